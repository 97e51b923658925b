"""What a lab's node offers pods: memory per GPU instance type, and the allocatable CPU and memory Karpenter computes.

Karpenter decides whether a pod fits a node it would launch from these figures (allocatable less DaemonSet requests),
so a learner's requests, and the warm-seat PodTemplate shaped like it, must fit slicesPerGpu x GPUs learners into them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from config.instance_types import GPU_INSTANCE_TYPES

# Source: Karpenter's generated instance-type reference (aws/karpenter-provider-aws@1d927085dd81,
# website/content/en/v1.14/reference/instance-types.md), label karpenter.k8s.aws/instance-memory (MiB), the same
# page and label set config/instance_types.py reads.
# fmt: off
_MEMORY_MIB: dict[str, dict[str, int]] = {
    "g4dn": {"xlarge": 16384, "2xlarge": 32768, "4xlarge": 65536, "8xlarge": 131072, "16xlarge": 262144,
             "12xlarge": 196608, "metal": 393216},
    "g5": {"xlarge": 16384, "2xlarge": 32768, "4xlarge": 65536, "8xlarge": 131072, "16xlarge": 262144,
           "12xlarge": 196608, "24xlarge": 393216, "48xlarge": 786432},
    "g5g": {"xlarge": 8192, "2xlarge": 16384, "4xlarge": 32768, "8xlarge": 65536, "16xlarge": 131072, "metal": 131072},
    "g6": {"xlarge": 16384, "2xlarge": 32768, "4xlarge": 65536, "8xlarge": 131072, "16xlarge": 262144,
           "12xlarge": 196608, "24xlarge": 393216, "48xlarge": 786432},
    "g6e": {"xlarge": 32768, "2xlarge": 65536, "4xlarge": 131072, "8xlarge": 262144, "16xlarge": 524288,
            "12xlarge": 393216, "24xlarge": 786432, "48xlarge": 1572864},
    "gr6": {"4xlarge": 131072, "8xlarge": 262144},
    "g7": {"2xlarge": 32768, "4xlarge": 65536, "8xlarge": 131072, "12xlarge": 196608, "24xlarge": 393216,
           "48xlarge": 786432},
    "g7e": {"2xlarge": 65536, "4xlarge": 131072, "8xlarge": 262144, "12xlarge": 524288, "24xlarge": 1048576,
            "48xlarge": 2097152},
    "p3dn": {"24xlarge": 786432},
    "p4d": {"24xlarge": 1179648},
    "p4de": {"24xlarge": 1179648},
    "p5": {"4xlarge": 262144, "48xlarge": 2097152},
    "p5e": {"48xlarge": 2097152},
    "p5en": {"48xlarge": 2097152},
    "p6-b200": {"48xlarge": 2097152},
    "p6-b300": {"48xlarge": 4194304},
}
# fmt: on
MEMORY_MIB: Mapping[str, int] = MappingProxyType(
    {f"{family}.{size}": mib for family, sizes in _MEMORY_MIB.items() for size, mib in sizes.items()}
)

# Karpenter's default --vm-memory-overhead-percent (aws/karpenter-provider-aws v1.14.1 pkg/operator/options/options.go).
VM_MEMORY_OVERHEAD = 0.075
# Room kept for the DaemonSets on every GPU node: the NVIDIA device plugin (50m / 128Mi by default) and the EKS add-ons
# (aws-node, kube-proxy, eks-pod-identity-agent). An estimate, not read from those add-ons' manifests: raise the
# learners' requests only as far as a node really has room.
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
    memory = MEMORY_MIB[instance_type] - (64 if info.architecture == "arm64" else 0)
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
_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)([KMGTPE]i|[mkMGTPE])?")


def quantity(text: str) -> Fraction:
    """A Kubernetes quantity of the form config.model.Quantity accepts (e.g. 500m, 1.5, 4Gi), as an exact number."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    return Fraction(match.group(1)) * _SUFFIXES[match.group(2) or ""]
