"""The twin of each Kubernetes minor version: a Go module per minor, rehearsal/controlplane/<minor>/ (its go.mod and
go.sum committed), that requires k8s.io/kubernetes at the release gpulab's user-scheduler runs on that minor
(domain/upstream/versions.py KUBE_SCHEDULER_VERSIONS; tests/test_twin_modules.py holds each go.mod to it). A stack is
rehearsed on the twin of its gpulab:cluster.kubernetesVersion, built on demand; a minor without a folder here has no
twin, and says so.

    python -m rehearsal.twins [minor ...]

builds the twin of each minor given (`make twin TWINS=1.35`), or of each minor the stack files (Pulumi.*.yaml) name
(`make twin`): etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl into
rehearsal/controlplane/<minor>/bin (devtools/go_build.py says what it builds, and its progress).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

import domain.stack
from devtools import go_build
from planner import plan
from render.run import read_stack_file

# kube-controller-manager's name for the CronJob controller (k8s.io/kubernetes v1.34.12
# cmd/kube-controller-manager/names/controller_names.go CronJobController), which the twin runs apart, on the
# rehearsal's clock (rehearsal/controlplane/cronjob-controller, built with each twin); also its service account's name.
CRONJOB_CONTROLLER = "cronjob-controller"
SERVERS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", CRONJOB_CONTROLLER)
STACK_FILES = sorted(go_build.ROOT.glob("Pulumi.*.yaml"))


class NoTwin(Exception):
    """The stack's Kubernetes minor version has no twin; the message names the config key and the minors that do."""


class NotBuilt(Exception):
    """The twin's binaries are missing: `make twin` builds them. The message says so in one line."""


class Failed(Exception):
    """go build of a twin failed; the message ends with Go's own lines."""


def minors() -> list[str]:
    """The minor versions with a twin, oldest first."""
    return [name.removeprefix(go_build.TWIN) for name in go_build.HELPERS if name.startswith(go_build.TWIN)]


def module(minor: str) -> Path:
    """The twin's Go module for `minor`; raises NoTwin where there is none."""
    if minor not in minors():
        raise NoTwin(
            f"gpulab:cluster.kubernetesVersion: the rehearsal has no twin of Kubernetes {minor} (twins: "
            f"{', '.join(minors())}, each a Go module in {go_build.CONTROLPLANE.relative_to(go_build.ROOT)}/<minor>; "
            "docs/developers/rehearsal.md says how to add one)"
        )
    return go_build.ROOT / go_build.HELPERS[go_build.TWIN + minor].module


def binaries(minor: str) -> dict[str, Path]:
    """Each binary of the twin of `minor` (KWOK, a module of its own, serves every minor)."""
    module(minor)
    folder = go_build.HELPERS[go_build.TWIN + minor].binary  # its output, bin/
    return {**{name: folder / name for name in SERVERS}, "kwok": go_build.HELPERS["kwok"].binary}


def missing(minor: str) -> list[str]:
    return [str(path.relative_to(go_build.ROOT)) for path in binaries(minor).values() if not path.exists()]


def require_built(minor: str) -> None:
    if absent := missing(minor):
        raise NotBuilt(
            f"the twin of Kubernetes {minor} is not built ({', '.join(absent)} missing): `make twin TWINS={minor}` "
            "builds it (the first build takes minutes: docs/rehearsal.md)"
        )


def build(minor: str) -> None:
    """The twin of `minor` built from its module, or brought up to date (seconds, Go's caches warm); with no Go here, a
    twin already built is used as it is. Says on stderr what it builds (devtools/go_build.py)."""
    module(minor)
    try:
        go = plan.go()
    except plan.Unavailable:
        require_built(minor)
        return
    if errors := go_build.build(go_build.TWIN + minor, go):
        raise Failed(f"go build of {module(minor).relative_to(go_build.ROOT)} failed: {errors}")


def stack_minors() -> list[str]:
    """The minor versions the stack files name, each once, oldest first."""
    named = {yaml.safe_load(read_stack_file(path)["gpulab:cluster"])["kubernetesVersion"] for path in STACK_FILES}
    return sorted(named, key=lambda minor: tuple(map(int, minor.split("."))))


def main(argv: list[str]) -> int:
    try:
        for minor in argv or stack_minors():
            build(minor)
    except domain.stack.ConfigError as error:
        print("\n".join(error.lines), file=sys.stderr)
        return 2
    except (NoTwin, NotBuilt, Failed) as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
