"""How many series the AWS managed scraper sends the workspace from the stack's cluster, with its labs full: what the
meter's samples and storage are billed by (domain/cost/meter_cost.py).

dcgm-exporter's count follows from its source and gpulab's fields; kube-state-metrics' and Karpenter's depend on what
the cluster runs and are ASSUMPTIONS, named as such wherever the figure is shown, until measured against a real scrape.
"""

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.karpenter import controller as karpenter
from components.metrics import dcgm_exporter, kube_state_metrics
from domain.capacity.daemonsets import DCGM_SERVER
from domain.cost.meter_cost import meter_cost
from domain.cost.price_book import PriceBook
from domain.stack.metrics import SCRAPE_INTERVAL_SECONDS
from domain.stack.model import Lab

# NVIDIA/dcgm-exporter 4.5.3-4.8.2 (commit 691c927), internal/pkg/transformation: on a GPU that pods share, the fields
# it reads per process (const.go:43-44) keep the whole GPU's series and add one per pod (kubernetes.go:366, 243);
# every other field is the whole GPU's value copied to each pod, its own series dropped (kubernetes.go:371-403).
PER_POD_FIELDS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED")
# What a scrape adds per target: up, scrape_duration_seconds, scrape_samples_scraped,
# scrape_samples_post_metric_relabeling, scrape_series_added (Prometheus documentation, "Jobs and instances",
# automatically generated time series: REPORTED, and that the managed collector adds them too: ASSUMPTION).
SERIES_PER_TARGET = 5
# ASSUMPTION: kube-state-metrics v2.20.0 with --resources=pods writes about 40 to 60 series per pod (phase x 5, ready
# x 3, scheduled x 3, a few per container: research for issue 47, section 5.4); not measured here.
KUBE_STATE_METRICS_SERIES_PER_POD = 50
# ASSUMPTION: the cluster's pods beside the learners' (CoreDNS, Karpenter, the hub and its proxy, the exporters, and
# each node's DaemonSets); not counted from the render.
OTHER_PODS = 30
# ASSUMPTION: Karpenter's /metrics (Go runtime, controller-runtime, its histograms) holds 1,000 to 2,000 series per
# controller; not measured here.
KARPENTER_SERIES_PER_REPLICA = 1500
# The Karpenter 1.14.1 chart's replicas (charts/karpenter/values.yaml:49), which gpulab keeps: each one is scraped.
KARPENTER_REPLICAS = 2


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


def series(labs: Mapping[str, Lab]) -> Series:
    """The series of the stack's cluster with every lab at maxGpus, slicesPerGpu learners on each GPU, and an exporter
    on each GPU node of a type the DCGM host engine runs on (at most one node per GPU)."""
    metered = [lab for lab in labs.values() if any(DCGM_SERVER.lands_on(t) for t in lab.instance_types)]
    gpus = sum(lab.max_gpus for lab in metered)
    metered_seats = sum(lab.learner_seats for lab in metered)
    seats = sum(lab.learner_seats for lab in labs.values())
    dcgm = sum(lab.max_gpus * dcgm_series_per_gpu(lab.slices_per_gpu) for lab in metered)
    pods = seats + OTHER_PODS
    return Series(
        {
            dcgm_exporter.NAME: dcgm + gpus * SERIES_PER_TARGET,
            kube_state_metrics.NAME: pods * KUBE_STATE_METRICS_SERIES_PER_POD + SERIES_PER_TARGET,
            karpenter.RELEASE: KARPENTER_REPLICAS * (KARPENTER_SERIES_PER_REPLICA + SERIES_PER_TARGET),
        },
        {
            dcgm_exporter.NAME: f"{gpus} GPUs at maxGpus, {metered_seats} learners on them ({len(_fields())} fields, "
            f"{len(PER_POD_FIELDS)} per learner)",
            kube_state_metrics.NAME: f"{pods} pods ({seats} learners + {OTHER_PODS} others, assumed) x "
            f"{KUBE_STATE_METRICS_SERIES_PER_POD} series (assumed)",
            karpenter.RELEASE: f"{KARPENTER_REPLICAS} controllers x {KARPENTER_SERIES_PER_REPLICA} series (assumed)",
        },
    )


def meter_output(
    labs: Mapping[str, Lab], book: PriceBook, days: tuple[datetime.date, datetime.date] | None
) -> dict[str, Any]:
    """The `cost.meter` stack output: the stack's series, by job and what each count rests on, and what they cost
    at `book`'s prices over the stack's term `days` (domain/cost/meter_cost.py)."""
    found = series(labs)
    return {
        "seriesByJob": {job: {"series": n, "counts": found.notes[job]} for job, n in found.counts.items()},
        **meter_cost(found.total, SCRAPE_INTERVAL_SECONDS, book.meter).as_output(days),
        "pricesFrom": f"{book.region}, AWS Price List API" if book.live else "none",
    }
