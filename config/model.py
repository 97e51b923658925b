"""The stack configuration users write under the `gpulab` namespace, as typed, validated models.

Field names are snake_case here and camelCase in the stack file (the alias generator), as Pulumi users write them.
Every model forbids unknown keys so that a typo fails loudly instead of silently falling back to a default.

Checks that compare keys are field validators of the key they report on, reading the keys declared before it from
`info.data`, which holds exactly those that are valid. Pydantic runs them even when other keys of the model fail, where
it would skip a model validator, so that every key's problem is reported in one pass (a key with several problems
reports its first). They set `validate_default` on their field, so that they also run when the key is left to its
default. A check that reports at another key of its model raises FieldProblem naming that key.
"""

import math
import re
from fractions import Fraction
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from config import durations, schedule
from config.cost import LabCost, lab_cost
from config.endpoint import EVERYWHERE, at_most_quota, public_access_cidr
from config.images import qualify_image
from config.instance_types import COMPUTE_CAPABILITIES, GPU_INSTANCE_TYPES
from config.instance_types import GpuInstanceType as GpuInstanceTypeData
from config.jupyterhub import JupyterHub, notebook_image_problem
from config.log_retention import accepted_retention
from config.node_capacity import QUANTITY, Resources, quantity, seat_share
from config.schedule import Schedule
from config.sharing import DEFAULT_PROFILE, MIN_REPLICAS, LearnerShare, Sharing, learner_share, mps_max_clients
from config.versions import KARPENTER_CHART_VERSION, NVIDIA_DEVICE_PLUGIN_CHART_VERSION


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, alias_generator=to_camel)


