"""What a plan or a rehearsal needs on this machine, checked at once, before anything is built or run: the stack file
(every problem the render would find before it registers a resource), helm, each chart the stack installs at its
version, and Go for the helpers the command builds.

    python -m render.inputs <stack name or stack file> --for plan|rehearse

`make plan` and `make rehearse` run it first: a missing chart used to show only after minutes of Go builds (25 of them
before a rehearsal, issue 50). It reads files and runs `go env GOVERSION`, nothing else: no network, no build. Exit
status 0 with one line naming what it found; 2 with the stack's `gpulab:` lines, as the render; 1 with one line per
missing input, each naming the command that brings it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import domain.stack
from components.jupyterhub.hub import RELEASE as HUB_RELEASE
from components.karpenter.controller import CRD_RELEASE
from components.karpenter.controller import RELEASE as KARPENTER_RELEASE
from components.nvidia.device_plugin import RELEASE as DEVICE_PLUGIN_RELEASE
from domain.upstream.versions import JUPYTERHUB_CHART_VERSION
from render import charts, run

ROOT = Path(__file__).resolve().parent.parent
# What each command builds with Go: the go.mod whose `go` line says the release it needs, and what it builds.
PURPOSES = {
    "plan": ("planner/go.mod", "make plan builds the planner"),
    "rehearse": ("rehearsal/stepper/go.mod", "make rehearse builds the twin and its stepper"),
}


def stack_charts(settings: domain.stack.Settings) -> list[tuple[str, str]]:
    """(chart, version) of each Helm release the program installs for these settings, as the render finds them
    (tests/test_inputs.py holds this to the releases a run registers)."""
    karpenter = settings.karpenter.chart_version
    found = [
        (CRD_RELEASE, karpenter),
        (KARPENTER_RELEASE, karpenter),
        (DEVICE_PLUGIN_RELEASE, settings.nvidia_device_plugin.chart_version),
    ]
    if settings.jupyterhub:
        found.append((HUB_RELEASE, JUPYTERHUB_CHART_VERSION))
    return found


def _go_version(go_mod: str) -> tuple[str | None, str | None]:
    """(the Go release here, or None without Go; a line saying why it will not do, or None)."""
    go = os.environ.get("GPULAB_GO") or shutil.which("go")
    if not go:
        return None, None
    done = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    here = done.stdout.strip().removeprefix("go")
    needed = re.search(r"^go (\S+)$", (ROOT / go_mod).read_text(), re.M)
    if done.returncode != 0 or needed is None:
        return here or None, f"{go} env GOVERSION failed: {done.stderr.strip()}"
    if _release(here) < _release(needed[1]):
        # With the default GOTOOLCHAIN=auto, go would download the newer toolchain itself.
        return here, f"Go {here} here, and {go_mod} needs Go {needed[1]} or later: install it"
    return here, None


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def missing(settings: domain.stack.Settings, purpose: str) -> tuple[list[str], list[str]]:
    """(one line per missing input, what was found)."""
    lines: list[str] = []
    found: list[str] = []
    try:
        found.append(f"helm {charts.helm_binary()}")
    except charts.Unavailable as no_helm:
        lines.append(str(no_helm))
    for chart, version in stack_charts(settings):
        if charts.local_chart(chart, version):
            found.append(f"{chart} {version}")
        else:
            lines.append(f"chart {chart} {version}: {charts.not_here(chart, version)}")
    go_mod, builds = PURPOSES[purpose]
    if os.environ.get("GPULAB_PLANNER") == "off" and purpose == "plan":
        lines.append("GPULAB_PLANNER=off: the plan needs the planner; unset it")
    go, problem = _go_version(go_mod)
    if go is None:
        lines.append(f"no Go (go on PATH, or $GPULAB_GO): {builds} with Go 1.26 (go.dev/dl)")
    elif problem:
        lines.append(problem)
    else:
        found.append(f"Go {go}")
    return lines, found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m render.inputs", description=__doc__.split("\n\n")[0])
    run.add_stack_argument(parser)
    parser.add_argument("--for", dest="purpose", required=True, choices=sorted(PURPOSES), help="what needs them")
    args = parser.parse_args(argv)
    try:
        name, stack = run.checked_stack(args.stack)
    except domain.stack.ConfigError as error:
        print("\n".join(error.lines), file=sys.stderr)
        return 2
    lines, found = missing(stack.settings, args.purpose)
    if lines:
        print("\n".join(f"{args.purpose}: {line}" for line in lines), file=sys.stderr)
        print(f"{args.purpose}: nothing built or run; fix the line(s) above first", file=sys.stderr)
        return 1
    print(f"{args.purpose}: {name}'s inputs are here: {', '.join(found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
