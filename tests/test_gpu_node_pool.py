"""gpulab:karpenter:GpuNodePool: the EC2NodeClass, NodePool and NodeOverlays each lab gets."""

import pytest
import yaml

from tests.conftest import BASE, STACK_FILES, run_stack_file, run_values, stack_values
from tests.support.crd_schema import crd_problems, requires_upstream
from tests.support.dependencies import waits_for
from tests.support.synthetic import SYNTHETIC
from tests.support.user_data_parts import mime_parts, prepull_script

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_OVERLAY = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"
KARPENTER_KINDS = (NODE_POOL, NODE_CLASS, NODE_OVERLAY)


def spec(run, type_token, name):
    return run.one(type_token, name).inputs["spec"]


def requirement(pool_spec, key):
    (found,) = [r for r in pool_spec["template"]["spec"]["requirements"] if r["key"] == key]
    return found


def with_intro(**changes):
    return stack_values(**{"gpulab:labs": {"intro": {**BASE["gpulab:labs"]["intro"], **changes}}})


def test_default_node_class_is_the_origin_node_images_on_nvme(base_run):
    node_class = spec(base_run, NODE_CLASS, "ec2nodeclass-intro")
    assert node_class["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]
    assert node_class["role"] == base_run.outputs["nodeRoleName"]
    discovery = [{"tags": {"karpenter.sh/discovery": "lab-test"}}]
    assert node_class["subnetSelectorTerms"] == node_class["securityGroupSelectorTerms"] == discovery
    assert node_class["blockDeviceMappings"] == [
        {
            "deviceName": "/dev/xvda",
            "rootVolume": True,
            "ebs": {
                "volumeSize": "20Gi",
                "volumeType": "gp3",
                "iops": 3000,
                "throughput": 125,
                "encrypted": True,
                "deleteOnTermination": True,
            },
        }
    ]
    assert node_class["instanceStorePolicy"] == "RAID0"
    assert node_class["metadataOptions"]["httpTokens"] == "required"
    assert node_class["metadataOptions"]["httpPutResponseHopLimit"] == 1
    # No kubelet maxPods: Karpenter then gives each instance type the pods its ENIs have addresses for.
    assert "kubelet" not in node_class
    assert node_class["tags"] == {"gpulab.dev/lab": "intro"}


def test_user_data_sets_the_pid_limit_and_prepulls_lab_images():
    run = run_values(with_intro(prepullImages=["tensorflow/tensorflow:2.12.0-gpu"]))
    user_data = spec(run, NODE_CLASS, "ec2nodeclass-intro")["userData"]
    node_config = yaml.safe_load(mime_parts(user_data)[0].get_payload())
    assert node_config["spec"]["kubelet"]["config"]["podPidsLimit"] == 32768
    assert "docker.io/tensorflow/tensorflow:2.12.0-gpu" in prepull_script(user_data)


def test_pool_labels_pick_the_plugin_profile_and_name_the_lab(base_run):
    labels = spec(base_run, NODE_POOL, "nodepool-intro")["template"]["metadata"]["labels"]
    assert labels == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/device-plugin.config": "intro",
        "gpulab.dev/lab": "intro",
    }


def test_pool_taints_gpu_nodes_names_its_class_by_group_kind(base_run):
    template = spec(base_run, NODE_POOL, "nodepool-intro")["template"]["spec"]
    assert template["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert template["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "intro"}
    assert base_run.one(NODE_CLASS, "ec2nodeclass-intro").inputs["metadata"]["name"] == "intro"


def test_pool_requires_the_labs_types_capacity_linux_and_nvidia(base_run):
    pool = spec(base_run, NODE_POOL, "nodepool-intro")
    assert requirement(pool, "node.kubernetes.io/instance-type")["values"] == ["g4dn.xlarge"]
    assert requirement(pool, "karpenter.sh/capacity-type")["values"] == ["on-demand"]
    assert requirement(pool, "kubernetes.io/arch")["values"] == ["amd64"]
    assert requirement(pool, "kubernetes.io/os")["values"] == ["linux"]
    assert requirement(pool, "karpenter.k8s.aws/instance-gpu-manufacturer")["values"] == ["nvidia"]


def test_node_pool_limits_count_slices_and_cpus(base_run):
    # maxGpus 4 x slicesPerGpu 3; without cpuLimit, the vCPUs of maxGpus' 4 g4dn.xlarge (tests/test_lab_limits.py).
    assert spec(base_run, NODE_POOL, "nodepool-intro")["limits"] == {"nvidia.com/gpu": "12", "cpu": "16"}