class FieldProblem(ValueError):
    """A problem that a field validator finds with another key of its model: `key` is that key's path in the model
    (e.g. "schedule", "classes[1].warmSeats", "learnerPod.cpu"), where the message is reported."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


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


def _positive_amount(value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be a positive amount of US dollars, got {value:g}")
    return value


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
    # Each lab names a device plugin profile, and one profile serves GPU nodes outside any lab.
    if name == DEFAULT_PROFILE:
        raise ValueError(f"{name!r} is reserved for the device plugin's default profile; choose another lab name")
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


def _runs_a_notebook_server(image: str) -> str:
    if problem := notebook_image_problem(image):
        raise ValueError(problem)
    return image


NotebookImage = Annotated[ImageReference, AfterValidator(_runs_a_notebook_server)]
# Karpenter's duration grammar (NodePool CRD): e.g. 30m, 1h30m, 720h.
DURATION = r"([0-9]+(s|m|h))+"
Duration = Annotated[str, _matching(DURATION, "a duration such as 10m, 1h30m or 720h")]
# Karpenter's budget durations (NodePool CRD): hours and minutes only; class durations and warmups are written alike.
ClockDuration = Annotated[str, _matching(r"[0-9]+(h|m)|[0-9]+h[0-9]+m", "hours and minutes such as 45m, 2h or 1h30m")]
# A Kubernetes resource quantity, e.g. 1, 500m, 1Gi.
Quantity = Annotated[str, _matching(QUANTITY, "a Kubernetes quantity such as 1, 500m or 1Gi")]
# An IAM role ARN, e.g. of an operators' role or a CI deploy role: EKS access entries name roles, not sessions.
RoleArn = Annotated[
    str,
    _matching(
        r"arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}",
        "an IAM role ARN such as arn:aws:iam::123456789012:role/platform-admins",
    ),
]
ReservationId = Annotated[str, _matching(r"cr-[0-9a-f]{17}", "a capacity reservation ID such as cr-0123456789abcdef0")]
Version = Annotated[str, _matching(r"[0-9]+\.[0-9]+\.[0-9]+", "a chart version such as 1.14.1")]
Namespace = Annotated[str, _matching(DNS_LABEL, "a Kubernetes namespace name (a DNS-1123 label)")]
# Namespaces every cluster has: gpulab installs into them as they are and creates any other it is given.
BUILT_IN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


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
    admin_role_arns: Annotated[list[RoleArn], AfterValidator(_unique)] = Field(
        default_factory=list,
        description="IAM roles (operators, CI preview and deploy roles) given cluster-admin access through EKS access "
        "entries; the identity that creates the cluster has it anyway.",
    )
    # GitHub: "We do not recommend allowing by IP address" (docs.github.com, "About GitHub's IP addresses"); the Actions
    # ranges are far more blocks than EKS' 40. A runner with a fixed egress (self-hosted, or a larger runner with a
    # static IP) can be listed instead; README, "The cluster's API, logs, keys and trust".
    public_access_cidrs: Annotated[
        list[Annotated[str, AfterValidator(public_access_cidr)]], AfterValidator(_unique), AfterValidator(at_most_quota)
    ] = Field(
        default=[EVERYWHERE],
        description="IPv4 blocks that may reach the public API endpoint; [] turns the public endpoint off. Open by "
        "default because GitHub-hosted runners, which run previews and deploys, have no fixed addresses; the API "
        "still authenticates every request (IAM, access entries).",
    )
    # EKS User Guide, cluster-endpoint: with both endpoints on, requests from within the VPC use the private one; it
    # needs enableDnsHostnames and enableDnsSupport on the VPC.
    private_endpoint: bool = Field(
        default=True,
        validate_default=True,
        description="Serve the API inside the VPC too, so that nodes reach it without leaving the VPC and without "
        "their NAT addresses in publicAccessCidrs. Costs nothing; needs DNS hostnames and resolution on the VPC.",
    )
    # AWS Config Developer Guide, cw-loggroup-retention-period-check: MinRetentionTime defaults to 365 days.
    log_retention_days: Annotated[int, AfterValidator(accepted_retention)] = Field(
        default=365,
        description="Days CloudWatch keeps the control-plane logs (audit included). A year: AWS Config's "
        "cw-loggroup-retention-period-check asks for 365 days by default, and an incident is often found after "
        "the course that caused it has ended.",
    )
    # EKS User Guide, deletion-protection: DeleteCluster fails with InvalidRequestException until UpdateClusterConfig
    # turns it off.
    deletion_protection: bool = Field(
        default=False,
        description="EKS deletion protection: the cluster cannot be deleted until it is turned off. Off by default "
        "so that test stacks can be destroyed; the policy pack requires it in production stacks.",
    )
    # EKS User Guide, kubernetes-versions: 14 months of standard support, then 12 of extended support. Prices: Amazon
    # EKS pricing (aws.amazon.com/eks/pricing) and the AWS Containers blog post "Amazon EKS extended support for
    # Kubernetes versions pricing": USD 0.10 per cluster hour in standard support, 0.60 in total in extended support.
    support_type: Literal["STANDARD", "EXTENDED"] = Field(
        default="STANDARD",
        description="What EKS does at the end of a version's standard support: STANDARD upgrades the control plane; "
        "EXTENDED keeps the version for 12 more months at USD 0.60 instead of 0.10 per cluster hour.",
    )

    @field_validator("private_endpoint")
    @classmethod
    def _api_reachable(cls, private_endpoint: bool, info: ValidationInfo) -> bool:
        if info.data.get("public_access_cidrs") == [] and not private_endpoint:
            raise ValueError(
                "must be true when publicAccessCidrs is [] (no public endpoint): otherwise nothing, not even the "
                "cluster's own nodes, can reach the Kubernetes API"
            )
        return private_endpoint


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


# The NodePool CRD's pattern for a budget schedule (karpenter.sh_nodepools.yaml, Karpenter 1.14.1), with RE2's \s and
# end of text spelled out for Python: the API server refuses what it does not match, e.g. a leading space before @daily.
_BUDGET_SCHEDULE_CRD = re.compile(
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))"
    r"|((.+)[\t\n\f\r ](.+)[\t\n\f\r ](.+)[\t\n\f\r ](.+)[\t\n\f\r ](.+))\Z"
)


def _cron(value: str, never: str) -> Schedule:
    try:
        parsed = schedule.parse(value)
    except schedule.ScheduleError as error:
        raise ValueError(f"{value!r} is not a Go cron schedule: {error}") from None
    if schedule.never_fires(parsed):
        raise ValueError(f"{value!r} never fires (no day or time matches it), {never}")
    return parsed


def _budget_schedule(value: str) -> str:
    # Karpenter parses the schedule only when it evaluates the budget; one it cannot parse fails closed (no
    # disruption at all) and one that never fires counts as always active (kubernetes-sigs/karpenter
    # pkg/apis/v1/nodepool.go, Budget.IsActive): catch both here, not at run time.
    _cron(value, "and Karpenter would treat the budget as always active")
    if not _BUDGET_SCHEDULE_CRD.search(value):
        raise ValueError(f"{value!r} does not match the NodePool CRD's schedule pattern (whitespace around it?)")
    return value


class Budget(Model):
    """A Karpenter disruption budget: how many of the lab's nodes may be disrupted at once, and when."""

    nodes: Annotated[str, _matching(r"(100|[0-9]{1,2})%|[0-9]+", "a node count or percentage such as 1 or 10%")]
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = Field(
        default=None, description="Disruption reasons the budget applies to; all when omitted."
    )
    schedule: Annotated[str, AfterValidator(_budget_schedule)] | None = Field(
        default=None, description="Cron schedule when the budget is active (UTC, Go cron: three-letter names only)."
    )
    duration: ClockDuration | None = Field(
        default=None, validate_default=True, description="How long the budget is active from each schedule."
    )

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
        description="Disruption budgets for consolidation and drift; by default one node at a time. Expiry, "
        "interruption and node repair ignore them.",
    )


