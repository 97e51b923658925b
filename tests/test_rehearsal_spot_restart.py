"""Learners whom one spot interruption moves start their servers again in an order and a batch that do not depend on
the wall clock (docs/rehearsal.md, One answer per stack): in the order they first arrived (rehearsal/run.py
Learners.respawn), so the same of them find the free slices there are; and those left waiting as one batch of
Karpenter's provisioner however slowly the driver makes their pods (rehearsal/stepper/simclock.go gatedTimer). The
rehearsal once made them again in the order Karpenter's eviction queue evicted them, which its many workers decide,
and under load made them up to 400 ms apart, past the batch's idle window: which learners waited, and the nodes
launched for them, differed from run to run. Here the driver pauses 300 ms after making each moved learner's pod, as
a loaded machine may. Without the twin and its stepper (`make twin`) the tests skip in one line.

The stack: one lab of spot g4dn.xlarge (2 slices) and g4dn.12xlarge (8 slices), up to 8 GPUs (16 seats), with a class
on Monday 4 January 2027 at 09:00 for an hour, 8 seats warm: the warm-up launches a g4dn.12xlarge, which the 8 warm
learners fill at 09:00, and the 8 others arrive a minute apart on g4dn.xlarge nodes. At 09:30 four learners leave,
two of them from g4dn.xlarge nodes. At RATE the second spot warning (09:42:01; the first, at 09:21:32, goes to a
g4dn.xlarge) goes to the g4dn.12xlarge: it moves its 6 learners, 2 find the free slices, and 4 wait for a node.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest

import rehearsal.run
from rehearsal import spot
from tests.conftest import as_cli_config, run_config, stack_values
from tests.support import twin_tests
from tests.support.synthetic import lab

TODAY = datetime.date(2027, 1, 4)
LAB = "restart"
RATE = 0.679
STACK = stack_values(
    **{
        "gpulab:labs": {
            LAB: lab(
                ["g4dn.xlarge", "g4dn.12xlarge"],
                2,
                max_gpus=8,
                capacityTypes=["spot"],
                learnerPod={"cpu": "250m", "memory": "1Gi"},
                classes=[{"schedule": "0 9 * * mon", "duration": "1h", "warmSeats": 8, "warmup": "20m"}],
            )
        }
    }
)
# How long the driver takes here to make each pod of a learner a spot warning moved: more than the provisioner's idle
# window in the rehearsal (200 ms, rehearsal.json's shortenedTimers).
SLOW_DRIVER_SECONDS = 0.3


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The stack's day played with a slow driver: each spot warning that moved more learners still there than found a
    free slice at once, as {at, moved (in the order they first arrived), atOnce, waited: {learner: node bound next}}."""
    twin_tests.require_twin()
    twin_tests.require_stepper()
    run = run_config("spot-restart", as_cli_config(STACK))
    out = tmp_path_factory.mktemp("spot-restart") / "render"
    twin_tests.render_with_charts(run, out)
    respawn = rehearsal.run.Learners.respawn

    def slowly(self: rehearsal.run.Learners, pods: list[dict[str, str]]) -> None:
        """The driver's respawn, each pod it makes followed by a pause."""
        arrive = self.arrive

        def then_pause(lab_name: str, learner: str) -> dict[str, str] | None:
            refused = arrive(lab_name, learner)
            time.sleep(SLOW_DRIVER_SECONDS)
            return refused

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(self, "arrive", then_pause)
            respawn(self, pods)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rehearsal.run.Learners, "respawn", slowly)
        done = rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region, spot_rate=RATE)
    assert rehearsal.run.problems(done) == []
    log: list[dict[str, Any]] = sorted(done["labs"][LAB]["events"], key=lambda e: e["at"])
    arrived = [e["learner"] for e in log if e["what"] == "arrive"]
    left = {e["learner"]: e["at"] for e in log if e["what"] == "leave"}
    found = []
    for warning in [e for e in log if e["what"] == "spotWarning"]:
        at = warning["at"]
        moved = {
            e["learner"]
            for e in log
            if e["what"] == "disrupted"
            and e["at"] == at
            and e["reason"] == spot.SPOT_INTERRUPTED
            and e.get("learner")
            and left.get(e["learner"], "~") > at
        }
        at_once = {e["learner"] for e in log if e["what"] == "bound" and e["at"] == at and e["learner"] in moved}
        if 0 < len(at_once) < len(moved):
            waited = {}
            for e in log:
                if e["what"] == "bound" and e["at"] > at and e["learner"] in moved - at_once:
                    waited.setdefault(e["learner"], e["node"])
            found.append({"at": at, "moved": [a for a in arrived if a in moved], "atOnce": at_once, "waited": waited})
    assert found, "no warning moved more learners than found a free slice at once: the stack tests nothing"
    return found


def test_learners_moved_together_start_again_in_the_order_they_arrived(moved) -> None:
    """Those of them who find a free slice at once are the first of them to have arrived in the class."""
    for warning in moved:
        assert warning["atOnce"] == set(warning["moved"][: len(warning["atOnce"])]), warning


def test_learners_moved_together_who_wait_are_provisioned_for_together(moved) -> None:
    """Karpenter provisions for those who wait in one batch: here one g4dn.12xlarge for the 4 of them, where a batch
    of one pod launches a g4dn.xlarge and leaves the others to the next."""
    for warning in moved:
        assert len(warning["waited"]) == len(warning["moved"]) - len(warning["atOnce"]), warning
        assert len(set(warning["waited"].values())) == 1, warning
