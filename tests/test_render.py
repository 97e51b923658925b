"""The offline render: what it writes for a good stack file, and that a bad one exits 2 and writes nothing."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import BASE, ROOT, STACK_FILES, stack_values
from tools import render


def render_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def write_stack(tmp_path: Path, values, name: str = "Pulumi.case.yaml") -> Path:
    path = tmp_path / name
    path.write_text(values if isinstance(values, str) else yaml.safe_dump({"config": values}))
    return path


@pytest.fixture(scope="module")
def staging(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("staging")
    assert render.main(["staging", "--out", str(out)]) == 0
    return out


def test_staging_render_lists_cluster_node_role_attachments_access_entry_and_discovery_tags(staging):
    resources = json.loads((staging / "resources.json").read_text())
    by_type: dict[str, list[str]] = {}
    for r in resources:
        by_type.setdefault(r["type"], []).append(r["name"])
    assert by_type["eks:index:Cluster"] == ["cluster-eks"]
    assert by_type["aws:eks/accessEntry:AccessEntry"] == ["karpenter-nodes-access"]
    node_role = [r["name"] for r in resources if r["parent"] == "gpulab:iam:NodeRole::karpenter-nodes"]
    expected = ["karpenter-nodes-access", "karpenter-nodes-role"] + [
        f"karpenter-nodes-{k}" for k in ("cni", "ecr", "ssm", "worker")
    ]
    assert sorted(node_role) == sorted(expected)
    staging_subnets = yaml.safe_load((ROOT / "Pulumi.staging.yaml").read_text())["config"]["gpulab:cluster"]
    assert sorted(by_type["aws:ec2/tag:Tag"]) == sorted(
        ["discovery-cluster-sg"] + [f"discovery-{s}" for s in staging_subnets["privateSubnetIds"]]
    )


def test_staging_render_writes_the_labs_karpenter_objects_and_both_karpenter_releases(staging):
    manifests = sorted(p.name for p in (staging / "manifests").iterdir())
    assert {"ec2nodeclass-intro.yaml", "nodepool-intro.yaml", "nodeoverlay-intro-1gpu.yaml"} <= set(manifests)
    helm = sorted(p.name for p in (staging / "helm").iterdir())
    assert {"karpenter-crd.yaml", "karpenter.yaml"} <= set(helm)
    pool = yaml.safe_load((staging / "manifests" / "nodepool-intro.yaml").read_text())
    assert (pool["apiVersion"], pool["kind"], pool["metadata"]["name"]) == ("karpenter.sh/v1", "NodePool", "intro")
    release = yaml.safe_load((staging / "helm" / "karpenter.yaml").read_text())
    assert release["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert release["version"] == "1.14.1"
    assert release["values"]["settings"]["clusterName"] == "learninglab-staging"


def test_resources_json_is_sorted_by_type_then_name_with_parent_and_inputs(staging):
    resources = json.loads((staging / "resources.json").read_text())
    assert [list(r) for r in resources] == [["type", "name", "parent", "dependsOn", "inputs"]] * len(resources)
    assert resources == sorted(resources, key=lambda r: (r["type"], r["name"]))


def test_secrets_never_reach_the_render(staging):
    text = (staging / "resources.json").read_text()
    assert '"kubeconfig": "[secret]"' in text
    assert "get-token" not in text  # the mock kubeconfig's content


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_stack_renders_byte_identically_twice(path, tmp_path):
    assert render.main([str(path), "--out", str(tmp_path / "a")]) == 0
    assert render.main([str(path), "--out", str(tmp_path / "b")]) == 0
    assert render_files(tmp_path / "a") == render_files(tmp_path / "b")


def test_rendering_again_into_the_same_directory_leaves_no_stale_files(tmp_path):
    out = tmp_path / "out"
    (out / "manifests").mkdir(parents=True)
    (out / "manifests" / "nodepool-gone.yaml").write_text("stale")
    assert render.main(["staging", "--out", str(out)]) == 0
    assert not (out / "manifests" / "nodepool-gone.yaml").exists()


def test_summary_names_the_cluster_and_each_labs_seats(capsys, tmp_path):
    assert render.main(["staging", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cluster learninglab-staging: Kubernetes 1.34 in eu-west-1")
    assert "lab intro: g4dn.xlarge; up to 4 GPUs x 3 slices = 12 learner seats" in lines


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
}


@pytest.mark.parametrize(("values", "expected"), BAD_STACKS.values(), ids=BAD_STACKS.keys())
def test_a_bad_stack_file_exits_2_names_the_key_and_writes_nothing(values, expected, tmp_path, capsys):
    out = tmp_path / "out"
    assert render.main([str(write_stack(tmp_path, values)), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert any(line.startswith(expected) for line in lines), lines
    assert all(line.startswith(("gpulab:", "aws:")) for line in lines)
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
