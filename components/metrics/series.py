"""How many series the AWS managed scraper sends the workspace from the stack's cluster, with its labs full: what the
meter's samples and storage are billed by (domain/cost/meter_cost.py).

Of kube-state-metrics and Karpenter the scraper keeps only the metrics gpulab's rules read (components/metrics/
read_series.py, scrape.py): each of those is counted from its exporter's source at the pinned version, per object it
describes (pods, nodes, NodePools). dcgm-exporter's count follows from its source and gpulab's fields. What stays an
ASSUMPTION is named wherever the figure is shown: the pods on the system nodes, and the resources a node's
allocatable lists.
"""

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.karpenter import controller as karpenter
from components.karpenter.manifests import node_pool
from components.metrics import dcgm_exporter, kube_state_metrics
from components.metrics.read_series import SCRAPE_SERIES, read_by_job
from components.metrics.recording_rules import rule_groups
from domain.capacity.daemonsets import DCGM_SERVER
from domain.cost.meter_cost import MeterCost, meter_cost
from domain.cost.price_book import LIST, PriceBook
from domain.stack.metrics import SCRAPE_INTERVAL_SECONDS, Metrics
from domain.stack.model import Lab, Settings

# NVIDIA/dcgm-exporter 4.5.3-4.8.2 (commit 691c927), internal/pkg/transformation: on a GPU that pods share, the fields
# it reads per process (const.go:43-44) keep the whole GPU's series and add one per pod (kubernetes.go:366, 243);
# every other field is the whole GPU's value copied to each pod, its own series dropped (kubernetes.go:371-403).
PER_POD_FIELDS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED")
# What a scrape adds per target (components/metrics/read_series.py SCRAPE_SERIES), whatever it keeps.
SERIES_PER_TARGET = len(SCRAPE_SERIES)
# kubernetes/kube-state-metrics v2.20.0 (commit 4ffeda2) internal/store/pod.go, CONFIRMED: the series each pod
# metric writes per pod. kube_pod_info one (createPodInfoFamilyGenerator, 640-670); kube_pod_status_phase one per
# phase, Pending, Succeeded, Failed, Unknown and Running, once the pod has one (1502-1545); kube_pod_start_time one once
# it started (1478-1500); kube_pod_annotations one with an annotations allowlist, which gpulab gives
# (1217-1238, components/metrics/kube_state_metrics.py ARGS); kube_pod_nodeselectors one, opt-in (1973-1990).
KUBE_STATE_METRICS_SERIES_PER_POD = {
    "kube_pod_info": 1,
    "kube_pod_status_phase": 5,
    "kube_pod_start_time": 1,
    "kube_pod_annotations": 1,
    "kube_pod_nodeselectors": 1,
}
# ASSUMPTION: the pods on the system nodes (CoreDNS, Karpenter, kube-state-metrics, the hub and its proxy, the system
# nodes' DaemonSets), which kube-state-metrics (--resources=pods, every namespace) describes too; not counted from the
# render. The learners' and their nodes' DaemonSet pods are counted (daemonset_pods).
SYSTEM_NODE_PODS = 30
# ASSUMPTION (REPORTED, not read in source here): the resources a node's status.allocatable lists, which the kubelet
# writes: cpu, memory, pods, ephemeral-storage, hugepages-1Gi and hugepages-2Mi; a GPU node adds nvidia.com/gpu (the
# device plugin's).
NODE_ALLOCATABLE_RESOURCES = 6
# The Karpenter 1.14.1 chart's replicas (charts/karpenter/values.yaml:49), which gpulab keeps: each one is scraped. Only
# the leader runs the controllers that write the metrics gpulab keeps (sigs.k8s.io/karpenter v1.14.1
# pkg/operator/operator.go:173 LeaderElection on, CONFIRMED; that controller-runtime runs a controller on the leader
# only: REPORTED, its default, not read here).
KARPENTER_REPLICAS = 2


def daemonset_pods(labs: Mapping[str, Lab]) -> int:
    """The DaemonSet pods on the labs' GPU nodes at maxGpus, a node per GPU at most, each node as the lab's instance
    type with the most of them (domain/capacity/daemonsets.py node_daemonsets, as Karpenter sizes the node)."""
    return sum(lab.max_gpus * max(len(share.daemonsets) for share in lab.node_shares) for lab in labs.values())


def karpenter_series(labs: Mapping[str, Lab], system_nodes: int) -> dict[str, int]:
    """The series of each Karpenter metric gpulab may keep, with the labs full (a node per GPU at most) beside the
    system nodes, from sigs.k8s.io/karpenter v1.14.1 (CONFIRMED): karpenter_nodes_allocatable one per resource of
    each node's allocatable, of every node in Karpenter's state, its own or not (pkg/controllers/metrics/node/
    controller.go buildMetrics 267-289; state/informer/node.go watches every Node); karpenter_nodepools_cost_total one
    per NodePool and karpenter_nodepools_limit one per resource of its spec.limits
    (pkg/controllers/metrics/nodepool/controller.go buildMetrics 119-139)."""
    gpu_nodes = sum(lab.max_gpus for lab in labs.values())
    return {
        "karpenter_nodes_allocatable": (system_nodes + gpu_nodes) * NODE_ALLOCATABLE_RESOURCES + gpu_nodes,
        "karpenter_nodepools_cost_total": len(labs),
        "karpenter_nodepools_limit": sum(len(node_pool(name, lab)["spec"]["limits"]) for name, lab in labs.items()),
    }


