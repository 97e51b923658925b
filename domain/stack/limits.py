"""Checks of a lab's limits against its instance types: what Karpenter would never launch, a pod that could never
start, learners that would not fill a node, and the most labs one stack holds."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Protocol

from pydantic import ValidationInfo

from domain.capacity.daemonsets import (
    DEVICE_PLUGIN_DEFAULTS,
    ContainerResources,
    cpu_text,
    memory_text,
    node_daemonsets,
)
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.node_capacity import NodeShare, Resources, node_share, seats_per_node
from domain.capacity.quantity import quantity
from domain.capacity.sharing import Sharing
from domain.problems import FieldProblem
from domain.stack import context
from domain.stack.fields import lab_instance_types


class _LearnerPod(Protocol):
    """What these checks read of a learner's requests: domain.stack.model's LearnerPod, which attaches them (and so
    imports this module)."""

    @property
    def cpu(self) -> str | None: ...

    @property
    def memory(self) -> str | None: ...


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
    # The type of the most GPUs: a limit that holds its node holds every other type's.
    for name, instance_type in sorted(lab_instance_types(info), key=lambda t: -t[1].gpus)[:1]:
        if instance_type.gpus > max_gpus:
            raise ValueError(
                f"must be at least {instance_type.gpus}: {name} has {instance_type.gpus} GPUs, and Karpenter never "
                "launches a node that exceeds the NodePool's nvidia.com/gpu limit (maxGpus x slicesPerGpu)"
            )
    return max_gpus


# For the same reason a limit between two whole nodes of a type is never reached on that type: Karpenter stops one node
# short, and the seats above it exist only on paper. A lab's learnerSeats must be what its nodes can hold whichever of
# its types Karpenter launches; as every type's GPU count is a power of two, a limit that each divides leaves room for
# another node of the smallest until it is reached.
def max_gpus_in_whole_nodes(max_gpus: int, info: ValidationInfo) -> int:
    # The failing type of the most GPUs: every count is a power of two, so its multiples are every other type's. A
    # type of more GPUs than the limit fails max_gpus_hold_a_node instead.
    failing = [(name, t) for name, t in lab_instance_types(info) if max_gpus % t.gpus and t.gpus <= max_gpus]
    for name, instance_type in sorted(failing, key=lambda t: -t[1].gpus)[:1]:
        if max_gpus % instance_type.gpus:
            reached = max_gpus - max_gpus % instance_type.gpus
            raise ValueError(
                f"must be a multiple of {instance_type.gpus}: {name} has {instance_type.gpus} GPUs, and Karpenter "
                f"launches whole nodes, so a lab of {name} reaches {reached} of its {max_gpus} GPUs; use {reached} or "
                f"{reached + instance_type.gpus}"
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


# Karpenter 1.14.1 counts a NodePool's limits against the capacity of its nodes (sigs.k8s.io/karpenter
# pkg/controllers/provisioning/scheduling/scheduler.go: filterByRemainingResources drops each instance type whose
# capacity exceeds what is left of the limits, subtractMax charges a new NodeClaim the largest capacity among its
# instance types; provisioner.go Create refuses a NodeClaim once the nodes' capacity, NodePoolResourcesFor, exceeds
# them), and a node's cpu capacity is its vCPUs (aws/karpenter-provider-aws v1.14.1
# pkg/providers/instancetype/types.go cpu: DefaultVCpus). Karpenter may fill maxGpus with nodes of the lab's type of
# most vCPUs per GPU, so a cpu limit below their vCPUs stops the lab short of the seats maxGpus promises, unseen by
# the GPU limit. Charged the largest of each resource over its types, no NodeClaim uses more vCPUs per GPU than that
# type has, so its vCPUs for maxGpus are enough (tests/test_planner.py: Karpenter reaches maxGpus at that limit and
# stops a node short one vCPU below).
def cpu_needed(instance_types: Sequence[str], max_gpus: int) -> tuple[int, str]:
    """The vCPUs of maxGpus GPUs on the lab's type of most vCPUs per GPU, and that type: the least cpu limit that
    lets Karpenter reach maxGpus whichever of the types it launches."""
    name = max(instance_types, key=lambda t: Fraction(GPU_INSTANCE_TYPES[t].vcpus, GPU_INSTANCE_TYPES[t].gpus))
    data = GPU_INSTANCE_TYPES[name]
    # Whole nodes: a valid maxGpus is a multiple of every type's GPUs (max_gpus_in_whole_nodes).
    return -(-max_gpus // data.gpus) * data.vcpus, name


def cpu_limit_holds_max_gpus(cpu_limit: int | None, info: ValidationInfo) -> int | None:
    types = [name for name, _ in lab_instance_types(info)]
    if cpu_limit is None or not types or "max_gpus" not in info.data:
        return cpu_limit
    max_gpus = info.data["max_gpus"]
    needed, name = cpu_needed(types, max_gpus)
    if cpu_limit < needed:
        data = GPU_INSTANCE_TYPES[name]
        nodes = -(-max_gpus // data.gpus)
        raise ValueError(
            f"must be at least {needed} for maxGpus {max_gpus}, got {cpu_limit}: Karpenter launches no node past the "
            f"NodePool's cpu limit, the sum of its nodes' vCPUs, and maxGpus {max_gpus} of {name} ({data.gpus} "
            f"GPU{'s' if data.gpus > 1 else ''}, {data.vcpus} vCPUs a node) are {nodes} node{'s' if nodes > 1 else ''} "
            f"of {needed} vCPUs; raise cpuLimit to {needed}, or leave it out (by default it is what maxGpus needs)"
        )
    return cpu_limit


def node_shares(
    instance_types: Sequence[str],
    sharing: Sharing,
    slices_per_gpu: int,
    plugin: ContainerResources,
    ebs_csi: bool,
    metrics: bool,
) -> list[NodeShare]:
    """A learner's share of a node of each of the lab's instance types, its DaemonSets taken off."""
    return [
        node_share(t, slices_per_gpu, node_daemonsets(t, sharing, plugin, ebs_csi, metrics)) for t in instance_types
    ]


def seat_share(shares: Sequence[NodeShare]) -> Resources:
    """The most CPU and memory one learner may request so that every GPU slice of a node of each type gets a learner."""
    return Resources(min(s.share.cpu_millis for s in shares), min(s.share.memory_mib for s in shares))


def share_text(key: str, share: Resources) -> str:
    """A seat's share of one resource as a Kubernetes quantity: millicores for cpu, MiB for memory."""
    return f"{share.cpu_millis}m" if key == "cpu" else f"{share.memory_mib}Mi"


