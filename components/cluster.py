"""gpulab:eks:Cluster, the EKS control plane, its system node group and the Kubernetes provider that follows."""

import json

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.control_plane import cluster_args, log_group_name, secrets_key_alias
from components.labels import GPU_TOLERATION, SYSTEM_NODE_LABEL, SYSTEM_NODE_VALUE
from components.node_role import NodeRole
from domain.capacity.system_nodes import MAX_UNAVAILABLE, max_size
from domain.stack.model import Cluster as ClusterConfig
from domain.upstream.versions import (
    KUBE_PROXY_ADDON_VERSIONS,
    NODE_MONITORING_AGENT_ADDON_VERSIONS,
    POD_IDENTITY_AGENT_ADDON_VERSIONS,
    VPC_CNI_ADDON_VERSIONS,
)

CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
# The VPC CNI add-on's network policy agent on, and with it EKS's network policy controller: without it no
# NetworkPolicy is enforced, and a learner's server reaches every other learner's (docs/jupyterhub.md, "Network walls").
# The add-on's key is the chart's (aws/amazon-vpc-cni-k8s v1.21.1 charts/aws-vpc-cni/values.yaml: enableNetworkPolicy,
# a string, which the chart passes to aws-node's aws-eks-nodeagent container as --enable-network-policy and to the
# amazon-vpc-cni ConfigMap as enable-network-policy-controller). pulumi-eks writes configurationValues into the
# add-on's configuration as given (nodejs/eks/addons/cni-addon.ts, mergeConfigurationValues, at main 7bf0c1b).
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}


class Cluster(pulumi.ComponentResource):
    """An EKS cluster in API authentication mode (access entries, no aws-auth ConfigMap), with no default node group.

    Karpenter must not run on nodes it manages, so a small managed node group across the private subnets carries it
    and CoreDNS; every GPU node comes from Karpenter.
    """

    def __init__(self, name: str, config: ClusterConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpulab:eks:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {config.name}",
            enable_key_rotation=True,
            opts=child,
        )
        aws.kms.Alias(
            f"{name}-secrets",
            name=secrets_key_alias(config.name),
            target_key_id=secrets_key.key_id,
            opts=child,
        )
        # Created before the cluster, so that EKS writes into it rather than creating one that keeps logs forever.
        logs = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=log_group_name(config.name),
            retention_in_days=config.log_retention_days,
            opts=child,
        )
        # Each add-on at the build pinned for the cluster's Kubernetes version, so that a version change moves them too.
        version = config.kubernetes_version
        cluster = eks.Cluster(
            f"{name}-eks",
            name=config.name,
            version=config.kubernetes_version,
            vpc_id=config.vpc_id,
            private_subnet_ids=config.private_subnet_ids,
            authentication_mode=eks.AuthenticationMode.API,
            skip_default_node_group=True,
            # Without pulumi-eks' own security groups, nodes and the control plane share the one EKS creates, which
            # is what managed node groups use and what Karpenter's nodes find through the discovery tag.
            skip_default_security_groups=True,
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            encryption_config_key_arn=secrets_key.arn,
            # Pod Identity replaces IRSA for Karpenter, so no OIDC provider is needed.
            create_oidc_provider=False,
            # pulumi-eks installs both add-ons; pinned, their DaemonSets (and what they take of every node) stay put.
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(version=KUBE_PROXY_ADDON_VERSIONS[version]),
            vpc_cni_options=eks.VpcCniOptionsArgs(
                addon_version=VPC_CNI_ADDON_VERSIONS[version], configuration_values=VPC_CNI_CONFIGURATION
            ),
            **cluster_args(config),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[logs]),
        )
        self.kubernetes_version = config.kubernetes_version
        self.vpc_id = config.vpc_id
        self.cluster_name: pulumi.Output[str] = cluster.eks_cluster.name
        self.cluster_arn: pulumi.Output[str] = cluster.eks_cluster.arn
        self.security_group_id: pulumi.Output[str] = cluster.cluster_security_group_id
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(cluster.kubeconfig_json)

        # Karpenter authenticates with EKS Pod Identity, which needs this agent on every node.
        aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=self.cluster_name,
            addon_name="eks-pod-identity-agent",
            addon_version=POD_IDENTITY_AGENT_ADDON_VERSIONS[version],
            opts=child,
        )

        for role_arn in config.admin_role_arns:
            # Keyed by account and role name, unique per account, so reordering the list replaces nothing.
            _, partition, _, _, account, _ = role_arn.split(":")
            role_name = role_arn.rsplit("/", 1)[1]
            key = f"{name}-admin-{account}-{role_name}"
            entry = aws.eks.AccessEntry(key, cluster_name=self.cluster_name, principal_arn=role_arn, opts=child)
            aws.eks.AccessPolicyAssociation(
                key,
                cluster_name=self.cluster_name,
                principal_arn=entry.principal_arn,
                policy_arn=f"arn:{partition}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}",
                access_scope={"type": "cluster"},
                opts=child,
            )

        # Reports GPU health as the node condition AcceleratedHardwareReady, which Karpenter's node repair acts on.
        # Its agent DaemonSet tolerates every taint, but the dcgm-server DaemonSet it reads GPU health from tolerates
        # none by default; without it on a tainted GPU node the agent reports DCGMError, the condition turns False and
        # Karpenter would replace healthy nodes every 10 minutes (aws/eks-node-monitoring-agent v1.6.1,
        # charts/eks-node-monitoring-agent/values.yaml: nodeAgent.tolerations, dcgmAgent.tolerations; the add-on
        # accepts dcgmAgent.tolerations from v1.6.0 on, charts/configuration.schema.json). Its dcgm-server affinity
        # at the pinned version lists the amd64 types of domain/capacity/instance_types.py but the g7 and g7e families
        # (it gains g7e at v1.6.2 and g7 at v1.6.7, not pinned: domain/upstream/versions.py), and the add-on takes no
        # dcgmAgent.affinity to add them, so a lab of those types is refused (domain/stack/node_repair.py); on arm64
        # (g5g) the agent runs no DCGM check and misses no host engine (monitors/nvidia/monitor.go).
        aws.eks.Addon(
            f"{name}-node-monitoring-agent",
            cluster_name=self.cluster_name,
            addon_name="eks-node-monitoring-agent",
            addon_version=NODE_MONITORING_AGENT_ADDON_VERSIONS[version],
            configuration_values=json.dumps({"dcgmAgent": {"tolerations": [GPU_TOLERATION]}}),
            opts=child,
        )

        system_role = NodeRole(f"{name}-system-nodes", cluster_name=self.cluster_name, access_entry=False, opts=child)
        size = config.system_nodes.size
        aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=self.cluster_name,
            node_role_arn=system_role.role_arn,
            subnet_ids=config.private_subnet_ids,
            instance_types=config.system_nodes.instance_types,
            ami_type="AL2023_x86_64_STANDARD",
            capacity_type="ON_DEMAND",
            version=config.kubernetes_version,
            scaling_config={"desired_size": size, "min_size": size, "max_size": max_size(size)},
            update_config={"max_unavailable": MAX_UNAVAILABLE},
            labels={SYSTEM_NODE_LABEL: SYSTEM_NODE_VALUE},
            # Nodes that start before their role has its policies cannot join the cluster.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[system_role]),
        )

        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=child)
        self.register_outputs(
            {"clusterName": self.cluster_name, "securityGroupId": self.security_group_id, "kubeconfig": self.kubeconfig}
        )
