"""The DaemonSets that run on a lab's GPU nodes, and what each of their pods requests.

Karpenter 1.14.1 sizes a node it would launch by its allocatable less the requests of every DaemonSet pod that would
run there (kubernetes-sigs/karpenter pkg/controllers/provisioning: getDaemonSetPods in provisioner.go, the daemon
overhead of each NodeClaim template in scheduling/nodeclaim.go), each pod sized by pkg/utils/resources `Ceiling`,
which is k8s.io/component-helpers `resource.PodRequests`: the sum of its containers' requests, or its largest init
container's if larger (a restartable init container counts in both). A DaemonSet lands where its tolerations, node
selector and node affinity admit the node: every EKS add-on below tolerates every taint, the GPU taint
`nvidia.com/gpu:NoSchedule` included; the dcgm-server tolerates it only because gpulab configures it to
(components/cluster.py). tests/test_daemonsets.py checks each placement with the scheduling predicate against the
rendered lab nodes, and the chart's DaemonSets against `helm template` of the pinned chart; tests/test_addon_sources.py
checks the add-ons against their sources.

Requests are exact: CPU in cores, memory in bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.quantity import quantity
from domain.capacity.sharing import Sharing
from domain.upstream.versions import builds, one_release


class ContainerResources(Protocol):
    """The device plugin's resources setting (domain.stack.model.DevicePluginResources)."""

    @property
    def cpu(self) -> str: ...
    @property
    def memory(self) -> str: ...


@dataclass(frozen=True)
class DaemonSetRequests:
    name: str  # as the DaemonSet is named in the cluster
    cpu: Fraction  # cores
    memory: Fraction  # bytes

    def describe(self) -> str:
        return f"{self.name} {cpu_text(self.cpu)}/{memory_text(self.memory)}"


def cpu_text(cores: Fraction, /) -> str:
    millis = cores * 1000
    return f"{millis.numerator}m" if millis.denominator == 1 else f"{float(millis):g}m"


def memory_text(size: Fraction, /) -> str:
    mib = size / 2**20
    return f"{mib.numerator}Mi" if mib.denominator == 1 else f"{float(mib):g}Mi"


def _container_requests(container: Mapping[str, Any]) -> tuple[Fraction, Fraction]:
    resources = container.get("resources") or {}
    # A DaemonSet's pods are Pods: the API server fills a missing request from its limit (SetDefaults_Pod), and
    # Karpenter reads a running pod of the DaemonSet once there is one, its template before (getDaemonSetPods). Every
    # DaemonSet counted here requests what it limits, so both give the same.
    requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return quantity(str(requests.get("cpu", "0"))), quantity(str(requests.get("memory", "0")))


def pod_requests(pod_spec: Mapping[str, Any]) -> tuple[Fraction, Fraction]:
    """CPU (cores) and memory (bytes) a pod with this spec requests, as Kubernetes and Karpenter count them."""
    cpu = memory = Fraction(0)
    for container in pod_spec.get("containers") or []:
        c, m = _container_requests(container)
        cpu, memory = cpu + c, memory + m
    init_cpu = init_memory = sidecar_cpu = sidecar_memory = Fraction(0)
    for container in pod_spec.get("initContainers") or []:
        c, m = _container_requests(container)
        if container.get("restartPolicy") == "Always":  # a sidecar: runs beside the containers and later inits
            sidecar_cpu, sidecar_memory = sidecar_cpu + c, sidecar_memory + m
            cpu, memory = cpu + c, memory + m
            c, m = Fraction(0), Fraction(0)
        init_cpu, init_memory = max(init_cpu, sidecar_cpu + c), max(init_memory, sidecar_memory + m)
    return max(cpu, init_cpu), max(memory, init_memory)


# The NVIDIA device plugin chart (NVIDIA/k8s-device-plugin v0.20.0, deployments/helm/nvidia-device-plugin) gives the
# chart's `resources` value to the plugin container and, on MPS nodes, to the MPS control daemon's container and its
# mount-shm init container; its config-manager containers request nothing. gpulab passes these resources (one memory
# figure as request and limit; no CPU limit, since a throttled plugin answers kubelet late).
def device_plugin_resources(resources: ContainerResources) -> dict[str, dict[str, str]]:
    """The chart's `resources` value for the device plugin's settings: what components/nvidia passes to Helm."""
    return {"requests": {"cpu": resources.cpu, "memory": resources.memory}, "limits": {"memory": resources.memory}}


