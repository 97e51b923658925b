"""The README's quick start works as written: its example lab, added to the staging stack, renders."""

import itertools
import re

import yaml

import render.run
from tests.conftest import ROOT


def test_the_readmes_example_lab_renders_in_the_staging_stack(tmp_path, capsys):
    readme = (ROOT / "README.md").read_text()
    (example,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL) if "ami:" in b]
    ((name, keys),) = yaml.safe_load(example).items()
    stack = yaml.safe_load((ROOT / "Pulumi.staging.yaml").read_text())
    taken = stack["config"]["gpulab:labs"] = stack["config"].get("gpulab:labs") or {}
    # A staging stack that has a lab of that name already (a user who followed the README) gets the example beside it,
    # under a name of its own: the example adds a lab, whatever staging holds.
    added = next(n for n in itertools.chain([name], (f"{name}-{i}" for i in itertools.count(2))) if n not in taken)
    taken[added] = keys
    (tmp_path / "Pulumi.staging.yaml").write_text(yaml.safe_dump(stack))
    code = render.run.main([str(tmp_path / "Pulumi.staging.yaml"), "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
    assert added in capsys.readouterr().out  # the summary gains the lab
