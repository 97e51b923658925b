"""The stack configuration users write under the `gpulab` namespace, as typed, validated models.

Field names are snake_case here and camelCase in the stack file (the alias generator), as Pulumi users write them.
Every model forbids unknown keys so that a typo fails loudly instead of silently falling back to a default.
"""

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from config.instance_types import GPU_INSTANCE_TYPES


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
LabName = Annotated[str, _matching(DNS_LABEL, "a DNS-1123 label (lowercase letters, digits and '-', at most 63)")]
ClusterName = Annotated[
    str,
    _matching(
        r"[a-z][a-z0-9-]{0,98}[a-z0-9]",
        "lowercase letters, digits and '-', starting with a letter and at most 100 long",
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


class Lab(Model):
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

    @property
    def learner_seats(self) -> int:
        """Learners the lab can seat at once: every slice of every GPU it may run."""
        return self.max_gpus * self.slices_per_gpu


class Settings(Model):
    """Everything under `gpulab:` in one stack file."""

    cluster: Cluster
    labs: dict[LabName, Lab] = Field(default_factory=dict, description="One entry per lab, keyed by lab name.")
