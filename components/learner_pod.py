"""The pod of one learner of a lab, as Kubernetes stores it and Karpenter schedules it: one pure builder for the class
seats' PodTemplate, the `labs.<lab>.learnerPodSpec` stack output (which the planner schedules, planner/) and anyone
who spawns learners' pods."""

from typing import Any

from components.labels import GPU_RESOURCE, GPU_TOLERATION, LAB_LABEL
from domain.stack.model import Lab

# Where no real image matters (the seat template's pods exist only in Karpenter's memory, the planner never pulls one),
# any resolvable image does: the Kubernetes pause image, the version kubeadm 1.32 defaults to (kubernetes/kubernetes
# 00886ac01fec, cmd/kubeadm/app/constants/constants.go, PauseVersion).
PLACEHOLDER_IMAGE = "registry.k8s.io/pause:3.10"


def learner_pod_spec(lab_name: str, lab: Lab, image: str) -> dict[str, Any]:
    """One slice, the GPU toleration, the lab's nodes, the learner's CPU and memory: all that decides where it runs."""
    return {
        "nodeSelector": {LAB_LABEL: lab_name},
        "tolerations": [dict(GPU_TOLERATION)],
        "containers": [
            {
                "name": "learner",
                "image": image,
                # Kubernetes copies limits into missing requests only for Pods (SetDefaults_Pod), never for a
                # PodTemplate, and Karpenter sizes pods (a buffer's virtual ones too) by their requests alone: the
                # slice is requested here, as admission would store it on a learner's Pod.
                "resources": {
                    "requests": dict(lab.learner_requests) | {GPU_RESOURCE: 1},
                    "limits": {GPU_RESOURCE: 1},
                },
            }
        ],
    }
