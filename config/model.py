"""The stack configuration users write under the `gpulab` namespace, as typed, validated models.

Field names are snake_case here and camelCase in the stack file (the alias generator), as Pulumi users write them.
Every model forbids unknown keys so that a typo fails loudly instead of silently falling back to a default.

Checks that compare keys are field validators of the key they report on, reading the keys declared before it from
`info.data`, which holds exactly those that are valid. Pydantic runs them even when other keys of the model fail, where
it would skip a model validator, so that every problem of a stack file is reported in one pass. They set
`validate_default` on their field, so that they also run when the key is left to its default.
"""

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from config.images import qualify_image
from config.instance_types import GPU_INSTANCE_TYPES
from config.versions import KARPENTER_CHART_VERSION, NVIDIA_DEVICE_PLUGIN_CHART_VERSION


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, alias_generator=to_camel)


def _between(low: int, high: int):
    def check(value: int) -> int:
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return AfterValidator(check)


def _at_least(low: int):
    def check(value: int) -> int:
        if value < low:
            raise ValueError(f"must be at least {low}, got {value}")
        return value

    return AfterValidator(check)


def _matching(pattern: str, what: str):
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {what}, got {value!r}")
        return value

    return AfterValidator(check)


def _unique(values: list) -> list:
    duplicates = sorted({v for v in values if values.count(v) > 1})
    if duplicates:
        raise ValueError(f"must not repeat {', '.join(map(str, duplicates))}")
    return values


def _two_or_more(subnets: list[str]) -> list[str]:
    # Karpenter's two replicas must land in two zones, and EKS itself wants subnets in two zones.
    if len(subnets) < 2:
        raise ValueError(f"needs at least two subnets in different availability zones, got {len(subnets)}")
    return subnets


def _quoted_version(value: object) -> object:
    # YAML reads an unquoted 1.30 as the float 1.3: insist on a string rather than guess what was meant.
    if isinstance(value, float | int):
        raise ValueError(f'must be a quoted string such as "1.34", got the number {value}')
    return value


def _gpu_instance_type(value: str) -> str:
    if value not in GPU_INSTANCE_TYPES:
        raise ValueError(
            f"{value!r} is not an NVIDIA GPU instance type that gpulab knows (the list is in config/instance_types.py)"
        )
    return value


DNS_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"


def _not_reserved(name: str) -> str:
    # Each lab names a device plugin profile; "default" is the profile of GPU nodes outside any lab.
    if name == "default":
        raise ValueError("'default' is reserved for the device plugin's default profile; choose another lab name")
    return name


LabName = Annotated[
    str,
    _matching(DNS_LABEL, "a DNS-1123 label (lowercase letters, digits and '-', at most 63)"),
    AfterValidator(_not_reserved),
]
# EKS allows 100 characters, but the interruption queue is named after the cluster and SQS allows 80.
ClusterName = Annotated[
    str,
    _matching(
        r"[a-z]([a-z0-9-]{0,78}[a-z0-9])?",
        "lowercase letters, digits and '-', starting with a letter and at most 80 long",
    ),
]
KubernetesVersion = Annotated[
    str, BeforeValidator(_quoted_version), _matching(r"1\.[0-9]{2}", 'a Kubernetes minor version such as "1.34"')
]
VpcId = Annotated[str, _matching(r"vpc-[0-9a-f]{8,17}", "a VPC ID such as vpc-0a1b2c3d4e5f60718")]
SubnetId = Annotated[str, _matching(r"subnet-[0-9a-f]{8,17}", "a subnet ID such as subnet-0a1b2c3d4e5f60718")]
GpuInstanceType = Annotated[str, AfterValidator(_gpu_instance_type)]
# Karpenter resolves al2023@<version> to the release of that date; for GPU instance types it picks the NVIDIA variant.
AmiAlias = Annotated[
    str, _matching(r"al2023@(v[0-9]{8}|latest)", "an AL2023 AMI alias, al2023@v<YYYYMMDD> or al2023@latest")
]
CapacityType = Literal["on-demand", "spot", "reserved"]
ImageReference = Annotated[str, AfterValidator(qualify_image)]
# Karpenter's duration grammar (NodePool CRD): e.g. 30m, 1h30m, 720h.
Duration = Annotated[str, _matching(r"([0-9]+(s|m|h))+", "a duration such as 10m, 1h30m or 720h")]
# A Kubernetes resource quantity, e.g. 1, 500m, 1Gi.
Quantity = Annotated[
    str, _matching(r"([0-9]+(\.[0-9]+)?)([KMGTPE]i|[mkMGTPE])?", "a Kubernetes quantity such as 1, 500m or 1Gi")
]
ReservationId = Annotated[str, _matching(r"cr-[0-9a-f]{17}", "a capacity reservation ID such as cr-0123456789abcdef0")]
Version = Annotated[str, _matching(r"[0-9]+\.[0-9]+\.[0-9]+", "a chart version such as 1.14.1")]
Namespace = Annotated[str, _matching(DNS_LABEL, "a Kubernetes namespace name (a DNS-1123 label)")]


