"""Shared fixtures: stack configurations as the Pulumi CLI would hand them over, and runs of the program under mocks.

A run of the program under mocks is the suite's main cost (0.2 to 1 s each), and many tests read the same stack: every
run made through `run_config` (and so `run_values`, `run_stack_file` and tests/support/rendered.py) happens once per
test session for a given stack name and configuration, and tests share the recorded Run: pytest-xdist's workers hand
each other their runs through a folder of the session (a run is deterministic: tests/test_render.py renders twice). A
test that changes what it reads from a Run copies it first (copy.deepcopy), as the tests that plant defects do; a test
that patches the harness calls `harness.run` itself.
"""

import copy
import datetime
import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import render.run
from devtools import go_build
from domain.time import utc
from render import charts, harness
from tests.support import allowed_skips
from tests.support.suite_progress import SuiteProgress

# jsonschema registers the "iri" formats when it can import rfc3987_syntax (jsonschema/_format.py), which builds 38
# lark grammars as it is imported: 2 s in every test process. The tests check no iri format (tests/support/crd_schema.py
# checks the formats of Kubernetes' schemas, int32, int64 and date-time, with its own checker), so it is not imported.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
# Renders in tests leave the planner out (it has tests of its own, tests/test_planner.py, which build it once).
os.environ.setdefault("GPULAB_PLANNER", "off")
# helm template's results are kept between runs, keyed by all of helm's inputs (render/helm_cache.py): the check that
# every Helm value is read templates the releases hundreds of times, with the same inputs as the last run.
os.environ.setdefault("GPULAB_HELM_CACHE", str(charts.cache_home() / "helm-template"))

ROOT = Path(__file__).resolve().parent.parent
# helm-batch, where `make helm-batch` built it (devtools/helmbatch, Go): those hundreds of helm templates in a few
# processes. Without it each runs helm (render/helm_cache.py).
HELM_BATCH = go_build.HELPERS["helm-batch"].binary
if HELM_BATCH.exists():
    os.environ.setdefault("GPULAB_HELM_BATCH", str(HELM_BATCH))
STACK_FILES = sorted(ROOT.glob("Pulumi.*.yaml"))

# The day every run in the tests is made on (domain/time/utc.py today, pinned below): whether a version is in EKS
# standard support, and so whether a stack is refused and what its control plane costs, depends on it, and a test's
# verdict must not change with the calendar. 1.34 left standard support two days before.
RUN_DAY = datetime.date(2026, 12, 4)


@pytest.fixture(autouse=True, scope="session")
def _run_day() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(utc, "today", lambda: RUN_DAY)
        yield


# A small valid stack that tests change one key at a time.
BASE: dict[str, Any] = {
    "aws:region": "eu-west-1",
    "gpulab:cluster": {
        "name": "lab-test",
        "kubernetesVersion": "1.36",
        "vpcId": "vpc-0a1b2c3d4e5f60718",
        "privateSubnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"],
    },
    "gpulab:labs": {
        "intro": {"instanceTypes": ["g4dn.xlarge"], "slicesPerGpu": 3, "maxGpus": 4, "ami": "al2023@v20260714"},
    },
}


def stack_values(**overrides: Any) -> dict[str, Any]:
    """BASE with whole top-level keys replaced, e.g. stack_values(**{"gpulab:labs": {}})."""
    values = copy.deepcopy(BASE)
    values.update(overrides)
    return values


def as_cli_config(values: dict[str, Any]) -> dict[str, str]:
    return harness.config_from_stack_file({"config": values})


_RUNS: dict[tuple[str, str], harness.Run] = {}
# The folder where the workers of one pytest-xdist session share their runs: made by the controller before it starts
# them (they inherit the variable), removed when it ends.
SHARED_RUNS = "GPULAB_SHARED_RUNS"


def pytest_configure(config: pytest.Config) -> None:
    # CI's check that no test skips unless .ci/allowed-skips lists it (GPULAB_ALLOWED_SKIPS, set by .ci/run).
    if not config.pluginmanager.is_registered(allowed_skips):
        config.pluginmanager.register(allowed_skips, "gpulab-allowed-skips")
    # What runs when no test has finished for a while, on a terminal (the controller hears every worker's tests).
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(SuiteProgress(config), "gpulab-suite-progress")
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        folder = tempfile.mkdtemp(prefix="gpulab-runs-")
        os.environ[SHARED_RUNS] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def run_config(stack: str, cli_config: dict[str, str]) -> harness.Run:
    """harness.run, once per stack name and configuration in this test session (a failed run is not kept)."""
    key = (stack, json.dumps(cli_config, sort_keys=True))
    if key not in _RUNS:
        shared = os.environ.get(SHARED_RUNS)
        _RUNS[key] = _shared_run(Path(shared), key) if shared else harness.run(stack, cli_config)
    return _RUNS[key]


def _shared_run(folder: Path, key: tuple[str, str]) -> harness.Run:
    path = folder / f"{hashlib.sha256(json.dumps(key).encode()).hexdigest()}.pickle"
    if path.exists():
        return pickle.loads(path.read_bytes())
    run = harness.run(key[0], json.loads(key[1]))
    # Written whole, then renamed: a worker reads a run another has finished, or none (it then makes its own).
    with tempfile.NamedTemporaryFile(dir=folder, delete=False) as partial:
        partial.write(pickle.dumps(run))
    os.replace(partial.name, path)
    return run


def run_values(values: dict[str, Any], stack: str = "test") -> harness.Run:
    return run_config(stack, as_cli_config(values))


def run_stack_file(path: Path) -> harness.Run:
    # As the render reads it, and so as the Pulumi CLI hands it over (an unquoted date stays text).
    return run_config(path.name.split(".")[1], render.run.read_stack_file(path))


@pytest.fixture(scope="session")
def base_run() -> harness.Run:
    return run_values(BASE)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Skips by reason: each reason once, with how many tests it skipped and in which files (pytest's -rs repeats a
    reason for every line that skips, e.g. once per stack when the upstream data is absent)."""
    files_by_reason: dict[str, list[str]] = {}
    for report in terminalreporter.stats.get("skipped", []):
        _path, _line, reason = report.longrepr  # a skip's longrepr: (path, line, "Skipped: <reason>")
        files_by_reason.setdefault(reason.removeprefix("Skipped: "), []).append(Path(report.fspath).name)
    if not files_by_reason:
        return
    terminalreporter.section("skipped, by reason", sep="-")
    for reason, files in sorted(files_by_reason.items(), key=lambda item: -len(item[1])):
        terminalreporter.write_line(f"{len(files)} skipped in {', '.join(sorted(set(files)))}:")
        for line in reason.splitlines():
            terminalreporter.write_line(f"    {line}")
