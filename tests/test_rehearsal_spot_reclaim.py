"""A spot node whose drain is held past EC2's two-minute warning is reclaimed at its end (rehearsal/stepper/spot.go
reclaim): EC2 does not wait for Karpenter. Here a PodDisruptionBudget of minAvailable 2 over the learners' 2 pods
(KubeSpawner's `component: singleuser-server`) holds every drain, as a platform team's budget over notebooks would;
Karpenter's termination honours it until the lab's terminationGracePeriod (1 h), so only the reclaim ends the node.
What a user sees: a warned node whose learner's notebook runs is gone exactly at the warning + 120 s on the simulated
clock, its learner is moved then (not before: the drain never evicted them), counted in `disruptedBySpot` and started
again on another node, and the summary says the drain did not finish. (A learner whose pod is still starting is
evicted at the warning: the eviction API checks no budget for a Pending pod, Kubernetes pkg/registry/core/pod/storage/
eviction.go canIgnorePDB.) Without the twin and its stepper (`make twin`) the rehearsal skips in one
line, as tests/test_rehearsal_spot.py's do.

The stack: one lab of spot g4dn.xlarge (1 slice, up to 2 GPUs, 2 seats), the hub on (the learners' pods are
KubeSpawner's, which carry the labels a budget selects), a class on Monday 4 January 2027 at 09:00 for an hour with
its 2 seats warm; at 3 warnings per spot node-hour its learners' nodes get warned (spot.go's seed draws the same ones
on every run).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

import rehearsal.run
from rehearsal import report, spot
from tests.conftest import as_cli_config, run_config, stack_values
from tests.support import twin_tests
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab

TODAY = datetime.date(2027, 1, 4)
LAB = "held"
RATE = 3.0
SEATS = 2  # maxGpus x slicesPerGpu
# EC2's warning (rehearsal.json's spot.warningSeconds, rehearsal/stepper/spot.go spotWarning).
WARNING = datetime.timedelta(seconds=120)
STACK = stack_values(
    **{
        "gpulab:labs": {
            LAB: lab(
                ["g4dn.xlarge"],
                1,
                max_gpus=SEATS,
                capacityTypes=["spot"],
                disruption={"budgets": [{"nodes": "100%"}]},
                classes=[{"schedule": "0 9 * * mon", "duration": "1h", "warmSeats": SEATS, "warmup": "20m"}],
            )
        },
        "gpulab:jupyterhub": {**HUB, "notebookImage": NOTEBOOK_IMAGE},
        "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
    }
)


def _hold_learners(render_dir: Path, namespace: str) -> None:
    """Adds to the render, as one more object `pulumi up` would apply, a PodDisruptionBudget that lets no learner pod
    be evicted: the eviction API refuses Karpenter's drain (429) until the node's terminationGracePeriod."""
    path = render_dir / "resources.json"
    resources = json.loads(path.read_text())
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "hold-learners", "namespace": namespace},
        # minAvailable as a number, the seats: a learner's pod is a bare pod (KubeSpawner makes it, no workload owns
        # it), for which Kubernetes' disruption controller counts no expected pods, so maxUnavailable 0 or a percentage
        # would allow every eviction (REPORTED: kubernetes.io "Specifying a Disruption Budget for your Application",
        # Arbitrary workloads and arbitrary selectors: only an integer minAvailable).
        "spec": {"minAvailable": SEATS, "selector": {"matchLabels": {"component": "singleuser-server"}}},
    }
    # After the namespaces, as Pulumi would create it.
    namespaces = [f"{r['type']}::{r['name']}" for r in resources if r["type"] == "kubernetes:core/v1:Namespace"]
    resources.append(
        {
            "type": "kubernetes:policy/v1:PodDisruptionBudget",
            "name": "hold-learners",
            "inputs": budget,
            "dependsOn": namespaces,
        }
    )
    path.write_text(json.dumps(resources))


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    twin_tests.require_twin()
    twin_tests.require_stepper()
    run = run_config("spot", as_cli_config(STACK))
    out = tmp_path_factory.mktemp("reclaim") / "render"
    twin_tests.render_with_charts(run, out)
    hub = run.stack.settings.jupyterhub
    assert hub is not None
    _hold_learners(out, hub.namespace)
    done = rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region, spot_rate=RATE)
    assert done["refused"] == [], "the API server refused the budget or the render"
    return done


def _events(done: dict[str, Any], what: str) -> list[dict[str, Any]]:
    return [e for e in done["labs"][LAB]["events"] if e["what"] == what]


def _at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


def _moves(done: dict[str, Any]) -> list[dict[str, Any]]:
    """The learners a spot interruption moved off their node, by the drain or by the reclaim."""
    return [e for e in _events(done, "disrupted") if e["reason"] == spot.SPOT_INTERRUPTED and e.get("learner")]


def _reclaimed_moves(done: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each reclaim by EC2 with each learner it moved."""
    return [(r, m) for r in _events(done, "spotReclaimed") for m in _moves(done) if m["node"] == r["node"]]


