"""Pinned upstream versions, defined once. Tests check rendered objects against the upstream data of these versions."""

KARPENTER_CHART_VERSION = "1.14.1"
KARPENTER_CHART_REPOSITORY = "oci://public.ecr.aws/karpenter"

NVIDIA_DEVICE_PLUGIN_CHART_VERSION = "0.20.0"
NVIDIA_DEVICE_PLUGIN_CHART_REPOSITORY = "https://nvidia.github.io/k8s-device-plugin"

# jupyterhub/zero-to-jupyterhub-k8s, chart jupyterhub (JupyterHub 5.5.0); tools/upstream.py fetches its reference data.
JUPYTERHUB_CHART_VERSION = "4.4.0"
JUPYTERHUB_CHART_REPOSITORY = "https://hub.jupyter.org/helm-chart/"
