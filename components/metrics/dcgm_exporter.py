"""Pure builders of NVIDIA dcgm-exporter on the lab nodes: the objects the NVIDIA/dcgm-exporter chart at 4.5.3-4.8.2
(deployment/templates) installs, with gpulab's settings, written here because no copy of that chart reaches an offline
render (docs/metrics.md says where the chart's own render is compared, tests/test_metrics_exporters.py).

Per-pod GPU use under time-slicing: with --kubernetes-virtual-gpus (KUBERNETES_VIRTUAL_GPUS) the exporter maps each
shared GPU replica the device plugin handed out to its pod (kubelet's pod-resources API) and, from 4.5.3-4.8.2 on
(PR #594), reports DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED per pod from NVML's per-process samples, the processes
mapped to pods by their cgroups in /proc, so it needs the host's PIDs (hostPID); a pod with no GPU process reads 0
(internal/pkg/transformation/kubernetes.go, process_metrics.go, pidmapper.go). Other fields are the whole GPU's, copied
to every pod that shares it (#587, #642).

The API server, for each pod's UID: kubelet's answer names pods without their UID (k8s.io/kubelet v0.36.0
pkg/apis/podresources/v1/api.proto:34-38), and the exporter matches a process's cgroup to a pod by UID. At 4.5.3-4.8.2
(commit 691c927) the UID comes only from a pod informer that NewPodMapper builds from the in-cluster configuration, the
service account's token (internal/pkg/transformation/kubernetes.go:109-112, 124-140; createPodInfo :920-946); with no
token, or a token without the right to list pods, every UID is "", pidmapper.go:83-88 maps no process to any pod, and
buildIdlePodValues (kubernetes.go:271-279) gives every pod 0 with pod_uid="": every seat would read idle. So the
account's token is mounted and a ClusterRole lets it list and watch pods (cluster_role), nothing more.

One DCGM host engine per node: the EKS node monitoring agent's dcgm-server runs `nv-hostengine -n -b ALL` on host port
5555 (aws/eks-node-monitoring-agent v1.6.1, templates/dcgm-daemonset.yaml). An exporter that embedded its own host
engine beside it would fail to initialise some DCGM modules (NVIDIA's maintainer in NVIDIA/dcgm-exporter#61), so it
connects to the node's (`-r <node IP>:5555`) and runs only where the dcgm-server runs. On the host's network: the lab
nodes' host firewall drops every connection a pod on the pod network opens to its node
(components/karpenter/host_firewall.py), the host port among them; the node's own processes reach it through the
loopback, as the node monitoring agent does. Its metrics port is then the node's, which the same firewall closes to
the learners on the node and their policies to every other.
"""

from typing import Any

from components.labels import GPU_PRESENT_LABEL, GPU_TOLERATION
from domain.capacity.daemonsets import DCGM_EXPORTER, DCGM_EXPORTER_RESOURCES, DCGM_SERVER
from domain.upstream.node_listeners import DCGM_PORT
from domain.upstream.versions import DCGM_EXPORTER_IMAGE

NAME = DCGM_EXPORTER
METRICS_PORT = 9400
COUNTERS_FILE = "/etc/dcgm-exporter/gpulab-counters.csv"
# The fields gpulab reads, in the exporter's CSV format (etc/default-counters.csv): few, since the workspace bills by
# samples ingested. GPU_UTIL and FB_USED are the two it attributes per pod.
COUNTERS = """\
DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
"""
LABELS = {"app.kubernetes.io/name": NAME}


def _metadata(namespace: str) -> dict[str, Any]:
    return {"name": NAME, "namespace": namespace, "labels": dict(LABELS)}


# The chart's name for its role on pods (deployment/templates/clusterrole.yaml:5, `<fullname>-read-pods`).
READ_PODS = f"{NAME}-read-pods"
METRICS_PORT_NAME = "metrics"


def service_account(namespace: str) -> dict[str, Any]:
    # The token the pod informer authenticates with (kubernetes.go:109, rest.InClusterConfig reads
    # /var/run/secrets/kubernetes.io/serviceaccount/token): the chart mounts it when it reads pod UIDs or labels
    # (deployment/templates/serviceaccount.yaml:27, daemonset.yaml:61).
    return {"metadata": _metadata(namespace), "automount_service_account_token": True}


