"""How long a lab's GPU node and its learners' notebook take on EC2: the one table the rehearsal's clock plays
(rehearsal/stepper, boot.go and kubelet.go, fed by rehearsal/timings.py) and the render's warm-up check reads
(least_warmup_seconds). docs/rehearsal.md, "What the clock models", gives each figure with its source.

No AWS-published launch-to-Ready figure exists for any GPU instance family on the EKS AL2023 NVIDIA AMI (searched:
AWS blogs, EKS best practices, Karpenter's docs, awslabs/amazon-eks-ami at v20260724), nor a per-family one, so one
row stands for every family: user reports, taken at their slow end, each figure saying so. A lab overrides any of them
(`gpulab:labs.<lab>.timings`, domain/stack/model.py LabTimings) and so does the rehearse command line (`--timing`).

Image pulls: the stack does not know the size of an image (gpulab cannot reach its registry), so a learner image is
taken as IMAGE_GB unless the lab says (`timings.learnerImageGb`). A pull takes the image's GB at PLAIN_SECONDS_PER_GB,
or at SOCI_FACTOR of that where nodeadm's FastImagePull is on and helps (domain/capacity/disks.py fast_pull_helps:
4 vCPUs, 7 GiB and a disk of 600 MiB/s or the instance store); pre-pulled images (the lab's node_images, learners'
first) are pulled at boot, from the kubelet's registration (the pre-pull unit runs after nodeadm-run.service,
components/karpenter/user_data.py), one after the other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

PullMode = Literal["soci", "plain"]

NO_FIGURE = "no published figure; cautious choice"


@dataclass(frozen=True)
class Figure:
    """A duration in seconds (or a rate), with where it comes from."""

    value: float
    source: str


# Launch to the kubelet's registration of the Node: instance start, nodeadm, containerd, kubelet.
LAUNCH_TO_REGISTERED = Figure(
    60,
    f"{NO_FIGURE}: REPORTED awslabs/amazon-eks-ami#1099 (AWS, 2022-12-15): a c5.xlarge registers 39 s after launch, "
    '"GPU instance types often take much longer to boot within EC2"; #1751 (2024-08-01): AL2023 userspace 62 s '
    "before a nodeadm fix, 40 s after",
)
# Registration to Ready (the CNI, the kubelet's first status).
REGISTERED_TO_READY = Figure(15, NO_FIGURE)
# Ready to nvidia.com/gpu advertised: the device plugin's pod pulled and started on the new node.
READY_TO_DEVICE_PLUGIN = Figure(
    60,
    f"{NO_FIGURE}: REPORTED NVIDIA/k8s-device-plugin#291 (2022-02-16, g5 with Karpenter): the plugin finds the GPU "
    '"approximately 90 seconds" after the launch; cloudpilot-ai/karpenter-provider-gcp#148 (2025-11-09, GCP): "about a '
    'minute" after Ready',
)
# A plain (containerd, overlayfs) pull, per GB of image.
PLAIN_SECONDS_PER_GB = Figure(
    24,
    f'{NO_FIGURE}: REPORTED AWS Machine Learning blog, 2026-06-03, "Reducing container cold start times using SOCI '
    'index on DLAMI and DLC": "Standard Docker image pulls of 15-20 GB can take 4-6 minutes" (12-24 s/GB; the slow '
    "end)",
)
# nodeadm's FastImagePull (SOCI parallel pull and unpack) against a plain pull, where it helps.
SOCI_FACTOR = Figure(
    0.86,
    f'{NO_FIGURE}: REPORTED awslabs/soci-snapshotter f1fcd05 (2026-04): images without a SOCI index "parallel-pull '
    "(14-50% faster than Docker)\"; the slow end. AWS's own parallel-pull benchmark could not be read here",
)
# The size of a learner image the lab does not give.
IMAGE_GB = Figure(
    10,
    f"{NO_FIGURE}: gpulab cannot read the image's size from its registry; a CUDA notebook image of about 10 GB "
    "(issue #48); set gpulab:labs.<lab>.timings.learnerImageGb",
)
# The longest Karpenter gathers pending pods (a buffer's too) before it launches for them.
BATCH_MAX = Figure(
    10,
    "CONFIRMED sigs.k8s.io/karpenter v1.14.1 pkg/operator/options/options.go:129 BATCH_MAX_DURATION, default 10s",
)
# Karpenter deletes a NodeClaim whose Node has not registered this long after its launch (and launches again).
REGISTRATION_TIMEOUT = Figure(
    15 * 60,
    "CONFIRMED sigs.k8s.io/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/liveness.go:52 registrationTimeout",
)


@dataclass(frozen=True)
class NodeBoot:
    """One instance type's boot as the clock plays it, in seconds from its launch."""

    registered: float  # the kubelet registers the Node; the pre-pull starts
    ready: float  # the Node is Ready
    slices: float  # the device plugin advertises nvidia.com/gpu
    source: str

    @property
    def device_plugin_after_ready(self) -> float:
        return self.slices - self.ready


