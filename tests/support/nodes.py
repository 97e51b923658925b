"""The nodes a stack's cluster can have, with the labels and taints the scheduler sees on them.

System nodes come from the stack's EKS managed node groups (the labels and taints the program gives them, plus the
labels every node carries); lab nodes from each NodePool's template: its labels and taints, one value of each `In`
requirement (every combination, so a check holds whichever instance the lab gets), and the labels Karpenter adds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from render import harness
from tests.support.scheduling import Node

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
# The EKS API spells taint effects in capitals (eks:CreateNodegroup Taint.effect).
EKS_TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
# Labels Karpenter puts on every node it launches (kubernetes-sigs/karpenter pkg/apis/v1/labels.go, NodePoolLabelKey;
# karpenter-provider-aws pkg/apis/v1/labels.go, LabelNodeClass).
NODE_POOL_LABEL = "karpenter.sh/nodepool"
NODE_CLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"


def _architecture(ami_type: str) -> str:
    # EKS AMI types name the architecture: AL2023_x86_64_STANDARD, AL2023_ARM_64_STANDARD, BOTTLEROCKET_ARM_64, ...
    if "ARM_64" in ami_type:
        return "arm64"
    if "x86_64" in ami_type:
        return "amd64"
    raise ValueError(f"no architecture known for the EKS AMI type {ami_type!r}")


def system_nodes(run: harness.Run) -> list[Node]:
    """One node per instance type of each managed node group of the stack."""
    nodes = []
    for group in run.of_type(NODE_GROUP):
        inputs = group.inputs
        taints = [
            {"key": t["key"], "value": t.get("value", ""), "effect": EKS_TAINT_EFFECTS[t["effect"]]}
            for t in inputs.get("taints") or []
        ]
        for instance_type in inputs["instanceTypes"]:
            labels = {
                **(inputs.get("labels") or {}),
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": _architecture(inputs["amiType"]),
                "node.kubernetes.io/instance-type": instance_type,
                "eks.amazonaws.com/capacityType": inputs.get("capacityType", "ON_DEMAND"),
            }
            nodes.append(Node(f"{group.name}/{instance_type}", labels, taints))
    return nodes


def pool_nodes(node_pool: Mapping[str, Any]) -> list[Node]:
    """Every node the NodePool can launch, as far as labels and taints go."""
    name = node_pool["metadata"]["name"]
    template = node_pool["spec"]["template"]
    spec = template["spec"]
    fixed = {
        **(template.get("metadata", {}).get("labels") or {}),
        "kubernetes.io/os": "linux",
        NODE_POOL_LABEL: name,
        NODE_CLASS_LABEL: spec["nodeClassRef"]["name"],
    }
    chosen = [r for r in spec.get("requirements", []) if r["operator"] == "In"]
    nodes = []
    for values in itertools.product(*(r["values"] for r in chosen)):
        labels = {**fixed, **{r["key"]: value for r, value in zip(chosen, values, strict=True)}}
        nodes.append(Node(f"{name}/{'/'.join(values)}", labels, list(spec.get("taints") or [])))
    return nodes


def lab_nodes(manifests: Iterable[Mapping[str, Any]]) -> dict[str, list[Node]]:
    """Each NodePool's possible nodes, by NodePool name."""
    return {m["metadata"]["name"]: pool_nodes(m) for m in manifests if m.get("kind") == "NodePool"}
