"""Pure builder of the AWS managed scraper's configuration: what it scrapes from the cluster, every 30 s.

The scraper finds its targets with Kubernetes service discovery (the only discovery it supports) and reaches pods by
their IP addresses through its network interfaces in the cluster's subnets (AMP User Guide, AMP-collector-how-to,
"Scraper configuration"). Three jobs: dcgm-exporter on the lab nodes, kube-state-metrics, and Karpenter's controller.
"""

from typing import Any

from components.karpenter import controller as karpenter
from components.metrics import dcgm_exporter, kube_state_metrics
from domain.stack.metrics import SCRAPE_INTERVAL_SECONDS, Metrics
from domain.stack.model import Karpenter

APP = "app.kubernetes.io/name"


def _pods(job: str, namespace: str, app: str, port: str, *, own_labels: bool) -> dict[str, Any]:
    """A job over the pods of `namespace` labelled app.kubernetes.io/name=<app>, at their container port `port`."""
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
    }


def scrape_configuration(metrics: Metrics, karpenter_settings: Karpenter) -> dict[str, Any]:
    """Each job where the stack deploys its component (components/metrics/exporters.py in the metrics namespace, the
    Karpenter controller's release in Karpenter's), by the pod label and port name the component's builder gives it."""
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
            ),
            _pods(
                karpenter.RELEASE,
                karpenter_settings.namespace,
                karpenter.POD_NAME_LABEL,
                karpenter.METRICS_PORT_NAME,
                own_labels=False,
            ),
        ],
    }
