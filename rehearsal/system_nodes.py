"""The system managed node group's nodes on the twin, so that kube-scheduler places the pods pinned to them (the class
CronJobs' Jobs, components/labels.py SYSTEM_NODE_SELECTOR) as the render's node group would let it: each of its
`desiredSize` nodes with the labels the render gives the group (resources.json, aws:eks/nodeGroup:NodeGroup `labels`)
and its taints, plus the well-known labels every kubelet sets (kubernetes.io/os, kubernetes.io/arch,
kubernetes.io/hostname; k8s.io/api core/v1 well_known_labels.go), the node group's instance type
(node.kubernetes.io/instance-type) and its zone (topology.kubernetes.io/zone: the nodes spread over the group's subnets,
each subnet's zone named as the planner's stand-in names it for Karpenter's nodes, planner/standin/aws.go Zone), which
the pods spread over zones need (Karpenter's own, by its chart's topologySpreadConstraints). KWOK plays their kubelets
(rehearsal/twin.py FAKE_NODE): Ready, their pods Running; with no capacity given, KWOK's node-initialize stage gives
them its own (cpu 1k, memory 1Ti, pods 1M): where a pod goes is rehearsed, not whether it fits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rehearsal import twin

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
# The node group's amiType names its architecture (AL2023_x86_64_STANDARD, AL2023_ARM_64_STANDARD, ...).
ARCHITECTURES = {"x86_64": "amd64", "ARM_64": "arm64"}
# rehearsal.json's `substitutions` entry for them.
SUBSTITUTION = {
    "component": "the system managed node group's nodes (aws:eks/nodeGroup:NodeGroup)",
    "inTheRehearsal": "its desiredSize nodes registered on the twin with the group's labels and taints, KWOK in their "
    "kubelets' place, and KWOK's own capacity (cpu 1k, memory 1Ti, pods 1M) instead of the instance type's: pods "
    "pinned to them are placed by their selectors and tolerations, never refused for room",
}


def nodes(render_dir: Path) -> list[dict[str, Any]]:
    """The Node objects of the render's managed node groups, as their kubelets would register them."""
    found = []
    for resource in json.loads((render_dir / "resources.json").read_text()):
        if resource["type"] != NODE_GROUP:
            continue
        inputs = resource["inputs"]
        arch = next(a for key, a in ARCHITECTURES.items() if key in inputs["amiType"])
        key, value = twin.FAKE_NODE
        subnets = inputs["subnetIds"]
        for i in range(inputs["scalingConfig"]["desiredSize"]):
            name = f"{resource['name']}-{i}"
            labels = {
                **(inputs.get("labels") or {}),
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch,
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": inputs["instanceTypes"][0],
                "topology.kubernetes.io/zone": f"{subnets[i % len(subnets)]}-zone",
            }
            spec = {"taints": [_taint(t) for t in inputs.get("taints") or []]}
            found.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": {key: value}},
                    "spec": spec,
                }
            )
    return found


def _taint(taint: dict[str, str]) -> dict[str, str]:
    """A node group taint (EKS's effect names, NO_SCHEDULE) as the Node carries it (NoSchedule)."""
    effect = "".join(part.capitalize() for part in taint["effect"].split("_"))
    return {"key": taint["key"], **({"value": taint["value"]} if taint.get("value") else {}), "effect": effect}


def register(plane: twin.ControlPlane, render_dir: Path) -> list[str]:
    """The render's system nodes made on the twin; their names."""
    made = nodes(render_dir)
    for node in made:
        plane.admin.request("POST", "/api/v1/nodes", node)
    return [n["metadata"]["name"] for n in made]
