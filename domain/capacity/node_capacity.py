"""What a lab's node offers pods: the allocatable CPU and memory Karpenter computes for a GPU instance type.

Karpenter decides whether a pod fits a node it would launch from these figures (allocatable less the requests of the
DaemonSets that run there, domain/capacity/daemonsets.py), so a learner's requests, and the warm-seat PodTemplate shaped
like it, must fit slicesPerGpu x GPUs learners into them.
"""

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from domain.capacity.daemonsets import DaemonSetRequests
from domain.capacity.instance_types import GPU_INSTANCE_TYPES

# Karpenter's default --vm-memory-overhead-percent (aws/karpenter-provider-aws v1.14.1 pkg/operator/options/options.go).
VM_MEMORY_OVERHEAD = 0.075


@dataclass(frozen=True)
class Resources:
    cpu_millis: int
    memory_mib: int


def allocatable(instance_type: str) -> Resources:
    """Allocatable CPU and memory of a node as Karpenter computes it before launch, whatever the lab's maxPods.

    aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go (NewInstanceType, kubeReservedResources):
    memory less the VM overhead (and 64 MiB on Graviton), kube-reserved CPU by the Bottlerocket ranges and memory
    11 MiB per pod + 255 MiB, eviction 100 MiB. The pods of kube-reserved are the type's ENI-limited pods with no ENI
    reserved (ENILimitedPods(ctx, info, 0, ...)), not the kubelet's maxPods: AL2023 sets UsesENILimitedMemoryOverhead
    (pkg/providers/amifamily/resolver.go, DefaultFamily's feature flags). For g4dn.xlarge, 29 pods, this gives the
    3920m and 14481Mi the instance-type reference lists.
    """
    info = GPU_INSTANCE_TYPES[instance_type]
    pods = info.max_pods
    memory = info.memory_mib - (64 if info.architecture == "arm64" else 0)
    memory -= math.ceil(memory * VM_MEMORY_OVERHEAD)
    memory -= 11 * pods + 255 + 100
    cpu = info.vcpus * 1000
    reserved = 0.0
    for start, end, share in ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025)):
        if cpu >= start:
            reserved += int((min(cpu, end) - start) * share)
    return Resources(cpu - int(reserved), memory)


def learner_seats(max_gpus: int, slices_per_gpu: int) -> int:
    """Learners a lab seats at once: every slice of every GPU its maxGpus lets it run."""
    return max_gpus * slices_per_gpu


def seats_per_node(instance_type: str, slices_per_gpu: int) -> int:
    """Learners a node of the type seats: slicesPerGpu x its GPUs, the nvidia.com/gpu its device plugin advertises."""
    return slices_per_gpu * GPU_INSTANCE_TYPES[instance_type].gpus


@dataclass(frozen=True)
class NodeShare:
    """One learner's share of a lab's node of one instance type, and the figures it comes from."""

    instance_type: str
    allocatable: Resources
    daemonsets: tuple[DaemonSetRequests, ...]  # every DaemonSet pod on the node (domain/capacity/daemonsets.py)
    seats: int  # learners the node takes: slicesPerGpu x its GPUs
    share: Resources  # what is left of the allocatable for each seat, rounded down to 1m and 1Mi


# Cached: the labs of a stack mostly share their instance types, slices and DaemonSets.
@functools.cache
def node_share(instance_type: str, slices_per_gpu: int, daemonsets: tuple[DaemonSetRequests, ...]) -> NodeShare:
    """What each of the slicesPerGpu x GPUs learners of a node may request so that they and its DaemonSets fit."""
    node = allocatable(instance_type)
    seats = seats_per_node(instance_type, slices_per_gpu)
    cpu = Fraction(node.cpu_millis, 1000) - sum((d.cpu for d in daemonsets), Fraction(0))
    memory = node.memory_mib * 2**20 - sum((d.memory for d in daemonsets), Fraction(0))
    share = Resources(math.floor(cpu * 1000 / seats), math.floor(memory / 2**20 / seats))
    return NodeShare(instance_type, node, daemonsets, seats, share)