@dataclass(frozen=True)
class DevicePluginDefaults:
    """nvidiaDevicePlugin.resources when a stack leaves it out (domain.stack.model.DevicePluginResources)."""

    cpu: str = "50m"
    memory: str = "128Mi"


DEVICE_PLUGIN_DEFAULTS = DevicePluginDefaults()

# The chart's DaemonSets as its templates name them for gpulab's release (fullname = the release name,
# components/nvidia/device_plugin.py).
DEVICE_PLUGIN = "nvidia-device-plugin"
MPS_CONTROL_DAEMON = "nvidia-device-plugin-mps-control-daemon"


@dataclass(frozen=True)
class AddonDaemonSet:
    """A DaemonSet an EKS add-on installs: its pod spec's placement and requests as its source has them."""

    name: str
    source: str
    pod_spec: Mapping[str, Any]
    architectures: frozenset[str]  # the CPU architectures of the lab nodes it lands on
    instance_types: frozenset[str] | None = None  # the only instance types it lands on, when it names them

    def lands_on(self, instance_type: str) -> bool:
        info = GPU_INSTANCE_TYPES[instance_type]
        return info.architecture in self.architectures and (
            self.instance_types is None or instance_type in self.instance_types
        )

    # Cached: every lab's node of every instance type counts the same few add-ons.
    @functools.cached_property
    def requests(self) -> DaemonSetRequests:
        return DaemonSetRequests(self.name, *pod_requests(self.pod_spec))


def _affinity(*expressions: Mapping[str, Any]) -> dict[str, Any]:
    terms = [{"matchExpressions": list(expressions)}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def _requests(**requests: str) -> dict[str, Any]:
    return {"resources": {"requests": requests}} if requests else {}


TOLERATE_EVERYTHING = [{"operator": "Exists"}]
_LINUX = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
_BOTH_ARCHES = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}
_NOT_FARGATE_HYBRID_AUTO = {
    "key": "eks.amazonaws.com/compute-type",
    "operator": "NotIn",
    "values": ["fargate", "hybrid", "auto"],
}
_NOT_HYPERPOD = {"key": "sagemaker.amazonaws.com/compute-type", "operator": "NotIn", "values": ["hyperpod"]}
_BOTH = frozenset({"amd64", "arm64"})

# What is read below of the node monitoring agent is its chart at the one release every pinned build is made from.
_NMA = one_release("eks-node-monitoring-agent")
_NMA_BUILDS = builds("eks-node-monitoring-agent")

# The dcgm-server's node affinity at v1.6.1 lists these of gpulab's instance types: all but the g7 and g7e families
# (charts/eks-node-monitoring-agent/values.yaml, dcgmAgent.affinity; its list gained g7e at v1.6.2 and g7 at v1.6.7,
# releases gpulab does not pin: domain/upstream/versions.py). On those nodes no DCGM server runs, and the agent reports
# DCGMError (monitors/nvidia/dcgm/dcgm_reconcile.go; e2e/suites/monitors/nvidia_monitor.go at v1.6.1 removes the
# dcgm-server to provoke it). The add-on takes no dcgmAgent.affinity at v1.6.1 (charts/configuration.schema.json,
# DCGMAgent: podAnnotations, podLabels, resources, resizePolicy, tolerations), so gpulab cannot add them.
_DCGM_INSTANCE_TYPES = frozenset(name for name in GPU_INSTANCE_TYPES if name.split(".")[0] not in ("g7", "g7e"))

# Upstream's dcgmAgent.tolerations are empty: gpulab's add-on configuration adds the GPU toleration
# (components/cluster.py), and the tests place this spec with the tolerations the program really passes.
DCGM_SERVER = AddonDaemonSet(
    "dcgm-server",
    f"EKS add-on eks-node-monitoring-agent {_NMA_BUILDS}: aws/eks-node-monitoring-agent {_NMA} "
    "charts/eks-node-monitoring-agent/values.yaml, dcgmAgent (resources: {})",
    {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": _affinity(
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": sorted(_DCGM_INSTANCE_TYPES)},
            _NOT_FARGATE_HYBRID_AUTO,
            _NOT_HYPERPOD,
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        ),
        "containers": [{"name": "eks-node-monitoring-agent-dcgm"}],
    },
    frozenset({"amd64"}),
    _DCGM_INSTANCE_TYPES,
)

