"""The building blocks of the stack configuration's models: the base model, the shared checks and the value types.

Checks that compare keys are field validators of the key they report on, reading the keys declared before it from
`info.data`, which holds exactly those that are valid. Pydantic runs them even when other keys of the model fail, where
it would skip a model validator, so that every key's problem is reported in one pass (a key with several problems
reports its first). They set `validate_default` on their field, so that they also run when the key is left to its
default. A check that reports at another key of its model raises FieldProblem naming that key. A check that needs a
key that is wrong (not in `info.data`) says nothing: that key's own problem is the one to fix.

A list or dict whose entry is wrong fails as a whole, and pydantic then runs no check after it: the checks across a
lab's classes (classes_fit) run among the classes that pass their own (a wrap validator, with valid_entries), and the
checks of keys after gpulab:labs read the labs that pass theirs (labs_checked, from the stack context).
"""

import difflib
import inspect
import math
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo
from pydantic.alias_generators import to_camel

from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.instance_types import GpuInstanceType as GpuInstanceTypeData
from domain.capacity.quantity import QUANTITY, quantity
from domain.problems import Problems, report
from domain.stack import context
from domain.stack.images import qualify_image
from domain.time import durations
from domain.upstream.ami_releases import REFUSED
from domain.upstream.eks_calendar import CALENDAR
from domain.upstream.versions import ADDON_VERSIONS, KUBE_SCHEDULER_VERSIONS


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, alias_generator=to_camel)


def _found(check: Callable[..., Any], value: Any, info: ValidationInfo) -> list[ValueError]:
    try:
        check(value, info) if len(inspect.signature(check).parameters) == 2 else check(value)
    except Problems as several:
        return several.problems
    except ValueError as problem:
        return [problem]
    return []


def all_of(*checks: Callable[..., Any]) -> AfterValidator:
    """The checks of one key, each run and every problem reported, where a chain of AfterValidators stops at the
    first; each check takes the value (and the ValidationInfo) and returns it unchanged."""

    def check(value: Any, info: ValidationInfo) -> Any:
        report([problem for each in checks for problem in _found(each, value, info)])
        return value

    return AfterValidator(check)


def between(low: int, high: int):
    def check(value: int) -> int:
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return AfterValidator(check)


def at_least(low: int):
    def check(value: int) -> int:
        if value < low:
            raise ValueError(f"must be at least {low}, got {value}")
        return value

    return AfterValidator(check)


def matching(pattern: str, what: str):
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {what}, got {value!r}")
        return value

    return AfterValidator(check)


