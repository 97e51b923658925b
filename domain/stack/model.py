"""The stack configuration users write under the `gpulab` namespace, as typed, validated models: the users' contract,
every key in one place.

Field names are snake_case here and camelCase in the stack file (the alias generator), as Pulumi users write them.
Every model forbids unknown keys so that a typo fails loudly instead of silently falling back to a default. The checks
live beside the concern they guard (domain/stack/fields.py for the shared ones and how they report;
domain/stack/limits.py, sharing.py, classes.py, disruption.py, cost.py) and are attached here to the key they report on.
"""

import datetime
import math
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)

from domain.capacity import boot_timings
from domain.capacity.boot_timings import ImagePull, NodeBoot, Overrides
from domain.capacity.daemonsets import DEVICE_PLUGIN_DEFAULTS, ContainerResources
from domain.capacity.disks import (
    GP3_INCLUDED_IOPS,
    GP3_INCLUDED_MIBPS,
    IMAGES_ROOT_GIB,
    IMAGES_ROOT_IOPS,
    OS_ROOT_GIB,
    DiskPlan,
    DiskStrategy,
    disk_plan,
    fast_pull_helps,
    gate_in_release,
    root_volume_fits,
    strategy_fits,
)
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.node_capacity import NodeShare, learner_seats
from domain.capacity.sharing import (
    DEFAULT_PROFILE,
    LearnerShare,
    Sharing,
    learner_share,
    mps_replicas_the_daemon_accepts,
)
from domain.cost.lab_cost import LabCost, alert_threshold, lab_cost, threshold_kind, within_max_hourly_cost
from domain.cost.price_book import LIST, PriceBook
from domain.problems import FieldProblem, report
from domain.stack import context
from domain.stack.budgets import (
    MANAGEMENT_ACCOUNT,
    BudgetAlerts,
    BudgetKey,
    LabBudget,
    TagActivation,
    alerts_fit,
    default_fits,
    default_terms_kept,
    lab_budget,
    term_fits,
)
from domain.stack.classes import (
    DEFAULT_WARMUP,
    at_least_a_minute,
    class_schedule,
    class_zone,
    classes_fit,
    ends_after_start,
    holds_every_day,
    iso_day,
    shiftable,
    skips_within_term,
    warmup_range,
)
from domain.stack.context import ALONE, StackContext
from domain.stack.disruption import budget_schedule, schedule_with_duration
from domain.stack.endpoint import EVERYWHERE, at_most_quota, public_access_cidr
from domain.stack.fields import (
    DNS_LABEL,
    DURATION,
    AmiAlias,
    CapacityType,
    ClockDuration,
    ClusterName,
    Duration,
    GpuInstanceType,
    ImageReference,
    KubernetesVersion,
    Model,
    Namespace,
    Quantity,
    ReservationId,
    RoleArn,
    SubnetId,
    Version,
    VpcId,
    all_of,
    at_least,
    between,
    data_checked,
    known_version,
    matching,
    positive_amount,
    two_or_more,
    unique,
    valid_entries,
)
from domain.stack.jupyterhub import JupyterHub, NotebookImage, hub_has_its_labs
from domain.stack.limits import (
    cpu_limit_holds_max_gpus,
    cpu_needed,
    fits_one_stack,
    learner_pod_fits,
    max_gpus_hold_a_node,
    max_gpus_in_whole_nodes,
    max_pods_have_addresses,
    max_pods_hold_the_seats,
    node_shares,
    reserved_needs_reservations,
    seat_share,
    share_text,
)
from domain.stack.log_retention import accepted_retention
from domain.stack.metrics import IdleWindow, Metrics, metrics_fit
from domain.stack.namespaces import namespace_clash
from domain.stack.node_repair import host_engine_for_node_repair
from domain.stack.support import support_chosen
from domain.time import class_calendar, cron, durations, zones
from domain.time.budget_windows import Window, windows
from domain.time.class_calendar import Occurrence
from domain.time.cron import Schedule
from domain.upstream.versions import KARPENTER_CHART_VERSION, NVIDIA_DEVICE_PLUGIN_CHART_VERSION


def _not_reserved(name: str) -> str:
    # Each lab names a device plugin profile, and one profile serves GPU nodes outside any lab.
    if name == DEFAULT_PROFILE:
        raise ValueError(f"{name!r} is reserved for the device plugin's default profile; choose another lab name")
    return name


LabName = Annotated[
    str,
    matching(DNS_LABEL, "a DNS-1123 label (lowercase letters, digits and '-', at most 63)"),
    AfterValidator(_not_reserved),
]