# The agent checks NVIDIA GPUs through the DCGM host engine on amd64 nodes only: on arm64 it leaves every DCGM check off
# (outside EKS Auto Mode) "until a dcgm-server manifest that contains arm64 images can be provided"
# (monitors/nvidia/monitor.go 82-86 at v1.6.1), so an arm64 node does not miss the host engine it lacks.
DCGM_CHECKED_ARCHITECTURES = frozenset({"amd64"})


def no_host_engine(instance_types: Iterable[str]) -> str | None:
    """Which of these instance types' nodes run no DCGM host engine, as the refusals that need one say it (the GPU
    meter's, node repair's); None when every one runs it."""
    without = sorted(t for t in instance_types if not DCGM_SERVER.lands_on(t))
    if not without:
        return None
    return (
        f"{', '.join(without)} nodes run no DCGM host engine: the EKS node monitoring agent {_NMA_BUILDS} runs its "
        "dcgm-server only on amd64 nodes of the instance types its node affinity lists"
    )


EKS_ADDON_DAEMONSETS: tuple[AddonDaemonSet, ...] = (
    # No public manifest of the kube-proxy add-on at a pinned version gives its requests. The DaemonSet EKS installs
    # requests 100m CPU and no memory and tolerates every taint, as captured from a cluster in eksctl-io/eksctl
    # pkg/addons/default/testdata/sample-1.25.json (v0.230.0): the figure used here, unconfirmed for 1.34.
    AddonDaemonSet(
        "kube-proxy",
        "EKS add-on kube-proxy (per Kubernetes version, domain/upstream/versions.py): no public manifest at the pinned "
        "versions; as EKS installed it for Kubernetes 1.25, eksctl-io/eksctl "
        "pkg/addons/default/testdata/sample-1.25.json, v0.230.0",
        {
            "tolerations": TOLERATE_EVERYTHING,
            "affinity": _affinity(
                _LINUX,
                _BOTH_ARCHES,
                {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["fargate"]},
            ),
            "containers": [{"name": "kube-proxy", **_requests(cpu="100m")}],
        },
        _BOTH,
    ),
    AddonDaemonSet(
        "aws-node",
        f"EKS add-on vpc-cni {builds('vpc-cni')}: aws/amazon-vpc-cni-k8s {one_release('vpc-cni')} "
        "config/master/aws-k8s-cni.yaml",
        {
            "tolerations": TOLERATE_EVERYTHING,
            "affinity": _affinity(_LINUX, _BOTH_ARCHES, _NOT_FARGATE_HYBRID_AUTO),
            "initContainers": [{"name": "aws-vpc-cni-init", **_requests(cpu="25m")}],
            "containers": [
                {"name": "aws-node", **_requests(cpu="25m")},
                {"name": "aws-eks-nodeagent", **_requests(cpu="25m")},
            ],
        },
        _BOTH,
    ),
    # The add-on is built from the chart of aws/eks-pod-identity-agent, whose tags are agent versions, not add-on
    # versions: charts/eks-pod-identity-agent at v0.1.37 (resources: {} for the agent, none for its init).
    AddonDaemonSet(
        "eks-pod-identity-agent",
        f"EKS add-on eks-pod-identity-agent {builds('eks-pod-identity-agent')}: aws/eks-pod-identity-agent "
        "charts/eks-pod-identity-agent/values.yaml, v0.1.37",
        {
            "tolerations": TOLERATE_EVERYTHING,
            "affinity": _affinity(_LINUX, _BOTH_ARCHES, _NOT_FARGATE_HYBRID_AUTO),
            "initContainers": [{"name": "eks-pod-identity-agent-init"}],
            "containers": [{"name": "eks-pod-identity-agent"}],
        },
        _BOTH,
    ),
    AddonDaemonSet(
        "eks-node-monitoring-agent",
        f"EKS add-on eks-node-monitoring-agent {_NMA_BUILDS}: aws/eks-node-monitoring-agent {_NMA} "
        "charts/eks-node-monitoring-agent/values.yaml, nodeAgent",
        {
            "tolerations": TOLERATE_EVERYTHING,
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "affinity": _affinity(_NOT_FARGATE_HYBRID_AUTO, _NOT_HYPERPOD, _BOTH_ARCHES),
            "containers": [{"name": "eks-node-monitoring-agent", **_requests(cpu="10m", memory="30Mi")}],
        },
        _BOTH,
    ),
    DCGM_SERVER,
)


