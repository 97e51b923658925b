"""mypy reads every part of the AWS and Kubernetes SDKs the code uses (pyproject.toml's [[tool.mypy.overrides]]).

mypy skips the SDKs' generated modules but for those listed, and a skipped module is Any to it: a call into a service
or API group missing from the list would go unchecked without a word. The code reaches them as `aws.<service>` and
`k8s.<group>` (the only ways it imports them); each must be listed.
"""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What `make check` gives mypy, and program.py, which it reaches through render/harness.py.
CHECKED = (
    "components",
    "domain",
    "render",
    "reports",
    "planner",
    "rehearsal",
    "devtools",
    "tools",
    "policy",
    "program.py",
)
ALIASES = {"aws": "pulumi_aws", "k8s": "pulumi_kubernetes"}


def _followed() -> set[str]:
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    return {module for o in overrides if o.get("follow_imports") == "normal" for module in o["module"]}


def _used(source: str) -> set[str]:
    """The SDK submodules a module reaches, e.g. pulumi_aws.iam for `aws.iam.Role`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ALIASES:
            found.add(f"{ALIASES[node.value.id]}.{node.attr}")
    return found


def _sources() -> list[Path]:
    return [
        p for name in CHECKED for p in ([ROOT / name] if name.endswith(".py") else sorted((ROOT / name).rglob("*.py")))
    ]


def _sdk_package(module: str) -> bool:
    package, _, name = module.partition(".")
    return (Path(__import__(package).__file__).parent / name).is_dir()


def test_every_sdk_package_the_code_uses_is_one_mypy_reads():
    used = {module for path in _sources() for module in _used(path.read_text()) if _sdk_package(module)}
    assert {"pulumi_aws.iam", "pulumi_kubernetes.core"} <= used  # the walk finds what the code is known to use
    followed = _followed()
    assert sorted(m for m in used if f"{m}.*" not in followed) == []


def test_a_package_the_list_lacks_is_reported():
    source = "import pulumi_aws as aws\naws.s3.Bucket('b')\n"
    assert _used(source) == {"pulumi_aws.s3"}
    assert _sdk_package("pulumi_aws.s3")
    assert "pulumi_aws.s3.*" not in _followed()
