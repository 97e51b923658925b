"""gpulab:nvidia:DevicePlugin, the NVIDIA device plugin with one sharing profile (time-slicing or MPS) per lab."""

from collections.abc import Mapping

import pulumi
import pulumi_kubernetes as k8s

from components.labels import GPU_PRESENT_LABEL, GPU_TOLERATION
from components.namespace import namespace_dependencies
from components.nvidia.sharing_profiles import config_map
from components.nvidia.smoke_test import smoke_deployment
from domain.capacity.daemonsets import DEVICE_PLUGIN, device_plugin_resources
from domain.capacity.sharing import DEFAULT_PROFILE
from domain.stack.model import Lab, NvidiaDevicePlugin
from domain.upstream.versions import NVIDIA_DEVICE_PLUGIN_CHART_REPOSITORY

# Pinned so that the DaemonSet's name stays put across upgrades (an auto-named release gets a random suffix); the
# chart names its DaemonSets after the release.
RELEASE = DEVICE_PLUGIN


def helm_values(settings: NvidiaDevicePlugin, labs: Mapping[str, Lab]) -> dict:
    return {
        "config": {"map": config_map(labs), "default": DEFAULT_PROFILE},
        # Exactly the nodes of the GPU NodePools: the chart's default also matches nodes labelled by NFD.
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]}]}
                    ]
                }
            }
        },
        "tolerations": [dict(GPU_TOLERATION)],
        # What every lab's seat share counts this chart's pods by (domain/capacity/daemonsets.py).
        "resources": device_plugin_resources(settings.resources),
    }


class DevicePlugin(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        settings: NvidiaDevicePlugin,
        labs: Mapping[str, Lab],
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("gpulab:nvidia:DevicePlugin", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        namespace = namespace_dependencies(f"{name}-namespace", settings.namespace, child)
        in_namespace = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=namespace))
        k8s.helm.v3.Release(
            name,
            name=RELEASE,
            chart="nvidia-device-plugin",
            repository_opts={"repo": NVIDIA_DEVICE_PLUGIN_CHART_REPOSITORY},
            version=settings.chart_version,
            namespace=settings.namespace,
            values=helm_values(settings, labs),
            opts=in_namespace,
        )
        for lab_name, lab in labs.items():
            if lab.smoke_test:
                manifest = smoke_deployment(lab_name, lab, settings.namespace)
                k8s.apps.v1.Deployment(
                    f"{name}-{lab_name}-smoke", metadata=manifest["metadata"], spec=manifest["spec"], opts=in_namespace
                )
        self.register_outputs({})
