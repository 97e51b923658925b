"""Pure builder of the AWS managed scraper's configuration: what it scrapes from the cluster, every 30 s.

The scraper finds its targets with Kubernetes service discovery (the only discovery it supports) and reaches pods by
their IP addresses through its network interfaces in the cluster's subnets (AMP User Guide, AMP-collector-how-to,
"Scraper configuration"). Three jobs: dcgm-exporter on the lab nodes, kube-state-metrics, and Karpenter's controller.

Of kube-state-metrics and Karpenter the scraper keeps only the metrics gpulab's rules and dashboard read
(components/metrics/read_series.py), by a metric_relabel_configs keep on __name__: the workspace bills every sample it
ingests (domain/cost/meter_cost.py), and Karpenter's /metrics is mostly Go runtime and controller-runtime series no rule
reads. dcgm-exporter writes only the fields of gpulab's counters file (components/metrics/dcgm_exporter.py). The
managed collector takes metric_relabel_configs: REPORTED, from the "Scraper configuration" page of Amazon CloudWatch's
managed Prometheus collectors ("metric_relabel_configs — Relabeling rules applied after scraping"); AMP's own page
was not read here, and `promtool check config` checks the syntax only (tests/test_metrics_rules.py).
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any

from components.karpenter import controller as karpenter
from components.metrics import dcgm_exporter, kube_state_metrics
from components.metrics.read_series import read_by_job
from domain.stack.metrics import SCRAPE_INTERVAL_SECONDS, Metrics
from domain.stack.model import Karpenter

APP = "app.kubernetes.io/name"


# The jobs whose metrics the scraper keeps by name.
KEEP_LISTED = (kube_state_metrics.NAME, karpenter.RELEASE)


def keep(names: Sequence[str]) -> dict[str, Any]:
    """The metric_relabel_configs rule that keeps the series of `names` and drops the rest (Prometheus anchors the
    regex at both ends)."""
    return {"source_labels": ["__name__"], "regex": "|".join(re.escape(n) for n in names), "action": "keep"}


def _pods(
    job: str, namespace: str, app: str, port: str, *, own_labels: bool, kept: Sequence[str] | None = None
) -> dict[str, Any]:
    """A job over the pods of `namespace` labelled app.kubernetes.io/name=<app>, at their container port `port`;
    keeping only the metrics `kept` where given."""
    return {
        "job_name": job,
        # dcgm-exporter's and kube-state-metrics' pod and namespace labels name the pod they measure (a learner's),
        # not the exporter's own pod, which the scraper would otherwise add as exported_pod (honor_labels: false).
        "honor_labels": own_labels,
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
        "relabel_configs": [
            {
                "source_labels": [
                    "__meta_kubernetes_pod_label_app_kubernetes_io_name",
                    "__meta_kubernetes_pod_container_port_name",
                ],
                "regex": f"{app};{port}",
                "action": "keep",
            },
            {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
        ],
        **({"metric_relabel_configs": [keep(kept)]} if kept is not None else {}),
    }


def scrape_configuration(metrics: Metrics, karpenter_settings: Karpenter, rules: Mapping[str, Any]) -> dict[str, Any]:
    """Each job where the stack deploys its component (components/metrics/exporters.py in the metrics namespace, the
    Karpenter controller's release in Karpenter's), by the pod label and port name the component's builder gives it;
    kube-state-metrics and Karpenter keeping the metrics the rule file `rules` (recording_rules.rule_groups) reads."""
    read = read_by_job(rules)
    return {
        "global": {"scrape_interval": f"{SCRAPE_INTERVAL_SECONDS}s"},
        "scrape_configs": [
            _pods(
                dcgm_exporter.NAME,
                metrics.namespace,
                dcgm_exporter.LABELS[APP],
                dcgm_exporter.METRICS_PORT_NAME,
                own_labels=True,
            ),
            _pods(
                kube_state_metrics.NAME,
                metrics.namespace,
                kube_state_metrics.LABELS[APP],
                kube_state_metrics.METRICS_PORT_NAME,
                own_labels=True,
                kept=read[kube_state_metrics.NAME],
            ),
            _pods(
                karpenter.RELEASE,
                karpenter_settings.namespace,
                karpenter.POD_NAME_LABEL,
                karpenter.METRICS_PORT_NAME,
                own_labels=False,
                kept=read[karpenter.RELEASE],
            ),
        ],
    }
