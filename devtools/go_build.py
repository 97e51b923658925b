"""Builds gpulab's Go helpers and says what it is doing: the planner, helm-batch, promtool, the rehearsal's twin and
its stepper.

    python -m devtools.go_build <planner | helm-batch | promtool | dayeval | kwok | stepper | twin-<minor>>

A first build downloads the helper's modules and compiles its packages, which takes minutes on a small machine and
printed nothing but `go: downloading` lines; so a build first says what it builds and how long a first build took here,
then, on a terminal, a line redrawn every second with how many modules it has downloaded and packages it has compiled,
of how many a first build compiles, and for how long (devtools/progress.py; go build -v names each package as it
compiles it, and none that its cache already holds), and when it ends one line with the totals; in a CI log, the first
and the last line only. Go's own errors are printed as Go wrote them. `make planner`, `make helm-batch`, `make
promtool` and `make twin` run it, and so does the render for the planner (offline: GOPROXY=off).
"""

import contextlib
import fcntl
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from devtools.progress import Progress, elapsed_text

ROOT = Path(__file__).resolve().parent.parent
# The twin's control plane, one Go module per Kubernetes minor version (rehearsal/twins.py): helper "twin-<minor>".
CONTROLPLANE = ROOT / "rehearsal" / "controlplane"
TWIN = "twin-"
# Kubernetes' CronJob controller on the rehearsal's clock: a module each twin requires through a replace of its folder
# (CRONJOB_CONTROLLER_FOLDER, beside the twins' own), so that it is built with, and links, that twin's release.
CRONJOB_CONTROLLER_MODULE = "github.com/gpulab/rehearsal/controlplane/cronjob-controller"
CRONJOB_CONTROLLER_FOLDER = "../cronjob-controller"


@dataclass(frozen=True)
class Helper:
    module: str  # the Go module's folder in the repository
    output: str  # the binary, in the module's folder; a folder (ending in /) for several packages
    packages: tuple[str, ...]  # what go build builds
    what: str  # what the helper is for, for the first line
    # How long the first build took on this project's 2-core machines (where it was measured): the first line says it.
    first_build: str
    # How many packages that first build compiled (its go build -v lines), where it was counted: the progress line's
    # "of about"; None where only the time was measured.
    first_packages: int | None = None
    # The same binary in every clone (helm-batch's results are cached under its digest; render/helm_cache.py).
    trimpath: bool = True
    # Binaries go build names after their package's path, renamed: (as Go names it, as gpulab calls it) pairs.
    renames: tuple[tuple[str, str], ...] = ()
    # Stamp the version of the module's k8s.io/kubernetes into the binaries, as Kubernetes' release build does.
    kubernetes_version: bool = False

    @property
    def binary(self) -> Path:
        return ROOT / self.module / self.output


