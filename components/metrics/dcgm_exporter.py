"""Pure builders of NVIDIA dcgm-exporter on the lab nodes: the objects the NVIDIA/dcgm-exporter chart at 4.5.3-4.8.2
(deployment/templates) installs, with gpulab's settings, written here because no copy of that chart reaches an offline
render (docs/metrics.md says where the chart's own render is compared, tests/test_metrics_exporters.py).

Per-pod GPU use under time-slicing: with --kubernetes-virtual-gpus (KUBERNETES_VIRTUAL_GPUS) the exporter maps each
shared GPU replica the device plugin handed out to its pod (kubelet's pod-resources API) and, from 4.5.3-4.8.2 on
(PR #594), reports DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED per pod from NVML's per-process samples, the processes
mapped to pods by their cgroups in /proc, so it needs the host's PIDs (hostPID); a pod with no GPU process reads 0
(internal/pkg/transformation/kubernetes.go, process_metrics.go, pidmapper.go). Other fields are the whole GPU's, copied
to every pod that shares it (#587, #642).

One DCGM host engine per node: the EKS node monitoring agent's dcgm-server runs `nv-hostengine -n -b ALL` on host port
5555 (aws/eks-node-monitoring-agent v1.6.1, templates/dcgm-daemonset.yaml). An exporter that embedded its own host
engine beside it would fail to initialise some DCGM modules (NVIDIA's maintainer in NVIDIA/dcgm-exporter#61), so it
connects to the node's (`-r <node IP>:5555`) and runs only where the dcgm-server runs.
"""

from typing import Any

from components.labels import GPU_PRESENT_LABEL, GPU_TOLERATION
from domain.capacity.daemonsets import DCGM_EXPORTER, DCGM_EXPORTER_RESOURCES, DCGM_SERVER
from domain.upstream.versions import DCGM_EXPORTER_IMAGE

NAME = DCGM_EXPORTER
METRICS_PORT = 9400
# The dcgm-server's host port (nv-hostengine's default port).
HOST_ENGINE_PORT = 5555
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


def service_account(namespace: str) -> dict[str, Any]:
    # The exporter reads kubelet's socket, not the API: the account gets no token (the chart mounts one only for pod
    # labels or UIDs, templates/daemonset.yaml automountServiceAccountToken).
    return {"metadata": _metadata(namespace), "automount_service_account_token": False}


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
        "priorityClassName": "system-node-critical",
        "hostPID": True,
        # Lab nodes only: the device plugin's label, which every GPU NodePool puts on its nodes.
        "nodeSelector": {"kubernetes.io/os": "linux", GPU_PRESENT_LABEL: "true"},
        "affinity": _where_the_host_engine_runs(),
        "tolerations": [dict(GPU_TOLERATION)],
        "containers": [
            {
                "name": "exporter",
                "image": DCGM_EXPORTER_IMAGE,
                # Kubernetes expands $(NODE_IP) from the container's env.
                "args": ["-f", COUNTERS_FILE, "-r", f"$(NODE_IP):{HOST_ENGINE_PORT}"],
                "env": env,
                "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
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
