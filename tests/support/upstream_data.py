"""Where the tests find the upstream reference data of the pinned versions: $GPULAB_UPSTREAM, else .upstream/ once
`make upstream` has fetched it (git ignores it), else ../shared/upstream beside the clone (render/charts.py).

Tests that need it skip with a one-line reason when it is absent (`absent`).
"""

from pathlib import Path

from domain.upstream.fetch import FOLDERS
from render.charts import upstream_absent, upstream_folder

# The render looks for the pinned charts there too: one definition of where the folder is.
UPSTREAM = upstream_folder()
# The data of the versions the stack deploys (domain/upstream/fetch.py names each folder after its version), so that a
# version bump without new data skips, not passes.
KARPENTER = UPSTREAM / FOLDERS["karpenter"]
NVIDIA_DEVICE_PLUGIN = UPSTREAM / FOLDERS["nvidia-device-plugin"]


def absent(path: Path) -> str:
    """The skip reason of a test that needs `path` of the upstream data: the path within the data, how to get it."""
    return upstream_absent(path.relative_to(UPSTREAM).as_posix())
