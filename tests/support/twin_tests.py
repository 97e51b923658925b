"""What the tests on the rehearsal's twin share: skipping in one line where its binaries are not built, a render with
its charts, and waiting on the twin."""

from __future__ import annotations

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
