"""One answer per stack: the class day of a stack played three times on fresh twins gives the same rehearsal.json, but
for the wall-clock times it reports and the node names Karpenter generates (issue #48). The stack makes Karpenter do
what waits on the wall clock in a cluster: learners' nodes expire under them (expiry drains them, whatever the
budgets), consolidation removes the emptied ones, and drains evict learners; the stepper drives each of those to its
end before it moves the simulated clock (docs/developers/rehearsal.md, "Karpenter on a clock"). Without the twin and
its stepper (`make twin`) this test skips in one line.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import rehearsal.run
from tests.conftest import as_cli_config, run_config, stack_values
from tests.support import twin_tests
from tests.support.synthetic import lab

LAB = "drains"
TODAY = datetime.date(2027, 1, 4)
# Nine learners trickle in a minute apart from 00:00 and leave from 00:10 (rehearsal/class_day.py): nodes launched
# for the first ones expire at 00:07 with learners on them, and drained nodes and emptied ones go at once.
STACK = stack_values(
    **{
        "gpulab:labs": {
            LAB: lab(
                ["g4dn.xlarge"],
                3,
                max_gpus=3,
                learnerPod={"cpu": "250m", "memory": "1Gi"},
                expireAfter="7m",
                terminationGracePeriod="2m",
                disruption={
                    "consolidationPolicy": "WhenEmptyOrUnderutilized",
                    "consolidateAfter": "1m",
                    "budgets": [{"nodes": "100%"}],
                },
            )
        }
    }
)


def test_a_stack_with_expiry_and_drains_gives_one_answer(tmp_path: Path) -> None:
    twin_tests.require_twin()
    twin_tests.require_stepper()
    run = run_config("one-answer", as_cli_config(STACK))
    out = tmp_path / "render"
    twin_tests.render_with_charts(run, out)
    runs = [rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region) for _ in range(3)]
    for done in runs:
        assert rehearsal.run.problems(done) == [], rehearsal.run.problems(done)
    first = runs[0]
    reasons = {e.get("reason") for e in first["labs"][LAB]["events"] if e["what"] == "nodeDeleted"}
    assert "expired" in reasons, first["labs"][LAB]["events"]
    assert any(e["what"] == "disrupted" for e in first["labs"][LAB]["events"]), "learners drained off expiring nodes"
    for again in runs[1:]:
        assert twin_tests.without_wall_times(again)["labs"] == twin_tests.without_wall_times(first)["labs"]
        assert twin_tests.without_wall_times(again) == twin_tests.without_wall_times(first)
