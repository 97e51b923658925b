"""Pure builder of a lab's optional smoke workload: one more pod than a GPU has slices, each running nvidia-smi.

On single-GPU instance types Karpenter should then launch exactly two nodes for the lab (slicesPerGpu pods share the
first GPU, the last pod needs a second), which an operator can watch to see the NodeOverlay and time-slicing at work.
"""

from components.labels import GPU_RESOURCE, GPU_TOLERATION, LAB_LABEL
from config.model import Lab

# CUDA base image: nvidia-smi itself comes from the node's driver through the NVIDIA container toolkit.
SMOKE_IMAGE = "docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04"


def smoke_deployment(lab_name: str, lab: Lab, namespace: str) -> dict:
    # Labels carry the lab's name itself, never `<lab>-smoke`: a label value holds 63 characters, as a lab name may.
    selector = {"app.kubernetes.io/name": "gpulab-smoke", "app.kubernetes.io/instance": lab_name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"{lab_name}-smoke",
            "namespace": namespace,
            "labels": selector,
            # `pulumi up` would otherwise wait for GPU nodes to boot; the operator watches the rollout instead.
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "replicas": lab.slices_per_gpu + 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {
                    "nodeSelector": {LAB_LABEL: lab_name},
                    "tolerations": [dict(GPU_TOLERATION)],
                    "containers": [
                        {
                            "name": "nvidia-smi",
                            "image": SMOKE_IMAGE,
                            "command": ["sh", "-c", "nvidia-smi -L && nvidia-smi && sleep infinity"],
                            "resources": {"limits": {GPU_RESOURCE: 1}},
                        }
                    ],
                },
            },
        },
    }
