"""Pure builder of the AWS managed scraper's configuration: what it scrapes from the cluster, every 30 s.

The scraper finds its targets with Kubernetes service discovery (the only discovery it supports) and reaches pods by
their IP addresses through its network interfaces in the cluster's subnets (AMP User Guide, AMP-collector-how-to,
"Scraper configuration"). Three jobs: dcgm-exporter on the lab nodes, kube-state-metrics, and Karpenter's controller.
"""

from typing import Any

from components.karpenter.controller import RELEASE as KARPENTER
from components.metrics import dcgm_exporter, kube_state_metrics
from domain.stack.metrics import SCRAPE_INTERVAL_SECONDS

# Karpenter's chart names its controller's pods and its metrics port so (charts/karpenter/templates/_helpers.tpl
# karpenter.selectorLabels, templates/deployment.yaml: containerPort controller.metrics.port, named http-metrics).
KARPENTER_PORT = "http-metrics"


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


def scrape_configuration(metrics_namespace: str, karpenter_namespace: str) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": f"{SCRAPE_INTERVAL_SECONDS}s"},
        "scrape_configs": [
            _pods(dcgm_exporter.NAME, metrics_namespace, dcgm_exporter.NAME, "metrics", own_labels=True),
            _pods(
                kube_state_metrics.NAME,
                metrics_namespace,
                kube_state_metrics.NAME,
                "http-metrics",
                own_labels=True,
            ),
            _pods(KARPENTER, karpenter_namespace, KARPENTER, KARPENTER_PORT, own_labels=False),
        ],
    }
