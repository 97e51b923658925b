"""When Karpenter may remove a lab's emptied nodes: consolidateAfter after its last learner leaves, or later, at the
first moment the lab's NodePool disruption budgets allow the Empty reason again.

Karpenter removes an empty node for the reason Empty (sigs.k8s.io/karpenter v1.14.1
pkg/controllers/disruption/emptiness.go, Emptiness.Reason), and allows as many nodes for a reason as the least of the
active budgets that name it, or name none (pkg/apis/v1/nodepool.go, GetAllowedDisruptionsByReason). A budget is active
from each firing of its schedule for its duration, [firing, firing + duration), always when it has neither
(Budget.IsActive); a percentage is rounded up over the lab's nodes (GetAllowedDisruptions), so only "0" or "0%" stops
every removal. All CONFIRMED in the module source at v1.14.1. The budgets read are the NodePool's:
the lab's own (disruption.budgets) and its classes' windows (domain/time/budget_windows.py), as
components/karpenter/manifests.py node_pool_budgets writes them. Schedules are evaluated by domain/time/cron.py.
"""

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from domain.time import cron, durations
from domain.time.budget_windows import EMPTY
from domain.time.cron import Schedule

_UTC = datetime.UTC
# Firings are whole minutes: a second either side turns fires()'s [start, end) into (moment - duration, moment].
_SECOND = datetime.timedelta(seconds=1)


@dataclass(frozen=True)
class Hold:
    """A budget of the lab's NodePool that allows no empty node to go while active: from each firing of `schedule`
    (UTC) for `minutes`, or always when `schedule` is None. `said` names it as the stack config does."""

    schedule: Schedule | None
    minutes: int
    said: str


def _none_allowed(nodes: str) -> bool:
    return int(nodes.rstrip("%")) == 0


def holds(lab: Any) -> tuple[Hold, ...]:
    """The budgets of `lab`'s NodePool (domain.stack.model's Lab) that stop an empty node from going while active."""
    own = [
        Hold(
            None if budget.schedule is None else cron.parse(budget.schedule),
            0 if budget.duration is None else durations.duration_minutes(budget.duration),
            f"disruption.budgets[{index}]"
            + ("" if budget.schedule is None else f" ({budget.schedule} UTC for {budget.duration})"),
        )
        for index, budget in enumerate(lab.disruption.budgets)
        if _none_allowed(budget.nodes) and (budget.reasons is None or EMPTY[0] in budget.reasons)
    ]
    windows = [
        Hold(window.schedule, window.minutes, f"classes[{index}]'s window ({window.schedule} UTC)")
        for index, lab_class in enumerate(lab.classes)
        for window in lab_class.budget_windows
        if EMPTY[0] in window.reasons
    ]
    return (*own, *windows)


@dataclass(frozen=True)
class Removal:
    """When emptied nodes may go: `at` (None: not before `until`, the end of what was asked), and the hold that kept
    them last past the moment asked about (None: none did)."""

    at: datetime.datetime | None
    kept_by: Hold | None


def removable(holding: Iterable[Hold], moment: datetime.datetime, until: datetime.datetime) -> Removal:
    """The first moment at or after `moment` (aware) at which no hold in `holding` is active, looked for up to
    `until`."""
    found = tuple(holding)
    kept_by = None
    while moment < until:
        naive = moment.astimezone(_UTC).replace(tzinfo=None)
        ends = []
        for hold in found:
            if hold.schedule is None:
                return Removal(None, hold)
            length = datetime.timedelta(minutes=hold.minutes)
            ends += [(fire + length, hold) for fire in hold.schedule.fires(naive - length + _SECOND, naive + _SECOND)]
        if not ends:
            return Removal(moment, kept_by)
        end, kept_by = max(ends, key=lambda pair: pair[0])
        moment = end.replace(tzinfo=_UTC)
    return Removal(None, kept_by)
