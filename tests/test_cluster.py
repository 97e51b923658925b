"""gpulab:eks:Cluster, gpulab:iam:NodeRole and gpulab:network:DiscoveryTags: the inputs the program passes to AWS."""

import json
import re

import pytest

from domain.upstream.versions import (
    EBS_CSI_DRIVER_ADDON_VERSION,
    KUBE_PROXY_ADDON_VERSIONS,
    NODE_MONITORING_AGENT_ADDON_VERSION,
    POD_IDENTITY_AGENT_ADDON_VERSION,
    VPC_CNI_ADDON_VERSION,
)
from tests.conftest import BASE, STACK_FILES, run_stack_file

SUBNETS = BASE["gpulab:cluster"]["privateSubnetIds"]


def test_cluster_has_access_entries_its_vpc_no_default_group(base_run):
    eks = base_run.one("eks:index:Cluster", "cluster-eks").inputs
    assert eks["authenticationMode"] == "API"
    assert eks["skipDefaultNodeGroup"] is True
    assert eks["name"] == "lab-test"
    assert eks["version"] == BASE["gpulab:cluster"]["kubernetesVersion"]
    assert eks["vpcId"] == BASE["gpulab:cluster"]["vpcId"]
    assert eks["privateSubnetIds"] == SUBNETS
    assert set(eks["enabledClusterLogTypes"]) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}


def test_secrets_are_encrypted_with_a_rotating_kms_key(base_run):
    key = base_run.one("aws:kms/key:Key", "cluster-secrets").inputs
    eks = base_run.one("eks:index:Cluster", "cluster-eks").inputs
    assert key["enableKeyRotation"] is True
    assert eks["encryptionConfigKeyArn"].startswith("arn:aws:kms:eu-west-1:")


def test_pod_identity_agent_addon_is_installed_on_the_cluster(base_run):
    addon = base_run.one("aws:eks/addon:Addon", "cluster-pod-identity-agent").inputs
    assert addon == {
        "addonName": "eks-pod-identity-agent",
        "addonVersion": POD_IDENTITY_AGENT_ADDON_VERSION,
        "clusterName": "lab-test",
    }


EKS_ADDON_VERSION = re.compile(r"v(\d+)\.(\d+)\.\d+-eksbuild\.\d+")


@pytest.mark.parametrize("stack", STACK_FILES, ids=lambda p: p.name)
def test_every_eks_addon_installed_runs_a_pinned_version(stack):
    # Unpinned, EKS and pulumi-eks pick a version on the day of `pulumi up`, and with it the DaemonSets on every node.
    run = run_stack_file(stack)
    eks = run.one("eks:index:Cluster", "cluster-eks").inputs
    versions = {a.inputs["addonName"]: a.inputs.get("addonVersion") for a in run.of_type("aws:eks/addon:Addon")}
    versions |= {
        "kube-proxy": eks["kubeProxyAddonOptions"]["version"],
        "vpc-cni": eks["vpcCniOptions"]["addonVersion"],
    }
    assert versions == {
        "eks-pod-identity-agent": POD_IDENTITY_AGENT_ADDON_VERSION,
        "eks-node-monitoring-agent": NODE_MONITORING_AGENT_ADDON_VERSION,
        "kube-proxy": KUBE_PROXY_ADDON_VERSIONS[eks["version"]],
        "vpc-cni": VPC_CNI_ADDON_VERSION,
        # The EBS CSI driver comes with JupyterHub (components/jupyterhub/hub.py).
        **({"aws-ebs-csi-driver": EBS_CSI_DRIVER_ADDON_VERSION} if run.stack.settings.jupyterhub else {}),
    }
    assert all(EKS_ADDON_VERSION.fullmatch(v) for v in versions.values()), versions
    # kube-proxy is built per Kubernetes minor version and must match the control plane's.
    major, minor = EKS_ADDON_VERSION.fullmatch(versions["kube-proxy"]).groups()
    assert f"{major}.{minor}" == eks["version"]


def test_system_group_spans_subnets_with_two_labelled_nodes(base_run):
    group = base_run.one("aws:eks/nodeGroup:NodeGroup", "cluster-system").inputs
    assert group["subnetIds"] == SUBNETS
    assert group["scalingConfig"]["minSize"] == 2
    assert group["labels"] == {"gpulab.dev/node-role": "system"}
    assert group["version"] == BASE["gpulab:cluster"]["kubernetesVersion"]
    assert group["nodeRoleArn"].startswith("arn:aws:iam::123456789012:role/cluster-system-nodes-role-")


