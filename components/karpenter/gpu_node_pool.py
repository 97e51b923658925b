"""gpulab:karpenter:GpuNodePool, one lab's EC2NodeClass, NodePool and NodeOverlays."""

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.karpenter.manifests import ec2_node_class, node_overlays, node_pool
from domain.stack.model import Lab
from domain.time.durations import seconds

TYPE = "gpulab:karpenter:GpuNodePool"

# pulumi-kubernetes waits for this condition before it reports the object created: a lab whose EC2NodeClass cannot
# resolve its AMI, subnets or security groups fails `pulumi up` instead of succeeding with no way to launch a node, and
# so does a NodeOverlay Karpenter rejects (its Ready follows ValidationSucceeded: kubernetes-sigs/karpenter v1.14.1
# pkg/apis/v1alpha1/nodeoverlay_status.go), which would leave Karpenter counting whole GPUs.
WAIT_FOR_READY = {"pulumi.com/waitFor": "condition=Ready"}
# Deleting a NodePool or EC2NodeClass waits for Karpenter to drain and terminate the lab's nodes (finalizers); on top of
# the lab's terminationGracePeriod, this is the time to start the drain and for EC2 to terminate the instances.
DELETE_MARGIN_SECONDS = 15 * 60


class GpuNodePool(pulumi.ComponentResource):
    """The GPU nodes of one lab: Karpenter launches them when its learners' pods are pending and removes them after.

    `runtime` is what the lab's objects need to exist and, above all, to be deleted: the Karpenter controller's release
    (which waits for its CRDs, IAM permissions and Pod Identity association) and the node role with its access entry.
    Only the running controller can clear the termination finalizers of the lab's nodes, so Pulumi must delete the lab
    first.
    """

    def __init__(
        self,
        name: str,
        lab: Lab,
        cluster_name: str,
        node_role_name: pulumi.Input[str],
        runtime: Sequence[pulumi.Resource],
        amis_found: pulumi.Output[None],
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ):
        # Registered once the stack's AMI releases are found (components/karpenter/ami.py), and so are its objects,
        # which wait for their parent: a lab whose release does not exist never gets an EC2NodeClass that could not
        # become Ready.
        found = pulumi.ResourceOptions(depends_on=amis_found.apply(lambda _: []))
        super().__init__(TYPE, name, None, pulumi.ResourceOptions.merge(opts, found))
        delete_after = f"{(seconds(lab.termination_grace_period) + DELETE_MARGIN_SECONDS) // 60}m"
        child = pulumi.ResourceOptions(
            parent=self,
            provider=provider,
            depends_on=list(runtime),
            custom_timeouts=pulumi.CustomTimeouts(delete=delete_after),
        )

        def custom_resource(manifest: dict, opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
            metadata = manifest["metadata"]
            metadata = {**metadata, "annotations": {**metadata.get("annotations", {}), **WAIT_FOR_READY}}
            # Named like the render's manifest files, e.g. nodepool-intro, nodeoverlay-intro-1gpu.
            return k8s.apiextensions.CustomResource(
                f"{manifest['kind'].lower()}-{manifest['metadata']['name']}",
                api_version=manifest["apiVersion"],
                kind=manifest["kind"],
                metadata=metadata,
                spec=manifest["spec"],
                opts=opts,
            )

        node_class = custom_resource(ec2_node_class(name, lab, cluster_name, node_role_name), child)
        # The NodePool goes first on delete: its nodes drain while their EC2NodeClass still exists.
        after_node_class = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[node_class]))
        custom_resource(node_pool(name, lab), after_node_class)
        for overlay in node_overlays(name, lab):
            custom_resource(overlay, child)
        self.node_pool_name = name
        self.register_outputs({"nodePoolName": name})
