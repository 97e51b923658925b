"""Builds gpulab's Go helpers and says what it is doing: the planner, helm-batch and promtool.

    python -m tools.go_build <planner | helm-batch | promtool>

A first build downloads the helper's modules and compiles its packages, which takes minutes on a small machine and
printed nothing but `go: downloading` lines; so a build first says what it builds and how long a first build took here,
then, while it runs, how many modules it has downloaded and packages it has compiled (go build -v names each package as
it compiles it, and none that its cache already holds: a warm build prints no progress). Go's own errors are printed
as Go wrote them. `make planner`, `make helm-batch` and `make promtool` run it, and so does the render for the planner.
"""

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A progress line at most this often, in seconds: often enough to show the build is alive, seldom enough to read.
EVERY = 30


@dataclass(frozen=True)
class Helper:
    module: str  # the Go module's folder in the repository
    output: str  # the binary, in the module's folder
    package: str  # what go build builds
    what: str  # what the helper is for, for the first line
    # How long the first build took on this project's 2-core machines (where it was measured): the first line says it.
    first_build: str
    # The same binary in every clone (helm-batch's results are cached under its digest; tools/helm_cache.py).
    trimpath: bool = True

    @property
    def binary(self) -> Path:
        return ROOT / self.module / self.output


HELPERS = {
    "planner": Helper(
        "planner",
        "bin/planner",
        ".",
        "Karpenter 1.14.1's scheduler",
        # docs/planner.md, "How long it takes": about 1,000 packages in 16 min 8 s (7 min 29 s of CPU).
        "about 1,000 packages, 16 min on 2 cores",
        trimpath=False,
    ),
    "helm-batch": Helper(
        "tools/helmbatch",
        "bin/helm-batch",
        ".",
        "helm template for the tests",
        # Measured: 599 packages in 28 min 42 s (4 min 26 s of CPU) under a load of 38; issue 37 saw 8.5 min.
        "about 600 packages, 4.5 CPU-minutes (8 to 30 min on 2 busy cores)",
    ),
    "promtool": Helper(
        "tools/promtool",
        "bin/promtool",
        "github.com/prometheus/prometheus/cmd/promtool",
        "Prometheus's rule and query checker",
        # docs/development.md, "Two commands": 19 CPU-minutes, 63 min wall under a load of 35.
        "Prometheus, 19 CPU-minutes (an hour on 2 busy cores)",
    ),
}


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60)} s" if seconds >= 60 else f"{int(seconds)} s"


def build(name: str, go: str = "go", say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> str:
    """Builds helper `name` with `go`, saying what it does through `say`; returns Go's own lines of a failed build, ""
    when it succeeded."""
    helper = HELPERS[name]
    say(
        f"{name}: building {helper.binary.relative_to(ROOT)}, {helper.what} (Go: a first build downloads and compiles "
        f"{helper.first_build}; later ones take seconds)"
    )
    command = [go, "build", "-v", *(["-trimpath"] if helper.trimpath else []), "-o", helper.output, helper.package]
    start = last = time.monotonic()
    modules = packages = 0
    errors: list[str] = []
    with subprocess.Popen(
        command, cwd=ROOT / helper.module, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            if line.startswith("go: downloading "):
                modules += 1
            elif line and " " not in line and ":" not in line and not line.startswith("#"):
                packages += 1  # -v: the import path of a package as it is compiled
            else:
                errors.append(line)
            if time.monotonic() - last >= EVERY:
                last = time.monotonic()
                say(f"  {name}: {modules} modules downloaded, {packages} packages compiled, {_minutes(last - start)}")
    if process.returncode:
        return "\n".join(errors) or f"go build exited with status {process.returncode}"
    for line in errors:  # what Go printed besides progress on a build that worked: a warning, say
        say(line)
    if packages or modules:
        say(f"  {name}: built in {_minutes(time.monotonic() - start)} ({modules} modules, {packages} packages)")
    return ""


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in HELPERS:
        print(f"usage: python -m tools.go_build <{' | '.join(HELPERS)}>", file=sys.stderr)
        return 2
    errors = build(argv[0])
    if errors:
        print(errors, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
