"""NVIDIA GPU instance types offered by Amazon EC2, as data.

Single source of truth for validating users' ``instanceTypes``, sizing Karpenter NodeOverlays
(``nvidia.com/gpu`` capacity = slices x ``gpus``) and choosing NodePool CPU-architecture requirements.

Values mirror the labels Karpenter puts on the node, so they can be compared one to one:

- ``gpus`` is ``karpenter.k8s.aws/instance-gpu-count`` (whole physical GPUs).
- ``gpu_model`` is ``karpenter.k8s.aws/instance-gpu-name`` verbatim: EC2's GPU name in lower kebab case,
  e.g. ``"t4"``, ``"a10g"``, ``"l40s"``, ``"rtx-pro-server-6000"``.
- ``gpu_memory_mib`` is ``karpenter.k8s.aws/instance-gpu-memory`` (MiB per GPU, as EC2's API reports it);
  ``gpu_memory_gib`` is that floored to GiB. EC2 reports usable memory, so A10G/L4 show 22 and L40S 44 rather than
  the 24/48 GB on the datasheet; flooring keeps the figure from ever overstating what a workload can allocate.
- ``architecture`` is ``kubernetes.io/arch``.
- ``vcpus`` is ``karpenter.k8s.aws/instance-cpu``: what a NodePool's ``cpu`` limit counts for one node.
- ``memory_mib`` is ``karpenter.k8s.aws/instance-memory``: the node's memory in MiB, before Karpenter's overheads.
- ``local_nvme_gb`` is ``karpenter.k8s.aws/instance-local-nvme``: the instance-store NVMe in GB (0: EBS only), where
  an EC2NodeClass with ``instanceStorePolicy: RAID0`` puts images and pods' data (domain/capacity/disks.py).
- ``cpu_manufacturer`` is ``karpenter.k8s.aws/instance-cpu-manufacturer`` and ``cpu_clock_mhz``
  ``karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz``: gpulab selects on neither, but the planner gives
  Karpenter every label a node of the type carries.
- ``max_pods`` is the ``pods`` capacity Karpenter computes when ``maxPods`` is not set: the VPC CNI's ENI-limited
  pod count without prefix delegation (ENIs x (IPv4 addresses per ENI - 1) + 2, ``ENILimitedPods`` in
  aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go). A pod beyond it gets no IP address.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

Architecture = Literal["amd64", "arm64"]


@dataclass(frozen=True)
class GpuInstanceType:
    gpus: int
    gpu_model: str
    gpu_memory_mib: int
    architecture: Architecture
    vcpus: int
    max_pods: int
    memory_mib: int
    local_nvme_gb: int  # karpenter.k8s.aws/instance-local-nvme: total instance-store NVMe in GB; 0 for EBS-only types
    cpu_manufacturer: str
    cpu_clock_mhz: int

    @property
    def gpu_memory_gib(self) -> int:
        return self.gpu_memory_mib // 1024

    def __post_init__(self) -> None:
        # A zero or fractional count would size NodeOverlays to no GPUs at all, so refuse it at import time.
        if not isinstance(self.gpus, int) or self.gpus < 1:
            raise ValueError(f"gpus must be a whole number >= 1, got {self.gpus!r}")
        if self.architecture not in get_args(Architecture):
            raise ValueError(f"architecture must be one of {get_args(Architecture)}, got {self.architecture!r}")


# Source: Karpenter's generated instance-type reference (aws/karpenter-provider-aws@1d927085dd81,
# website/content/en/v1.14/reference/instance-types.md), which is built from EC2 DescribeInstanceTypes in
# us-east-1, us-east-2 and us-west-2 -- the same data behind the EC2 "Accelerated computing instances" spec
# pages. Checked 2026-11-30.
#
# Deliberately absent:
# - g6f, gr6f: fractional L4 slices; Karpenter reports instance-gpu-count 0 and no nvidia.com/gpu capacity.
# - g4ad (AMD), inf1/inf2, trn1/trn2, dl1 and other non-NVIDIA accelerators.
# - p3 (.2xlarge/.8xlarge/.16xlarge, V100): dropped from DescribeInstanceTypes in all three regions between
#   Karpenter v1.12 and v1.13 (mid 2026), alongside the retired f1, so treated as no longer offered.
# - p6e-gb200: sold only as UltraServer capacity blocks and absent from Karpenter's data, so its
#   instance-gpu-name cannot be confirmed.
#
# fmt: off
# family: (instance-gpu-name, instance-gpu-memory in MiB per GPU, kubernetes.io/arch,
#          {size: (instance-gpu-count, instance-cpu, instance-memory in MiB, pods, instance-local-nvme in GB)})
# instance-local-nvme is the total size of the instance-store NVMe disks (EC2's InstanceStorageInfo.TotalSizeInGB); a
# type without the label has none and is written 0 here (every g5g size). The reference lists no disk count, and none is
# needed: an instanceStorePolicy RAID0 array spans every disk (domain/capacity/disks.py).
_FAMILIES: dict[str, tuple[str, int, Architecture, dict[str, tuple[int, int, int, int, int]]]] = {
    "g4dn": ("t4", 16384, "amd64", {
        "xlarge": (1, 4, 16384, 29, 125), "2xlarge": (1, 8, 32768, 29, 225), "4xlarge": (1, 16, 65536, 29, 225),
        "8xlarge": (1, 32, 131072, 58, 900), "16xlarge": (1, 64, 262144, 58, 900),
        "12xlarge": (4, 48, 196608, 234, 900), "metal": (8, 96, 393216, 737, 1800),
    }),
    "g5": ("a10g", 22888, "amd64", {
        "xlarge": (1, 4, 16384, 58, 250), "2xlarge": (1, 8, 32768, 58, 450), "4xlarge": (1, 16, 65536, 234, 600),
        "8xlarge": (1, 32, 131072, 234, 900), "16xlarge": (1, 64, 262144, 234, 1900),
        "12xlarge": (4, 48, 196608, 737, 3800), "24xlarge": (4, 96, 393216, 737, 3800),
        "48xlarge": (8, 192, 786432, 345, 7600),
    }),
    "g5g": ("t4g", 16384, "arm64", {
        "xlarge": (1, 4, 8192, 58, 0), "2xlarge": (1, 8, 16384, 58, 0), "4xlarge": (1, 16, 32768, 234, 0),
        "8xlarge": (1, 32, 65536, 234, 0), "16xlarge": (2, 64, 131072, 737, 0), "metal": (2, 64, 131072, 737, 0),
    }),
    "g6": ("l4", 22888, "amd64", {
        "xlarge": (1, 4, 16384, 58, 250), "2xlarge": (1, 8, 32768, 58, 450), "4xlarge": (1, 16, 65536, 234, 600),
        "8xlarge": (1, 32, 131072, 234, 900), "16xlarge": (1, 64, 262144, 737, 1880),
        "12xlarge": (4, 48, 196608, 234, 3760), "24xlarge": (4, 96, 393216, 737, 3760),
        "48xlarge": (8, 192, 786432, 737, 7520),
    }),
    "g6e": ("l40s", 45776, "amd64", {
        "xlarge": (1, 4, 32768, 58, 250), "2xlarge": (1, 8, 65536, 58, 450), "4xlarge": (1, 16, 131072, 234, 600),
        "8xlarge": (1, 32, 262144, 234, 900), "16xlarge": (1, 64, 524288, 737, 1900),
        "12xlarge": (4, 48, 393216, 292, 3800), "24xlarge": (4, 96, 786432, 492, 3800),
        "48xlarge": (8, 192, 1572864, 492, 7600),
    }),
    "gr6": ("l4", 22888, "amd64", {"4xlarge": (1, 16, 131072, 234, 600), "8xlarge": (1, 32, 262144, 234, 900)}),
    "g7": ("rtx-pro-4500", 32768, "amd64", {
        "2xlarge": (1, 8, 32768, 254, 440), "4xlarge": (1, 16, 65536, 506, 875), "8xlarge": (1, 32, 131072, 632, 930),
        "12xlarge": (2, 48, 196608, 758, 1900), "24xlarge": (4, 96, 393216, 1514, 3800),
        "48xlarge": (8, 192, 786432, 758, 7600),
    }),
    "g7e": ("rtx-pro-server-6000", 98304, "amd64", {
        "2xlarge": (1, 8, 65536, 254, 1900), "4xlarge": (1, 16, 131072, 506, 1900),
        "8xlarge": (1, 32, 262144, 506, 1900), "12xlarge": (2, 48, 524288, 632, 3800),
        "24xlarge": (4, 96, 1048576, 632, 7600), "48xlarge": (8, 192, 2097152, 632, 15200),
    }),
    "p3dn": ("v100", 32768, "amd64", {"24xlarge": (8, 96, 786432, 737, 1800)}),
    "p4d": ("a100", 40960, "amd64", {"24xlarge": (8, 96, 1179648, 737, 8000)}),
    "p4de": ("a100", 81920, "amd64", {"24xlarge": (8, 96, 1179648, 737, 8000)}),
    "p5": ("h100", 81920, "amd64", {"4xlarge": (1, 16, 262144, 118, 3800), "48xlarge": (8, 192, 2097152, 100, 30400)}),
    "p5e": ("h200", 144384, "amd64", {"48xlarge": (8, 192, 2097152, 100, 30400)}),
    "p5en": ("h200", 144384, "amd64", {"48xlarge": (8, 192, 2097152, 198, 30400)}),
    "p6-b200": ("b200", 183359, "amd64", {"48xlarge": (8, 192, 2097152, 198, 30400)}),
    "p6-b300": ("b300", 275040, "amd64", {"48xlarge": (8, 192, 4194304, 198, 30400)}),
}
# Each family's CPU, the same for every size in the reference: (instance-cpu-manufacturer,
# instance-cpu-sustained-clock-speed-mhz).
_CPUS: dict[str, tuple[str, int]] = {
    "g4dn": ("intel", 2500), "g5": ("amd", 3300), "g5g": ("aws", 2500), "g6": ("amd", 3400), "g6e": ("amd", 3400),
    "gr6": ("amd", 3400), "g7": ("intel", 3900), "g7e": ("intel", 2400), "p3dn": ("intel", 2500),
    "p4d": ("intel", 3000), "p4de": ("intel", 3000), "p5": ("amd", 3600), "p5e": ("amd", 3600),
    "p5en": ("intel", 2400), "p6-b200": ("intel", 2400), "p6-b300": ("intel", 2400),
}
# fmt: on

GPU_INSTANCE_TYPES: Mapping[str, GpuInstanceType] = MappingProxyType(
    {
        f"{family}.{size}": GpuInstanceType(
            gpus, model, gpu_memory_mib, arch, vcpus, max_pods, memory_mib, local_nvme_gb, *_CPUS[family]
        )
        for family, (model, gpu_memory_mib, arch, sizes) in _FAMILIES.items()
        for size, (gpus, vcpus, memory_mib, max_pods, local_nvme_gb) in sizes.items()
    }
)

# CUDA compute capability (major, minor) of each GPU model above, keyed by instance-gpu-name. The NVIDIA device
# plugin's MPS control daemon serves 48 clients per GPU from 7.5 and 16 below (domain/capacity/sharing.py), so this
# decides how many learners an MPS lab may put on one GPU. None means not confirmed from NVIDIA: gpulab then allows the
# lower limit. Sources:
# - NVIDIA, "CUDA GPU Compute Capability" (developer.nvidia.com/cuda-gpus): L4 and L40S 8.9, H100 and H200 9.0, B200
#   10.0, B300 10.3, RTX PRO 6000 Blackwell Server Edition and RTX PRO 4500 Blackwell (Server Edition) 12.0.
# - NVIDIA, "Legacy CUDA GPU Compute Capability" (developer.nvidia.com/cuda-legacy-gpus): V100 7.0.
# - NVIDIA MIG user guide, "Supported GPUs" (docs.nvidia.com/datacenter/tesla/mig-user-guide): A100 8.0.
# - NVIDIA TensorRT 8.5.3 support matrix, "Hardware and Precision" (docs.nvidia.com/deeplearning/tensorrt/archives/
#   tensorrt-853/support-matrix): T4 7.5.
# Not confirmed: A10G (g5) and T4G (g5g) are AWS's names for variants that NVIDIA's lists do not name (they list the
# A10 at 8.6 and the T4 at 7.5); gpulab does not assume the variants match. Searched again for issue 17: no NVIDIA
# page and no published `nvidia-smi --query-gpu=compute_cap` output from a g5 or g5g instance was found. Third-party
# statements exist for the A10G only (pytorch/test-infra#769 and vantage-sh/ec2instances.info#724 say 8.6), none for
# the T4G; neither is a measurement or NVIDIA's word, so both stay at the lower limit until one is.
# MIG: none of these GPUs is MIG-only. The A100, H100, H200, B200 and RTX PRO Blackwell GPUs support MIG as an optional
# mode (MIG user guide); gpulab never enables it and its profiles use migStrategy none, so MPS sees whole GPUs.
COMPUTE_CAPABILITIES: Mapping[str, tuple[int, int] | None] = MappingProxyType(
    {
        "t4": (7, 5),
        "a10g": None,
        "t4g": None,
        "l4": (8, 9),
        "l40s": (8, 9),
        "rtx-pro-4500": (12, 0),
        "rtx-pro-server-6000": (12, 0),
        "v100": (7, 0),
        "a100": (8, 0),
        "h100": (9, 0),
        "h200": (9, 0),
        "b200": (10, 0),
        "b300": (10, 3),
    }
)
