"""Checks of a lab's disruption budgets: schedules Karpenter can parse and that fire, in the NodePool CRD's form."""

import re

from pydantic import ValidationInfo

from domain.time import cron
from domain.time.cron import Schedule

# The NodePool CRD's pattern for a budget schedule (karpenter.sh_nodepools.yaml, Karpenter 1.14.1), with RE2's \s and
# end of text spelled out for Python: the API server refuses what it does not match, e.g. a leading space before @daily.
_BUDGET_SCHEDULE_CRD = re.compile(
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))"
    r"|((.+)[\t\n\f\r ](.+)[\t\n\f\r ](.+)[\t\n\f\r ](.+)[\t\n\f\r ](.+))\Z"
)


def cron_schedule(value: str, never: str) -> Schedule:
    """`value` parsed as Go cron does; `never` says what a schedule that never fires would mean."""
    try:
        parsed = cron.parse(value)
    except cron.ScheduleError as error:
        raise ValueError(f"{value!r} is not a Go cron schedule: {error}") from None
    if cron.never_fires(parsed):
        raise ValueError(f"{value!r} never fires (no day or time matches it), {never}")
    return parsed


def budget_schedule(value: str) -> str:
    # Karpenter parses the schedule only when it evaluates the budget; one it cannot parse fails closed (no
    # disruption at all) and one that never fires counts as always active (kubernetes-sigs/karpenter
    # pkg/apis/v1/nodepool.go, Budget.IsActive): catch both here, not at run time.
    cron_schedule(value, "and Karpenter would treat the budget as always active")
    if not _BUDGET_SCHEDULE_CRD.search(value):
        raise ValueError(f"{value!r} does not match the NodePool CRD's schedule pattern (whitespace around it?)")
    return value


def schedule_with_duration(duration: str | None, info: ValidationInfo) -> str | None:
    if "schedule" in info.data and (info.data["schedule"] is None) != (duration is None):
        raise ValueError("schedule and duration go together")
    return duration