HELPERS = {
    "planner": Helper(
        "planner",
        "bin/planner",
        (".",),
        "Karpenter 1.14.1's scheduler",
        # docs/developers/measurements.md, "The planner": about 1,000 packages in 16 min 8 s (7 min 29 s of CPU).
        "about 1,000 packages, 16 min on 2 cores",
        first_packages=1000,
        trimpath=False,
    ),
    "helm-batch": Helper(
        "devtools/helmbatch",
        "bin/helm-batch",
        (".",),
        "helm template for the tests",
        # Measured: 599 packages in 28 min 42 s (4 min 26 s of CPU) under a load of 38; issue 37 saw 8.5 min.
        "about 600 packages, 4.5 CPU-minutes (8 to 30 min on 2 busy cores)",
        first_packages=599,
    ),
    "promtool": Helper(
        "devtools/promtool",
        "bin/promtool",
        ("github.com/prometheus/prometheus/cmd/promtool",),
        "Prometheus's rule and query checker",
        # docs/developers/measurements.md, "promtool": 19 CPU-minutes, 63 min wall under a load of 35.
        "Prometheus, 19 CPU-minutes (an hour on 2 busy cores)",
    ),
    # Prometheus's engine and rule groups over a day of series, for the dashboard's picture
    # (reports/dashboard_picture.py): a package of gpulab's in promtool's module, linking the packages promtool's build
    # compiled. Measured here after promtool's build was in the cache: 2 min 24 s under a load of 6 to 10 (38 s of CPU).
    "dayeval": Helper(
        "devtools/promtool",
        "bin/dayeval",
        ("./dayeval",),
        "Prometheus's engine over a day, for the dashboard's picture",
        "Prometheus's packages, as promtool's build (about 40 CPU-seconds after it)",
    ),
    # The rehearsal's stepper, Karpenter 1.14.1's controllers on the twin on a simulated clock: a module of its own
    # (rehearsal/stepper/go.mod) that imports the planner's packages through a replace and requires every module at the
    # planner's version, so that a build after the planner's compiles only its own package and links.
    "stepper": Helper(
        "rehearsal/stepper",
        "bin/stepper",
        (".",),
        "Karpenter 1.14.1's controllers on the twin's clock",
        # Measured with an empty build cache (GOCACHE), modules downloaded: 1,123 packages in 7 min 12 s under a load of
        # 8 to 11 (3 min 50 s of CPU); 12 s once the planner, whose packages it compiles with the same flags, is built.
        "1,123 packages, 4 CPU-minutes (seconds after the planner's build, which compiles the same ones)",
        first_packages=1123,
        # The same cache entries as the planner's build, which is not trimmed either.
        trimpath=False,
    ),
    # KWOK's controller, the twin's stand-in for kubelets (rehearsal/kwok/go.mod: its k8s.io modules are v0.36's).
    "kwok": Helper(
        "rehearsal/kwok",
        "bin/kwok",
        ("sigs.k8s.io/kwok/cmd/kwok",),
        "KWOK, the twin's node and pod status",
        # docs/developers/measurements.md, "The twin and KWOK": 90 s under a load of 2 (164 CPU-seconds).
        "974 packages, 3 CPU-minutes (90 s on 2 quiet cores)",
        first_packages=974,
        trimpath=False,
    ),
}


def _twin(minor: str) -> Helper:
    """The twin of one Kubernetes minor version. One go build for the five: each of their packages (2,646 for 1.34,
    go list -deps) compiles once, as it would in five builds through the build cache, and the five link in parallel:
    300 s cold here for 1.34, against 411 s for five builds in a row."""
    return Helper(
        f"rehearsal/controlplane/{minor}",
        "bin/",
        (
            "go.etcd.io/etcd/server/v3",
            *(
                f"k8s.io/kubernetes/cmd/{c}"
                for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
            ),
            CRONJOB_CONTROLLER_MODULE,
        ),
        f"the rehearsal's control plane of Kubernetes {minor} (etcd, kube-apiserver, kube-controller-manager, "
        "kube-scheduler, kubectl, the CronJob controller on the rehearsal's clock)",
        # docs/developers/measurements.md, "The twin and KWOK": 1.34's in 300 s under a load of 3 (8.6 CPU-minutes),
        # 112 min under 25 to 50; 1.36's 2,172 packages not in the machine's cache in 7 min 15 s under 6 to 17.
        "about 2,650 packages, 9 CPU-minutes: 5 min on 2 quiet cores, an hour and more on busy ones",
        # go list -deps of the five: 2,725 for 1.36 (2,646 for 1.34).
        first_packages=2725,
        # The same cache entries as `go build` without it (a developer's own builds of the module share them).
        trimpath=False,
        # etcd's command is its server module's root package, which go build names "server" (the path's /v3 dropped).
        renames=(("server", "etcd"),),
        kubernetes_version=True,
    )


HELPERS.update(
    (TWIN + minor, _twin(minor))
    for minor in sorted(
        # A folder named as a minor version; cronjob-controller/ is a module the twins require, not a twin.
        (
            folder.name
            for folder in (m.parent for m in CONTROLPLANE.glob("*/go.mod"))
            if re.fullmatch(r"\d+\.\d+", folder.name)
        ),
        key=lambda minor: tuple(map(int, minor.split("."))),
    )
)

