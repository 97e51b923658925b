"""Shared fixtures: stack configurations as the Pulumi CLI would hand them over, and runs of the program under mocks.

A run of the program under mocks is the suite's main cost (0.2 to 1 s each), and many tests read the same stack: every
run made through `run_config` (and so `run_values`, `run_stack_file` and tests/rendered.py) happens once per test
process for a given stack name and configuration, and tests share the recorded Run. A test that changes what it reads
from a Run copies it first (copy.deepcopy), as the tests that plant defects do; a test that patches the harness calls
`harness.run` itself.
"""

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools import charts, harness

# Renders in tests leave the planner out (it has tests of its own, tests/test_planner.py, which build it once).
os.environ.setdefault("GPULAB_PLANNER", "off")
# helm template's results are kept between runs, keyed by all of helm's inputs (tools/helm_cache.py): the check that
# every Helm value is read templates the releases hundreds of times, with the same inputs as the last run.
os.environ.setdefault("GPULAB_HELM_CACHE", str(charts.cache_home() / "helm-template"))

ROOT = Path(__file__).resolve().parent.parent
STACK_FILES = sorted(ROOT.glob("Pulumi.*.yaml"))

# A small valid stack that tests change one key at a time.
BASE: dict[str, Any] = {
    "aws:region": "eu-west-1",
    "gpulab:cluster": {
        "name": "lab-test",
        "kubernetesVersion": "1.34",
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


def run_config(stack: str, cli_config: dict[str, str]) -> harness.Run:
    """harness.run, once per stack name and configuration in this test process (a failed run is not kept)."""
    key = (stack, json.dumps(cli_config, sort_keys=True))
    if key not in _RUNS:
        _RUNS[key] = harness.run(stack, cli_config)
    return _RUNS[key]


def run_values(values: dict[str, Any], stack: str = "test") -> harness.Run:
    return run_config(stack, as_cli_config(values))


def run_stack_file(path: Path) -> harness.Run:
    return run_config(path.name.split(".")[1], harness.config_from_stack_file(yaml.safe_load(path.read_text())))


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
