"""Where a lab's nodes keep images and pods' data, what root volume they get, and whether containerd pulls in parallel.

Disk strategy. Karpenter 1.14.1's EC2NodeClass `instanceStorePolicy: RAID0` makes nodeadm build one RAID0 array from
the instance's NVMe instance-store disks and bind-mount /var/lib/containerd, /var/lib/kubelet, /var/log/pods and
/var/lib/soci-snapshotter-grpc onto it (aws/karpenter-provider-aws v1.14.1 pkg/providers/amifamily/bootstrap/nodeadm.go
sets `localStorage.strategy: RAID0`; amazon-eks-ami v20260714 templates/al2023/runtime/bin/setup-local-disks does the
rest), and Karpenter then counts the instance store as the node's ephemeral storage (pkg/providers/instancetype/
types.go, ephemeralStorage). Images and pods' data then no longer touch the root volume, which only needs what the OS
needs. The policy belongs to the EC2NodeClass, one per lab, so a lab cannot give it to some of its types only. It is
harmless where there is no instance store: setup-local-disks finds no `NVMe_Instance_Storage_*` disk, prints "no NVMe
instance storage disks found!" and exits 0, and Karpenter falls back to the root volume's size for ephemeral storage.
So a lab that mixes NVMe and EBS-only types gets RAID0 and the full root volume: its NVMe types keep images on the
NVMe, its EBS-only types on the root volume, which must then be as large and fast as on an EBS-only lab.

Parallel pull. nodeadm's `FastImagePull` feature gate switches the CRI to the SOCI snapshotter in parallel pull and
unpack mode (amazon-eks-ami nodeadm/internal/containerd/config.go, UseSOCISnapshotter; "Enabling fast image pull
(experimental)" in nodeadm/doc/examples.md). nodeadm ignores it below 4 vCPUs or 7 GiB of online memory, and the docs
recommend at least 600 MiB/s of disk throughput: below that, pulls may get slower. The gate exists from release
v20250821 (renamed from AggressiveImagePull, awslabs/amazon-eks-ami#2381); gpulab turns it on by default only where
every type of the lab clears nodeadm's threshold and pulls onto a fast disk: the instance store, or a root volume of at
least 600 MiB/s.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import ValidationInfo

from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.problems import FieldProblem

DiskStrategy = Literal["instanceStore", "rootVolume"]

# What every gp3 volume includes without provisioning more: 3,000 IOPS and 125 MiB/s (the sources are with the gp3
# prices, domain/cost/prices.py). Here, below the prices, so that a disk's defaults need no price.
GP3_INCLUDED_IOPS = 3000
GP3_INCLUDED_MIBPS = 125

# AL2023 AMIs are registered with a 20 GiB root volume (amazon-eks-ami v20260714 templates/al2023/template.json,
# ami_block_device_mappings), the size Karpenter 1.14.1 gives AL2023 nodes by default (pkg/providers/amifamily/
# resolver.go, DefaultEBS): the OS fits in it (how much it leaves free for logs is not measured here). gp3's included
# performance costs nothing above the storage.
OS_ROOT_GIB = 20
# The seed's root volume: images are pulled onto it where there is no instance store.
IMAGES_ROOT_GIB, IMAGES_ROOT_IOPS = 100, 10000

FAST_IMAGE_PULL_SINCE = "v20250821"  # first amazon-eks-ami release whose nodeadm has the FastImagePull gate
# nodeadm's threshold (UseSOCISnapshotter): 4000 millicores and 7 GiB of online memory. The table's memory is the
# instance's nominal size, a little more than the kernel shows online (nodeadm's comment: 15.75 of 16 GiB); every type
# in domain/capacity/instance_types.py has at least 8 GiB, so none is near the line (tests/test_disks.py).
FAST_PULL_MIN_VCPUS = 4
FAST_PULL_MIN_MEMORY_MIB = 7 * 1024
FAST_PULL_MIN_MIBPS = 600  # nodeadm/doc/examples.md: "We recommend at least 600MiB/s throughput"


class RootVolumeKeys(Protocol):
    """The lab's rootVolume keys as written (domain/stack/model.py RootVolume); None where left to the strategy's
    default."""

    size_gib: int | None
    iops: int | None
    throughput_mibps: int | None
    encrypted: bool


@dataclass(frozen=True)
class Volume:
    size_gib: int
    iops: int
    throughput_mibps: int
    encrypted: bool

    def describe(self) -> str:
        return f"{self.size_gib} GiB gp3, {self.iops} IOPS, {self.throughput_mibps} MiB/s"


@dataclass(frozen=True)
class DiskPlan:
    """What the lab's EC2NodeClass and NodeConfig say about disks, and what each instance type gets from it."""

    raid0: bool  # instanceStorePolicy: RAID0
    root: Volume
    fast_image_pull: bool
    image_disk: Mapping[str, str]  # instance type -> where its images and pods' data live


def has_nvme(instance_type: str) -> bool:
    return GPU_INSTANCE_TYPES[instance_type].local_nvme_gb > 0


def raid0(instance_types: Sequence[str], strategy: DiskStrategy | None) -> bool:
    """Whether the lab's EC2NodeClass asks for RAID0: unless told otherwise, when any of its types has NVMe."""
    return strategy == "instanceStore" or (strategy is None and any(map(has_nvme, instance_types)))