# How long before a class starts its seats are asked for, by default: Karpenter's batching, EC2 launch, boot and join
# of a GPU node with the NVIDIA AMI, the device plugin, and the pull of a multi-GiB notebook image (about five minutes
# to a Ready node and up to ten for a 10 GB image, as reported by practitioners; not measured by gpulab), plus room
# for a retry in another zone or instance type after an insufficient-capacity error.
DEFAULT_WARMUP = "20m"
# Longer warmups only pay for idle GPUs; below a day also keeps the warmup's shift to at most the day before.
MAX_WARMUP_MINUTES = 6 * 60
# Karpenter's budgets per NodePool (the NodePool CRD's maxItems) and how many each class adds.
MAX_BUDGETS = 50
BUDGETS_PER_CLASS = 2


def _class_schedule(value: str) -> str:
    _cron(value, "so the class never starts")
    return value


def _at_least_a_minute(value: str) -> str:
    if durations.duration_minutes(value) < 1:
        raise ValueError("must be at least 1m")
    return value


def _warmup_range(value: str) -> str:
    if not 1 <= durations.duration_minutes(value) <= MAX_WARMUP_MINUTES:
        raise ValueError(f"must be between 1m and {durations.format_duration(MAX_WARMUP_MINUTES)}")
    return value


def _share_text(key: str, share: Resources) -> str:
    return f"{share.cpu_millis}m" if key == "cpu" else f"{share.memory_mib}Mi"


def _instance_types(info: ValidationInfo) -> list[tuple[str, GpuInstanceTypeData]]:
    """The lab's instance types and their data, for a check of a key declared after instanceTypes; none if invalid."""
    return [(name, GPU_INSTANCE_TYPES[name]) for name in info.data.get("instance_types", [])]


class LabClass(Model):
    """A class of a lab: its seats are warm when it starts, and its running learners are not moved while it lasts."""

    schedule: Annotated[str, AfterValidator(_class_schedule)] = Field(
        description="When the class starts: a five-field Go cron schedule in UTC, as for budgets (e.g. 0 9 * * mon)."
    )
    duration: Annotated[ClockDuration, AfterValidator(_at_least_a_minute)] = Field(
        description="How long the class lasts, e.g. 1h30m."
    )
    warm_seats: Annotated[int, _at_least(1)] | None = Field(
        default=None, description="Seats ready when it starts; the lab's learner seats when omitted, and at most that."
    )
    warmup: Annotated[ClockDuration, AfterValidator(_warmup_range)] = Field(
        default=DEFAULT_WARMUP,
        validate_default=True,
        description="How long before the start the seats are asked for (node boot, image pull).",
    )

    @field_validator("warmup")
    @classmethod
    def _shiftable(cls, warmup: str, info: ValidationInfo) -> str:
        if "schedule" not in info.data:
            return warmup
        start, minutes = schedule.parse(info.data["schedule"]), durations.duration_minutes(warmup)
        try:
            schedule.shift_earlier(start, minutes)
        except schedule.ScheduleError as error:
            raise FieldProblem("schedule", f"cannot be warmed up {warmup} ahead exactly: {error}") from None
        gap = schedule.shortest_gap(start)
        if gap is not None and gap <= minutes:
            raise FieldProblem(
                "schedule",
                f"starts only {durations.format_duration(gap)} apart at times, not more than its warmup of "
                f"{warmup}: the next start's warmup would begin before this start has released its seats; "
                "make each start time a class of its own",
            )
        return warmup

    @property
    def start(self) -> Schedule:
        return schedule.parse(self.schedule)

    @property
    def warm_from(self) -> Schedule:
        """When the seats are asked for: the start, warmup earlier."""
        return schedule.shift_earlier(self.start, durations.duration_minutes(self.warmup))


