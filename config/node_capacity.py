"""What a lab's node offers pods: the allocatable CPU and memory Karpenter computes for a GPU instance type.

Karpenter decides whether a pod fits a node it would launch from these figures (allocatable less the requests of the
DaemonSets that run there, config/daemonsets.py), so a learner's requests, and the warm-seat PodTemplate shaped like
it, must fit slicesPerGpu x GPUs learners into them.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from config.instance_types import GPU_INSTANCE_TYPES

if TYPE_CHECKING:  # config.daemonsets reads quantities with this module's parser
    from config.daemonsets import DaemonSetRequests

# Karpenter's default --vm-memory-overhead-percent (aws/karpenter-provider-aws v1.14.1 pkg/operator/options/options.go).
VM_MEMORY_OVERHEAD = 0.075


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


def seats_per_node(instance_type: str, slices_per_gpu: int) -> int:
    """Learners a node of the type seats: slicesPerGpu x its GPUs, the nvidia.com/gpu its device plugin advertises."""
    return slices_per_gpu * GPU_INSTANCE_TYPES[instance_type].gpus


@dataclass(frozen=True)
class NodeShare:
    """One learner's share of a lab's node of one instance type, and the figures it comes from."""

    instance_type: str
    allocatable: Resources
    daemonsets: tuple[DaemonSetRequests, ...]  # every DaemonSet pod on the node (config/daemonsets.py)
    seats: int  # learners the node takes: slicesPerGpu x its GPUs
    share: Resources  # what is left of the allocatable for each seat, rounded down to 1m and 1Mi


# Cached: the labs of a stack mostly share their instance types, slices and DaemonSets.
@functools.cache
def node_share(
    instance_type: str, slices_per_gpu: int, max_pods: int | None, daemonsets: tuple[DaemonSetRequests, ...]
) -> NodeShare:
    """What each of the slicesPerGpu x GPUs learners of a node may request so that they and its DaemonSets fit.

    `max_pods` is the lab's kubelet maxPods, None when unset.
    """
    node = allocatable(instance_type, max_pods)
    seats = seats_per_node(instance_type, slices_per_gpu)
    cpu = Fraction(node.cpu_millis, 1000) - sum((d.cpu for d in daemonsets), Fraction(0))
    memory = node.memory_mib * 2**20 - sum((d.memory for d in daemonsets), Fraction(0))
    share = Resources(math.floor(cpu * 1000 / seats), math.floor(memory / 2**20 / seats))
    return NodeShare(instance_type, node, daemonsets, seats, share)


# A Kubernetes quantity, as k8s.io/apimachinery pkg/api/resource/quantity.go reads one (kubernetes-1.34.1): the
# grammar in Quantity's comment (a sign, digits with an optional point, then a binary suffix, a decimal exponent or a
# decimal suffix) with the decimal suffixes its parser knows (quantitySuffixer: n and u too); the exponent is a whole
# number (parseQuantityString reads digits only). `1.`, `.5`, `4e9`, `1E` (exa) and `+1` are quantities; `1K`, `1e`,
# `1e1.5`, `1Mi1` and `` are not. (ParseQuantity itself reads `.` and `e3`, which have no digits, as 0; the grammar
# does not allow them, and neither does gpulab.)
QUANTITY = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[eE][+-]?[0-9]+|[numkMGTPE])?"
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>[KMGTPE]i)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]))?"
)
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {suffix: 10 * (i + 1) for i, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))}
# ParseQuantity rounds a value up (away from zero) to whole nanos and caps binary ones at 2^63 - 1.
_NANO = 10**9
_MAX_BINARY = 2**63 - 1


# Cached: every lab parses the same few requests of every DaemonSet for each of its instance types.
@functools.cache
def quantity(text: str) -> Fraction:
    """The value Kubernetes gives a quantity (e.g. 500m, 0.5, 4e9, 1.5Gi), as an exact number."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    value = Fraction(match["number"])
    if match["binary"]:
        value = min(value * 2 ** _BINARY[match["binary"]], Fraction(_MAX_BINARY))
    elif match["exponent"]:
        value *= Fraction(10) ** int(match["exponent"])
    elif match["decimal"]:
        value *= Fraction(10) ** _DECIMAL[match["decimal"]]
    nanos = math.ceil(abs(value) * _NANO)
    return Fraction(nanos if value >= 0 else -nanos, _NANO)
