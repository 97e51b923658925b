"""gpulab:iam:NodeRole, the IAM role that EC2 nodes of the cluster assume."""

import json

import pulumi
import pulumi_aws as aws

# Keyed by a stable name, never by list position, so that reordering never replaces an attachment.
NODE_POLICIES = {
    "worker": "AmazonEKSWorkerNodePolicy",
    "cni": "AmazonEKS_CNI_Policy",
    "ecr": "AmazonEC2ContainerRegistryPullOnly",
    "ssm": "AmazonSSMManagedInstanceCore",
}

EC2_TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


class NodeRole(pulumi.ComponentResource):
    """The role of a cluster's nodes with the four managed policies an EKS node needs.

    With `access_entry` the role also gets an EC2_LINUX access entry, which is how nodes Karpenter launches are allowed
    to join a cluster in API authentication mode. EKS makes that entry itself for a managed node group's role.
    """

    def __init__(
        self,
        name: str,
        cluster_name: pulumi.Input[str],
        access_entry: bool = True,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("gpulab:iam:NodeRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(f"{name}-role", assume_role_policy=json.dumps(EC2_TRUST_POLICY), opts=child)
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        for key, policy in NODE_POLICIES.items():
            aws.iam.RolePolicyAttachment(
                f"{name}-{key}",
                role=role.name,
                policy_arn=pulumi.Output.concat("arn:", partition, ":iam::aws:policy/", policy),
                opts=child,
            )
        if access_entry:
            aws.eks.AccessEntry(
                f"{name}-access", cluster_name=cluster_name, principal_arn=role.arn, type="EC2_LINUX", opts=child
            )
        self.role_name = role.name
        self.role_arn = role.arn
        self.register_outputs({"roleName": self.role_name, "roleArn": self.role_arn})
