"""Who can use the cluster, GPU health reporting and node repair, and the namespaces the stack creates."""

import copy
import json

import pulumi
import pytest

import domain.stack
from tests.conftest import BASE, as_cli_config, run_values, stack_values
from tests.support.scheduling import tolerates
from tests.support.synthetic import SYNTHETIC

OPERATORS = "arn:aws:iam::123456789012:role/platform/operators"
DEPLOYER = "arn:aws:iam::210987654321:role/gpulab-deploy"


def with_admins(arns: list[str]) -> dict:
    return stack_values(**{"gpulab:cluster": {**BASE["gpulab:cluster"], "adminRoleArns": arns}})


def test_each_admin_role_gets_cluster_admin_at_cluster_scope():
    run = run_values(with_admins([OPERATORS, DEPLOYER]))
    entries = {r.name: r.inputs for r in run.of_type("aws:eks/accessEntry:AccessEntry") if "admin" in r.name}
    assert entries == {
        "cluster-admin-123456789012-operators": {"clusterName": "lab-test", "principalArn": OPERATORS},
        "cluster-admin-210987654321-gpulab-deploy": {"clusterName": "lab-test", "principalArn": DEPLOYER},
    }
    for name, principal in (
        ("cluster-admin-123456789012-operators", OPERATORS),
        ("cluster-admin-210987654321-gpulab-deploy", DEPLOYER),
    ):
        association = run.one("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", name)
        assert association.inputs == {
            "accessScope": {"type": "cluster"},
            "clusterName": "lab-test",
            "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
            "principalArn": principal,
        }
        assert f"aws:eks/accessEntry:AccessEntry::{name}" in association.dependencies


def test_by_default_no_role_is_an_admin(base_run):
    assert base_run.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation") == []


@pytest.mark.parametrize(
    ("arns", "message"),
    [
        (
            ["arn:aws:sts::123456789012:assumed-role/ci/session"],
            "gpulab:cluster.adminRoleArns[0]: must be an IAM role ARN such as arn:aws:iam::123456789012:role/",
        ),
        ([OPERATORS, OPERATORS], f"gpulab:cluster.adminRoleArns: must not repeat {OPERATORS}"),
    ],
    ids=["session-arn", "repeated"],
)
def test_admin_roles_must_be_distinct_role_arns(arns, message):
    pulumi.runtime.set_all_config(as_cli_config(with_admins(arns)))
    with pytest.raises(domain.stack.ConfigError, match="adminRoleArns") as caught:
        domain.stack.load()
    assert caught.value.lines[0].startswith(message)


def test_node_monitoring_reports_gpu_health_on_tainted_nodes(base_run):
    addon = base_run.one("aws:eks/addon:Addon", "cluster-node-monitoring-agent").inputs
    assert addon["addonName"] == "eks-node-monitoring-agent"
    tolerations = json.loads(addon["configurationValues"])["dcgmAgent"]["tolerations"]
    pool = base_run.one("kubernetes:karpenter.sh/v1:NodePool", "nodepool-intro").inputs["spec"]["template"]["spec"]
    for taint in pool["taints"]:
        assert any(tolerates(t, taint) for t in tolerations), f"dcgm-server would not run on a node tainted {taint}"


def test_karpenter_repairs_nodes(base_run):
    values = base_run.one("kubernetes:helm.sh/v3:Release", "karpenter").inputs["values"]
    assert values["settings"]["featureGates"]["nodeRepair"] is True


def test_karpenters_own_namespace_is_created_before_releases():
    run = run_values(stack_values(**{"gpulab:karpenter": {"namespace": "karpenter"}}))
    namespace = run.one("kubernetes:core/v1:Namespace", "karpenter-namespace")
    assert namespace.inputs["metadata"] == {"name": "karpenter"}
    assert namespace.parent == "gpulab:karpenter:Controller::karpenter"
    for release in ("karpenter-crd", "karpenter"):
        assert (
            "kubernetes:core/v1:Namespace::karpenter-namespace"
            in run.one("kubernetes:helm.sh/v3:Release", release).dependencies
        )


def test_built_in_namespaces_are_used_as_they_are(base_run):
    names = [r.inputs["metadata"]["name"] for r in base_run.of_type("kubernetes:core/v1:Namespace")]
    assert names == ["nvidia-device-plugin"]  # Karpenter's default kube-system exists in every cluster


def test_mixed_arch_4_gpu_own_namespace_render_2_gpus_refused():
    run = run_values(SYNTHETIC["own-namespace"])
    spec = run.one("kubernetes:karpenter.sh/v1:NodePool", "nodepool-mixed-arch").inputs["spec"]["template"]["spec"]
    assert {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]} in spec["requirements"]
    association = run.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpenter-pod-identity")
    assert association.inputs["namespace"] == "karpenter"

    values = copy.deepcopy(SYNTHETIC["own-namespace"])
    values["gpulab:labs"]["four-gpu"]["maxGpus"] = 2
    pulumi.runtime.set_all_config(as_cli_config(values))
    with pytest.raises(domain.stack.ConfigError, match=r"gpulab:labs\.four-gpu\.maxGpus: must be at least 4"):
        domain.stack.load()


def test_karpenter_and_plugin_cannot_both_create_a_namespace():
    values = stack_values(
        **{"gpulab:karpenter": {"namespace": "gpu"}, "gpulab:nvidiaDevicePlugin": {"namespace": "gpu"}}
    )
    pulumi.runtime.set_all_config(as_cli_config(values))
    with pytest.raises(
        domain.stack.ConfigError,
        match=r"gpulab:nvidiaDevicePlugin\.namespace: must be a namespace of its own, not 'gpu', which gpulab:karp",
    ):
        domain.stack.load()
