"""Pure builders of kube-state-metrics, for the lab and the phase of every learner's pod: the objects of
kubernetes/kube-state-metrics v2.20.0 examples/standard, narrowed to pods.

Its pod metrics give each learner's pod its lab (kube_pod_nodeselectors, opt-in: the learner pod's node selector
names the lab, components/learner_pod.py), its phase (kube_pod_status_phase: pending learners), its start time and, on
JupyterHub's pods, the learner's name (kube_pod_annotations of KubeSpawner 7.0.0's hub.jupyter.org/username and
/servername annotations, spawner.py _build_common_annotations), which the idle-GPU culler stops servers by.
"""

from typing import Any

from components.labels import LAB_LABEL, SYSTEM_NODE_SELECTOR
from components.security import unprivileged
from domain.upstream.versions import KUBE_STATE_METRICS_IMAGE

NAME = "kube-state-metrics"
METRICS_PORT = 8080
METRICS_PORT_NAME = "http-metrics"
LABELS = {"app.kubernetes.io/name": NAME}
USERNAME_ANNOTATION = "hub.jupyter.org/username"
SERVERNAME_ANNOTATION = "hub.jupyter.org/servername"
ARGS = [
    "--resources=pods",
    "--metric-opt-in-list=kube_pod_nodeselectors",
    f"--metric-annotations-allowlist=pods=[{USERNAME_ANNOTATION},{SERVERNAME_ANNOTATION}]",
]


def prometheus_label(prefix: str, key: str) -> str:
    """The label kube-state-metrics makes of a Kubernetes key: every character outside [a-zA-Z0-9_] becomes `_`."""
    return prefix + "".join(c if c.isalnum() or c == "_" else "_" for c in key)


LAB_SELECTOR = prometheus_label("nodeselector_", LAB_LABEL)
USERNAME = prometheus_label("annotation_", USERNAME_ANNOTATION)
SERVERNAME = prometheus_label("annotation_", SERVERNAME_ANNOTATION)


def _metadata(namespace: str | None = None) -> dict[str, Any]:
    return {"name": NAME, "labels": dict(LABELS)} | ({"namespace": namespace} if namespace else {})


def service_account(namespace: str) -> dict[str, Any]:
    return {"metadata": _metadata(namespace)}


def cluster_role() -> dict[str, Any]:
    # examples/standard/cluster-role.yaml lists every resource it can read; --resources=pods reads pods alone.
    return {"metadata": _metadata(), "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]}


def cluster_role_binding(namespace: str) -> dict[str, Any]:
    return {
        "metadata": _metadata(),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
    }


def deployment(namespace: str) -> dict[str, Any]:
    container = {
        "name": NAME,
        "image": KUBE_STATE_METRICS_IMAGE,
        "args": ARGS,
        "ports": [
            {"containerPort": METRICS_PORT, "name": METRICS_PORT_NAME},
            {"containerPort": 8081, "name": "telemetry"},
        ],
        "livenessProbe": {
            "httpGet": {"path": "/livez", "port": METRICS_PORT_NAME},
            "initialDelaySeconds": 5,
            "timeoutSeconds": 5,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "telemetry"},
            "initialDelaySeconds": 5,
            "timeoutSeconds": 5,
        },
        # The README's "Resource recommendation" at v2.20.0 (for all its resources; gpulab reads pods only), and no CPU
        # limit, which it warns lets its queues and memory grow.
        "resources": {"requests": {"cpu": "100m", "memory": "250Mi"}},
        "securityContext": unprivileged() | {"seccompProfile": {"type": "RuntimeDefault"}},
    }
    return {
        "metadata": _metadata(namespace),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "automountServiceAccountToken": True,
                    "serviceAccountName": NAME,
                    # The system nodes, never a GPU node that Karpenter would keep for it.
                    "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
                    "containers": [container],
                },
            },
        },
    }
