"""Where the tests find the upstream reference data (../shared/upstream, or $GPULAB_UPSTREAM), for the pinned versions.

The folder belongs beside the repository, never in it (`make upstream` fetches it); tests that need it skip with a
reason when it is absent.
"""

from tools.charts import upstream_folder
from tools.upstream import FOLDERS

# The render looks for the pinned charts there too: one definition of where the folder is.
UPSTREAM = upstream_folder()
# The data of the versions the stack deploys (tools/upstream.py names each folder after its version), so that a
# version bump without new data skips, not passes.
KARPENTER = UPSTREAM / FOLDERS["karpenter"]
NVIDIA_DEVICE_PLUGIN = UPSTREAM / FOLDERS["nvidia-device-plugin"]
