"""gpulab:metrics:Exporters, what the GPU meter runs in the cluster: NVIDIA dcgm-exporter on the lab nodes and
kube-state-metrics on the system nodes, in a namespace of their own."""

import pulumi
import pulumi_kubernetes as k8s

from components.metrics import dcgm_exporter, kube_state_metrics
from components.namespace import namespace_dependencies
from domain.stack.metrics import Metrics

TYPE = "gpulab:metrics:Exporters"


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
        daemonset = dcgm_exporter.daemonset(ns)
        k8s.apps.v1.DaemonSet(f"{name}-dcgm-exporter", **daemonset, opts=inside)

        k8s.core.v1.ServiceAccount(f"{name}-kube-state-metrics", **kube_state_metrics.service_account(ns), opts=inside)
        role = kube_state_metrics.cluster_role()
        k8s.rbac.v1.ClusterRole(f"{name}-kube-state-metrics", **role, opts=child)
        binding = kube_state_metrics.cluster_role_binding(ns)
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-kube-state-metrics",
            metadata=binding["metadata"],
            role_ref=binding["roleRef"],
            subjects=binding["subjects"],
            opts=child,
        )
        k8s.apps.v1.Deployment(f"{name}-kube-state-metrics", **kube_state_metrics.deployment(ns), opts=inside)
        self.register_outputs({})