def _running_at(done: dict[str, Any], node: str, when: datetime.datetime) -> set[str]:
    """The learners whose notebook ran on the node at that moment: ready there, and not moved or gone since."""
    running: set[str] = set()
    for e in done["labs"][LAB]["events"]:
        if _at(e["at"]) > when or not e.get("learner"):
            continue
        if e["what"] == "ready" and e["node"] == node:
            running.add(e["learner"])
        elif e["what"] in ("ready", "disrupted", "leave"):
            running.discard(e["learner"])
    return running


def test_a_held_drain_ends_when_ec2_reclaims_the_node_at_the_end_of_the_warning(held) -> None:
    reclaims = _events(held, "spotReclaimed")
    assert reclaims, "no warned node was still draining at the end of its warning"
    warned = {e["node"]: _at(e["at"]) for e in _events(held, "spotWarning")}
    deleted = {e["node"]: _at(e["at"]) for e in _events(held, "nodeDeleted")}
    left = {e["learner"]: _at(e["at"]) for e in _events(held, "leave")}
    for node, warning in warned.items():
        end = warning + WARNING
        staying = {learner for learner in _running_at(held, node, warning) if left[learner] > end}
        if not staying:
            continue
        # A learner's notebook ran there to the end (the budget held the drain): EC2 took the node then, not earlier,
        # not later, and the learner was moved by that.
        assert deleted.get(node) == end, (node, warning, deleted.get(node))
        assert [_at(r["at"]) for r in reclaims if r["node"] == node] == [end], (node, reclaims)
        moved = {m["learner"]: _at(m["at"]) for m in _moves(held) if m["node"] == node}
        assert moved == dict.fromkeys(staying, end), (node, moved)
    assert {r["node"] for r in reclaims} <= set(warned)
    assert held["spot"]["reclaimed"] == {LAB: len(reclaims)}
    assert held["unsettled"] == [], "a held drain must settle: it waits for the simulated clock"


def test_the_learners_a_reclaim_stopped_are_counted_and_start_again_elsewhere(held) -> None:
    (c,) = held["labs"][LAB]["classes"]
    moved = {m["learner"] for _, m in _reclaimed_moves(held)}
    assert c["disruptedBySpot"] >= len(moved) > 0, (c, moved)
    left = {e["learner"]: _at(e["at"]) for e in _events(held, "leave")}
    for _, move in _reclaimed_moves(held):
        if left[move["learner"]] <= _at(move["at"]) + datetime.timedelta(minutes=10):
            continue  # gone before a new node could have had its slices and image
        again = [b for b in _events(held, "ready") if b["learner"] == move["learner"] and b["at"] > move["at"]]
        assert again and again[0]["node"] != move["node"], (move, again)


def test_a_learner_bound_again_runs_their_notebook_once_the_node_has_the_image(held) -> None:
    """A pod moved while it still waited for its node's image, made again under the same name, starts by its own
    node's image: its notebook runs there within the image's pull of its binding, unless its learner leaves or is
    moved first (not at its gone namesake's start, before it was bound, which left it running with no `ready`)."""
    (image,) = held["timings"]["images"].values()
    pull = datetime.timedelta(seconds=image["pullSeconds"])
    log = held["labs"][LAB]["events"]
    moves = _moves(held)
    rebound = [
        b for b in _events(held, "bound") if any(m["learner"] == b["learner"] and m["at"] < b["at"] for m in moves)
    ]
    assert rebound
    for bound in rebound:
        nxt = [
            e
            for e in log
            if e.get("learner") == bound["learner"]
            and e["what"] in ("ready", "disrupted", "leave")
            and _at(e["at"]) >= _at(bound["at"])
        ]
        assert nxt and _at(nxt[0]["at"]) <= _at(bound["at"]) + pull, (bound, nxt[:1])
        if nxt[0]["what"] == "ready":
            assert nxt[0]["node"] == bound["node"], (bound, nxt[0])


def test_the_summary_says_the_drain_did_not_finish(held) -> None:
    count = len(_events(held, "spotReclaimed"))
    assert count > 0
    said = [line for line in report.table(held) if line.startswith("spot (")]
    assert (
        said
        and f"{count} warned node(s) reclaimed by EC2 at the end of the warning, their drain not finished" in (said[0])
    ), said
