"""What a lab's node offers pods: the allocatable CPU and memory Karpenter computes for a GPU instance type.

Karpenter decides whether a pod fits a node it would launch from these figures (allocatable less DaemonSet requests),
so a learner's requests, and the warm-seat PodTemplate shaped like it, must fit slicesPerGpu x GPUs learners into them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from config.instance_types import GPU_INSTANCE_TYPES

# Karpenter's default --vm-memory-overhead-percent (aws/karpenter-provider-aws v1.14.1 pkg/operator/options/options.go).
VM_MEMORY_OVERHEAD = 0.075
# Room kept for the DaemonSets on every GPU node: the NVIDIA device plugin (50m / 128Mi by default; an MPS lab's node
# runs the MPS control daemon with the same requests too) and the EKS add-ons (aws-node, kube-proxy,
# eks-pod-identity-agent, eks-node-monitoring-agent). An estimate, not read from those add-ons' manifests: raise the
# learners' requests, or the device plugin's, only as far as a node really has room.
DAEMONSET_CPU_MILLIS = 250
DAEMONSET_MEMORY_MIB = 512


@dataclass(frozen=True)
class Resources:
    cpu_millis: int
    memory_mib: int


def allocatable(instance_type: str, max_pods: int | None) -> Resources:
    """Allocatable CPU and memory of a node as Karpenter computes it before launch, for kubelet maxPods = max_pods
    (None: Karpenter's default, the type's ENI-limited pods).

    aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go: memory less the VM overhead (and 64 MiB on
    Graviton), kube-reserved CPU by the Bottlerocket ranges and memory 11 MiB per pod + 255 MiB, eviction 100 MiB.
    For g4dn.xlarge with 29 pods this gives the 3920m and 14481Mi the instance-type reference lists.
    """
    info = GPU_INSTANCE_TYPES[instance_type]
    pods = info.max_pods if max_pods is None else max_pods
    memory = info.memory_mib - (64 if info.architecture == "arm64" else 0)
    memory -= math.ceil(memory * VM_MEMORY_OVERHEAD)
    memory -= 11 * pods + 255 + 100
    cpu = info.vcpus * 1000
    reserved = 0.0
    for start, end, share in ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025)):
        if cpu >= start:
            reserved += int((min(cpu, end) - start) * share)
    return Resources(cpu - int(reserved), memory)


def seat_share(instance_types: list[str], slices_per_gpu: int, max_pods: int | None) -> Resources:
    """The most CPU and memory one learner may request so that every GPU slice of a node of each type gets a learner.

    `max_pods` is the lab's kubelet maxPods, None when unset.
    """
    shares = []
    for name in instance_types:
        node = allocatable(name, max_pods)
        seats = slices_per_gpu * GPU_INSTANCE_TYPES[name].gpus
        shares.append(
            Resources(
                (node.cpu_millis - DAEMONSET_CPU_MILLIS) // seats, (node.memory_mib - DAEMONSET_MEMORY_MIB) // seats
            )
        )
    return Resources(min(s.cpu_millis for s in shares), min(s.memory_mib for s in shares))


_SUFFIXES = {
    "": 1,
    "m": Fraction(1, 1000),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    **{suffix: 2 ** (10 * (i + 1)) for i, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}
# The Kubernetes quantities gpulab accepts (config.fields.Quantity): a decimal number and an optional unit.
QUANTITY = r"([0-9]+(?:\.[0-9]+)?)([KMGTPE]i|[mkMGTPE])?"
_QUANTITY = re.compile(QUANTITY)


def quantity(text: str) -> Fraction:
    """A Kubernetes quantity of the form config.fields.Quantity accepts (e.g. 500m, 1.5, 4Gi), as an exact number."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    return Fraction(match.group(1)) * _SUFFIXES[match.group(2) or ""]
