"""`gpulab:metrics`: the GPU meter (dcgm-exporter and kube-state-metrics in the cluster, an Amazon Managed Service for
Prometheus workspace with its AWS managed scraper and rules), and the checks of a lab's `gpuIdleTimeout`, which stops a
learner's server whose GPU stayed idle that long (docs/metrics.md).

Absent, nothing of it is installed and no lab may set gpuIdleTimeout.
"""

from __future__ import annotations

from typing import Annotated, Protocol

from pydantic import AfterValidator, Field, ValidationInfo

from domain.capacity.daemonsets import no_host_engine
from domain.problems import FieldProblem, report
from domain.stack.fields import Duration, Model, Namespace, between, data_checked, labs_checked
from domain.stack.namespaces import namespace_clash
from domain.time import durations
from domain.upstream.versions import DCGM_EXPORTER_VERSION


class MeteredLab(Protocol):
    """What these checks read of a lab: domain.stack.model's Lab, which attaches them (and so imports this module)."""

    @property
    def gpu_idle_timeout(self) -> str | None: ...

    @property
    def sharing(self) -> str: ...

    @property
    def instance_types(self) -> list[str]: ...


# The AWS managed scraper scrapes at most every 30 s (AMP User Guide, AMP-collector-how-to, "Scrape interval"). An
# idle window of 5 minutes holds 10 samples of a seat: one missed scrape does not make a busy seat look idle.
SCRAPE_INTERVAL_SECONDS = 30
SHORTEST_IDLE_WINDOW = "5m"


def _a_window_of_samples(value: str) -> str:
    if durations.seconds(value) < durations.seconds(SHORTEST_IDLE_WINDOW):
        raise ValueError(
            f"must be at least {SHORTEST_IDLE_WINDOW}: the scraper samples each seat every "
            f"{SCRAPE_INTERVAL_SECONDS} s, and a shorter window would call a seat idle on a few samples"
        )
    return value


IdleWindow = Annotated[Duration, AfterValidator(_a_window_of_samples)]


class Metrics(Model):
    """The GPU meter of the stack's labs and seats."""

    namespace: Namespace = Field(
        default="gpu-metrics", description="Namespace of dcgm-exporter and kube-state-metrics."
    )
    idle_utilisation_percent: Annotated[int, between(1, 100)] = Field(
        default=5,
        description="A seat is idle while its GPU utilisation (dcgm-exporter's per-pod DCGM_FI_DEV_GPU_UTIL) stays "
        "under this percentage.",
    )
    idle_after: IdleWindow = Field(
        default="30m",
        description="How long a seat stays under idleUtilisationPercent before it counts as idle, in the rules and "
        "alerts of labs without gpuIdleTimeout.",
    )


def idle_window(lab: MeteredLab, metrics: Metrics) -> str:
    """How long a lab's seat stays under the threshold before it counts as idle: the lab's gpuIdleTimeout, else the
    stack's idleAfter."""
    return lab.gpu_idle_timeout or metrics.idle_after


def _timeout_problem(lab: MeteredLab, has_metrics: bool, has_hub: bool | None) -> str | None:
    """`has_hub` None: gpulab:jupyterhub is set but wrong, which its own problem names."""
    if not has_metrics:
        return "needs gpulab:metrics, which measures each seat's GPU use"
    if has_hub is None:
        return None
    if not has_hub:
        return "needs gpulab:jupyterhub: the idle-GPU culler is a service of the hub, which stops learners' servers"
    if lab.sharing == "mps":
        # dcgm-exporter 4.5.3-4.8.2 attributes GPU_UTIL to a pod through NVML's per-process samples, mapped to pods by
        # the PIDs' cgroups, and gives 0 to a pod with no sample (internal/pkg/transformation/process_metrics.go,
        # kubernetes.go buildIdlePodValues). Under MPS the GPU work runs in the MPS server, which is the device
        # plugin's pod, not the learner's: nothing in its source shows MPS clients sampled per process.
        return (
            f"not with sharing: mps: dcgm-exporter {DCGM_EXPORTER_VERSION} attributes GPU use to a learner's pod by "
            "NVML's per-process samples, and under MPS the work runs in the MPS server's process, so every learner "
            "could read as idle"
        )
    if missing := no_host_engine(lab.instance_types):
        return f"{missing}; dcgm-exporter reads that host engine, so their seats have no GPU meter"
    return None


def metrics_fit(metrics: Metrics | None, info: ValidationInfo) -> Metrics | None:
    """gpulab:metrics beside the other settings: the scraper's way into the cluster, a namespace of its own, and every
    lab's gpuIdleTimeout backed by a meter and a hub. Every problem is reported; a check that needs a key that is
    wrong (a lab, gpulab:jupyterhub) is left to that key's own problem."""
    labs, _ = labs_checked(info)
    # gpulab:jupyterhub is in info.data unless it is wrong (its default, None, is valid): a wrong hub is not a missing
    # one, and a lab's gpuIdleTimeout is not to blame for it.
    hub = info.data.get("jupyterhub") is not None if "jupyterhub" in info.data else None
    timeouts = {
        name: _timeout_problem(lab, metrics is not None, hub)
        for name, lab in labs.items()
        if lab.gpu_idle_timeout is not None
    }
    problems: list[ValueError] = [
        FieldProblem(f"labs.{name}.gpuIdleTimeout", problem) for name, problem in timeouts.items() if problem
    ]
    if metrics is not None:
        cluster = info.data.get("cluster")
        if cluster is not None and not cluster.private_endpoint:
            problems.append(
                FieldProblem(
                    "cluster.privateEndpoint",
                    "must be true with gpulab:metrics: the AWS managed scraper reaches the cluster only through its "
                    "private endpoint (AMP User Guide, AMP-collector-how-to)",
                )
            )
        if clash := namespace_clash(
            metrics.namespace, data_checked(info), ("karpenter", "nvidia_device_plugin", "jupyterhub")
        ):
            problems.append(FieldProblem("metrics.namespace", clash))
    report(problems)
    return metrics