@dataclass(frozen=True)
class Overrides:
    """What a lab, or the rehearse command line, sets instead of the table (None: not set), and `where` it is set, the
    prefix of its keys in messages and sources (`gpulab:labs.intro.timings`, `--timing`)."""

    where: str
    node_registered: float | None = None
    node_ready: float | None = None
    device_plugin: float | None = None
    learner_image_gb: float | None = None
    pull_seconds_per_gb: float | None = None


def _pick(layers: Sequence[Overrides], attribute: str, key: str, figure: Figure) -> tuple[float, str]:
    """The first layer's value that is set, with its key as its source, else the table's figure and source."""
    for layer in layers:
        if (value := getattr(layer, attribute)) is not None:
            return value, f"{layer.where}.{key}"
    return figure.value, figure.source


def node_boot(layers: Sequence[Overrides] = ()) -> NodeBoot:
    """A node's boot: the table's figures, or the first override layer's that sets them."""
    registered, s1 = _pick(layers, "node_registered", "nodeRegistered", LAUNCH_TO_REGISTERED)
    ready, s2 = _pick(layers, "node_ready", "nodeReady", REGISTERED_TO_READY)
    plugin, s3 = _pick(layers, "device_plugin", "devicePlugin", READY_TO_DEVICE_PLUGIN)
    source = f"launch to registered {registered:g} s ({s1}); to Ready +{ready:g} s ({s2}); slices +{plugin:g} s ({s3})"
    return NodeBoot(registered, registered + ready, registered + ready + plugin, source)


@dataclass(frozen=True)
class ImagePull:
    """How a learner image reaches a node: pre-pulled at boot (gpulab pre-pulls every lab's learner image first,
    domain/stack/model.py node_images), with FastImagePull (soci) or without (plain); its seconds and their sources."""

    mode: PullMode
    seconds: float
    source: str


def image_pull(soci: bool, layers: Sequence[Overrides] = ()) -> ImagePull:
    """The pre-pull of a learner image on a node where FastImagePull helps (`soci`) or not, from the Node's
    registration: its size and plain rate from the first layer that sets them, else the table's."""
    gb, gb_source = _pick(layers, "learner_image_gb", "learnerImageGb", IMAGE_GB)
    rate, rate_source = _pick(layers, "pull_seconds_per_gb", "pullSecondsPerGb", PLAIN_SECONDS_PER_GB)
    factor = SOCI_FACTOR.value if soci else 1.0
    how = f"x {factor:g} FastImagePull ({SOCI_FACTOR.source})" if soci else "plain"
    source = f"{gb:g} GB ({gb_source}) at {rate:g} s/GB ({rate_source}) {how}; pre-pulled at boot from the registration"
    return ImagePull("soci" if soci else "plain", math.ceil(gb * rate * factor), source)


def least_warmup_seconds(boot: NodeBoot, learner_pull: ImagePull | None) -> float:
    """The least warm-up lead that has a class's warm seats ready at its start: Karpenter's longest batch, then the
    node's boot until its slices are advertised and its learner image pre-pulled (learner_pull: None when the stack
    names no learner image, without gpulab:jupyterhub)."""
    pulled = boot.registered + (learner_pull.seconds if learner_pull else 0)
    return BATCH_MAX.value + max(boot.slices, pulled)
