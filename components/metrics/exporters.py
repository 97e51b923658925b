"""gpulab:metrics:Exporters, what the GPU meter runs in the cluster: NVIDIA dcgm-exporter on the lab nodes and
kube-state-metrics on the system nodes, in a namespace of their own."""

import pulumi
import pulumi_kubernetes as k8s

from components.metrics import dcgm_exporter, kube_state_metrics
from components.namespace import namespace_dependencies
from domain.stack.metrics import Metrics

TYPE = "gpulab:metrics:Exporters"


def _cluster_role(name: str, role: dict, binding: dict, opts: pulumi.ResourceOptions) -> None:
    k8s.rbac.v1.ClusterRole(name, **role, opts=opts)
    k8s.rbac.v1.ClusterRoleBinding(
        name, metadata=binding["metadata"], role_ref=binding["roleRef"], subjects=binding["subjects"], opts=opts
    )


class Exporters(pulumi.ComponentResource):
    def __init__(
        self, name: str, settings: Metrics, provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        namespace = namespace_dependencies(f"{name}-namespace", settings.namespace, child)
        inside = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=namespace))
        ns = settings.namespace

        account = dcgm_exporter.service_account(ns)
        k8s.core.v1.ServiceAccount(f"{name}-dcgm-exporter", **account, opts=inside)
        counters = dcgm_exporter.counters(ns)
        k8s.core.v1.ConfigMap(f"{name}-dcgm-exporter", **counters, opts=inside)
        # Its pod informer's right to list and watch pods, the only API use on gpulab's path (dcgm_exporter.py).
        _cluster_role(
            f"{name}-dcgm-exporter", dcgm_exporter.cluster_role(), dcgm_exporter.cluster_role_binding(ns), child
        )
        daemonset = dcgm_exporter.daemonset(ns)
        k8s.apps.v1.DaemonSet(f"{name}-dcgm-exporter", **daemonset, opts=inside)

        k8s.core.v1.ServiceAccount(f"{name}-kube-state-metrics", **kube_state_metrics.service_account(ns), opts=inside)
        _cluster_role(
            f"{name}-kube-state-metrics",
            kube_state_metrics.cluster_role(),
            kube_state_metrics.cluster_role_binding(ns),
            child,
        )
        k8s.apps.v1.Deployment(f"{name}-kube-state-metrics", **kube_state_metrics.deployment(ns), opts=inside)
        self.register_outputs({})