def cluster_role() -> dict[str, Any]:
    """What the exporter asks of the API server at 4.5.3-4.8.2 on gpulab's path, and nothing else: a shared informer on
    pods of every namespace, narrowed to the node by a field selector (kubernetes.go:124-140), i.e. list and watch at
    cluster scope; the lister reads the informer's cache (kubernetes.go:926), so no get is ever sent. The chart's role
    also grants get, and resourceslices (clusterrole.yaml:9-11), which only --kubernetes-enable-dra reads
    (kubernetes.go:142-150, dra.go:43); the exporter reads no nodes, and its only other API call, a ConfigMap get for
    `-m` (counters/counter_config.go:173), gpulab does not make (it passes `-f`)."""
    return {
        "metadata": {"name": READ_PODS, "labels": dict(LABELS)},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}],
    }


def cluster_role_binding(namespace: str) -> dict[str, Any]:
    # deployment/templates/clusterrolebinding.yaml: the role to the exporter's service account.
    return {
        "metadata": {"name": READ_PODS, "labels": dict(LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READ_PODS},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
    }


def counters(namespace: str) -> dict[str, Any]:
    return {"metadata": _metadata(namespace), "data": {"counters.csv": COUNTERS}}


def _where_the_host_engine_runs() -> dict[str, Any]:
    # The dcgm-server's own node affinity (domain/capacity/daemonsets.py), so that every exporter has a host engine to
    # read.
    return {"nodeAffinity": dict(DCGM_SERVER.pod_spec["affinity"]["nodeAffinity"])}


def pod_spec() -> dict[str, Any]:
    env = [
        {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
        {"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"},
        {"name": "DCGM_EXPORTER_LISTEN", "value": f":{METRICS_PORT}"},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
    ]
    health = {"path": "/health", "port": METRICS_PORT, "scheme": "HTTP"}
    probe = {"httpGet": health, "initialDelaySeconds": 45, "periodSeconds": 5}
    return {
        "serviceAccountName": NAME,
        # The chart's pod sets it as its service account does (daemonset.yaml:61): the pod informer's token.
        "automountServiceAccountToken": True,
        "priorityClassName": "system-node-critical",
        "hostPID": True,
        # The host engine's port on the node's own address, which the host firewall closes to the pod network. With the
        # chart's DNS policy for it (deployment/templates/daemonset.yaml:52-54): the cluster's DNS, not the node's.
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        # Lab nodes only: the device plugin's label, which every GPU NodePool puts on its nodes.
        "nodeSelector": {"kubernetes.io/os": "linux", GPU_PRESENT_LABEL: "true"},
        "affinity": _where_the_host_engine_runs(),
        "tolerations": [dict(GPU_TOLERATION)],
        "containers": [
            {
                "name": "exporter",
                "image": DCGM_EXPORTER_IMAGE,
                # Kubernetes expands $(NODE_IP) from the container's env.
                "args": ["-f", COUNTERS_FILE, "-r", f"$(NODE_IP):{DCGM_PORT}"],
                "env": env,
                "ports": [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT}],
                # The chart's securityContext less SYS_ADMIN, which only profiling fields (DCGM_FI_PROF_*) need and
                # the host engine, not the exporter, reads.
                "securityContext": {
                    "runAsNonRoot": False,
                    "runAsUser": 0,
                    "capabilities": {"drop": ["ALL"]},
                    "allowPrivilegeEscalation": False,
                },
                "resources": DCGM_EXPORTER_RESOURCES,
                "volumeMounts": [
                    {"name": "pod-gpu-resources", "readOnly": True, "mountPath": "/var/lib/kubelet/pod-resources"},
                    {"name": "counters", "mountPath": COUNTERS_FILE, "subPath": "counters.csv"},
                ],
                "livenessProbe": probe,
                "readinessProbe": {"httpGet": probe["httpGet"], "initialDelaySeconds": 45},
            }
        ],
        "volumes": [
            {"name": "pod-gpu-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}},
            {"name": "counters", "configMap": {"name": NAME}},
        ],
    }


def daemonset(namespace: str) -> dict[str, Any]:
    return {
        "metadata": _metadata(namespace),
        "spec": {
            "selector": {"matchLabels": dict(LABELS)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod_spec()},
        },
    }
