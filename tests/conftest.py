"""Shared fixtures: stack configurations as the Pulumi CLI would hand them over, and runs of the program under mocks."""

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools import harness

# Renders in tests leave the planner out (it has tests of its own, tests/test_planner.py, which build it once).
os.environ.setdefault("GPULAB_PLANNER", "off")

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


def run_values(values: dict[str, Any], stack: str = "test") -> harness.Run:
    return harness.run(stack, as_cli_config(values))


def run_stack_file(path: Path) -> harness.Run:
    return harness.run(path.name.split(".")[1], harness.config_from_stack_file(yaml.safe_load(path.read_text())))


@pytest.fixture(scope="session")
def base_run() -> harness.Run:
    return run_values(BASE)
