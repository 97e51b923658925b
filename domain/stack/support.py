"""Whether a stack may run its Kubernetes version on the day it is checked: a version past EKS standard support is
refused unless the stack chose to pay for extended support (gpulab:cluster.supportType: EXTENDED), and one past
extended support is refused outright.

EKS would not refuse either: by default it puts a cluster past standard support into extended support at six times
the price, and a cluster with supportType STANDARD is upgraded by EKS on a day of its choosing ("If you disable
extended support, your cluster will be auto upgraded at the end of standard support", EKS User Guide,
kubernetes-versions). A course cannot have either happen unseen, so the stack says which it wants. The day is the day of
the run in UTC (domain/time/utc.py today), as EKS's calendar and billing are in UTC.
"""

from pydantic import ValidationInfo

from domain.cost.prices import EKS_USD_PER_CLUSTER_HOUR
from domain.problems import FieldProblem
from domain.time import utc
from domain.upstream.eks_calendar import CALENDAR

EXTENDED = "EXTENDED"
# Where a user reads the versions gpulab runs and their dates.
VERSIONS_DOC = "docs/configuration.md#kubernetes-versions"


def in_standard_support() -> list[str]:
    """The versions in EKS standard support today, oldest first."""
    today = utc.today()
    return sorted((v for v, w in CALENDAR.items() if today < w.end_of_standard), key=lambda v: int(v.split(".")[1]))


def support_chosen(support_type: str, info: ValidationInfo) -> str:
    """supportType's check, reported at kubernetesVersion, which is what most stacks will change."""
    version = info.data.get("kubernetes_version")
    if version is None:  # the version is wrong itself, and reported at its key
        return support_type
    window, today = CALENDAR[version], utc.today()
    supported = ", ".join(in_standard_support()) or "none"
    move = f"move gpulab:cluster.kubernetesVersion to a version in standard support ({supported}; {VERSIONS_DOC})"
    if today >= window.end_of_extended:
        raise FieldProblem(
            "kubernetesVersion",
            f"Kubernetes {version} left EKS extended support on {window.end_of_extended} (today is {today}, UTC): "
            f"EKS creates no cluster on it and upgrades a running one itself; {move}",
        )
    if today >= window.end_of_standard and support_type != EXTENDED:
        prices = EKS_USD_PER_CLUSTER_HOUR
        raise FieldProblem(
            "kubernetesVersion",
            f"Kubernetes {version} left EKS standard support on {window.end_of_standard} (today is {today}, UTC): "
            f"{move}, or set gpulab:cluster.supportType: EXTENDED to keep {version} until {window.end_of_extended} "
            f"at {prices['extended']} USD per cluster-hour instead of {prices['standard']}",
        )
    return support_type