def test_node_pool_disruption_defaults_keep_learners_sessions(base_run):
    pool = spec(base_run, NODE_POOL, "nodepool-intro")
    assert pool["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "10m",
        "budgets": [{"nodes": "1"}],
    }
    assert pool["template"]["spec"]["expireAfter"] == "720h"


def test_budgets_and_consolidation_come_from_config():
    budgets = [{"nodes": "1"}, {"nodes": "0", "schedule": "0 13 * * mon-fri", "duration": "9h"}]
    run = run_values(with_intro(disruption={"consolidateAfter": "30m", "budgets": budgets}))
    disruption = spec(run, NODE_POOL, "nodepool-intro")["disruption"]
    assert disruption["consolidateAfter"] == "30m"
    assert disruption["budgets"][1] == {"nodes": "0", "schedule": "0 13 * * mon-fri", "duration": "9h"}


def test_architectures_follow_the_instance_types():
    run = run_values(SYNTHETIC["mixed"])
    assert requirement(spec(run, NODE_POOL, "nodepool-graviton"), "kubernetes.io/arch")["values"] == ["arm64"]
    both = requirement(spec(run, NODE_POOL, "nodepool-both-arches"), "kubernetes.io/arch")["values"]
    assert both == ["amd64", "arm64"]


def test_one_overlay_per_gpu_count_matching_only_its_labs_nodes():
    run = run_values(SYNTHETIC["mixed"])
    overlays = {r.name: r.inputs["spec"] for r in run.of_type(NODE_OVERLAY) if r.parent.endswith("::one-four-eight")}
    assert sorted(overlays) == [
        "nodeoverlay-one-four-eight-1gpu",
        "nodeoverlay-one-four-eight-4gpu",
        "nodeoverlay-one-four-eight-8gpu",
    ]
    eight = overlays["nodeoverlay-one-four-eight-8gpu"]
    assert eight["requirements"] == [
        {"key": "gpulab.dev/lab", "operator": "In", "values": ["one-four-eight"]},
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "In", "values": ["8"]},
    ]
    assert eight["capacity"] == {"nvidia.com/gpu": "16"}


def test_a_lab_without_sharing_gets_no_overlay():
    run = run_values(SYNTHETIC["mixed"])
    assert not [r for r in run.of_type(NODE_OVERLAY) if r.parent.endswith("::solo")]


def test_reserved_capacity_selects_the_labs_reservations():
    run = run_values(SYNTHETIC["mixed"])
    node_class = spec(run, NODE_CLASS, "ec2nodeclass-big")
    assert node_class["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert requirement(spec(run, NODE_POOL, "nodepool-big"), "karpenter.sh/capacity-type")["values"] == ["reserved"]


def test_custom_resources_use_the_clusters_provider_after_crds(base_run):
    objects = [r for r in base_run.resources if r.type in KARPENTER_KINDS]
    assert len(objects) == 3
    for r in objects:
        assert "kubernetes:helm.sh/v3:Release::karpenter-crd" in waits_for(base_run, r)
        assert r.parent == "gpulab:karpenter:GpuNodePool::intro"
        assert r.provider == "pulumi:providers:kubernetes::cluster-k8s"


def all_runs():
    runs = [(path.name, run_stack_file(path)) for path in STACK_FILES]
    return runs + [(f"synthetic-{name}", run_values(values)) for name, values in SYNTHETIC.items()]


@requires_upstream
def test_every_rendered_karpenter_object_passes_upstream_crds():
    checked = 0
    for stack, run in all_runs():
        for r in run.resources:
            if r.type in KARPENTER_KINDS:
                assert crd_problems(r.inputs) == [], f"{stack}: {r.name}"
                checked += 1
    assert checked >= 20


@requires_upstream
@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        (("spec", "disruption", "consolidationPolicy"), "WhenUnderutilized", "consolidationPolicy"),
        (("spec", "template", "spec", "nodeClassRef", "apiVersion"), "karpenter.k8s.aws/v1", "unknown field"),
    ],
)
def test_the_crd_check_catches_v1beta1_mistakes_in_a_pool(base_run, path, value, problem):
    manifest = yaml.safe_load(yaml.safe_dump(base_run.one(NODE_POOL, "nodepool-intro").inputs))
    target = manifest
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert any(problem in p for p in crd_problems(manifest))
