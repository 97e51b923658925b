"""The README's quick start works as written: its example lab, added to the staging stack, renders."""

import re

import yaml

import render.run
from tests.conftest import ROOT


def test_the_readmes_example_lab_renders_in_the_staging_stack(tmp_path, capsys):
    readme = (ROOT / "README.md").read_text()
    (example,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL) if "ami:" in b]
    labs = yaml.safe_load(example)
    stack = yaml.safe_load((ROOT / "Pulumi.staging.yaml").read_text())
    assert not set(labs) & set(stack["config"]["gpulab:labs"]), "the example must add a lab, not replace one"
    stack["config"]["gpulab:labs"] |= labs
    (tmp_path / "Pulumi.staging.yaml").write_text(yaml.safe_dump(stack))
    code = render.run.main([str(tmp_path / "Pulumi.staging.yaml"), "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
    (name,) = labs
    assert name in capsys.readouterr().out  # the summary gains the lab
