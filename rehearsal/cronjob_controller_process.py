"""Kubernetes' own CronJob controller on the rehearsal's simulated clock: rehearsal/controlplane/cronjob-controller
(`make twin` builds it with each twin), k8s.io/kubernetes pkg/controller/cronjob at the twin's release, started against
the twin's API server as the controller's own service account, in place of kube-controller-manager's, which the twin
starts without it (rehearsal/twin.py).

    with rehearsal.cronjob_controller_process.running(plane, start) as controller:
        controller.address    # its /state, which the stepper (rehearsal/stepper cronjobs.go) waits on
        controller.move(t)    # without the stepper: the clock moved to t, and what the controller then made

Its clock starts at `start` and moves as the stepper annotates every CronJob with its own (or as `move` does, where no
class day is played); docs/developers/rehearsal.md says how, and what it changes of the controller.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from domain.time import zones
from domain.time.utc import utc_text
from rehearsal import twin, twins

# The annotation that carries the simulated clock to the controller (rehearsal/stepper rehearse.go clockAnnotation).
CLOCK_ANNOTATION = "rehearsal.gpulab.dev/clock"
# It answers its address at once; under a load of 30 on two cores a process took up to 40 s to start (twin.py).
START_SECONDS = 60
# `move` waits this long for the controller to take in the clock and finish what it does then.
MOVE_SECONDS = 60


class Failed(Exception):
    """The controller did not start or stopped; the message ends with its log's last lines."""


@dataclass
class CronJobController:
    address: str
    plane: twin.ControlPlane
    process: subprocess.Popen[str]

    def state(self) -> dict[str, Any]:
        """Its /state: idle (nothing queued or under way), writes (to the API server), seen (each CronJob's clock)."""
        with urllib.request.urlopen(f"http://{self.address}/state", timeout=5) as answer:
            state: dict[str, Any] = json.loads(answer.read())
            return state

    def move(self, t: datetime.datetime) -> None:
        """Where no class day is played (no stepper): the clock moved to t on every CronJob, and back when the
        controller has taken it in on each and has nothing left to do."""
        admin = self.plane.admin
        clock = utc_text(t, whole_seconds=True)
        patch = {"metadata": {"annotations": {CLOCK_ANNOTATION: clock}}}
        names = [
            f"{c['metadata']['namespace']}/{c['metadata']['name']}"
            for c in admin.get("/apis/batch/v1/cronjobs")["items"]
        ]
        for name in names:
            namespace, cron_job = name.split("/")
            admin.request(
                "PATCH",
                f"/apis/batch/v1/namespaces/{namespace}/cronjobs/{cron_job}",
                patch,
                content_type="application/merge-patch+json",
            )
        deadline = time.monotonic() + MOVE_SECONDS
        while time.monotonic() < deadline:
            state = self.state()
            if state["idle"] and all(state["seen"].get(n) == clock for n in names):
                return
            time.sleep(0.05)
        raise Failed(f"the CronJob controller had not taken in the clock at {clock} after {MOVE_SECONDS} s")


@contextlib.contextmanager
def running(plane: twin.ControlPlane, start: datetime.datetime) -> Iterator[CronJobController]:
    """The controller against the twin, as its own service account (kube-system/cronjob-controller, which the API
    server's bootstrap RBAC binds to system:controller:cronjob-controller), its clock at `start`; stopped on exit.
    It reads time zones from the pinned tzdata package ($ZONEINFO, as gpulab reads them) and runs in UTC (TZ), as
    kube-controller-manager's image has no local time zone: a CronJob without spec.timeZone runs on UTC."""
    account = twins.CRONJOB_CONTROLLER
    with contextlib.suppress(twin.ApiError):  # kube-controller-manager makes it only for the controllers it runs
        plane.admin.request(
            "POST",
            "/api/v1/namespaces/kube-system/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
        )
    identity = plane.service_account("kube-system", account, twin.TOKEN_SECONDS)
    kubeconfig = twin.write_kubeconfig(plane.folder, identity, account)
    log = plane.folder / f"{account}.log"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [
                str(plane.binaries[account]),
                f"-kubeconfig={kubeconfig}",
                f"-start={utc_text(start, whole_seconds=True)}",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env={**os.environ, "ZONEINFO": zones.go_zoneinfo(), "TZ": "UTC"},
        )
    try:
        stdout: IO[str] | None = process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            process.wait(timeout=START_SECONDS)
            tail = " ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
            raise Failed(f"the CronJob controller stopped (exit {process.returncode}): {tail} (log: {log})")
        yield CronJobController(json.loads(line)["address"], plane, process)
    finally:
        twin.close_stdin(process, 20)
