"""Checks of a lab's limits against its instance types: what Karpenter would never launch, a pod that could never
start, learners that would not fill a node, and the most labs one stack holds."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from pydantic import ValidationInfo

from config.fields import FieldProblem, lab_instance_types
from config.node_capacity import Resources, quantity, seat_share

if TYPE_CHECKING:  # the models attach these checks, so they import this module
    from config.model import LearnerPod


def reserved_needs_reservations(ids: list[str], info: ValidationInfo) -> list[str]:
    # Karpenter only offers reserved capacity from reservations the EC2NodeClass selects.
    if "capacity_types" in info.data and ("reserved" in info.data["capacity_types"]) != bool(ids):
        raise ValueError(
            "required with capacity type 'reserved', and only then"
            if "reserved" in info.data["capacity_types"]
            else "only used with capacity type 'reserved'; add it to capacityTypes"
        )
    return ids


# Karpenter never launches a node whose capacity alone would exceed what is left of the NodePool's limits, and a pod
# beyond the VPC CNI's IP addresses never starts: refuse a lab with an instance type that could never work.
def max_gpus_hold_a_node(max_gpus: int, info: ValidationInfo) -> int:
    for name, instance_type in lab_instance_types(info):
        if instance_type.gpus > max_gpus:
            raise ValueError(
                f"must be at least {instance_type.gpus}: {name} has {instance_type.gpus} GPUs, and Karpenter never "
                "launches a node that exceeds the NodePool's nvidia.com/gpu limit (maxGpus x slicesPerGpu)"
            )
    return max_gpus


def max_pods_have_addresses(max_pods: int | None, info: ValidationInfo) -> int | None:
    for name, instance_type in lab_instance_types(info):
        if max_pods is not None and max_pods > instance_type.max_pods:
            raise ValueError(
                f"must be at most {instance_type.max_pods}: the VPC CNI has IP addresses for "
                f"{instance_type.max_pods} pods on {name} (no prefix delegation); unset, each type gets its own"
            )
    return max_pods


def cpu_limit_holds_a_node(cpu_limit: int, info: ValidationInfo) -> int:
    for name, instance_type in lab_instance_types(info):
        if instance_type.vcpus > cpu_limit:
            raise ValueError(
                f"must be at least {instance_type.vcpus}: {name} has {instance_type.vcpus} vCPUs, and Karpenter "
                "never launches a node that exceeds the NodePool's cpu limit"
            )
    return cpu_limit


def share_text(key: str, share: Resources) -> str:
    """A seat's share of one resource as a Kubernetes quantity: millicores for cpu, MiB for memory."""
    return f"{share.cpu_millis}m" if key == "cpu" else f"{share.memory_mib}Mi"


def learner_pod_fits(learner_pod: LearnerPod, info: ValidationInfo) -> LearnerPod:
    """Requests no larger than a seat's share, so that every slice of each instance type's node gets a learner."""
    if not {"instance_types", "slices_per_gpu", "max_pods"} <= info.data.keys():
        return learner_pod
    share = seat_share(info.data["instance_types"], info.data["slices_per_gpu"], info.data["max_pods"])
    for key, asked, most in (
        ("cpu", learner_pod.cpu, Fraction(share.cpu_millis, 1000)),
        ("memory", learner_pod.memory, Fraction(share.memory_mib * 2**20)),
    ):
        if asked is not None and quantity(asked) > most:
            raise FieldProblem(
                f"learnerPod.{key}",
                f"must be at most {share_text(key, share)} so that every "
                "slice of each instance type's node gets a learner (allocatable less room for DaemonSets)",
            )
    return learner_pod


# Every lab's device plugin profile lands in one ConfigMap, whose values may total 1 MiB and which etcd stores, keys
# included, in one request of at most 1.5 MiB; and in one Helm release Secret (1 MiB). With the longest lab names and
# the largest profiles, this many labs fit and one more does not: tests/test_stack_size.py measures it.
MAX_LABS = 4677


def fits_one_stack(labs: object) -> object:
    # Checked before the labs themselves, so that a stack far too large is refused at once.
    if isinstance(labs, dict) and len(labs) > MAX_LABS:
        raise ValueError(
            f"at most {MAX_LABS} labs fit in one stack, got {len(labs)}: every lab's device plugin profile goes into "
            "one ConfigMap, whose size Kubernetes and etcd limit; split the labs over several stacks"
        )
    return labs