class SystemNodes(Model):
    """The managed node group that runs Karpenter and CoreDNS: never a node Karpenter itself manages."""

    instance_types: Annotated[list[str], Field(min_length=1), AfterValidator(_unique)] = Field(
        default=["m7i.large"],
        description="x86_64 EC2 instance types of the system node group (it runs the AL2023 x86_64 AMI).",
    )
    # Karpenter's chart spreads its two replicas over zones with DoNotSchedule, so two nodes is the floor.
    size: Annotated[int, _between(2, 10)] = Field(default=2, description="Number of system nodes.")


class Cluster(Model):
    name: ClusterName = Field(description="EKS cluster name; also the karpenter.sh/discovery tag value.")
    kubernetes_version: KubernetesVersion = Field(description="Kubernetes minor version of the control plane.")
    vpc_id: VpcId = Field(description="The existing VPC the cluster runs in.")
    private_subnet_ids: Annotated[list[SubnetId], AfterValidator(_unique), AfterValidator(_two_or_more)] = Field(
        description="Private subnets of the cluster and of every node, in at least two availability zones."
    )
    system_nodes: SystemNodes = Field(default_factory=SystemNodes, description="The system node group.")


class RootVolume(Model):
    """The gp3 root volume of a lab's nodes; images, including pre-pulled ones, live on it."""

    size_gib: Annotated[int, _between(20, 16384)] = Field(default=100, description="Size in GiB.")
    iops: Annotated[int, _between(3000, 80000)] = Field(
        default=10000, validate_default=True, description="Provisioned IOPS."
    )
    throughput_mibps: Annotated[int, _between(125, 2000)] = Field(
        default=125, validate_default=True, description="Throughput in MiB/s."
    )
    encrypted: bool = Field(default=True, description="Encrypt the volume (with the account's default EBS key).")

    # EBS rejects gp3 volumes above 500 IOPS per GiB or 0.25 MiB/s per provisioned IOPS.
    @field_validator("iops")
    @classmethod
    def _iops_per_gib(cls, iops: int, info: ValidationInfo) -> int:
        size = info.data.get("size_gib")
        if size is not None and iops > 500 * size:
            raise ValueError(f"must be at most 500 per GiB, so {500 * size} for {size} GiB")
        return iops

    @field_validator("throughput_mibps")
    @classmethod
    def _throughput_per_iops(cls, throughput: int, info: ValidationInfo) -> int:
        iops = info.data.get("iops")
        if iops is not None and throughput * 4 > iops:
            raise ValueError(f"must be at most iops / 4, so {iops // 4} for {iops} IOPS")
        return throughput


