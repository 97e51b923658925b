"""The offline render: what it writes for a good stack file, and that a bad one exits 2 and writes nothing."""

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import render.run
from rehearsal import report
from reports import summary as summary_module
from reports.summary import summary
from tests.conftest import BASE, ROOT, STACK_FILES, run_values, stack_values
from tests.support import tables


def render_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def write_stack(tmp_path: Path, values, name: str = "Pulumi.case.yaml") -> Path:
    path = tmp_path / name
    if isinstance(values, bytes):
        path.write_bytes(values)
    else:
        path.write_text(values if isinstance(values, str) else yaml.safe_dump({"config": values}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def staging(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("staging")
    assert render.run.main(["staging", "--out", str(out)]) == 0
    return out


def staging_config() -> dict:
    return yaml.safe_load((ROOT / "Pulumi.staging.yaml").read_text())["config"]


def test_staging_lists_cluster_role_policies_entry_and_tags(staging):
    resources = json.loads((staging / "resources.json").read_text())
    by_type: dict[str, list[str]] = {}
    for r in resources:
        by_type.setdefault(r["type"], []).append(r["name"])
    assert by_type["eks:index:Cluster"] == ["cluster-eks"]
    assert "karpenter-nodes-access" in by_type["aws:eks/accessEntry:AccessEntry"]
    node_role = [r["name"] for r in resources if r["parent"] == "gpulab:iam:NodeRole::karpenter-nodes"]
    expected = ["karpenter-nodes-access", "karpenter-nodes-role"] + [
        f"karpenter-nodes-{k}" for k in ("cni", "ecr", "ssm", "worker")
    ]
    assert sorted(node_role) == sorted(expected)
    subnets = staging_config()["gpulab:cluster"]["privateSubnetIds"]
    assert sorted(by_type["aws:ec2/tag:Tag"]) == sorted(["discovery-cluster-sg"] + [f"discovery-{s}" for s in subnets])


def test_staging_writes_labs_karpenter_objects_and_releases(staging):
    manifests = {p.name for p in (staging / "manifests").iterdir()}
    for lab in staging_config().get("gpulab:labs", {}):
        assert {f"ec2nodeclass-{lab}.yaml", f"nodepool-{lab}.yaml"} <= manifests
        pool = yaml.safe_load((staging / "manifests" / f"nodepool-{lab}.yaml").read_text())
        assert (pool["apiVersion"], pool["kind"], pool["metadata"]["name"]) == ("karpenter.sh/v1", "NodePool", lab)
    helm = sorted(p.name for p in (staging / "helm").iterdir())
    assert {"karpenter-crd.yaml", "karpenter.yaml"} <= set(helm)
    release = yaml.safe_load((staging / "helm" / "karpenter.yaml").read_text())
    assert release["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert release["version"] == "1.14.1"
    assert release["values"]["settings"]["clusterName"] == staging_config()["gpulab:cluster"]["name"]


def test_resources_json_is_sorted_by_type_then_name_with_inputs(staging):
    resources = json.loads((staging / "resources.json").read_text())
    assert [list(r) for r in resources] == [["type", "name", "parent", "dependsOn", "inputs"]] * len(resources)
    assert resources == sorted(resources, key=lambda r: (r["type"], r["name"]))


def test_secrets_never_reach_the_render(staging):
    text = (staging / "resources.json").read_text()
    assert '"kubeconfig": "[secret]"' in text
    assert "get-token" not in text  # the mock kubeconfig's content


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_stack_renders_byte_identically_twice(path, tmp_path, monkeypatch):
    # With helm run each time: the same bytes from the same inputs is what lets the tests keep helm's results.
    monkeypatch.delenv("GPULAB_HELM_CACHE", raising=False)
    assert render.run.main([str(path), "--out", str(tmp_path / "a")]) == 0
    assert render.run.main([str(path), "--out", str(tmp_path / "b")]) == 0
    assert render_files(tmp_path / "a") == render_files(tmp_path / "b")


def test_rendering_again_into_a_directory_leaves_no_stale_files(tmp_path):
    out = tmp_path / "out"
    (out / "manifests").mkdir(parents=True)
    (out / "manifests" / "nodepool-gone.yaml").write_text("stale")
    assert render.run.main(["staging", "--out", str(out)]) == 0
    assert not (out / "manifests" / "nodepool-gone.yaml").exists()


def test_summary_names_cluster_and_labs_types_capacity_seats(capsys, tmp_path):
    spot = {**BASE["gpulab:labs"]["intro"], "instanceTypes": ["g5.xlarge"], "capacityTypes": ["spot", "on-demand"]}
    values = stack_values(**{"gpulab:labs": {"intro": BASE["gpulab:labs"]["intro"], "spot": spot}})
    assert render.run.main([str(write_stack(tmp_path, values)), "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert tables.cluster(lines).items() >= {"cluster": "lab-test", "Kubernetes": "1.36", "region": "eu-west-1"}.items()
    shared = {"maxGpus": "4", "slicesPerGpu": "3", "learner seats": "12"}
    assert [row | shared == row for row in tables.table(lines, "labs:")] == [True, True]
    # The sharing as the key takes it.
    assert [row["sharing"] for row in tables.table(lines, summary_module.LEARNER_LEAD_IN)] == ["timeSlicing"] * 2
    assert [(r["lab"], r["instanceTypes"], r["capacityTypes"]) for r in tables.table(lines, "labs:")] == [
        ("intro", "g4dn.xlarge", "on-demand"),
        ("spot", "g5.xlarge", "spot, on-demand"),
    ]


def test_summary_shows_each_labs_ami_and_disruption_budgets():
    budgets = [
        {"nodes": "10%"},
        {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 8 * * mon-fri", "duration": "9h"},
    ]
    classes = [{"schedule": "0 9 * * mon", "duration": "10m"}]
    run = run_values(stack_values(**lab(ami="al2023@v20260714", disruption={"budgets": budgets}, classes=classes)))
    lines = summary(run)
    (row,) = tables.table(lines, summary_module.NODES_LEAD_IN)
    assert row["AMI"] == "al2023@v20260714"
    # The user's budgets, then the class's two: nothing moves learners from the warmup to the end, and no empty node
    # goes from the warm-up while they arrive (here to the end of the class's 10 minutes).
    assert budgets_shown(lines) == [
        ("10%", "all", "always", "-"),
        ("0", "Drifted", "0 8 * * mon-fri", "9h"),
        ("0", "Drifted, Underutilized", "40 8 * * mon", "30m"),
        ("0", "Empty", "40 8 * * mon", "30m"),
    ]
    # What the summary shows is what the NodePool carries.
    pool = run.one("kubernetes:karpenter.sh/v1:NodePool", "nodepool-intro").inputs
    assert len(pool["spec"]["disruption"]["budgets"]) == 4
    assert budgets_shown(summary(run_values(BASE))) == [("1", "all", "always", "-")]


def budgets_shown(lines: list[str]) -> list[tuple[str, ...]]:
    rows = tables.table(lines, summary_module.BUDGETS_LEAD_IN)
    return [(r["nodes"], r["reasons"], r["schedule"], r["duration"]) for r in rows]


def lab(**changes):
    return {"gpulab:labs": {"intro": {**BASE["gpulab:labs"]["intro"], **changes}}}


def cluster(**changes):
    return {"gpulab:cluster": {**BASE["gpulab:cluster"], **changes}}


BAD_STACKS = {
    "unknown key": (stack_values(**lab(slicesPerGPU=3)), "gpulab:labs.intro.slicesPerGPU: unknown key"),
    "wrong type": (stack_values(**lab(maxGpus="four")), "gpulab:labs.intro.maxGpus: must be a whole number"),
    "out of range": (stack_values(**lab(slicesPerGpu=0)), "gpulab:labs.intro.slicesPerGpu: must be between 1 and 48"),
    "bad lab name": (
        stack_values(**{"gpulab:labs": {"Intro": BASE["gpulab:labs"]["intro"]}}),
        "gpulab:labs.Intro: must be a DNS-1123 label",
    ),
    "bad cluster name": (stack_values(**cluster(name="Lab_1")), "gpulab:cluster.name: must be lowercase"),
    "non-GPU instance": (
        stack_values(**lab(instanceTypes=["m5.large"])),
        "gpulab:labs.intro.instanceTypes[0]: 'm5.large' is not an NVIDIA GPU instance type",
    ),
    "one subnet": (
        stack_values(**cluster(privateSubnetIds=["subnet-0a1b2c3d4e5f60001"])),
        "gpulab:cluster.privateSubnetIds: needs at least two subnets",
    ),
    "duplicate subnets": (
        stack_values(**cluster(privateSubnetIds=["subnet-0a1b2c3d4e5f60001"] * 2)),
        "gpulab:cluster.privateSubnetIds: must not repeat",
    ),
    "missing key": (
        stack_values(**{"gpulab:cluster": {k: v for k, v in BASE["gpulab:cluster"].items() if k != "vpcId"}}),
        "gpulab:cluster.vpcId: required key is missing",
    ),
    "malformed AMI alias": (stack_values(**lab(ami="al2023@2025")), "gpulab:labs.intro.ami: must be an AL2023 AMI"),
    "unsupported AMI alias": (stack_values(**lab(ami="al2@latest")), "gpulab:labs.intro.ami: must be an AL2023 AMI"),
    "labs as a list": (stack_values(**{"gpulab:labs": ["intro"]}), "gpulab:labs: must be a mapping"),
    "invalid YAML": ("config:\n  gpulab:labs: [\n", "gpulab: Pulumi.case.yaml is not valid YAML"),
    "duplicate YAML key": (
        "config:\n  gpulab:labs: {}\n  gpulab:labs: {}\n",
        "gpulab: Pulumi.case.yaml is not valid YAML: duplicate key 'gpulab:labs'",
    ),
    "duplicate key beside a merge key": (
        "config:\n  gpulab:labs:\n    a: &lab {maxGpus: 1}\n"
        "    b:\n      <<: *lab\n      maxGpus: 2\n      maxGpus: 3\n",
        "gpulab: Pulumi.case.yaml is not valid YAML: duplicate key 'maxGpus' (line 7, column 7)",
    ),
    "two merge keys": (
        "config:\n  gpulab:labs:\n    a: &lab {maxGpus: 1}\n    b:\n      <<: *lab\n      <<: *lab\n",
        "gpulab: Pulumi.case.yaml is not valid YAML: duplicate key '<<'",
    ),
    "UTF-16": (
        yaml.safe_dump({"config": BASE}).encode("utf-16"),
        "gpulab: Pulumi.case.yaml is not UTF-8 (byte 0xff at offset 0); it looks like UTF-16 text; save it as UTF-8",
    ),
    "gzip": (
        gzip.compress(yaml.safe_dump({"config": BASE}).encode()),
        "gpulab: Pulumi.case.yaml is not UTF-8 (byte 0x8b at offset 1); it looks gzip-compressed; save it as UTF-8",
    ),
    "near miss of the namespace": (
        {"aws:region": "eu-west-1", "gpulab:cluster": BASE["gpulab:cluster"], "gpulb:labs": BASE["gpulab:labs"]},
        "gpulb:labs: unknown namespace 'gpulb'; did you mean gpulab:labs?",
    ),
    "key without a namespace": (
        {"aws:region": "eu-west-1", "gpulab:cluster": BASE["gpulab:cluster"], "labs": BASE["gpulab:labs"]},
        "labs: no namespace; Pulumi keys are <namespace>:<name>; did you mean gpulab:labs?",
    ),
}


@pytest.mark.parametrize(("values", "expected"), BAD_STACKS.values(), ids=BAD_STACKS.keys())
def test_a_bad_stack_exits_2_naming_the_key_writing_nothing(values, expected, tmp_path, capsys):
    out = tmp_path / "out"
    assert render.run.main([str(write_stack(tmp_path, values)), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert any(line.startswith(expected) for line in lines), lines
    assert all(re.fullmatch(r"\S+: .+", line) for line in lines), lines  # `<key path>: <message>`, no traceback
    assert captured.out == ""
    assert not out.exists()


def test_render_runs_as_a_module_from_the_command_line(tmp_path):
    bad = write_stack(tmp_path, stack_values(**lab(slicesPerGpu=0)))
    done = subprocess.run(
        [sys.executable, "-m", "tools.render", str(bad), "--out", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == "gpulab:labs.intro.slicesPerGpu: must be between 1 and 48, got 0\n"


MERGED = """\
config:
  aws:region: eu-west-1
  gpulab:cluster: {name: lab-test, kubernetesVersion: "1.36", vpcId: vpc-0a1b2c3d4e5f60718,
                   privateSubnetIds: [subnet-0a1b2c3d4e5f60001, subnet-0a1b2c3d4e5f60002]}
  gpulab:labs:
    intro: &lab
      instanceTypes: [g4dn.xlarge]
      slicesPerGpu: 3
      maxGpus: 4
      ami: al2023@v20260714
    vision:
      <<: *lab
      instanceTypes: [g5.xlarge]
      slicesPerGpu: 5
"""


def test_a_yaml_merge_key_lab_renders_with_the_merged_values(tmp_path, capsys):
    out = tmp_path / "out"
    assert render.run.main([str(write_stack(tmp_path, MERGED)), "--out", str(out)]) == 0
    (vision,) = [row for row in tables.table(capsys.readouterr().out.splitlines(), "labs:") if row["lab"] == "vision"]
    shown = ("instanceTypes", "capacityTypes", "maxGpus", "slicesPerGpu", "learner seats")
    assert [vision[column] for column in shown] == ["g5.xlarge", "on-demand", "4", "5", "20"]
    pool = yaml.safe_load((out / "manifests" / "nodepool-vision.yaml").read_text())
    node_class = yaml.safe_load((out / "manifests" / "ec2nodeclass-vision.yaml").read_text())
    assert pool["spec"]["limits"]["nvidia.com/gpu"] == "20"
    assert node_class["spec"]["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]


def test_a_failed_render_removes_the_previous_keeps_other_files(tmp_path, capsys):
    out = tmp_path / "out"
    assert render.run.main(["staging", "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine")
    bad = write_stack(tmp_path, stack_values(**lab(slicesPerGpu=0)))
    assert render.run.main([str(bad), "--out", str(out)]) == 2
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_the_render_owns_everything_it_writes(tmp_path):
    # What is not in OWNED would survive a failed render and pass for its output.
    assert render.run.main(["staging", "--out", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} <= set(render.run.OWNED)


def test_an_unknown_stack_name_lists_the_stacks_there_are(tmp_path, capsys):
    assert render.run.main(["nosuchstack", "--out", str(tmp_path / "out")]) == 2
    stacks = ", ".join(sorted(path.name.split(".")[1] for path in STACK_FILES))
    assert capsys.readouterr().err == (
        f"gpulab: no stack 'nosuchstack': there is no Pulumi.nosuchstack.yaml beside Pulumi.yaml; stacks: {stacks}\n"
    )


def test_render_without_requirements_says_how_to_run_it(tmp_path):
    # As `python3 -m tools.render` does outside the virtualenv: PyYAML cannot be imported.
    block_yaml = "import runpy, sys; sys.modules['yaml'] = None; runpy.run_module('tools.render', run_name='__main__')"
    done = subprocess.run(
        [sys.executable, "-c", block_yaml, "staging", "--out", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"gpulab: yaml is not installed for {sys.executable}; run `make render`, or ")
    assert "`.venv/bin/python -m tools.render ...`" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_render_says_no_day_was_played_drops_old_rehearsal(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    # A rehearsal of an earlier render, copied beside it (.ci/run): it no longer describes what is rendered.
    (out / report.REHEARSAL).write_text("{}")
    assert render.run.main([str(write_stack(tmp_path, BASE)), "--out", str(out), "--no-charts"]) == 0
    assert capsys.readouterr().out.splitlines().count(report.NOT_RUN) == 1
    assert not (out / report.REHEARSAL).exists()
