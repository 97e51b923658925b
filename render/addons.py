"""The DaemonSets the stack's EKS add-ons run on its nodes, as Kubernetes objects: what domain/capacity/daemonsets.py
records of each add-on's source, with the configuration the program gives the add-on.

The add-ons are not Helm releases of the stack, so `charts/` does not hold them; the render writes them to
`eks-addons.json`, so that the planner's Karpenter reserves their room on a lab's node as it does for the charts'
DaemonSets, and the tests place them on every lab node as they place the charts'.
"""

import copy
import json
from typing import Any

from components.jupyterhub.hub import EBS_CSI_ADDON
from domain.capacity.daemonsets import EBS_CSI_NODE, EKS_ADDON_DAEMONSETS
from render import harness

ADDON = "aws:eks/addon:Addon"
FILE = "eks-addons.json"


def pod_specs(run: harness.Run) -> dict[str, dict[str, Any]]:
    """Each add-on DaemonSet's pod spec, by DaemonSet name."""
    configured = {
        a.inputs["addonName"]: json.loads(a.inputs.get("configurationValues") or "{}") for a in run.of_type(ADDON)
    }
    addons = (*EKS_ADDON_DAEMONSETS, EBS_CSI_NODE) if EBS_CSI_ADDON in configured else EKS_ADDON_DAEMONSETS
    specs = {addon.name: copy.deepcopy(dict(addon.pod_spec)) for addon in addons}
    # Upstream's dcgmAgent.tolerations are empty (aws/eks-node-monitoring-agent v1.6.1 values.yaml); gpulab sets them.
    specs["dcgm-server"]["tolerations"] = configured["eks-node-monitoring-agent"]["dcgmAgent"]["tolerations"]
    return specs


def daemonsets(run: harness.Run) -> list[dict[str, Any]]:
    """The add-ons' DaemonSets in kube-system, sorted by name: only their pods' placement and requests are real."""
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
            },
        }
        for name, spec in sorted(pod_specs(run).items())
    ]