# The variables Kubernetes' release build stamps (hack/lib/version.sh, ldflags): without them the API server and
# kubectl report v0.0.0-master, and clients see that.
VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")


def kubernetes_ldflags(module: Path) -> str:
    """-X flags setting the version of the k8s.io/kubernetes that the module's go.mod requires."""
    found = re.search(r"^\s*k8s\.io/kubernetes (v(\d+)\.(\d+)\.\S+)", (module / "go.mod").read_text(), re.M)
    if found is None:
        raise ValueError(f"{module / 'go.mod'} requires no k8s.io/kubernetes")
    version, major, minor = found.groups()
    values = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    return " ".join(f"-X {pkg}.{name}={value}" for pkg in VERSION_PACKAGES for name, value in values.items())


# What Go says of a module an offline build would have to download.
OFFLINE_REFUSAL = "module lookup disabled by GOPROXY=off"


@contextlib.contextmanager
def _one_build_at_a_time(out: Path) -> Iterator[None]:
    """Holds an exclusive lock on the folder `out` (the build's bin/) while the caller builds into it."""
    out.mkdir(parents=True, exist_ok=True)
    folder = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)  # released when the descriptor closes
        yield
    finally:
        os.close(folder)


def build(
    name: str,
    go: str = "go",
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    offline: bool = False,
    stream: TextIO | None = None,
) -> str:
    """Builds helper `name` with `go`, saying what it does through `say` and its progress on `stream` (stderr) where
    that is a terminal; returns Go's own lines of a failed build, "" when it succeeded. `offline` downloads nothing
    (GOPROXY=off): a module not in Go's module cache fails the build with OFFLINE_REFUSAL."""
    helper = HELPERS[name]
    say(
        f"{name}: building {helper.binary.relative_to(ROOT)}, {helper.what} (Go: a first build downloads and compiles "
        f"{helper.first_build}; later ones take seconds)"
    )
    folder = ROOT / helper.module
    ldflags = ["-ldflags", kubernetes_ldflags(folder)] if helper.kubernetes_version else []
    command = [go, "build", "-v", *(["-trimpath"] if helper.trimpath else []), *ldflags, "-o", helper.output]
    command += helper.packages
    # Two rehearsals at once (.ci/run plays the stacks together) build the same twin: one build at a time per
    # module, or one renames what the other has just renamed.
    with _one_build_at_a_time(folder / helper.output.rstrip("/").rsplit("/", 1)[0]):
        start = time.monotonic()
        modules = packages = 0
        errors: list[str] = []
        of_about = f" of about {helper.first_packages:,}" if helper.first_packages else ""
        env = {**os.environ, "GOPROXY": "off"} if offline else None
        with (
            Progress(f"  {name}", stream) as progress,
            subprocess.Popen(
                command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            ) as process,
        ):
            assert process.stdout is not None
            for line in process.stdout:
                line = line.rstrip("\n")
                if line.startswith("go: downloading "):
                    modules += 1
                elif line and " " not in line and ":" not in line and not line.startswith("#"):
                    packages += 1  # -v: the import path of a package as it is compiled
                else:
                    errors.append(line)
                progress.update(f"{packages}{of_about} packages compiled, {modules} modules downloaded")
        if process.returncode:
            return "\n".join(errors) or f"go build exited with status {process.returncode}"
        for as_go_names, ours in helper.renames:
            (folder / helper.output / as_go_names).replace(folder / helper.output / ours)
    for line in errors:  # what Go printed besides progress on a build that worked: a warning, say
        say(line)
    if packages or modules:
        say(f"  {name}: built in {elapsed_text(time.monotonic() - start)} ({modules} modules, {packages} packages)")
    return ""


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in HELPERS:
        print(f"usage: python -m devtools.go_build <{' | '.join(HELPERS)}>", file=sys.stderr)
        return 2
    errors = build(argv[0])
    if errors:
        print(errors, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