class Budget(Model):
    """A Karpenter disruption budget: how many of the lab's nodes may be disrupted at once, and when."""

    nodes: Annotated[str, _matching(r"(100|[0-9]{1,2})%|[0-9]+", "a node count or percentage such as 1 or 10%")]
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = Field(
        default=None, description="Disruption reasons the budget applies to; all when omitted."
    )
    schedule: (
        Annotated[
            str,
            _matching(
                r"@(annually|yearly|monthly|weekly|daily|midnight|hourly)|\S+ \S+ \S+ \S+ \S+",
                "a five-field cron schedule such as '0 9 * * mon-fri', or a macro such as @daily",
            ),
        ]
        | None
    ) = Field(default=None, description="Cron schedule when the budget is active (UTC).")
    duration: (
        Annotated[str, _matching(r"[0-9]+(h|m)|[0-9]+h[0-9]+m", "hours and minutes such as 8h or 1h30m")] | None
    ) = Field(default=None, validate_default=True, description="How long the budget is active from each schedule.")

    @field_validator("duration")
    @classmethod
    def _schedule_with_duration(cls, duration: str | None, info: ValidationInfo) -> str | None:
        if "schedule" in info.data and (info.data["schedule"] is None) != (duration is None):
            raise ValueError("schedule and duration go together")
        return duration


class Disruption(Model):
    """When Karpenter may take a lab's nodes away. The defaults never evict a learner to save money."""

    # WhenEmpty removes a node only once its last learner pod is gone; WhenEmptyOrUnderutilized would also move
    # running learners to pack nodes tighter, which ends their sessions.
    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = Field(
        default="WhenEmpty", description="Which nodes Karpenter may consolidate."
    )
    consolidate_after: Duration = Field(
        default="10m", description="How long a node stays empty before it goes, so a returning learner finds it."
    )
    budgets: list[Budget] = Field(
        default_factory=lambda: [Budget(nodes="1")],
        description="Disruption budgets; by default one node at a time (drift or expiry never takes a whole lab).",
    )


class Lab(Model):
    """One lab: the GPU nodes Karpenter may launch for its learners, and how they share each GPU."""

    instance_types: Annotated[list[GpuInstanceType], Field(min_length=1), AfterValidator(_unique)] = Field(
        description="NVIDIA GPU instance types Karpenter may launch for this lab."
    )
    capacity_types: Annotated[list[CapacityType], Field(min_length=1), AfterValidator(_unique)] = Field(
        default=["on-demand"], description="EC2 capacity types the lab's nodes may use."
    )
    slices_per_gpu: Annotated[int, _between(1, 48)] = Field(
        default=1, description="Time-slicing replicas per physical GPU: learners sharing one GPU. 1 means no sharing."
    )
    max_gpus: Annotated[int, _at_least(1)] = Field(
        default=1, description="Cap on the physical GPUs this lab may run at once."
    )
    ami: AmiAlias = Field(description="Karpenter AMI alias of the lab's nodes.")
    capacity_reservation_ids: Annotated[list[ReservationId], AfterValidator(_unique)] = Field(
        default_factory=list,
        validate_default=True,
        description="On-demand capacity reservations the lab may use; needed for 'reserved'.",
    )
    root_volume: RootVolume = Field(default_factory=RootVolume, description="Root volume of the lab's nodes.")
    prepull_images: Annotated[list[ImageReference], AfterValidator(_unique)] = Field(
        default_factory=list, description="Images pulled onto each node as it boots, before learners' pods need them."
    )
    pod_pids_limit: Annotated[int, _between(1024, 4194304)] = Field(
        default=32768, description="Most processes one pod may run (kubelet podPidsLimit)."
    )
    max_pods: Annotated[int, _between(1, 737)] = Field(default=110, description="Most pods per node (kubelet maxPods).")
    cpu_limit: Annotated[int, _at_least(1)] = Field(
        default=1000, description="Most vCPUs the lab's nodes may have in total, a backstop to maxGpus."
    )
    expire_after: Annotated[str, _matching(r"([0-9]+(s|m|h))+|Never", "a duration such as 720h, or Never")] = Field(
        default="720h", description="Age at which Karpenter replaces a node (it waits for the budget)."
    )
    disruption: Disruption = Field(default_factory=Disruption, description="Consolidation and disruption budgets.")
    smoke_test: bool = Field(
        default=False,
        description="Run slicesPerGpu + 1 pods that each take one slice and run nvidia-smi, to watch the lab scale.",
    )

    @field_validator("capacity_reservation_ids")
    @classmethod
    def _reserved_needs_reservations(cls, ids: list[str], info: ValidationInfo) -> list[str]:
        # Karpenter only offers reserved capacity from reservations the EC2NodeClass selects.
        if "capacity_types" in info.data and ("reserved" in info.data["capacity_types"]) != bool(ids):
            raise ValueError(
                "required with capacity type 'reserved', and only then"
                if "reserved" in info.data["capacity_types"]
                else "only used with capacity type 'reserved'; add it to capacityTypes"
            )
        return ids

    @property
    def learner_seats(self) -> int:
        """Learners the lab can seat at once: every slice of every GPU it may run."""
        return self.max_gpus * self.slices_per_gpu


