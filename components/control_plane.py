"""What a security review asks of the EKS control plane, as pure builders: who reaches its API, where its logs go, what
its secrets key is called, whether it can be deleted, and what happens when its Kubernetes version ages out.
"""

from typing import Any

import pulumi_aws as aws

from domain.stack.model import Cluster as ClusterConfig


def log_group_name(cluster_name: str) -> str:
    """The CloudWatch log group EKS writes the cluster's control-plane logs to (EKS User Guide, control-plane-logs).

    EKS creates it when logging is on and it does not exist, and a group without a retention policy keeps its events
    forever (CloudWatch Logs API Reference, PutRetentionPolicy and DeleteRetentionPolicy). Created by the stack before
    the cluster, with a retention, it is the group EKS writes to: the terraform-provider-aws aws_eks_cluster docs
    ("Enabling Control Plane Logging") create it first "to prevent ordering issues with EKS automatically creating the
    log group first".
    """
    return f"/aws/eks/{cluster_name}/cluster"


def secrets_key_alias(cluster_name: str) -> str:
    """The alias of the key that envelope-encrypts the cluster's Kubernetes secrets, named after the cluster.

    AWS KMS Developer Guide, "Create aliases": 1 to 256 characters, only letters, digits, '/', '_' and '-', starting
    with alias/ but not alias/aws/. Cluster names are lowercase letters, digits and '-', at most 80 long.
    """
    return f"alias/{cluster_name}-eks-secrets"


def cluster_args(config: ClusterConfig) -> dict[str, Any]:
    """pulumi-eks 4.4.0 Cluster arguments for the API endpoint, deletion protection and the upgrade policy.

    pulumi-eks passes each to the aws.eks.Cluster it creates (nodejs/eks/cluster/cluster.ts); it refuses
    publicAccessCidrs when the public endpoint is off, hence None rather than an empty list.
    """
    return {
        "endpoint_public_access": bool(config.public_access_cidrs),
        "public_access_cidrs": config.public_access_cidrs or None,
        "endpoint_private_access": config.private_endpoint,
        "deletion_protection": config.deletion_protection,
        "upgrade_policy": aws.eks.ClusterUpgradePolicyArgs(support_type=config.support_type),
    }