def positive_amount(value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be a positive amount of US dollars, got {value:g}")
    return value


def unique(values: list) -> list:
    duplicates = sorted({v for v in values if values.count(v) > 1})
    if duplicates:
        raise ValueError(f"must not repeat {', '.join(map(str, duplicates))}")
    return values


def two_or_more(subnets: list[str]) -> list[str]:
    # Karpenter's two replicas must land in two zones, and EKS itself wants subnets in two zones.
    if len(subnets) < 2:
        raise ValueError(f"needs at least two subnets in different availability zones, got {len(subnets)}")
    return subnets


def quoted_version(value: object) -> object:
    # YAML reads an unquoted 1.30 as the float 1.3: insist on a string rather than guess what was meant.
    if isinstance(value, float | int):
        raise ValueError(f'must be a quoted string such as "1.34", got the number {value}')
    return value


# The versions gpulab runs: it pins each EKS add-on's build and the user-scheduler's kube-scheduler per Kubernetes
# minor version (domain/upstream/versions.py), and it prices and checks each version's support from EKS's calendar
# (domain/upstream/eks_calendar.py). A version is known when all of them have it.
KNOWN_VERSIONS = sorted(
    set(KUBE_SCHEDULER_VERSIONS).intersection(CALENDAR, *ADDON_VERSIONS.values()), key=lambda v: int(v.split(".")[1])
)


def known_version(version: str) -> str:
    if version not in KNOWN_VERSIONS:
        raise ValueError(
            f"gpulab runs Kubernetes {KNOWN_VERSIONS[0]} to {KNOWN_VERSIONS[-1]}, not {version}: a version needs its "
            "EKS add-ons and kube-scheduler pinned (domain/upstream/versions.py) and its EKS support dates "
            "(domain/upstream/eks_calendar.py)"
        )
    return version


def gpu_instance_type(value: str) -> str:
    if value not in GPU_INSTANCE_TYPES:
        close = difflib.get_close_matches(value.lower(), GPU_INSTANCE_TYPES, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ValueError(
            f"{value!r} is not an NVIDIA GPU instance type that gpulab knows "
            "(the list is in domain/capacity/instance_types.py)"
            f"{hint}"
        )
    return value


def ami_alias(value: str) -> str:
    # Karpenter resolves al2023@<version> to the release of that date; for GPU instance types it picks the NVIDIA
    # variant. amazon-eks-ami names its releases v<YYYYMMDD>, and the alias takes the name as it is.
    if re.fullmatch(r"al2023@(v[0-9]{8}|latest)", value):
        release = value.partition("@")[2]
        if defect := REFUSED.get(release):
            raise ValueError(
                f"release {release} is refused: {defect.what}, says {defect.source}; choose {defect.fixed_in} or a "
                "later release"
            )
        return value
    hint = ""
    if missing_v := re.fullmatch(r"al2023@([0-9]{8})", value):
        hint = f"; did you mean al2023@v{missing_v[1]}? (amazon-eks-ami names its releases v<YYYYMMDD>)"
    raise ValueError(f"must be an AL2023 AMI alias, al2023@v<YYYYMMDD> or al2023@latest, got {value!r}{hint}")


DNS_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"


# EKS allows 100 characters, but the interruption queue is named after the cluster and SQS allows 80.
ClusterName = Annotated[
    str,
    matching(
        r"[a-z]([a-z0-9-]{0,78}[a-z0-9])?",
        "lowercase letters, digits and '-', starting with a letter and at most 80 long",
    ),
]
KubernetesVersion = Annotated[
    str, BeforeValidator(quoted_version), matching(r"1\.[0-9]{2}", 'a Kubernetes minor version such as "1.34"')
]
VpcId = Annotated[str, matching(r"vpc-[0-9a-f]{8,17}", "a VPC ID such as vpc-0a1b2c3d4e5f60718")]
SubnetId = Annotated[str, matching(r"subnet-[0-9a-f]{8,17}", "a subnet ID such as subnet-0a1b2c3d4e5f60718")]
GpuInstanceType = Annotated[str, AfterValidator(gpu_instance_type)]
AmiAlias = Annotated[str, AfterValidator(ami_alias)]
CapacityType = Literal["on-demand", "spot", "reserved"]
ImageReference = Annotated[str, AfterValidator(qualify_image)]
# Karpenter's duration grammar (NodePool CRD): e.g. 30m, 1h30m, 720h.
DURATION = r"([0-9]+(s|m|h))+"
# A bare number (`duration: 120`) is refused with the units it may have meant (domain/time/durations.py).
Duration = Annotated[
    str, BeforeValidator(durations.unit_needed), matching(DURATION, "a duration such as 10m, 1h30m or 720h")
]
# Karpenter's budget durations (NodePool CRD): hours and minutes only; class durations and warmups are written alike.
ClockDuration = Annotated[
    str,
    BeforeValidator(durations.unit_needed),
    matching(r"[0-9]+(h|m)|[0-9]+h[0-9]+m", "hours and minutes such as 45m, 2h or 1h30m"),
]


def not_negative(value: str) -> str:
    # The API server refuses a negative request or limit (ValidateNonnegativeQuantity).
    if quantity(value) < 0:
        raise ValueError(f"must not be negative, got {value!r}: Kubernetes refuses negative requests")
    return value


def number_as_text(value: object) -> object:
    # The API server reads a quantity written as a JSON number as it reads the same text (resource.Quantity's
    # UnmarshalJSON parses an unquoted value with ParseQuantity): `cpu: 2` is `cpu: "2"`. true and false are no number.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value) if math.isfinite(value) else value
    return value


# A Kubernetes resource quantity in any form Kubernetes reads, e.g. 1, 0.5, 500m, 1Gi, 4e9, or the number 2.
Quantity = Annotated[
    str,
    BeforeValidator(number_as_text),
    matching(QUANTITY, "a Kubernetes quantity such as 1, 0.5, 500m, 1Gi or 4e9"),
    AfterValidator(not_negative),
]
# An IAM role ARN, e.g. of an operators' role or a CI deploy role: EKS access entries name roles, not sessions.
RoleArn = Annotated[
    str,
    matching(
        r"arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}",
        "an IAM role ARN such as arn:aws:iam::123456789012:role/platform-admins",
    ),
]
ReservationId = Annotated[str, matching(r"cr-[0-9a-f]{17}", "a capacity reservation ID such as cr-0123456789abcdef0")]
Version = Annotated[str, matching(r"[0-9]+\.[0-9]+\.[0-9]+", "a chart version such as 1.14.1")]
Namespace = Annotated[str, matching(DNS_LABEL, "a Kubernetes namespace name (a DNS-1123 label)")]
# Namespaces every cluster has: gpulab installs into them as they are and creates any other it is given.
BUILT_IN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def lab_instance_types(info: ValidationInfo) -> list[tuple[str, GpuInstanceTypeData]]:
    """The lab's instance types and their data, for a check of a key declared after instanceTypes; none if invalid."""
    return [(name, GPU_INSTANCE_TYPES[name]) for name in info.data.get("instance_types", [])]


def labs_checked(info: ValidationInfo) -> tuple[dict[str, Any], bool]:
    """The labs a check of a key after gpulab:labs reads, and whether they are all of the stack's labs: those of
    `info.data`, else (some lab is wrong) the labs that passed their own checks, kept in the stack context
    (domain/stack/context.py valid_labs), which a check that needs every lab (none on the spawn page, none with a
    budget) must not judge the stack by. So a wrong key of one lab neither hides the other labs' problems with the hub,
    the meter or the budgets nor causes one."""
    if "labs" in info.data:
        return info.data["labs"], True
    return context.of(info.context).valid_labs, False


def data_checked(info: ValidationInfo) -> dict[str, Any]:
    """`info.data` with gpulab:labs as labs_checked reads it, for a check that hands the settings on
    (namespace_clash)."""
    return {**info.data, "labs": labs_checked(info)[0]}


def errors_beside(error: ValidationError, problems: Sequence[ValueError]) -> ValidationError:
    """`error`, a container's failed validation, with the problems its own checks found among the entries that passed
    theirs: one ValidationError naming both, at the container's key (a FieldProblem at the key it names)."""
    details: list[Any] = [
        {"type": e["type"], "loc": e["loc"], "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e else {})}
        for e in error.errors()
    ]
    details += [{"type": "value_error", "loc": (), "input": None, "ctx": {"error": p}} for p in problems]
    return ValidationError.from_exception_data(error.title, details)


def valid_entries(value: Any, error: ValidationError, handler: Callable[[Any], Any]) -> dict[Any, Any]:
    """The entries of a list or dict whose validation failed with `error` that pass their own checks (by index or
    key), each validated alone through `handler`, the container's validator."""
    wrong = {e["loc"][0] for e in error.errors() if e["loc"]}
    if isinstance(value, list):
        candidates: dict[Any, Any] = {i: v for i, v in enumerate(value) if i not in wrong}
    elif isinstance(value, dict):
        candidates = {k: v for k, v in value.items() if k not in wrong and str(k) not in wrong}
    else:
        return {}
    valid = {}
    for key, entry in candidates.items():
        try:
            checked = handler([entry] if isinstance(value, list) else {key: entry})
        except ValidationError:
            continue
        valid[key] = checked[0] if isinstance(value, list) else checked[key]
    return valid