class SystemNodes(Model):
    """The managed node group that runs Karpenter and CoreDNS: never a node Karpenter itself manages."""

    instance_types: Annotated[list[str], Field(min_length=1), AfterValidator(unique)] = Field(
        default=["m7i.large"],
        description="x86_64 EC2 instance types of the system node group (it runs the AL2023 x86_64 AMI).",
    )
    # Karpenter's chart spreads its two replicas over zones with DoNotSchedule, so two nodes is the floor.
    size: Annotated[int, between(2, 10)] = Field(default=2, description="Number of system nodes.")


class Cluster(Model):
    name: ClusterName = Field(description="EKS cluster name; also the karpenter.sh/discovery tag value.")
    kubernetes_version: Annotated[KubernetesVersion, AfterValidator(known_version)] = Field(
        description="Kubernetes minor version of the control plane."
    )
    vpc_id: VpcId = Field(description="The existing VPC the cluster runs in.")
    private_subnet_ids: Annotated[list[SubnetId], AfterValidator(unique), AfterValidator(two_or_more)] = Field(
        description="Private subnets of the cluster and of every node, in at least two availability zones."
    )
    system_nodes: SystemNodes = Field(default_factory=SystemNodes, description="The system node group.")
    admin_role_arns: Annotated[list[RoleArn], AfterValidator(unique)] = Field(
        default_factory=list,
        description="IAM roles (operators, CI preview and deploy roles) given cluster-admin access through EKS access "
        "entries; the identity that creates the cluster has it anyway.",
    )
    # GitHub: "We do not recommend allowing by IP address" (docs.github.com, "About GitHub's IP addresses"); the Actions
    # ranges are far more blocks than EKS' 40. A runner with a fixed egress (self-hosted, or a larger runner with a
    # static IP) can be listed instead; docs/control-plane.md.
    public_access_cidrs: Annotated[
        list[Annotated[str, AfterValidator(public_access_cidr)]], AfterValidator(unique), AfterValidator(at_most_quota)
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
    # EKS User Guide, kubernetes-versions: 14 months of standard support, then 12 of extended support (the dates:
    # domain/upstream/eks_calendar.py; the prices: domain/cost/prices.py). A version past standard support on the day
    # of the run is refused unless this is EXTENDED (domain/stack/support.py).
    support_type: Annotated[Literal["STANDARD", "EXTENDED"], AfterValidator(support_chosen)] = Field(
        default="STANDARD",
        validate_default=True,
        description="What EKS does at the end of a version's standard support: STANDARD upgrades the control plane; "
        "EXTENDED keeps the version for 12 more months at USD 0.60 instead of 0.10 per cluster hour. A version "
        "already past standard support needs EXTENDED.",
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
    """The gp3 root volume of a lab's nodes. Keys left out follow the lab's disk strategy (domain/capacity/disks.py):
    the OS's size at gp3's included IOPS and throughput when every type keeps its images on the instance store, else the
    size and IOPS that images need."""

    size_gib: Annotated[int, between(OS_ROOT_GIB, 16384)] | None = Field(
        default=None,
        description=f"Size in GiB; {OS_ROOT_GIB} with images on the instance store, else {IMAGES_ROOT_GIB}.",
    )
    iops: Annotated[int, between(GP3_INCLUDED_IOPS, 80000)] | None = Field(
        default=None,
        description=f"Provisioned IOPS; {GP3_INCLUDED_IOPS} with images on the instance store, "
        f"else {IMAGES_ROOT_IOPS}.",
    )
    throughput_mibps: Annotated[int, between(GP3_INCLUDED_MIBPS, 2000)] | None = Field(
        default=None, description=f"Throughput in MiB/s; {GP3_INCLUDED_MIBPS} unless set."
    )
    encrypted: bool = Field(default=True, description="Encrypt the volume (with the account's default EBS key).")

    # EBS rejects gp3 volumes above 500 IOPS per GiB or 0.25 MiB/s per provisioned IOPS. These check the keys the lab
    # sets; domain/capacity/disks.py checks them again against the defaults of the keys it leaves out.
    @field_validator("iops")
    @classmethod
    def _iops_per_gib(cls, iops: int | None, info: ValidationInfo) -> int | None:
        size = info.data.get("size_gib")
        if size is not None and iops is not None and iops > 500 * size:
            raise ValueError(f"must be at most 500 per GiB, so {500 * size} for {size} GiB")
        return iops

    @field_validator("throughput_mibps")
    @classmethod
    def _throughput_per_iops(cls, throughput: int | None, info: ValidationInfo) -> int | None:
        iops = info.data.get("iops")
        if iops is not None and throughput is not None and throughput * 4 > iops:
            raise ValueError(f"must be at most iops / 4, so {iops // 4} for {iops} IOPS")
        return throughput


class Budget(Model):
    """A Karpenter disruption budget: how many of the lab's nodes may be disrupted at once, and when."""

    nodes: Annotated[str, matching(r"(100|[0-9]{1,2})%|[0-9]+", "a node count or percentage such as 1 or 10%")]
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = Field(
        default=None, description="Disruption reasons the budget applies to; all when omitted."
    )
    schedule: Annotated[str, AfterValidator(budget_schedule)] | None = Field(
        default=None, description="Cron schedule when the budget is active (UTC, Go cron: three-letter names only)."
    )
    duration: Annotated[ClockDuration | None, AfterValidator(schedule_with_duration)] = Field(
        default=None, validate_default=True, description="How long the budget is active from each schedule."
    )


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


# A day of a class's calendar, YYYY-MM-DD.
Day = Annotated[datetime.date, BeforeValidator(iso_day)]
TimeZone = Annotated[str, AfterValidator(zones.time_zone)]


class Term(Model):
    """The days a class runs, in its time zone: from its first to its last day, less the days it skips."""

    start: Day = Field(description="The first day of class (YYYY-MM-DD).")
    end: Annotated[Day, AfterValidator(ends_after_start)] = Field(
        description="The last day of class (YYYY-MM-DD), inclusive; not before start."
    )
    skip: Annotated[list[Day], AfterValidator(unique), AfterValidator(skips_within_term)] = Field(
        default_factory=list, description="Days of the term without class (holidays), each a day the class meets on."
    )


class LabClass(Model):
    """A class of a lab: its seats are warm when it starts, and its running learners are not moved while it lasts."""

    schedule: Annotated[str, AfterValidator(class_schedule)] = Field(
        description="When the class starts: a five-field Go cron schedule on the clock of its time zone, in the "
        "budget grammar (e.g. 0 9 * * mon)."
    )
    duration: Annotated[ClockDuration, AfterValidator(at_least_a_minute)] = Field(
        description="How long the class lasts, e.g. 1h30m (time elapsed, across a daylight-saving change too)."
    )
    warm_seats: Annotated[int, at_least(1)] | None = Field(
        default=None, description="Seats ready when it starts; the lab's learner seats when omitted, and at most that."
    )
    warmup: Annotated[ClockDuration, AfterValidator(warmup_range), AfterValidator(shiftable)] = Field(
        default=DEFAULT_WARMUP,
        validate_default=True,
        description="How long before the start the seats are asked for (node boot, image pull).",
    )
    time_zone: TimeZone | None = Field(
        default=None, description="IANA time zone the schedule and term are read in; gpulab:timeZone when omitted."
    )
    term: Annotated[Term | None, AfterValidator(holds_every_day)] = Field(
        default=None,
        validate_default=True,
        description="The days of class (start, end, skip); without it the class repeats all year.",
    )

    # The stack's gpulab:timeZone when this class was validated: the validation context (domain/stack/context.py).
    _stack_zone: str | None = PrivateAttr(default=None)

    def model_post_init(self, validation_context: Any, /) -> None:
        self._stack_zone = context.of(validation_context).time_zone

    @property
    def zone(self) -> str:
        """The IANA zone the class's schedule and term are read in."""
        return class_zone(self.time_zone, self._stack_zone)

    @property
    def start(self) -> Schedule:
        return cron.parse(self.schedule)

    @property
    def warm_from(self) -> Schedule:
        """When the seats are asked for, on the class's clock: the start, warmup earlier."""
        return cron.shift(self.start, -durations.duration_minutes(self.warmup))

    @property
    def identity(self) -> str:
        """What tells the class from the lab's others, and names its objects: its start, and where it is not UTC all
        year, its zone and the first day of its term."""
        if self.zone == zones.UTC and self.term is None:
            return str(self.start)
        return " ".join([str(self.start), self.zone, *([str(self.term.start)] if self.term else [])])

    def occurrences(
        self, first: datetime.date | None = None, last: datetime.date | None = None
    ) -> Iterator[Occurrence]:
        """The class's occurrences on the local days from `first` to `last` (inclusive) within its term, skipped days
        left out; from the first day of its term to the last by default. A class without a term needs both."""
        if self.term is None:
            if first is None or last is None:
                raise ValueError("a class without a term repeats all year: give the first and last day")
            days: tuple[datetime.date, datetime.date] = (first, last)
        else:
            days = (max(first or self.term.start, self.term.start), min(last or self.term.end, self.term.end))
        skip = self.term.skip if self.term else ()
        minutes = (durations.duration_minutes(self.warmup), durations.duration_minutes(self.duration))
        return class_calendar.occurrences(self.start, self.zone, *minutes, *days, skip)

    @property
    def budget_windows(self) -> tuple[Window, ...]:
        """The NodePool budget windows, in UTC, that hold this class's learners (domain/time/budget_windows.py)."""
        warmup, duration = durations.duration_minutes(self.warmup), durations.duration_minutes(self.duration)
        term = (self.term.start, self.term.end, tuple(self.term.skip)) if self.term else None
        planned = class_calendar.planned(self.start, self.zone, warmup, duration, term)
        return windows(self.start, warmup, duration, planned, class_calendar.fixed_offset(self.zone), term is not None)


def positive_size(value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be a positive number, got {value:g}")
    return value


class LabTimings(Model):
    """How long the lab's nodes and learner image take, instead of gpulab's table (domain/capacity/boot_timings.py,
    docs/rehearsal.md): what the rehearsal's clock plays and the warm-up check reads."""

    node_registered: Duration | None = Field(
        default=None,
        description=f"From launch to the kubelet's registration; {boot_timings.LAUNCH_TO_REGISTERED.value:g}s unless "
        "set. Karpenter gives up on a node not registered within 15m.",
    )
    node_ready: Duration | None = Field(
        default=None,
        description=f"From registration to Ready; {boot_timings.REGISTERED_TO_READY.value:g}s unless set.",
    )
    device_plugin: Duration | None = Field(
        default=None,
        description=f"From Ready to the GPU slices advertised; {boot_timings.READY_TO_DEVICE_PLUGIN.value:g}s unless "
        "set.",
    )
    learner_image_gb: Annotated[float, AfterValidator(positive_size)] | None = Field(
        default=None,
        description=f"Size of the learners' notebook image in GB; {boot_timings.IMAGE_GB.value:g} unless set.",
    )
    pull_seconds_per_gb: Annotated[float, AfterValidator(positive_size)] | None = Field(
        default=None,
        description=f"Seconds a plain pull takes per GB; {boot_timings.PLAIN_SECONDS_PER_GB.value:g} unless set "
        f"(FastImagePull, where it helps: x {boot_timings.SOCI_FACTOR.value:g}).",
    )

    def overrides(self, where: str) -> Overrides:
        """These timings as the table's overrides, their keys named under `where`."""

        def s(duration: str | None) -> float | None:
            return None if duration is None else durations.seconds(duration)

        return Overrides(
            where,
            s(self.node_registered),
            s(self.node_ready),
            s(self.device_plugin),
            self.learner_image_gb,
            self.pull_seconds_per_gb,
        )


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

    instance_types: Annotated[
        list[GpuInstanceType], Field(min_length=1), AfterValidator(unique), AfterValidator(host_engine_for_node_repair)
    ] = Field(
        description="NVIDIA GPU instance types Karpenter may launch for this lab; not those whose nodes run no DCGM "
        "host engine for the node monitoring agent to check, which node repair would replace."
    )
    capacity_types: Annotated[list[CapacityType], Field(min_length=1), AfterValidator(unique)] = Field(
        default=["on-demand"], description="EC2 capacity types the lab's nodes may use."
    )
    sharing: Sharing = Field(
        default="timeSlicing",
        description="How learners share a GPU: timeSlicing (turns, memory shared) or mps (a memory cap per learner).",
    )
    slices_per_gpu: Annotated[int, between(1, 48), AfterValidator(mps_replicas_the_daemon_accepts)] = Field(
        default=1,
        validate_default=True,
        description="Replicas per physical GPU: learners sharing one GPU. 1 means no sharing.",
    )
    max_gpus: Annotated[int, at_least(1), all_of(max_gpus_hold_a_node, max_gpus_in_whole_nodes)] = Field(
        default=1, validate_default=True, description="Cap on the physical GPUs this lab may run at once."
    )
    ami: AmiAlias = Field(description="Karpenter AMI alias of the lab's nodes.")
    capacity_reservation_ids: Annotated[
        list[ReservationId], AfterValidator(unique), AfterValidator(reserved_needs_reservations)
    ] = Field(
        default_factory=list,
        validate_default=True,
        description="On-demand capacity reservations the lab may use; needed for 'reserved'.",
    )
    disk_strategy: Annotated[DiskStrategy | None, AfterValidator(strategy_fits)] = Field(
        default=None,
        description="Where images and pods' data live: instanceStore (a RAID0 of the instance's NVMe disks; the root "
        "volume keeps only the OS) or rootVolume. Unset, the instance store on every type that has one.",
    )
    root_volume: Annotated[RootVolume, AfterValidator(root_volume_fits)] = Field(
        default_factory=RootVolume, validate_default=True, description="Root volume of the lab's nodes."
    )
    fast_image_pull: Annotated[bool | None, AfterValidator(gate_in_release)] = Field(
        default=None,
        description="nodeadm's FastImagePull: containerd pulls and unpacks layers in parallel (SOCI). Unset, on when "
        "every instance type clears nodeadm's 4 vCPU / 7 GiB threshold and pulls onto the instance store or a "
        "root volume of at least 600 MiB/s, and the AMI release has the gate (v20250821 or later).",
    )
    prepull_images: Annotated[list[ImageReference], AfterValidator(unique)] = Field(
        default_factory=list, description="Images pulled onto each node as it boots, before learners' pods need them."
    )
    pod_pids_limit: Annotated[int, between(1024, 4194304)] = Field(
        default=32768, description="Most processes one pod may run (kubelet podPidsLimit)."
    )
    max_pods: Annotated[
        Annotated[int, at_least(1), AfterValidator(max_pods_have_addresses)] | None,
        AfterValidator(max_pods_hold_the_seats),
    ] = Field(
        default=None,
        validate_default=True,
        description="Most pods per node (kubelet maxPods), learners and DaemonSet pods together. Unset, Karpenter "
        "uses each instance type's ENI-limited count: the pods the VPC CNI can give an IP address without prefix "
        "delegation.",
    )
    cpu_limit: Annotated[Annotated[int, at_least(1)] | None, AfterValidator(cpu_limit_holds_max_gpus)] = Field(
        default=None,
        description="Most vCPUs the lab's nodes may have in total (the NodePool's cpu limit), at least what maxGpus "
        "needs on the lab's type of most vCPUs per GPU; that by default.",
    )
    expire_after: Annotated[
        str, BeforeValidator(durations.unit_needed), matching(f"{DURATION}|Never", "a duration such as 720h, or Never")
    ] = Field(
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
    classes: Annotated[list[LabClass], WrapValidator(classes_fit)] = Field(
        default_factory=list, description="Scheduled classes: warm seats at each start, no learner moved during it."
    )
    learner_pod: Annotated[LearnerPod, AfterValidator(learner_pod_fits)] = Field(
        default_factory=LearnerPod, validate_default=True, description="CPU and memory requests of each learner's pod."
    )
    timings: LabTimings = Field(
        default_factory=LabTimings,
        description="Node boot and image pull times instead of gpulab's table (docs/rehearsal.md, What the clock "
        "models).",
    )
    smoke_test: bool = Field(
        default=False,
        description="Run slicesPerGpu + 1 pods that each take one slice and run nvidia-smi, to watch the lab scale.",
    )
    max_hourly_cost: (
        Annotated[float, AfterValidator(positive_amount), AfterValidator(within_max_hourly_cost)] | None
    ) = Field(
        default=None,
        description="Cap in USD on what the lab's GPU limit costs per hour at reference prices (docs/cost.md).",
    )
    budget: Annotated[BudgetKey | None, AfterValidator(term_fits)] = Field(
        default=None,
        description="USD per term (a lab whose every class has a term) or per month (any other lab), or {amount, "
        "period: term|month}: the hub refuses the lab's learners new servers once its spend over the period reaches "
        "it (with the hub and the meter), and an AWS Budgets cost budget of its instances alerts gpulab:budgetAlerts "
        "month by month (docs/cost.md); gpulab:budget when omitted.",
    )
    notebook_image: NotebookImage | None = Field(
        default=None,
        description="Image of learners' notebook servers when gpulab:jupyterhub is set, instead of the hub's "
        "notebookImage; it must run jupyterhub-singleuser. The lab's nodes pre-pull it first (docs/jupyterhub.md).",
    )
    on_spawn_page: bool = Field(
        default=True, description="Offer the lab on JupyterHub's spawn page (when gpulab:jupyterhub is set)."
    )
    gpu_idle_timeout: IdleWindow | None = Field(
        default=None,
        description="Stop a learner's JupyterHub server whose GPU stayed under gpulab:metrics.idleUtilisationPercent "
        "this long (needs gpulab:metrics and gpulab:jupyterhub); unset: never.",
    )
    internet: bool = Field(
        default=True,
        description="Let the lab's JupyterHub learners reach the internet; false closes it (an exam), leaving the hub "
        "and DNS (needs gpulab:jupyterhub and onSpawnPage; docs/jupyterhub.md).",
    )

    @property
    def learner_share(self) -> LearnerShare:
        """What each learner gets of a GPU (strategy, and with MPS its memory cap and compute share)."""
        return learner_share(self.sharing, self.slices_per_gpu, self.instance_types)

    # The device plugin's resources of the stack this lab was validated in, and whether that stack runs the EBS CSI
    # driver and dcgm-exporter: the validation context (domain/stack/context.py).
    _device_plugin: ContainerResources = PrivateAttr(default=DEVICE_PLUGIN_DEFAULTS)
    _ebs_csi: bool = PrivateAttr(default=False)
    _metrics: bool = PrivateAttr(default=False)
    # gpulab:jupyterhub.notebookImage for a lab on the hub's spawn page (Settings._labs_get_the_hubs_image).
    _hub_notebook_image: str | None = PrivateAttr(default=None)

    def model_post_init(self, validation_context: Any, /) -> None:
        stack = context.of(validation_context)
        self._device_plugin = stack.device_plugin or DEVICE_PLUGIN_DEFAULTS
        self._ebs_csi = stack.runs_ebs_csi
        self._metrics = stack.runs_metrics

    @property
    def node_shares(self) -> list[NodeShare]:
        """A learner's share of a node of each instance type, and the DaemonSets taken off it."""
        return node_shares(
            self.instance_types,
            self.sharing,
            self.slices_per_gpu,
            self._device_plugin,
            self._ebs_csi,
            self._metrics,
        )

    @property
    def learner_requests(self) -> dict[str, str]:
        """A learner pod's CPU and memory requests: the lab's setting, else the smallest per-seat share of a node."""
        share = seat_share(self.node_shares)
        return {
            "cpu": self.learner_pod.cpu or share_text("cpu", share),
            "memory": self.learner_pod.memory or share_text("memory", share),
        }

    @property
    def learner_image(self) -> str | None:
        """The image of the lab's JupyterHub learners: its notebookImage, else the hub's; None without either."""
        return self.notebook_image or self._hub_notebook_image

    @property
    def node_images(self) -> list[str]:
        """What the lab's nodes pull as they boot: the learners' image first, so that a learner who gets a node as it
        boots waits for that pull only, then prepullImages."""
        first = [self.learner_image] if self.learner_image else []
        return [*first, *(image for image in self.prepull_images if image not in first)]

    def node_boot(self, name: str, command_line: Overrides | None = None) -> NodeBoot:
        """How the nodes of this lab, named `name`, boot (domain/capacity/boot_timings.py): the command line's
        figures, else the lab's timings, else the table's (one row for every GPU family)."""
        return boot_timings.node_boot(self._timing_layers(name, command_line))

    def learner_pull(self, name: str, instance_type: str, command_line: Overrides | None = None) -> ImagePull | None:
        """The pre-pull of the learners' image on a node of this type; None without a learner image (no
        gpulab:jupyterhub: the rehearsal's learners run learnerPodSpec's placeholder)."""
        if self.learner_image is None:
            return None
        disk = self.disk
        soci = disk.fast_image_pull and fast_pull_helps(instance_type, disk.raid0, disk.root)
        return boot_timings.image_pull(soci, self._timing_layers(name, command_line))

    def least_warmup_seconds(self, name: str, command_line: Overrides | None = None) -> float:
        """The least warm-up that has a class's warm seats ready at its start, on the lab's slowest instance type."""
        boot = self.node_boot(name, command_line)
        pulls = [self.learner_pull(name, t, command_line) for t in self.instance_types]
        return max(boot_timings.least_warmup_seconds(boot, pull) for pull in pulls)

    def _timing_layers(self, name: str, command_line: Overrides | None) -> list[Overrides]:
        return [*([command_line] if command_line else []), self.timings.overrides(f"gpulab:labs.{name}.timings")]

    def warm_seats(self, lab_class: LabClass) -> int:
        return lab_class.warm_seats or self.learner_seats

    @property
    def disk(self) -> DiskPlan:
        """The lab's disks as its nodes get them: RAID0 or not, the root volume, parallel pull
        (domain/capacity/disks.py)."""
        return disk_plan(self.instance_types, self.disk_strategy, self.root_volume, self.fast_image_pull, self.ami)

    @property
    def cost(self) -> LabCost:
        """The lab's cost figures at the reference prices (domain/cost/prices.py), each node's root volume and its
        classes' warm-ups included."""
        return self.cost_at(LIST)

    def cost_at(self, book: PriceBook) -> LabCost:
        """The lab's cost figures at `book`'s prices (a live preview's: components/live_prices.py)."""
        classes = [(c.schedule, self.warm_seats(c), c.warmup) for c in self.classes]
        return lab_cost(
            self.instance_types,
            self.slices_per_gpu,
            self.max_gpus,
            self.max_hourly_cost,
            root=self.disk.root,
            classes=classes,
            book=book,
        )

    @property
    def architectures(self) -> list[str]:
        """The CPU architectures (kubernetes.io/arch) of the lab's instance types: its nodes' and its AMIs'."""
        return sorted({GPU_INSTANCE_TYPES[t].architecture for t in self.instance_types})

    @property
    def node_pool_cpu_limit(self) -> int:
        """The NodePool's cpu limit: cpuLimit, else what maxGpus needs (domain/stack/limits.py cpu_needed). Derived by
        default so that it bounds the lab's nodes as maxGpus does and never below it: a fixed default (1000 vCPUs)
        stopped a lab of g4dn.xlarge, 4 vCPUs a GPU, at 250 of its GPUs whatever its maxGpus. Still a backstop:
        without the lab's NodeOverlays Karpenter counts one nvidia.com/gpu per physical GPU against a limit of
        maxGpus x slices, and this limit keeps the lab's vCPUs to what maxGpus GPUs take."""
        return self.cpu_limit if self.cpu_limit is not None else cpu_needed(self.instance_types, self.max_gpus)[0]

    @property
    def learner_seats(self) -> int:
        """Learners the lab can seat at once: every slice of every GPU it may run."""
        return learner_seats(self.max_gpus, self.slices_per_gpu)


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

    cpu: Quantity = Field(default=DEVICE_PLUGIN_DEFAULTS.cpu, description="CPU request.")
    memory: Quantity = Field(default=DEVICE_PLUGIN_DEFAULTS.memory, description="Memory request and limit.")


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


def _device_plugin_resources(data: Any) -> ContainerResources | None:
    """nvidiaDevicePlugin.resources of a stack file's settings; None when invalid, which validation reports itself."""
    plugin = data.get("nvidiaDevicePlugin", {}) if isinstance(data, dict) else None
    if not isinstance(plugin, dict):
        return None
    try:
        return DevicePluginResources.model_validate(plugin.get("resources", {}))
    except ValidationError:
        return None


def stack_context(data: Any) -> StackContext:
    """The stack-wide settings its labs' checks need, read from a stack file's values before they are validated (each is
    validated after the labs): the context to validate them with, Settings.model_validate(values,
    context=stack_context(values)) (domain/stack/context.py)."""
    values = data if isinstance(data, dict) else {}
    zone = values.get("timeZone")
    return StackContext(
        device_plugin=_device_plugin_resources(data),
        runs_ebs_csi=values.get("jupyterhub") is not None,
        runs_metrics=values.get("metrics") is not None,
        time_zone=zone if isinstance(zone, str) and zone in zones.names() else None,
    )


def _labs_kept_apart(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    # When a lab is wrong, pydantic leaves gpulab:labs out of what later keys' checks read: they read the labs that
    # passed their own checks instead, which this keeps in the stack context (domain.stack.fields.labs_checked).
    try:
        return handler(value)
    except ValidationError as error:
        if isinstance(info.context, StackContext) and info.context is not ALONE:
            info.context.valid_labs.update(valid_entries(value, error, handler))
        raise


class Settings(Model):
    """Everything under `gpulab:` in one stack file. Validated with its stack context, which its labs' checks read:
    Settings.model_validate(values, context=stack_context(values)) (domain/stack/load.py parse)."""

    cluster: Cluster
    labs: Annotated[dict[LabName, Lab], BeforeValidator(fits_one_stack), WrapValidator(_labs_kept_apart)] = Field(
        default_factory=dict, description="One entry per lab, keyed by lab name."
    )
    karpenter: Karpenter = Field(default_factory=Karpenter, description="The Karpenter controller.")
    nvidia_device_plugin: NvidiaDevicePlugin = Field(
        default_factory=NvidiaDevicePlugin, validate_default=True, description="The NVIDIA device plugin."
    )
    jupyterhub: Annotated[JupyterHub | None, AfterValidator(hub_has_its_labs)] = Field(
        default=None,
        validate_default=True,
        description="JupyterHub with one profile per lab; absent, no JupyterHub is installed (docs/jupyterhub.md).",
    )
    metrics: Annotated[Metrics | None, AfterValidator(metrics_fit)] = Field(
        default=None,
        validate_default=True,
        description="The GPU meter per lab and per seat, and idle GPU seats given back; absent, none "
        "(docs/metrics.md).",
    )
    time_zone: TimeZone = Field(
        default=zones.UTC, description="IANA time zone of the classes that name none (docs/classes.md)."
    )
    budget: Annotated[BudgetKey | None, AfterValidator(default_fits), AfterValidator(default_terms_kept)] = Field(
        default=None,
        description="The budget of every lab that sets none, read per lab as labs.<lab>.budget is; unset, none.",
    )
    cost_alert_threshold: (
        Annotated[float | str, BeforeValidator(threshold_kind), AfterValidator(alert_threshold)] | None
    ) = Field(
        default=None,
        description='The pull-request comment flags at its top a change that raises the labs\' "at most" per hour by '
        'more than this: USD per hour (2.5), or a percentage of the base branch\'s ("10%"); unset, none is flagged.',
    )
    budget_alerts: Annotated[BudgetAlerts | None, AfterValidator(alerts_fit)] = Field(
        default=None,
        validate_default=True,
        description="Where the labs' budgets send their actual and forecast alerts; needed with, and only with, a "
        "budget.",
    )
    cost_allocation_tag: TagActivation = Field(
        default=MANAGEMENT_ACCOUNT,
        description="Who activates the tag gpulab.dev/lab for cost allocation, which the labs' budgets filter on: "
        "managementAccount (not this stack: the organization's management account, or this account outside one) or "
        "activate (this stack, once AWS offers the key, up to 24 hours after a lab's first node). The budgets are "
        "made either way and count from the day the tag is active (docs/cost.md).",
    )

    @model_validator(mode="before")
    @classmethod
    def _validated_in_its_context(cls, data: Any, info: ValidationInfo) -> Any:
        # Without it, every lab would be checked as if alone: the default device plugin, no hub, no meter, classes in
        # UTC. A programming error, not a stack file's: raised as it is, never reported as a setting's problem.
        if not isinstance(info.context, StackContext):
            raise TypeError("Settings needs its stack context: model_validate(values, context=stack_context(values))")
        return data

    @model_validator(mode="after")
    def _labs_get_the_hubs_image(self) -> "Settings":
        if self.jupyterhub and self.jupyterhub.notebook_image:
            for lab in self.labs.values():
                if lab.on_spawn_page:
                    lab._hub_notebook_image = self.jupyterhub.notebook_image
        return self

    @field_validator("nvidia_device_plugin")
    @classmethod
    def _own_namespaces(cls, plugin: NvidiaDevicePlugin, info: ValidationInfo) -> NvidiaDevicePlugin:
        # Each component creates the namespace it installs into; two Namespace objects of one name cannot coexist.
        problems: list[ValueError] = []
        karpenter = info.data.get("karpenter")
        if karpenter and (clash := namespace_clash(karpenter.namespace, data_checked(info), (), built_in=True)):
            problems.append(FieldProblem("karpenter.namespace", clash))
        if clash := namespace_clash(plugin.namespace, data_checked(info), ("karpenter",), built_in=True):
            problems.append(FieldProblem("nvidiaDevicePlugin.namespace", clash))
        report(problems)
        return plugin

    @property
    def budgets(self) -> dict[str, LabBudget]:
        """Each budgeted lab's budget, by lab name."""
        return {
            name: budget
            for name, lab in self.labs.items()
            if (budget := lab_budget(lab.budget, self.budget, lab.classes)) is not None
        }

    @property
    def spend_gated(self) -> dict[str, LabBudget]:
        """The budgets at which the hub refuses new servers (components/jupyterhub/spend_gate.py): those of the labs
        on its spawn page, when the stack has the hub and the meter whose spend it reads."""
        if not (self.jupyterhub and self.metrics):
            return {}
        return {name: amount for name, amount in self.budgets.items() if self.labs[name].on_spawn_page}

    @property
    def shares_gpus(self) -> bool:
        """Whether any lab shares its GPUs (time-slicing or MPS), which is what Karpenter's NodeOverlays are for."""
        return any(lab.slices_per_gpu > 1 for lab in self.labs.values())

    @property
    def has_classes(self) -> bool:
        """Whether any lab has classes, which is what Karpenter's CapacityBuffers are for."""
        return any(lab.classes for lab in self.labs.values())
