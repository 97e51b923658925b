"""gpulab:eks:Cluster, gpulab:iam:NodeRole and gpulab:network:DiscoveryTags: the inputs the program passes to AWS."""

import json
import re

import pytest

from domain.upstream.versions import ADDON_VERSIONS, POD_IDENTITY_AGENT_ADDON_VERSIONS
from tests.conftest import BASE, STACK_FILES, run_stack_file, run_values, stack_values
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab

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
        "addonVersion": POD_IDENTITY_AGENT_ADDON_VERSIONS[BASE["gpulab:cluster"]["kubernetesVersion"]],
        "clusterName": "lab-test",
    }


EKS_ADDON_VERSION = re.compile(r"v(\d+)\.(\d+)\.\d+-eksbuild\.\d+")


def installed_addons(run) -> dict[str, str]:
    """Every EKS add-on the program installs, by name, at the version it passes: its own aws.eks.Addon resources and
    the two pulumi-eks creates from the cluster's options."""
    eks = run.one("eks:index:Cluster", "cluster-eks").inputs
    versions = {a.inputs["addonName"]: a.inputs.get("addonVersion") for a in run.of_type("aws:eks/addon:Addon")}
    return versions | {
        "kube-proxy": eks["kubeProxyAddonOptions"]["version"],
        "vpc-cni": eks["vpcCniOptions"]["addonVersion"],
    }


def pinned_for(version: str, hub: bool) -> dict[str, str]:
    # The EBS CSI driver comes with JupyterHub (components/jupyterhub/hub.py).
    return {name: table[version] for name, table in ADDON_VERSIONS.items() if hub or name != "aws-ebs-csi-driver"}


@pytest.mark.parametrize("stack", STACK_FILES, ids=lambda p: p.name)
def test_every_eks_addon_installed_runs_a_pinned_version(stack):
    # Unpinned, EKS and pulumi-eks pick a version on the day of `pulumi up`, and with it the DaemonSets on every node.
    run = run_stack_file(stack)
    eks = run.one("eks:index:Cluster", "cluster-eks").inputs
    versions = installed_addons(run)
    assert versions == pinned_for(eks["version"], run.stack.settings.jupyterhub is not None)
    assert all(EKS_ADDON_VERSION.fullmatch(v) for v in versions.values()), versions
    # kube-proxy is built per Kubernetes minor version and must match the control plane's.
    major, minor = EKS_ADDON_VERSION.fullmatch(versions["kube-proxy"]).groups()
    assert f"{major}.{minor}" == eks["version"]


# A synthetic stack with the hub (so the EBS CSI driver too) at each version a stack may run on the tests' day:
# 1.34 only with extended support (its standard support ended on 2026-12-02).
EXPECTED_ADDONS = {
    "1.36": {
        "kube-proxy": "v1.36.0-eksbuild.14",
        "vpc-cni": "v1.21.1-eksbuild.8",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.3",
        "eks-node-monitoring-agent": "v1.6.1-eksbuild.1",
        "aws-ebs-csi-driver": "v1.66.0-eksbuild.1",
    },
    "1.35": {
        "kube-proxy": "v1.35.3-eksbuild.13",
        "vpc-cni": "v1.21.1-eksbuild.8",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.2",
        "eks-node-monitoring-agent": "v1.6.1-eksbuild.1",
        "aws-ebs-csi-driver": "v1.66.0-eksbuild.1",
    },
    "1.34": {
        "kube-proxy": "v1.34.0-eksbuild.4",
        "vpc-cni": "v1.21.1-eksbuild.8",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.2",
        "eks-node-monitoring-agent": "v1.6.1-eksbuild.1",
        "aws-ebs-csi-driver": "v1.66.0-eksbuild.1",
    },
}


def hub_stack_at(version: str, **hub: str):
    cluster = {**BASE["gpulab:cluster"], "kubernetesVersion": version}
    if version == "1.34":
        cluster["supportType"] = "EXTENDED"
    labs = {"intro": lab(["g4dn.xlarge"], 3, notebookImage=NOTEBOOK_IMAGE)}
    values = stack_values(**{"gpulab:cluster": cluster, "gpulab:labs": labs, "gpulab:jupyterhub": HUB | hub})
    values["gpulab:jupyterhubClientSecret"] = {"secure": "v1:c3RhbmQtaW4="}  # a Pulumi secret, as a stack file has it
    return run_values(values)


@pytest.mark.parametrize("version", sorted(EXPECTED_ADDONS))
def test_each_addon_is_the_build_pinned_for_the_clusters_version(version):
    # The builds written out, as a reviewer reads them in a preview: a table row changed by mistake fails here.
    assert installed_addons(hub_stack_at(version)) == EXPECTED_ADDONS[version] == pinned_for(version, hub=True)


def test_a_stacks_ebs_csi_driver_version_overrides_the_pinned_one():
    run = hub_stack_at("1.36", ebsCsiDriverVersion="v1.65.0-eksbuild.1")
    assert installed_addons(run)["aws-ebs-csi-driver"] == "v1.65.0-eksbuild.1"


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