# The EBS CSI driver's node DaemonSet, which the aws-ebs-csi-driver add-on runs once gpulab:jupyterhub installs it
# (components/jupyterhub/hub.py): it tolerates every taint (node.tolerateAllTaints: true) and so lands on every lab
# node. Its containers request ebs-plugin 10m/40Mi (values.yaml node.resources) and node-driver-registrar and
# liveness-probe 10m/32Mi each (templates/_node.tpl, the defaults without sidecar resources), in
# kubernetes-sigs/aws-ebs-csi-driver v1.64.0 charts/aws-ebs-csi-driver, the newest tag read here: the chart of v1.66.0,
# from which the pinned add-on version is built, was not available, nor how the add-on differs from the chart.
EBS_CSI_NODE = AddonDaemonSet(
    "ebs-csi-node",
    f"EKS add-on aws-ebs-csi-driver {builds('aws-ebs-csi-driver')}: kubernetes-sigs/aws-ebs-csi-driver v1.64.0 "
    "charts/aws-ebs-csi-driver/values.yaml node.resources and templates/_node.tpl (sidecar defaults)",
    {
        "tolerations": TOLERATE_EVERYTHING,
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": _affinity(_NOT_FARGATE_HYBRID_AUTO),
        "containers": [
            {"name": "ebs-plugin", **_requests(cpu="10m", memory="40Mi")},
            {"name": "node-driver-registrar", **_requests(cpu="10m", memory="32Mi")},
            {"name": "liveness-probe", **_requests(cpu="10m", memory="32Mi")},
        ],
    },
    _BOTH,
)


# gpulab:metrics runs NVIDIA's dcgm-exporter on each lab node that has a DCGM host engine to read: the dcgm-server's
# nodes (components/metrics/dcgm_exporter.py gives it the dcgm-server's placement). Its container requests what the
# NVIDIA/dcgm-exporter chart at 4.5.3-4.8.2 gives it by default (deployment/values.yaml, resources), with the chart's
# memory limit; the API server keeps the requests as they are.
DCGM_EXPORTER = "dcgm-exporter"
DCGM_EXPORTER_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}


def node_daemonsets(
    instance_type: str, sharing: Sharing, plugin: ContainerResources, ebs_csi: bool, metrics: bool
) -> tuple[DaemonSetRequests, ...]:
    """Every DaemonSet pod on a lab's node of this instance type, with its requests; `ebs_csi` when the stack runs the
    EBS CSI driver (with JupyterHub), `metrics` when it runs dcgm-exporter (gpulab:metrics)."""
    plugin_pod = pod_requests({"containers": [{"resources": device_plugin_resources(plugin)}]})
    found = [DaemonSetRequests(DEVICE_PLUGIN, *plugin_pod)]
    # The MPS control daemon runs only where nvidia.com/mps.capable=true, which gpulab sets on every MPS lab's nodes.
    if sharing == "mps":
        found.append(DaemonSetRequests(MPS_CONTROL_DAEMON, *plugin_pod))
    addons = (*EKS_ADDON_DAEMONSETS, EBS_CSI_NODE) if ebs_csi else EKS_ADDON_DAEMONSETS
    found += [addon.requests for addon in addons if addon.lands_on(instance_type)]
    if metrics and DCGM_SERVER.lands_on(instance_type):
        found.append(
            DaemonSetRequests(DCGM_EXPORTER, *pod_requests({"containers": [{"resources": DCGM_EXPORTER_RESOURCES}]}))
        )
    return tuple(found)
