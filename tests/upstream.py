"""Where the tests find the upstream reference data (../shared/upstream, or $GPULAB_UPSTREAM), for the pinned versions.

The folder belongs beside the repository, never in it; tests that need it skip with a reason when it is absent.
"""

from config.versions import KARPENTER_CHART_VERSION, NVIDIA_DEVICE_PLUGIN_CHART_VERSION
from tools.charts import upstream_folder

# The render looks for the pinned charts there too: one definition of where the folder is.
UPSTREAM = upstream_folder()
# The Karpenter data of the version the stack deploys, so that a version bump without new data skips, not passes.
KARPENTER = UPSTREAM / f"karpenter-{KARPENTER_CHART_VERSION}"
NVIDIA_DEVICE_PLUGIN = UPSTREAM / f"nvidia-device-plugin-{NVIDIA_DEVICE_PLUGIN_CHART_VERSION}"