class LearnerPod(Model):
    """The requests of each learner's pod, as the notebook spawner sets them; warm seats are shaped like it."""

    cpu: Quantity | None = Field(
        default=None, description="CPU request; by default the smallest per-seat share of the lab's instance types."
    )
    memory: Quantity | None = Field(
        default=None, description="Memory request; by default the smallest per-seat share of the lab's instance types."
    )


class Lab(Model):
    """One lab: the GPU nodes Karpenter may launch for its learners, and how they share each GPU."""

    instance_types: Annotated[list[GpuInstanceType], Field(min_length=1), AfterValidator(_unique)] = Field(
        description="NVIDIA GPU instance types Karpenter may launch for this lab."
    )
    capacity_types: Annotated[list[CapacityType], Field(min_length=1), AfterValidator(_unique)] = Field(
        default=["on-demand"], description="EC2 capacity types the lab's nodes may use."
    )
    sharing: Sharing = Field(
        default="timeSlicing",
        description="How learners share a GPU: timeSlicing (turns, memory shared) or mps (a memory cap per learner).",
    )
    slices_per_gpu: Annotated[int, _between(1, 48)] = Field(
        default=1,
        validate_default=True,
        description="Replicas per physical GPU: learners sharing one GPU. 1 means no sharing.",
    )
    max_gpus: Annotated[int, _at_least(1)] = Field(
        default=1, validate_default=True, description="Cap on the physical GPUs this lab may run at once."
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
    max_pods: Annotated[int, _at_least(1)] | None = Field(
        default=None,
        validate_default=True,
        description="Most pods per node (kubelet maxPods). Unset, Karpenter uses each instance type's ENI-limited "
        "count: the pods the VPC CNI can give an IP address without prefix delegation.",
    )
    cpu_limit: Annotated[int, _at_least(1)] = Field(
        default=1000,
        validate_default=True,
        description="Most vCPUs the lab's nodes may have in total, a backstop to maxGpus.",
    )
    expire_after: Annotated[str, _matching(f"{DURATION}|Never", "a duration such as 720h, or Never")] = Field(
        default="720h",
        description="Age at which Karpenter replaces a node. Expiry ignores disruption budgets and "
        "karpenter.sh/do-not-disrupt; terminationGracePeriod bounds how long the node then waits for its pods.",
    )
    # Without a bound, a draining node (expired, drifted, or of a removed lab) whose pods carry do-not-disrupt stays
    # cordoned and billed indefinitely. An hour lets a learner save their work; it also bounds `pulumi destroy`.
    termination_grace_period: Duration = Field(
        default="1h",
        description="Longest a draining node waits for its pods (do-not-disrupt ones included) before Karpenter "
        "deletes them and terminates the node.",
    )
    disruption: Disruption = Field(default_factory=Disruption, description="Consolidation and disruption budgets.")
    classes: list[LabClass] = Field(
        default_factory=list, description="Scheduled classes: warm seats at each start, no learner moved during it."
    )
    learner_pod: LearnerPod = Field(
        default_factory=LearnerPod, validate_default=True, description="CPU and memory requests of each learner's pod."
    )
    smoke_test: bool = Field(
        default=False,
        description="Run slicesPerGpu + 1 pods that each take one slice and run nvidia-smi, to watch the lab scale.",
    )
    max_hourly_cost: Annotated[float, AfterValidator(_positive_amount)] | None = Field(
        default=None, description="Cap in USD on the lab's cost ceiling per hour at the reference prices (see README)."
    )
    notebook_image: NotebookImage | None = Field(
        default=None,
        description="Image of learners' notebook servers when gpulab:jupyterhub is set; it must run "
        "jupyterhub-singleuser. The lab's nodes pre-pull it.",
    )
    on_spawn_page: bool = Field(
        default=True, description="Offer the lab on JupyterHub's spawn page (when gpulab:jupyterhub is set)."
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

    # Karpenter never launches a node whose capacity alone would exceed what is left of the NodePool's limits, and a
    # pod beyond the VPC CNI's IP addresses never starts: refuse a lab with an instance type that could never work.
    @field_validator("max_gpus")
    @classmethod
    def _max_gpus_hold_a_node(cls, max_gpus: int, info: ValidationInfo) -> int:
        for name, instance_type in _instance_types(info):
            if instance_type.gpus > max_gpus:
                raise ValueError(
                    f"must be at least {instance_type.gpus}: {name} has {instance_type.gpus} GPUs, and Karpenter never "
                    "launches a node that exceeds the NodePool's nvidia.com/gpu limit (maxGpus x slicesPerGpu)"
                )
        return max_gpus

    @field_validator("max_pods")
    @classmethod
    def _max_pods_have_addresses(cls, max_pods: int | None, info: ValidationInfo) -> int | None:
        for name, instance_type in _instance_types(info):
            if max_pods is not None and max_pods > instance_type.max_pods:
                raise ValueError(
                    f"must be at most {instance_type.max_pods}: the VPC CNI has IP addresses for "
                    f"{instance_type.max_pods} pods on {name} (no prefix delegation); unset, each type gets its own"
                )
        return max_pods

    @field_validator("cpu_limit")
    @classmethod
    def _cpu_limit_holds_a_node(cls, cpu_limit: int, info: ValidationInfo) -> int:
        for name, instance_type in _instance_types(info):
            if instance_type.vcpus > cpu_limit:
                raise ValueError(
                    f"must be at least {instance_type.vcpus}: {name} has {instance_type.vcpus} vCPUs, and Karpenter "
                    "never launches a node that exceeds the NodePool's cpu limit"
                )
        return cpu_limit

    @field_validator("slices_per_gpu")
    @classmethod
    def _mps_replicas_the_daemon_accepts(cls, slices: int, info: ValidationInfo) -> int:
        if info.data.get("sharing") != "mps":
            return slices
        if slices < MIN_REPLICAS:
            raise ValueError(
                f"must be at least {MIN_REPLICAS} with sharing 'mps' (the device plugin refuses fewer replicas); a lab "
                "with one learner per GPU shares nothing, so leave sharing out"
            )
        for name, instance_type in _instance_types(info):
            model = instance_type.gpu_model
            limit = mps_max_clients(model)
            if slices > limit:
                capability = COMPUTE_CAPABILITIES[model]
                why = (
                    f"{model} has compute capability {capability[0]}.{capability[1]}"
                    if capability
                    else f"gpulab cannot confirm the compute capability of {model} (config/instance_types.py)"
                )
                raise ValueError(
                    f"must be at most {limit} with sharing 'mps' on {name}: NVIDIA's MPS daemon serves "
                    f"{limit} clients per GPU below compute capability 7.5, and {why}"
                )
        return slices

    @field_validator("classes")
    @classmethod
    def _classes_fit(cls, classes: list[LabClass], info: ValidationInfo) -> list[LabClass]:
        if {"max_gpus", "slices_per_gpu"} <= info.data.keys():
            seats = info.data["max_gpus"] * info.data["slices_per_gpu"]
            for i, lab_class in enumerate(classes):
                if (lab_class.warm_seats or 0) > seats:
                    raise FieldProblem(f"classes[{i}].warmSeats", f"must be at most the lab's {seats} learner seats")
        for i, lab_class in enumerate(classes):
            earlier = [j for j, other in enumerate(classes[:i]) if str(other.start) == str(lab_class.start)]
            if earlier:
                raise FieldProblem(f"classes[{i}].schedule", f"starts when classes[{earlier[0]}] does")
        if "disruption" in info.data:
            budgets = len(info.data["disruption"].budgets) + BUDGETS_PER_CLASS * len(classes)
            if budgets > MAX_BUDGETS:
                raise ValueError(
                    f"each class adds {BUDGETS_PER_CLASS} disruption budgets, and a NodePool takes at most "
                    f"{MAX_BUDGETS}; this lab would have {budgets}"
                )
        return classes

    @field_validator("learner_pod")
    @classmethod
    def _learner_pod_fits(cls, learner_pod: LearnerPod, info: ValidationInfo) -> LearnerPod:
        if not {"instance_types", "slices_per_gpu", "max_pods"} <= info.data.keys():
            return learner_pod
        share = seat_share(info.data["instance_types"], info.data["slices_per_gpu"], info.data["max_pods"])
        for key, asked, most in (
            ("cpu", learner_pod.cpu, Fraction(share.cpu_millis, 1000)),
            ("memory", learner_pod.memory, Fraction(share.memory_mib * 2**20)),
        ):
            if asked is not None and quantity(asked) > most:
                raise FieldProblem(
                    f"learnerPod.{key}",
                    f"must be at most {_share_text(key, share)} so that every "
                    "slice of each instance type's node gets a learner (allocatable less room for DaemonSets)",
                )
        return learner_pod

    @field_validator("max_hourly_cost")
    @classmethod
    def _within_max_hourly_cost(cls, cap: float | None, info: ValidationInfo) -> float | None:
        if cap is None or not {"instance_types", "slices_per_gpu", "max_gpus"} <= info.data.keys():
            return cap
        cost = lab_cost(info.data["instance_types"], info.data["slices_per_gpu"], info.data["max_gpus"], cap)
        if problem := cost.cap_problem:
            raise ValueError(problem)
        return cap

    @property
    def learner_share(self) -> LearnerShare:
        """What each learner gets of a GPU (strategy, and with MPS its memory cap and compute share)."""
        return learner_share(self.sharing, self.slices_per_gpu, self.instance_types)

    @property
    def learner_requests(self) -> dict[str, str]:
        """A learner pod's CPU and memory requests: the lab's setting, else the smallest per-seat share of a node."""
        share = seat_share(self.instance_types, self.slices_per_gpu, self.max_pods)
        return {
            "cpu": self.learner_pod.cpu or _share_text("cpu", share),
            "memory": self.learner_pod.memory or _share_text("memory", share),
        }

    @property
    def node_images(self) -> list[str]:
        """What the lab's nodes pull as they boot: prepullImages, and the notebook image learners start."""
        extra = [self.notebook_image] if self.notebook_image and self.notebook_image not in self.prepull_images else []
        return [*self.prepull_images, *extra]

    def warm_seats(self, lab_class: LabClass) -> int:
        return lab_class.warm_seats or self.learner_seats

    @property
    def cost(self) -> LabCost:
        """The lab's cost figures at the reference prices (config/prices.py)."""
        return lab_cost(self.instance_types, self.slices_per_gpu, self.max_gpus, self.max_hourly_cost)

    @property
    def architectures(self) -> list[str]:
        """The CPU architectures (kubernetes.io/arch) of the lab's instance types: its nodes' and its AMIs'."""
        return sorted({GPU_INSTANCE_TYPES[t].architecture for t in self.instance_types})

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
        default_factory=NvidiaDevicePlugin, validate_default=True, description="The NVIDIA device plugin."
    )

    jupyterhub: JupyterHub | None = Field(
        default=None,
        validate_default=True,
        description="JupyterHub with one profile per lab; absent, no JupyterHub is installed (docs/jupyterhub.md).",
    )

    @field_validator("nvidia_device_plugin")
    @classmethod
    def _own_namespaces(cls, plugin: NvidiaDevicePlugin, info: ValidationInfo) -> NvidiaDevicePlugin:
        # Each component creates the namespace it installs into; two Namespace objects of one name cannot coexist.
        karpenter = info.data.get("karpenter")
        if karpenter and karpenter.namespace == plugin.namespace and plugin.namespace not in BUILT_IN_NAMESPACES:
            raise FieldProblem("karpenter.namespace", "must differ from nvidiaDevicePlugin.namespace")
        return plugin

    @field_validator("jupyterhub")
    @classmethod
    def _hub_has_its_labs(cls, hub: JupyterHub | None, info: ValidationInfo) -> JupyterHub | None:
        if hub is None or "labs" not in info.data:
            return hub
        taken = {s.namespace for s in (info.data.get("karpenter"), info.data.get("nvidia_device_plugin")) if s}
        if hub.namespace in taken | BUILT_IN_NAMESPACES:
            raise FieldProblem(
                "jupyterhub.namespace", f"must be a namespace of its own, not {hub.namespace!r}, which another uses"
            )
        offered = {name: lab for name, lab in info.data["labs"].items() if lab.on_spawn_page}
        if not offered:
            # With no profile KubeSpawner starts a pod without the GPU toleration or a lab's node selector.
            raise ValueError("needs at least one lab on the spawn page (a lab with onSpawnPage: true)")
        for name, lab in offered.items():
            if lab.notebook_image is None:
                raise FieldProblem(
                    f"labs.{name}.notebookImage",
                    "required for a lab on the JupyterHub spawn page (or onSpawnPage: false)",
                )
        return hub

    @property
    def shares_gpus(self) -> bool:
        """Whether any lab shares its GPUs (time-slicing or MPS), which is what Karpenter's NodeOverlays are for."""
        return any(lab.slices_per_gpu > 1 for lab in self.labs.values())

    @property
    def has_classes(self) -> bool:
        """Whether any lab has classes, which is what Karpenter's CapacityBuffers are for."""
        return any(lab.classes for lab in self.labs.values())
