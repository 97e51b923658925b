"""gpulab:network:DiscoveryTags, the tags by which Karpenter finds where to launch nodes."""

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from components.labels import DISCOVERY_TAG


class DiscoveryTags(pulumi.ComponentResource):
    """`karpenter.sh/discovery=<cluster>` on each private subnet and on the cluster security group.

    The stack does not own these resources, so it adds one tag each (aws.ec2.Tag) instead of managing their tag sets.
    """

    def __init__(
        self,
        name: str,
        cluster_name: pulumi.Input[str],
        subnet_ids: Sequence[str],
        security_group_id: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("gpulab:network:DiscoveryTags", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Keyed by subnet ID, so that reordering the stack file's list replaces nothing.
        targets = {subnet_id: subnet_id for subnet_id in subnet_ids} | {"cluster-sg": security_group_id}
        for key, resource_id in targets.items():
            aws.ec2.Tag(f"{name}-{key}", resource_id=resource_id, key=DISCOVERY_TAG, value=cluster_name, opts=child)
        self.register_outputs({})
