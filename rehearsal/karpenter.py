"""Karpenter 1.14.1's controllers on the twin, on a simulated clock: the stepper (rehearsal/stepper, its own Go module)
started against a running twin's API server (rehearsal/twin.py) and a render applied to it (rehearsal/apply.py),
stepped one JSON line at a time.

    with rehearsal.karpenter.running(plane, render_dir, region, start) as karpenter:
        karpenter.advance(t)          # move the clock to t, let the controllers settle; what happened
        karpenter.at(t, make_pods)    # the clock to t, then an action there (learners arrive), then settled again

`advance` returns the stepper's answer: `now`, `events` (nodeLaunched, nodeDeleted, disrupted, podBound; the shared
format docs/developers/rehearsal.md describes), `nodes` and `wall` (where the step's wall-clock time went), with
`unsettled` when the controllers had not settled within the stepper's step limit. The first answer's `shortenedTimers`
(the `timers` attribute) are rehearsal.json's. Given the CronJob controller's process
(rehearsal/cronjob_controller_process.py), the stepper also stops the clock where a CronJob falls due, and hands each
Job the controller made there to `on_jobs` before it goes on: `advance` and `at` return once the clock is at their time.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from devtools import go_build
from domain.time import zones
from domain.time.utc import utc_text
from planner import plan
from rehearsal import twin

# rehearsal/stepper/bin/stepper (`make twin` builds it; build() brings it up to date).
BINARY = go_build.HELPERS["stepper"].binary


def build() -> Path:
    """rehearsal/stepper/bin/stepper, built from its go.mod and go.sum (and the planner's packages it imports); go
    rebuilds only what changed. It says on stderr what it builds (devtools/go_build.py)."""
    errors = go_build.build("stepper", plan.go())
    if errors:
        raise plan.Failed(f"go build of rehearsal/stepper/ failed: {errors}")
    return BINARY


def _clock(t: datetime.datetime) -> str:
    """A moment as the stepper's clock takes it: in whole seconds, as the stepper writes its own (time.RFC3339 in
    rehearsal/stepper/rehearse.go). A learner arriving between two seconds is stepped to at the second before; kept
    so."""
    return utc_text(t, whole_seconds=True)


class Failed(Exception):
    """The stepper refused a step or stopped; the message is one line, the stepper's own, with its log's path."""


@dataclass
class Karpenter:
    process: subprocess.Popen[str]
    log: Path
    timers: list[dict[str, str]] = field(default_factory=list)
    version: str = ""  # the Karpenter release the stepper is built with (its first answer's `karpenter`)
    spot: dict[str, Any] = field(default_factory=dict)  # how it plays spot (its first answer's `spot`)
    # What runs the Jobs the CronJob controller made (the stepper's `jobs`), at the simulated time it made them.
    on_jobs: Callable[[list[dict[str, Any]]], None] = lambda jobs: None
    # What makes again the pods a spot interruption moved (the stepper's `moved`: lab and pod), at that simulated time.
    on_moved: Callable[[list[dict[str, str]]], None] = lambda moved: None

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=30)
            tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
            raise Failed(
                f"the stepper stopped (exit {self.process.returncode}): {' '.join(tail) or 'no output'} "
                f"(log: {self.log})"
            )
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise Failed(f"the stepper: {answer['error']}")
        return answer

    def advance(self, t: datetime.datetime) -> dict[str, Any]:
        """Moves the simulated clock to t (never back) and returns what Karpenter's controllers did on the way; where
        the CronJob controller made Jobs on the way, the stepper stops there, `on_jobs` runs them, and the clock goes
        on to t; likewise where a spot interruption moved pods, for `on_moved`."""
        answer = self._step(t)
        while "jobs" in answer or "moved" in answer:
            self.on_jobs(answer.get("jobs", []))
            self.on_moved(answer.get("moved", []))
            more = self._step(t)
            answer = more | {
                "events": answer["events"] + more["events"],
                "wall": add_walls(answer["wall"], more["wall"]),
            }
        return answer

    def _step(self, t: datetime.datetime) -> dict[str, Any]:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps({"advance": _clock(t)}) + "\n")
            stdin.flush()
        except BrokenPipeError:
            pass  # _read says why it stopped
        return self._read()

    def at(self, t: datetime.datetime, action: Callable[[], None]) -> dict[str, Any]:
        """The clock moved to t, the action done there (pods made or deleted, a buffer patched), and the controllers'
        answer to it at t: both steps' events."""
        first = self.advance(t)
        action()
        second = self.advance(t)
        return second | {"events": first["events"] + second["events"], "wall": add_walls(first["wall"], second["wall"])}


