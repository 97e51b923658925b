"""How a lab's learners share a GPU, and what each of them gets: the NVIDIA device plugin's rules as plain arithmetic.

Everything here follows NVIDIA/k8s-device-plugin at tag v0.20.0:
- api/config/v1/replicas.go (ReplicatedResource.UnmarshalJSON): a shared resource needs at least 2 replicas.
- cmd/mps-control-daemon/mps/device.go (maxClients, isAtLeastVolta): an MPS daemon refuses more than 48 replicas per
  GPU of compute capability 7.5 or newer and more than 16 on older GPUs (the function's name says Volta, its
  comparison says 7.5), and then never starts, so the node never advertises nvidia.com/gpu.
- cmd/mps-control-daemon/mps/daemon.go (perDevicePinnedDeviceMemoryLimits, activeThreadPercentage): each MPS client
  may pin the GPU's total memory / replicas and use 100 / replicas percent (integer division) of its threads, however
  idle the rest of the GPU is.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationInfo

from domain.capacity.instance_types import COMPUTE_CAPABILITIES, GPU_INSTANCE_TYPES

# Spelled as the keys of `sharing` in the plugin's config file (api/config/v1/sharing.go), which profiles use as is.
# The device plugin profile of GPU nodes outside any lab; no lab may take its name.
DEFAULT_PROFILE = "default"

Sharing = Literal["timeSlicing", "mps"]

MIN_REPLICAS = 2
MPS_MAX_CLIENTS = 48
MPS_MAX_CLIENTS_BEFORE_7_5 = 16


def mps_max_clients(gpu_model: str) -> int:
    """The most MPS replicas the daemon accepts on one GPU of this model; the lower limit when unconfirmed."""
    capability = COMPUTE_CAPABILITIES[gpu_model]
    return MPS_MAX_CLIENTS if capability is not None and capability >= (7, 5) else MPS_MAX_CLIENTS_BEFORE_7_5


# How the summary and the smoke test name each strategy.
_NAMES = {"none": "none", "timeSlicing": "time-slicing", "mps": "MPS"}


@dataclass(frozen=True)
class LearnerShare:
    """What one learner's slice of a GPU is: the active strategy and, with MPS, its hard limits."""

    strategy: Literal["none", "timeSlicing", "mps"]
    # Smallest and largest per-learner memory cap over the lab's GPU models, in GiB; None when memory is not capped.
    memory_cap_gib: tuple[float, float] | None
    compute_percent: int | None

    @property
    def name(self) -> str:
        return _NAMES[self.strategy]

    def gets(self) -> str:
        """What each learner gets of the GPU under this strategy."""
        if self.strategy == "none":
            return "a whole GPU"
        if self.strategy == "timeSlicing":
            return "GPU memory shared and uncapped, compute in turns"
        assert self.memory_cap_gib is not None
        low, high = self.memory_cap_gib
        memory = f"{low:g} GiB of GPU memory" if low == high else f"{low:g}-{high:g} GiB of GPU memory (by GPU model)"
        return f"at most {memory} and {self.compute_percent}% of the GPU compute"

    def describe(self) -> str:
        if self.strategy == "none":
            return "a whole GPU (no sharing)"
        return f"{self.name}, {self.gets()}"

    def as_output(self) -> dict:
        """For the `labs` stack output: with MPS, the smallest memory cap over the lab's GPU models."""
        return {
            "sharing": self.strategy,
            "gpuMemoryCapGib": self.memory_cap_gib[0] if self.memory_cap_gib else None,
            "computePercent": self.compute_percent,
        }


def learner_share(sharing: Sharing, slices_per_gpu: int, instance_types: Iterable[str]) -> LearnerShare:
    if slices_per_gpu == 1:
        return LearnerShare("none", None, None)
    if sharing == "timeSlicing":
        return LearnerShare("timeSlicing", None, None)
    # EC2's GPU memory in whole GiB (floored, domain/capacity/instance_types.py) divided by the slices, floored to a
    # tenth of a GiB; the daemon divides what the driver reports, which can be a little less (docs/sharing.md, "Sharing
    # a GPU through MPS").
    caps = [GPU_INSTANCE_TYPES[t].gpu_memory_gib * 10 // slices_per_gpu / 10 for t in instance_types]
    return LearnerShare("mps", (min(caps), max(caps)), 100 // slices_per_gpu)


def mps_replicas_the_daemon_accepts(slices: int, info: ValidationInfo) -> int:
    """A lab's slicesPerGpu as MPS replicas: at least the plugin's minimum, at most what each GPU's daemon serves."""
    if info.data.get("sharing") != "mps":
        return slices
    if slices < MIN_REPLICAS:
        raise ValueError(
            f"must be at least {MIN_REPLICAS} with sharing 'mps' (the device plugin refuses fewer replicas); a lab "
            "with one learner per GPU shares nothing, so leave sharing out"
        )
    for name in info.data.get("instance_types", []):
        model = GPU_INSTANCE_TYPES[name].gpu_model
        limit = mps_max_clients(model)
        if slices > limit:
            capability = COMPUTE_CAPABILITIES[model]
            why = (
                f"{model} has compute capability {capability[0]}.{capability[1]}"
                if capability
                else f"gpulab cannot confirm the compute capability of {model} (domain/capacity/instance_types.py)"
            )
            raise ValueError(
                f"must be at most {limit} with sharing 'mps' on {name}: NVIDIA's MPS daemon serves "
                f"{limit} clients per GPU below compute capability 7.5, and {why}"
            )
    return slices