def test_node_role_trusts_ec2_with_four_node_policies_by_name(base_run):
    role = base_run.one("aws:iam/role:Role", "karpenter-nodes-role").inputs
    trust = json.loads(role["assumeRolePolicy"])
    assert trust["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ]
    attached = {
        r.name: r.inputs["policyArn"]
        for r in base_run.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.parent == "gpulab:iam:NodeRole::karpenter-nodes"
    }
    assert attached == {
        "karpenter-nodes-worker": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "karpenter-nodes-cni": "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
        "karpenter-nodes-ecr": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "karpenter-nodes-ssm": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
    }


def test_karpenter_nodes_join_through_an_ec2_linux_access_entry(base_run):
    entry = base_run.one("aws:eks/accessEntry:AccessEntry", "karpenter-nodes-access").inputs
    assert entry["type"] == "EC2_LINUX"
    assert entry["clusterName"] == "lab-test"
    assert entry["principalArn"] == base_run.outputs["nodeRoleArn"]


def test_system_node_role_gets_no_access_entry_eks_makes_one(base_run):
    entries = base_run.of_type("aws:eks/accessEntry:AccessEntry")
    assert [e.name for e in entries] == ["karpenter-nodes-access"]


def test_discovery_tag_is_on_private_subnets_and_cluster_sg(base_run):
    tags = {r.name: r.inputs for r in base_run.of_type("aws:ec2/tag:Tag")}
    targets = {name: tag.pop("resourceId") for name, tag in tags.items()}
    assert targets == {f"discovery-{s}": s for s in SUBNETS} | {"discovery-cluster-sg": targets["discovery-cluster-sg"]}
    assert targets["discovery-cluster-sg"].startswith("sg-")
    assert all(tag == {"key": "karpenter.sh/discovery", "value": "lab-test"} for tag in tags.values())


def test_components_own_their_children(base_run):
    parents = {(r.type, r.name): r.parent for r in base_run.resources}
    assert parents[("eks:index:Cluster", "cluster-eks")] == "gpulab:eks:Cluster::cluster"
    assert parents[("gpulab:iam:NodeRole", "cluster-system-nodes")] == "gpulab:eks:Cluster::cluster"
    assert parents[("pulumi:providers:kubernetes", "cluster-k8s")] == "gpulab:eks:Cluster::cluster"
    assert parents[("aws:iam/role:Role", "karpenter-nodes-role")] == "gpulab:iam:NodeRole::karpenter-nodes"
    assert parents[("gpulab:eks:Cluster", "cluster")] is None
    assert all(r.parent is not None for r in base_run.resources if not r.type.startswith("gpulab:"))


def test_kubernetes_provider_gets_the_kubeconfig_as_a_secret(base_run):
    assert base_run.one("pulumi:providers:kubernetes", "cluster-k8s").inputs["kubeconfig"] == "[secret]"


def test_stack_exports_name_secret_kubeconfig_and_node_role(base_run):
    outputs = base_run.outputs
    assert outputs["clusterName"] == "lab-test"
    assert outputs["kubeconfig"] == "[secret]"
    assert outputs["nodeRoleArn"] == f"arn:aws:iam::123456789012:role/{outputs['nodeRoleName']}"


def test_objects_use_the_clusters_provider_not_ambient_config(base_run):
    kubernetes = [r for r in base_run.resources if r.type.startswith("kubernetes:")]
    assert len(kubernetes) >= 6
    assert {r.provider for r in kubernetes} == {"pulumi:providers:kubernetes::cluster-k8s"}


def test_the_vpc_cni_addon_runs_its_network_policy_agent(base_run):
    # Without it the chart's and the labs' NetworkPolicies are objects that nothing enforces: learners reach each other.
    options = base_run.one("eks:index:Cluster", "cluster-eks").inputs["vpcCniOptions"]
    assert options["configurationValues"]["enableNetworkPolicy"] == "true"
    assert options.get("enableNetworkPolicy") in (None, True)  # pulumi-eks would not override the configuration's
