"""The NodePool budget windows that hold a class's learners in place: in UTC, since Karpenter reads a budget's schedule
as `TZ=UTC <schedule>` (sigs.k8s.io/karpenter v1.14.1 pkg/apis/v1/nodepool.go, Budget.IsActive), and the NodePool CRD
says time zones are not supported.

Two windows per class and UTC offset: nothing that would move a learner from the warm-up to the end, and no empty warm
node removed from the warm-up to ARRIVAL_MINUTES into the class. A class whose UTC offset changes during its term
(daylight saving) gets the pair once per offset, each in the UTC months in which the class starts at that offset; a
class with a term gets its windows only in the months of its term. So in a month with a change, each class day is held
for both offsets' windows (the change, an hour in most zones, longer than the class), and a day without class in a month
of the term (a skipped day, the days before the start or after the end) is held as a class day would be. docs/classes.md
says what that costs. A window is active from each firing of its schedule for its duration, [firing, firing + duration):
IsActive asks whether the schedule fired within the last `duration`.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from dataclasses import dataclass

from domain.problems import FieldProblem
from domain.time import cron, zones
from domain.time.class_calendar import Occurrence
from domain.time.cron import Field, Schedule

# How long after the start the class's warm nodes stay even when empty, for learners to arrive and take them. The Empty
# window opens at the warm-up, not the start: while the buffer is up, Karpenter spares an empty node only if its last
# provisioning pass put a buffer copy there (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/disruption/emptiness.go,
# HasBufferPods; state/cluster.go rebuilds bufferPodCounts wholesale after every pass), and a pass may pack the copies
# onto fewer nodes than the warm-up launched: the rehearsal saw a warm node removed as Empty ten minutes into a
# warm-up, and another launched in its place, which on EC2 would be booting as the class starts.
ARRIVAL_MINUTES = 15
# Reasons for which Karpenter would move a running learner to save money or to roll out a change (NodePool
# disruption reasons; Empty touches only nodes without learners). Expiry, interruption and repair ignore budgets.
MOVES_LEARNERS = ("Drifted", "Underutilized")
EMPTY = ("Empty",)


@dataclass(frozen=True)
class Window:
    """One budget of `nodes: "0"` for `reasons`, active `minutes` from each firing of `schedule` (UTC)."""

    reasons: tuple[str, ...]
    schedule: Schedule
    minutes: int
    offset: datetime.timedelta  # the class's UTC offset this window is for


@functools.lru_cache(maxsize=1024)
def windows(
    start: Schedule,
    warmup: int,
    duration: int,
    planned: tuple[Occurrence, ...] | None,
    offset: datetime.timedelta | None,
    term: bool,
) -> tuple[Window, ...]:
    """The class's windows. `planned` holds its occurrences over its term (over the horizon without one); it is None
    for a class without a term in a zone of one `offset`, whose windows are its schedule shifted by that offset.
    Cached: validation and the model both ask.

    Raises FieldProblem at `schedule` when a window in UTC cannot be one cron schedule (a start on the 1st of a month
    that UTC puts on the day before, say)."""
    kinds = ((MOVES_LEARNERS, warmup, warmup + duration), (EMPTY, warmup, warmup + min(ARRIVAL_MINUTES, duration)))
    if planned is None:
        assert offset is not None
        offsets, restrict = [offset], False
    else:
        offsets = list(dict.fromkeys(o.offset for o in planned))  # in the order the class first has them
        restrict = term or len(offsets) > 1
    # Restricted, a window names the months it applies in; its days then move across months freely (the day before
    # the 1st of March is in February), so the shift is made with every month named.
    shifted = dataclasses.replace(start, month=Field(frozenset(range(1, 13)))) if restrict else start
    result = []
    for each in offsets:
        for reasons, lead, minutes in kinds:
            total = lead + int(each.total_seconds()) // 60
            try:
                utc = cron.shift(shifted, -total)
            except cron.ScheduleError as error:
                raise FieldProblem(
                    "schedule",
                    f"its budget windows at {zones.utc_offset(each)} cannot be one cron schedule in UTC: {error}",
                ) from None
            if restrict:
                assert planned is not None
                lead_time = datetime.timedelta(minutes=lead)
                months = frozenset((o.start - lead_time).month for o in planned if o.offset == each)
                utc = dataclasses.replace(utc, month=Field(months))
            result.append(Window(reasons, utc, minutes, each))
    return tuple(result)