def root_volume(instance_types: Sequence[str], strategy: DiskStrategy | None, keys: RootVolumeKeys) -> Volume:
    """The lab's root volume: the keys it sets, the rest from its strategy.

    Only when every type keeps its images on the instance store does the root volume shrink to the OS at gp3's included
    performance; otherwise some type pulls onto it, and it keeps the seed's size and IOPS.
    """
    os_only = raid0(instance_types, strategy) and all(map(has_nvme, instance_types))
    return Volume(
        size_gib=keys.size_gib or (OS_ROOT_GIB if os_only else IMAGES_ROOT_GIB),
        iops=keys.iops or (GP3_INCLUDED_IOPS if os_only else IMAGES_ROOT_IOPS),
        throughput_mibps=keys.throughput_mibps or GP3_INCLUDED_MIBPS,
        encrypted=keys.encrypted,
    )


def fast_pull_helps(instance_type: str, on_raid0: bool, root: Volume) -> bool:
    """Whether nodeadm applies FastImagePull on this type, and the images land on a disk fast enough for it."""
    data = GPU_INSTANCE_TYPES[instance_type]
    applies = data.vcpus >= FAST_PULL_MIN_VCPUS and data.memory_mib >= FAST_PULL_MIN_MEMORY_MIB
    fast_disk = (on_raid0 and data.local_nvme_gb > 0) or root.throughput_mibps >= FAST_PULL_MIN_MIBPS
    return applies and fast_disk


def has_fast_image_pull_gate(ami: str) -> bool:
    """Whether the AMI release's nodeadm knows FastImagePull. Releases are vYYYYMMDD, so they compare as text.

    `latest` resolves to the newest release, which has the gate (every release since v20250821 does).
    """
    version = ami.split("@", 1)[1]
    return version == "latest" or version >= FAST_IMAGE_PULL_SINCE


def disk_plan(
    instance_types: Sequence[str],
    strategy: DiskStrategy | None,
    keys: RootVolumeKeys,
    fast_image_pull: bool | None,
    ami: str,
) -> DiskPlan:
    on_raid0 = raid0(instance_types, strategy)
    root = root_volume(instance_types, strategy, keys)
    if fast_image_pull is None:
        fast_image_pull = has_fast_image_pull_gate(ami) and all(
            fast_pull_helps(t, on_raid0, root) for t in instance_types
        )
    return DiskPlan(
        raid0=on_raid0,
        root=root,
        fast_image_pull=fast_image_pull,
        image_disk={
            t: f"instance store ({GPU_INSTANCE_TYPES[t].local_nvme_gb} GB NVMe)"
            if on_raid0 and has_nvme(t)
            else "root volume"
            for t in instance_types
        },
    )


# --- checks, attached to the keys in domain/stack/model.py ------------------------------------------------------------


def strategy_fits(strategy: DiskStrategy | None, info: ValidationInfo) -> DiskStrategy | None:
    """instanceStore only where every type has one: elsewhere the root volume would be too small for the images."""
    if strategy != "instanceStore" or "instance_types" not in info.data:
        return strategy
    without = [t for t in info.data["instance_types"] if not has_nvme(t)]
    if without:
        raise ValueError(
            f"instanceStore needs NVMe instance storage on every instance type, and {', '.join(without)} "
            f"{'has' if len(without) == 1 else 'have'} none (EBS only); leave diskStrategy out to keep images on "
            "the NVMe where a type has it and on a full root volume elsewhere, or leave those types out"
        )
    return strategy


def root_volume_fits(keys: RootVolumeKeys, info: ValidationInfo) -> RootVolumeKeys:
    """gp3's ratios, on the volume as resolved: a key the lab sets may not fit the strategy's default for another."""
    if "instance_types" not in info.data or "disk_strategy" not in info.data:
        return keys
    volume = root_volume(info.data["instance_types"], info.data["disk_strategy"], keys)
    # EBS rejects gp3 volumes above 500 IOPS per GiB or 0.25 MiB/s per provisioned IOPS.
    if volume.iops > 500 * volume.size_gib:
        raise FieldProblem(
            "rootVolume.iops",
            f"must be at most 500 per GiB, so {500 * volume.size_gib} for the {volume.size_gib} GiB this lab's "
            "root volume gets; set sizeGib too",
        )
    if volume.throughput_mibps * 4 > volume.iops:
        raise FieldProblem(
            "rootVolume.throughputMibps",
            f"must be at most iops / 4, so {volume.iops // 4} for the {volume.iops} IOPS this lab's root volume "
            "gets; set iops too",
        )
    return keys


def gate_in_release(fast_image_pull: bool | None, info: ValidationInfo) -> bool | None:
    if fast_image_pull and "ami" in info.data and not has_fast_image_pull_gate(info.data["ami"]):
        raise ValueError(
            f"the nodeadm of AMI release {info.data['ami']} has no FastImagePull feature gate (amazon-eks-ami "
            f"releases have it from {FAST_IMAGE_PULL_SINCE}); choose a later ami or leave fastImagePull out"
        )
    return fast_image_pull
