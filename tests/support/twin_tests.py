"""What the tests on the rehearsal's twin share: skipping in one line where its binaries are not built, a render with
its charts, waiting on the twin, and rehearsal.json as two runs of one stack must agree on it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import render.run
from planner import plan
from rehearsal import karpenter as karpenter_twin
from rehearsal import twins
from render import charts, harness
from tests.conftest import BASE

# The twin of the tests' own stacks (tests/conftest.py BASE): the one their twin.running(MINOR) and rehearsals run.
MINOR = BASE["gpulab:cluster"]["kubernetesVersion"]


def require_twin(minor: str = MINOR) -> None:
    """Skips the test where the twin of Kubernetes `minor` is not built (`make twin TWINS=<minor>`)."""
    try:
        twins.require_built(minor)
    except twins.NotBuilt as missing:
        pytest.skip(str(missing))


def require_stepper() -> None:
    """Skips the test where the rehearsal's stepper, which runs Karpenter on the twin, is not built."""
    if not karpenter_twin.BINARY.exists():
        pytest.skip(
            f"the rehearsal's stepper is not built ({karpenter_twin.BINARY.relative_to(plan.ROOT)}): "
            "`make twin` builds it"
        )


def render_with_charts(run: harness.Run, out: Path) -> None:
    """The run's render into `out`, its charts included; skips the test where the charts cannot be rendered."""
    render.run.write(run, out)
    if not_rendered := charts.write(run, out):
        pytest.skip("; ".join(not_rendered))


def until(what: str, check: Callable[[], Any], seconds: float = 90) -> Any:
    """check()'s first truthy answer, polled; fails naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {seconds} s")


# What a rehearsal reports of its own wall clock, and of the one process it started (its leader's name).
WALL = {"wallSeconds", "stepWall", "readySeconds", "leader"}
# A class Job's node, whichever of the system nodes it is.
SYSTEM_NODE = "<system node>"


def without_wall_times(done: dict[str, Any]) -> dict[str, Any]:
    """rehearsal.json without what differs from run to run by design: wall-clock times, the names Karpenter generates
    for its NodeClaims (each replaced by <lab>-<node>), the order of the events of one instant (they come from
    controllers that run side by side; every figure is of their times), and which of the alike system nodes a class
    Job's pod went to (kube-scheduler's pick among equal nodes, which the twin does not make one answer:
    docs/rehearsal.md, One answer per stack)."""
    done = {**done, "jobs": [{**job, "node": job["node"] and SYSTEM_NODE} for job in done.get("jobs", [])]}
    text = json.dumps({k: v for k, v in done.items() if k not in WALL}, sort_keys=True)
    for lab in done["labs"]:
        text = re.sub(rf'"{re.escape(lab)}-[a-z0-9]{{5}}"', f'"{lab}-<node>"', text)
        text = re.sub(rf"from {re.escape(lab)}-[a-z0-9]{{5}}", f"from {lab}-<node>", text)
    found: dict[str, Any] = json.loads(text)
    for labs in [found["labs"], *(day["labs"] for day in found["days"])]:
        for section in labs.values():
            section["events"].sort(key=lambda e: (e["at"], json.dumps(e, sort_keys=True)))
    return found
