"""Pod specs as the cluster sees them in stored objects: where each kind keeps its pod template, the requests Karpenter
sizes a pod by, and the restricted Pod Security profile's checks.

Kubernetes fills a Pod's missing requests from its limits when the Pod is created (SetDefaults_Pod, kubernetes
pkg/apis/core/v1/defaults.go), never a pod template's; Karpenter builds a CapacityBuffer's pods from the PodTemplate as
stored (kubernetes-sigs/karpenter pkg/state/virtualpods/utilities.go) and sizes every pod by requests alone
(pkg/utils/resources: RequestsForPods, Ceiling: the containers' requests summed, at least each init container's).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from domain.capacity.quantity import quantity

# Where each kind that stores a pod spec keeps it.
_POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def pod_spec(manifest: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod spec a manifest stores, or None for a kind that stores none."""
    path = _POD_SPEC_PATHS.get(manifest.get("kind", ""))
    if path is None:
        return None
    node: Any = manifest
    for key in path:
        node = node[key]
    return node


def pod_specs(manifests: list[Mapping[str, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(`<kind>/<namespace>/<name>`, pod spec) of every manifest that stores one."""
    for manifest in manifests:
        spec = pod_spec(manifest)
        if spec is not None:
            meta = manifest["metadata"]
            yield f"{manifest['kind']}/{meta.get('namespace', '')}/{meta['name']}", spec


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def karpenter_requests(spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """What Karpenter sizes a pod of this spec by: the containers' requests summed, at least each init container's.
    Limits never count: as stored, a template's requests are all there is."""
    total: dict[str, Fraction] = {}
    for container in spec["containers"]:
        for name, value in container.get("resources", {}).get("requests", {}).items():
            total[name] = total.get(name, Fraction(0)) + quantity(str(value))
    for container in spec.get("initContainers", []):
        for name, value in container.get("resources", {}).get("requests", {}).items():
            total[name] = max(total.get(name, Fraction(0)), quantity(str(value)))
    return total


def limits_without_requests(spec: Mapping[str, Any]) -> list[str]:
    """Resources a container limits but does not request: a template stored so reserves none of them."""
    return [
        f"{container['name']}: {name}"
        for container in _containers(spec)
        for name in container.get("resources", {}).get("limits", {})
        if name not in container.get("resources", {}).get("requests", {})
    ]


# The restricted profile, latest version, as k8s.io/pod-security-admission enforces it (policy/check_*.go at
# kubernetes-1.34.1): the baseline checks, then the restricted ones.
_RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip
_SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
}  # fmt: skip
_SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
_SECCOMP_ALLOWED = {"RuntimeDefault", "Localhost"}


def restricted_problems(spec: Mapping[str, Any]) -> list[str]:
    """Why the restricted Pod Security profile refuses a pod of this spec; empty when it admits it."""
    pod_context = spec.get("securityContext", {})
    containers = _containers(spec)
    problems = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    problems += [
        f"volume {volume['name']} is not of a type the profile allows"
        for volume in spec.get("volumes", [])
        if not set(volume) - {"name"} <= _RESTRICTED_VOLUMES
    ]
    problems += [
        f"sysctl {sysctl['name']} is not a safe one"
        for sysctl in pod_context.get("sysctls", [])
        if sysctl["name"] not in _SAFE_SYSCTLS
    ]
    for where, context in [("pod", pod_context)] + [(c["name"], c.get("securityContext", {})) for c in containers]:
        if context.get("windowsOptions", {}).get("hostProcess"):
            problems.append(f"{where}: hostProcess")
        selinux = context.get("seLinuxOptions", {})
        if selinux.get("type", "") not in _SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            problems.append(f"{where}: seLinuxOptions")
        if context.get("seccompProfile", {}).get("type") not in (None, *_SECCOMP_ALLOWED):
            problems.append(f"{where}: seccompProfile {context['seccompProfile']['type']}")
        if context.get("appArmorProfile", {}).get("type") == "Unconfined":
            problems.append(f"{where}: appArmorProfile Unconfined")
        if context.get("runAsUser") == 0:
            problems.append(f"{where}: runAsUser 0")
        if context.get("runAsNonRoot") is False:
            problems.append(f"{where}: runAsNonRoot false")
    for container in containers:
        name, context = container["name"], container.get("securityContext", {})
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            problems.append(f"{name}: hostPort")
        if context.get("procMount", "Default") != "Default":
            problems.append(f"{name}: procMount")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation != false")
        if not (context.get("runAsNonRoot") or (pod_context.get("runAsNonRoot") and "runAsNonRoot" not in context)):
            problems.append(f"{name}: runAsNonRoot != true (pod or container)")
        if (context.get("seccompProfile") or pod_context.get("seccompProfile", {})).get("type") not in _SECCOMP_ALLOWED:
            problems.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost (pod or container)")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            problems.append(f"{name}: capabilities must drop ALL")
        if not set(capabilities.get("add", [])) <= {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: adds capabilities other than NET_BIND_SERVICE")
    return problems
