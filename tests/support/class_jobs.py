"""A class CronJob's container run as its pod runs it, on this machine's POSIX shell (dash or BusyBox ash: the check
uses only what POSIX sh has), for given Job names, with kubectl replaced by a stand-in that prints its arguments."""

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from components.karpenter.class_seats_manifests import SHELL

SH = shutil.which("sh")
requires_sh = pytest.mark.skipif(SH is None, reason="needs a POSIX sh on PATH to run the CronJobs' class-day check")


def patches(container: dict, jobs: list[str]) -> dict[str, list[str]]:
    """Each Job name (`<CronJob>-<minute>`) whose run would call kubectl, with kubectl's arguments."""
    if "command" not in container:  # kubectl is the image's entrypoint: every run patches
        return {job: list(container["args"]) for job in jobs}
    shell, flag, script, name = container["command"]
    assert (shell, flag, name) == (SHELL, "-c", "kubectl"), container["command"]
    args = " ".join(shlex.quote(a) for a in container["args"])
    # Each run in a subshell of one sh, as `sh -c <script> kubectl <args>` would run it: the check's exit leaves the
    # subshell, its exec replaces it with the stand-in.
    driver = f'for job in "$@"; do ( JOB_NAME=$job; export JOB_NAME; set -- {args}; eval "$SCRIPT" ); done'
    with tempfile.TemporaryDirectory() as folder:
        stand_in = Path(folder) / "kubectl"
        stand_in.write_text('#!/bin/sh\necho "kubectl $JOB_NAME $*"\n')
        stand_in.chmod(0o755)
        assert SH is not None
        done = subprocess.run(
            [SH, "-c", driver, "driver", *jobs],
            env={**os.environ, "PATH": f"{folder}:{os.environ['PATH']}", "SCRIPT": script},
            capture_output=True,
            text=True,
            check=True,
        )
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith("kubectl "):
            _, job, *called = line.split(" ")
            found[job] = called
    return found
