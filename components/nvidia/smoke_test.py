"""Pure builder of a lab's optional smoke workload: one more pod than a GPU has slices, each running nvidia-smi.

On single-GPU instance types Karpenter should then launch exactly two nodes for the lab (slicesPerGpu pods share the
first GPU, the last pod needs a second), which an operator can watch to see the NodeOverlay and time-slicing at work.
In an MPS lab each pod also prints the limits gpulab expects and asks the MPS control daemon for the ones it set.
"""

import shlex

from components.labels import GPU_RESOURCE, GPU_TOLERATION, LAB_LABEL
from domain.stack.model import Lab

# CUDA base image: nvidia-smi itself comes from the node's driver through the NVIDIA container toolkit.
SMOKE_IMAGE = "docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04"


def smoke_script(lab: Lab) -> str:
    """The pod's shell script: it ends (and the pod restarts) if nvidia-smi finds no GPU, else it stays up."""
    steps = ["nvidia-smi -L", "nvidia-smi"]
    share = lab.learner_share
    if share.strategy == "mps":
        # The device plugin gives each MPS client CUDA_MPS_PIPE_DIRECTORY and mounts the daemon's pipe directory
        # (internal/plugin/mps.go updateReponse at v0.20.0), and the NVIDIA container toolkit mounts the driver's
        # nvidia-cuda-mps-control, so a client can ask the daemon for its defaults; device 0 exists on every node.
        # The queries only report: a failed one must not hide the nvidia-smi result above.
        steps += [
            f"echo {shlex.quote('gpulab expects each learner: ' + share.describe())}",
            "{ echo get_default_device_pinned_mem_limit 0 | nvidia-cuda-mps-control || true; }",
            "{ echo get_default_active_thread_percentage | nvidia-cuda-mps-control || true; }",
        ]
    return " && ".join([*steps, "sleep infinity"])


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
                            "command": ["sh", "-c", smoke_script(lab)],
                            # Requested as well as limited: Kubernetes fills requests from limits in the Pods it
                            # creates, never in the stored template that reviews and tools read.
                            "resources": {"requests": {GPU_RESOURCE: 1}, "limits": {GPU_RESOURCE: 1}},
                        }
                    ],
                },
            },
        },
    }
