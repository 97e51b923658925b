"""Pure builder of JupyterHub's spawn page: one KubeSpawner profile per lab, from the lab's own settings.

A learner who picks a lab's profile gets the lab's learner pod (components/learner_pod.py, the shape of its warm
seats and of the planner's learners): one nvidia.com/gpu slice, the GPU toleration, the lab's nodes, the learner's CPU
and memory.
How KubeSpawner 7.0.0 applies a profile (kubespawner/spawner.py, `_apply_overrides`): each `kubespawner_override` key
replaces the spawner's setting, except that a dict merges into a dict setting. So `node_selector` and the extra
resources below add to what the chart sets, and `tolerations`, a list, replaces the chart's user-pod tolerations
(scheduling.userPods.tolerations, which tolerate only the chart's own `hub.jupyter.org/dedicated` taint, which no
gpulab node has): the profile lists every toleration the pod needs.
"""

import math
from collections.abc import Mapping
from typing import Any

from components.jupyterhub import walls_gate
from components.labels import GPU_RESOURCE, LAB_LABEL
from components.learner_pod import learner_pod_spec
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.quantity import quantity
from domain.stack.model import Lab

# Jupyter Docker Stacks run as jovyan, UID 1000 in group 100 (jupyter/docker-stacks
# images/docker-stacks-foundation/Dockerfile: NB_UID="1000", NB_GID="100"). An MPS control daemon serves one Unix
# user at a time and queues clients of any other, so every learner of an MPS lab runs as this one UID.
MPS_LEARNER_UID = 1000
MPS_LEARNER_GID = 100

# KubeSpawner's memory settings (jupyterhub/traitlets.py ByteSpecification) read K, M, G and T as powers of 1024,
# take a plain number as bytes, and refuse Kubernetes' Ki/Mi/Gi.
_KUBESPAWNER_UNITS = (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10))


def kubespawner_memory(text: str) -> str | int:
    """A Kubernetes memory quantity in KubeSpawner's units: the largest exact K/M/G/T multiple, else bytes."""
    exact = math.ceil(quantity(text))  # the API server rounds a fractional byte count up too
    for suffix, size in _KUBESPAWNER_UNITS:
        if exact % size == 0:
            return f"{exact // size}{suffix}"
    return exact


def kubespawner_cpu(text: str) -> float:
    """A Kubernetes CPU quantity as KubeSpawner's cpu_guarantee and cpu_limit take it: cores, as a number."""
    return float(quantity(text))


def description(lab: Lab) -> str:
    """What a learner gets, in words a learner reads on the spawn page."""
    models = ", ".join(sorted({GPU_INSTANCE_TYPES[t].gpu_model.upper() for t in lab.instance_types}))
    requests = lab.learner_requests
    return (
        f"NVIDIA {models} GPU, {lab.learner_share.describe()}; {requests['cpu']} CPU and {requests['memory']} of memory"
    )


def profile(lab_name: str, lab: Lab) -> dict[str, Any]:
    """The lab's entry of KubeSpawner's profile_list (singleuser.profileList of the chart)."""
    assert lab.learner_image is not None, "config refuses a lab on the spawn page without a notebook image"
    pod = learner_pod_spec(lab_name, lab, lab.learner_image)
    (container,) = pod["containers"]
    requests = container["resources"]["requests"]
    cpu, memory = kubespawner_cpu(requests["cpu"]), kubespawner_memory(requests["memory"])
    override: dict[str, Any] = {
        "image": container["image"],
        "node_selector": pod["nodeSelector"],
        "tolerations": pod["tolerations"],
        # Limits equal to the guarantees: the seat's share of the node, so that no learner starves a neighbour.
        "cpu_guarantee": cpu,
        "cpu_limit": cpu,
        "mem_guarantee": memory,
        "mem_limit": memory,
        # One slice, requested and limited (KubeSpawner writes both; the device plugin refuses more than one).
        "extra_resource_guarantees": {GPU_RESOURCE: str(requests[GPU_RESOURCE])},
        "extra_resource_limits": {GPU_RESOURCE: str(container["resources"]["limits"][GPU_RESOURCE])},
        # The lab's name on the pod, which its NetworkPolicies select (components/jupyterhub/walls.py).
        "extra_labels": {LAB_LABEL: lab_name},
        # No learner code before those policies are enforced (walls_gate.py); a list replaces the chart's
        # singleuser.initContainers, which gpulab leaves empty.
        "init_containers": [walls_gate.init_container(container["image"], requests["cpu"], requests["memory"])],
    }
    if lab.sharing == "mps":  # the config refuses MPS with fewer than 2 slices
        override |= {"uid": MPS_LEARNER_UID, "gid": MPS_LEARNER_GID}
    return {
        "display_name": lab_name,
        "slug": lab_name,
        "description": description(lab),
        "kubespawner_override": override,
    }


def profile_list(labs: Mapping[str, Lab]) -> list[dict[str, Any]]:
    """Every lab on the spawn page, in the stack file's order; KubeSpawner preselects the first."""
    return [profile(name, lab) for name, lab in labs.items() if lab.on_spawn_page]