def _figures(key: str, node: NodeShare) -> str:
    """How a node's share of one resource comes about, every figure named."""
    if key == "cpu":
        offered, text, amount = Fraction(node.allocatable.cpu_millis, 1000), cpu_text, (lambda d: d.cpu)
    else:
        offered, text, amount = Fraction(node.allocatable.memory_mib * 2**20), memory_text, (lambda d: d.memory)
    taken = sum((amount(d) for d in node.daemonsets), Fraction(0))
    each = ", ".join(f"{d.name} {text(amount(d))}" for d in node.daemonsets)
    return (
        f"{node.instance_type} has {text(offered)} allocatable {key}; its DaemonSets request {text(taken)} ({each}); "
        f"the {text(offered - taken)} left over {node.seats} seats is {share_text(key, node.share)} each"
    )


def learner_pod_fits(learner_pod: _LearnerPod, info: ValidationInfo) -> _LearnerPod:
    """Requests no larger than a seat's share, so that every slice of each instance type's node gets a learner. The
    DaemonSets counted are the stack's (its device plugin's requests, JupyterHub's EBS CSI driver, gpulab:metrics'
    dcgm-exporter): pydantic's validation context, domain/stack/context.py."""
    stack = context.of(info.context)
    plugin = stack.device_plugin
    if plugin is None or not {"instance_types", "sharing", "slices_per_gpu"} <= info.data.keys():
        return learner_pod
    data = info.data
    shares = node_shares(
        data["instance_types"], data["sharing"], data["slices_per_gpu"], plugin, stack.runs_ebs_csi, stack.runs_metrics
    )
    for key, asked, unit in (("cpu", learner_pod.cpu, Fraction(1, 1000)), ("memory", learner_pod.memory, 2**20)):
        tightest = min(shares, key=lambda s: s.share.cpu_millis if key == "cpu" else s.share.memory_mib)
        most = tightest.share.cpu_millis if key == "cpu" else tightest.share.memory_mib
        if most < 1:
            raise FieldProblem(
                f"learnerPod.{key}", f"no room for a learner on every slice of each node: {_figures(key, tightest)}"
            )
        if asked is not None and quantity(asked) > most * unit:
            raise FieldProblem(
                f"learnerPod.{key}",
                f"must be at most {share_text(key, tightest.share)} so that every slice of each instance type's node "
                f"gets a learner: {_figures(key, tightest)}",
            )
    return learner_pod


def max_pods_hold_the_seats(max_pods: int | None, info: ValidationInfo) -> int | None:
    # A node takes no more pods than maxPods, and Karpenter counts each DaemonSet pod among them
    # (pkg/utils/resources RequestsForPods): the learners get what the DaemonSets leave.
    if not {"instance_types", "sharing", "slices_per_gpu"} <= info.data.keys():
        return max_pods
    stack = context.of(info.context)  # the stack's DaemonSets: pydantic's validation context (domain/stack/context.py)
    for name in info.data["instance_types"]:
        instance_type = GPU_INSTANCE_TYPES[name]
        pods = instance_type.max_pods if max_pods is None else max_pods
        # Only the pods are counted here, not their requests; the stack's plugin settings all the same.
        plugin = stack.device_plugin or DEVICE_PLUGIN_DEFAULTS
        daemonsets = node_daemonsets(name, info.data["sharing"], plugin, stack.runs_ebs_csi, stack.runs_metrics)
        seats = seats_per_node(name, info.data["slices_per_gpu"])
        if seats + len(daemonsets) > pods:
            why = (
                f"{name} takes {seats} learners and {len(daemonsets)} DaemonSet pods "
                f"({', '.join(d.name for d in daemonsets)})"
            )
            if max_pods is not None:
                raise ValueError(f"must be at least {seats + len(daemonsets)}: {why}")
            raise FieldProblem(
                "slicesPerGpu",
                f"too many learners for a node: {why}, but its pods are limited to {pods} (the VPC CNI's "
                "ENI-limited count; maxPods cannot exceed it)",
            )
    return max_pods


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