def _fields() -> list[str]:
    """The fields gpulab's exporter reads (its counters file)."""
    return [line.split(",")[0].strip() for line in dcgm_exporter.COUNTERS.splitlines() if line.strip()]


def dcgm_series_per_gpu(pods: int) -> int:
    """The exporter's series for one GPU that `pods` learners share."""
    fields = _fields()
    per_pod = [f for f in fields if f in PER_POD_FIELDS]
    copied = len(fields) - len(per_pod)
    return len(per_pod) * (1 + pods) + copied * max(pods, 1)


@dataclass(frozen=True)
class Series:
    """Each scraped component's series, and what its count rests on."""

    counts: Mapping[str, int]  # by scrape job (components/metrics/scrape.py)
    notes: Mapping[str, str]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _each(job: str, names: Sequence[str], counts: Mapping[str, int]) -> int:
    """The series of `names` at `counts` (per object, or in all); a name without a count is the program's error."""
    missing = [n for n in names if n not in counts]
    if missing:
        raise ValueError(
            f"the meter's rules read {', '.join(missing)} of {job}, whose series components/metrics/"
            "series.py does not count"
        )
    return sum(counts[n] for n in names)


def series(labs: Mapping[str, Lab], metrics: Metrics, system_nodes: int) -> Series:
    """The series of the stack's cluster with every lab at maxGpus, slicesPerGpu learners on each GPU, and an exporter
    on each GPU node of a type the DCGM host engine runs on (at most one node per GPU); of kube-state-metrics and
    Karpenter only the metrics the rules read (the scraper keeps no other), with `system_nodes` system nodes."""
    # The rules as the workspace holds them but for budgets, whose rules read recorded series only.
    read = read_by_job(rule_groups(labs, metrics, LIST))
    metered = [lab for lab in labs.values() if any(DCGM_SERVER.lands_on(t) for t in lab.instance_types)]
    gpus = sum(lab.max_gpus for lab in metered)
    metered_seats = sum(lab.learner_seats for lab in metered)
    seats = sum(lab.learner_seats for lab in labs.values())
    dcgm = sum(lab.max_gpus * dcgm_series_per_gpu(lab.slices_per_gpu) for lab in metered)
    on_gpu_nodes = daemonset_pods(labs)
    pods = seats + on_gpu_nodes + SYSTEM_NODE_PODS
    ksm_names, karpenter_names = read[kube_state_metrics.NAME], read[karpenter.RELEASE]
    per_pod = _each(kube_state_metrics.NAME, ksm_names, KUBE_STATE_METRICS_SERIES_PER_POD)
    by_metric = karpenter_series(labs, system_nodes)
    gpu_nodes = sum(lab.max_gpus for lab in labs.values())
    return Series(
        {
            dcgm_exporter.NAME: dcgm + gpus * SERIES_PER_TARGET,
            kube_state_metrics.NAME: pods * per_pod + SERIES_PER_TARGET,
            karpenter.RELEASE: _each(karpenter.RELEASE, karpenter_names, by_metric)
            + KARPENTER_REPLICAS * SERIES_PER_TARGET,
        },
        {
            dcgm_exporter.NAME: f"{gpus} GPUs at maxGpus, {metered_seats} learners on them ({len(_fields())} fields, "
            f"{len(PER_POD_FIELDS)} per learner)",
            kube_state_metrics.NAME: f"{pods} pods ({seats} learners + {on_gpu_nodes} DaemonSet pods on their nodes + "
            f"{SYSTEM_NODE_PODS} on the system nodes, assumed) x {per_pod} series of the {len(ksm_names)} metrics the "
            "rules read",
            karpenter.RELEASE: f"the leader's {len(karpenter_names)} metrics the rules read: "
            f"{system_nodes + gpu_nodes} nodes ({system_nodes} system + {gpu_nodes} GPU at maxGpus) x "
            f"{NODE_ALLOCATABLE_RESOURCES} allocatable resources (assumed; +1 GPU), {len(labs)} NodePools "
            f"x (cost + limits); {KARPENTER_REPLICAS} controllers scraped",
        },
    )


def stack_meter(settings: Settings, book: PriceBook) -> MeterCost | None:
    """The GPU meter of the stack at `book`'s prices, as the whole stack's cost counts it; None without
    gpulab:metrics."""
    if settings.metrics is None:
        return None
    found = series(settings.labs, settings.metrics, settings.cluster.system_nodes.size)
    return meter_cost(found.total, SCRAPE_INTERVAL_SECONDS, book.meter)


def meter_output(
    settings: Settings, book: PriceBook, days: tuple[datetime.date, datetime.date] | None
) -> dict[str, Any]:
    """The `cost.meter` stack output of a stack with gpulab:metrics: the stack's series, by job and what each count
    rests on, and what they cost at `book`'s prices over the stack's term `days` (domain/cost/meter_cost.py)."""
    assert settings.metrics is not None, "only a stack with gpulab:metrics has a meter"
    found = series(settings.labs, settings.metrics, settings.cluster.system_nodes.size)
    meter = stack_meter(settings, book)
    assert meter is not None
    figures = meter.as_output(days)
    return {
        "seriesByJob": {job: {"series": n, "counts": found.notes[job]} for job, n in found.counts.items()},
        **figures,
        # The term's USD is a priced line like the labs': it names its region and source, or why it has no price.
        "term": {**figures["term"], **book.meter_where()},
        "pricesFrom": f"{book.region}, AWS Price List API" if book.live else "none",
    }
