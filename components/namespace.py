"""The namespace a component installs into: created unless every cluster already has it."""

import pulumi
import pulumi_kubernetes as k8s

from domain.stack.fields import BUILT_IN_NAMESPACES


def namespace_dependencies(resource_name: str, namespace: str, opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """What objects in `namespace` must wait for: the Namespace this creates, or nothing for a built-in one."""
    if namespace in BUILT_IN_NAMESPACES:
        return []
    return [k8s.core.v1.Namespace(resource_name, metadata={"name": namespace}, opts=opts)]