def add_walls(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two answers' `wall` (where a step's wall-clock time went, rehearsal/stepper/rehearse.go stepWall) as one: each
    figure summed, `waitingFor` by kind."""
    waiting = dict(a["waitingFor"])
    for kind, seconds in b["waitingFor"].items():
        waiting[kind] = waiting.get(kind, 0) + seconds
    return {k: a[k] + b[k] for k in a if k != "waitingFor"} | {"waitingFor": waiting}


def rounded_walls(wall: dict[str, Any]) -> dict[str, Any]:
    """A stepWall entry with its seconds to the hundredth."""
    return {
        k: {w: round(s, 2) for w, s in sorted(v.items())} if k == "waitingFor" else round(v, 2) for k, v in wall.items()
    }


@contextlib.contextmanager
def running(
    plane: twin.ControlPlane,
    render_dir: Path,
    region: str,
    start: datetime.datetime,
    binary: Path | None = None,
    boot: dict[str, Any] | None = None,
    cron_jobs: str | None = None,
    spot_rate: float = 0.0,
    spot_prices: dict[str, Any] | None = None,
) -> Iterator[Karpenter]:
    """The stepper against the twin's API server as its admin, the clock at `start`; stopped on exit. `boot` is its
    -timings (rehearsal/timings.py for_stepper): without it, a node registers with its slices at its launch.
    `cron_jobs` is the address of the CronJob controller's process on the same clock, if it runs. `spot_rate` is EC2's
    spot interruption warnings per hour a spot node runs (rehearsal/stepper/spot.go); `spot_prices` its -spot-prices
    (rehearsal/spot.py prices): without them, spot is priced on-demand."""
    binary = binary or BINARY
    if not binary.exists():
        raise plan.Unavailable(f"the rehearsal's stepper is not built ({binary}): `make twin` builds it")
    plan.write_instance_types(render_dir)
    kubeconfig = plane.folder / "karpenter.kubeconfig"
    kubeconfig.write_text(json.dumps(plane.admin.kubeconfig()))
    log = plane.folder / "karpenter.log"
    timings: list[str] = []
    if boot is not None:
        (plane.folder / "timings.json").write_text(json.dumps(boot))
        timings = ["-timings", str(plane.folder / "timings.json")]
    if spot_prices is not None:
        (plane.folder / "spot-prices.json").write_text(json.dumps(spot_prices))
        timings += ["-spot-prices", str(plane.folder / "spot-prices.json")]
    with log.open("w") as errors:
        process = subprocess.Popen(
            [
                str(binary),
                "-kubeconfig",
                str(kubeconfig),
                "-region",
                region,
                "-start",
                _clock(start),
                *timings,
                *(["-cronjobs", cron_jobs] if cron_jobs else []),
                *(["-spot-interruptions-per-node-hour", repr(spot_rate)] if spot_rate else []),
                str(render_dir),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            # CronJobs' time zones from the pinned tzdata package, as their controller reads them.
            env={**os.environ, "ZONEINFO": zones.go_zoneinfo()},
        )
    karpenter = Karpenter(process, log)
    try:
        ready = karpenter._read()
        karpenter.timers, karpenter.version = ready["shortenedTimers"], ready["karpenter"]
        karpenter.spot = ready["spot"]
        yield karpenter
    finally:
        twin.close_stdin(process, 30)