class ControllerResources(Model):
    """CPU and memory of each Karpenter controller replica, as both requests and limits (guaranteed QoS)."""

    cpu: Quantity = Field(default="1", description="CPU per replica.")
    memory: Quantity = Field(default="1Gi", description="Memory per replica.")


class Karpenter(Model):
    chart_version: Version = Field(
        default=KARPENTER_CHART_VERSION, description="Version of the karpenter and karpenter-crd charts."
    )
    namespace: Namespace = Field(default="kube-system", description="Namespace of the Karpenter controller.")
    controller_resources: ControllerResources = Field(
        default_factory=ControllerResources, description="Resources of each controller replica."
    )


def _not_default(namespace: str) -> str:
    if namespace == "default":
        raise ValueError("must not be 'default': the device plugin's chart refuses to install there")
    return namespace


class DevicePluginResources(Model):
    """Requests of each device plugin pod; the memory request is its limit too."""

    cpu: Quantity = Field(default="50m", description="CPU request.")
    memory: Quantity = Field(default="128Mi", description="Memory request and limit.")


class NvidiaDevicePlugin(Model):
    chart_version: Version = Field(
        default=NVIDIA_DEVICE_PLUGIN_CHART_VERSION, description="Version of the nvidia-device-plugin chart."
    )
    namespace: Annotated[Namespace, AfterValidator(_not_default)] = Field(
        default="nvidia-device-plugin", description="Namespace of the device plugin (and of smoke workloads)."
    )
    resources: DevicePluginResources = Field(
        default_factory=DevicePluginResources, description="Resources of each device plugin pod."
    )


# Every lab's device plugin profile lands in one ConfigMap, whose values may total 1 MiB and which etcd stores, keys
# included, in one request of at most 1.5 MiB; and in one Helm release Secret (1 MiB). With the longest lab names and
# the largest profiles, this many labs fit and one more does not: tests/test_stack_size.py measures it.
MAX_LABS = 4677


def _fits_one_stack(labs: object) -> object:
    # Checked before the labs themselves, so that a stack far too large is refused at once.
    if isinstance(labs, dict) and len(labs) > MAX_LABS:
        raise ValueError(
            f"at most {MAX_LABS} labs fit in one stack, got {len(labs)}: every lab's device plugin profile goes into "
            "one ConfigMap, whose size Kubernetes and etcd limit; split the labs over several stacks"
        )
    return labs


class Settings(Model):
    """Everything under `gpulab:` in one stack file."""

    cluster: Cluster
    labs: Annotated[dict[LabName, Lab], BeforeValidator(_fits_one_stack)] = Field(
        default_factory=dict, description="One entry per lab, keyed by lab name."
    )
    karpenter: Karpenter = Field(default_factory=Karpenter, description="The Karpenter controller.")
    nvidia_device_plugin: NvidiaDevicePlugin = Field(
        default_factory=NvidiaDevicePlugin, description="The NVIDIA device plugin."
    )

    @property
    def shares_gpus(self) -> bool:
        """Whether any lab time-slices its GPUs, which is what Karpenter's NodeOverlays are for."""
        return any(lab.slices_per_gpu > 1 for lab in self.labs.values())
