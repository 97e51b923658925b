"""gpulab:karpenter:GpuNodePool, one lab's EC2NodeClass, NodePool and NodeOverlays."""

import pulumi
import pulumi_kubernetes as k8s

from components.karpenter.manifests import ec2_node_class, node_overlays, node_pool
from config.model import Lab


class GpuNodePool(pulumi.ComponentResource):
    """The GPU nodes of one lab: Karpenter launches them when its learners' pods are pending and removes them after."""

    def __init__(
        self,
        name: str,
        lab: Lab,
        cluster_name: str,
        node_role_name: pulumi.Input[str],
        crds: pulumi.Resource,
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("gpulab:karpenter:GpuNodePool", name, None, opts)
        # Custom resources cannot be created before their CRDs exist.
        child = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[crds])
        manifests = [
            ec2_node_class(name, lab, cluster_name, node_role_name),
            node_pool(name, lab),
            *node_overlays(name, lab),
        ]
        for manifest in manifests:
            # Named like the render's manifest files, e.g. nodepool-intro, nodeoverlay-intro-1gpu.
            k8s.apiextensions.CustomResource(
                f"{manifest['kind'].lower()}-{manifest['metadata']['name']}",
                api_version=manifest["apiVersion"],
                kind=manifest["kind"],
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=child,
            )
        self.node_pool_name = name
        self.register_outputs({"nodePoolName": name})
