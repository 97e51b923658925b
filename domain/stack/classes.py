"""Checks of a lab's classes: schedules that fire, warmups that can be shifted exactly, terms whose days the class
meets on, local times that a daylight-saving change neither skips nor repeats, days whose skipped midnight would make
the CronJob controller miss the class (robfig/cron v3.0.1 spec.go Next, domain/time/cron.py robfig_next), seats and
budgets that fit, alone and for classes that overlap."""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from pydantic import ValidationError, ValidationInfo, ValidatorFunctionWrapHandler

from domain.capacity.node_capacity import learner_seats
from domain.problems import FieldProblem, report
from domain.stack import context
from domain.stack.disruption import cron_schedule
from domain.stack.fields import errors_beside, valid_entries
from domain.time import class_calendar, cron, durations, zones
from domain.time.budget_windows import Window, windows
from domain.time.cron import Schedule


class _LabClass(Protocol):
    """What these checks read of a class: domain.stack.model's LabClass, which attaches them (and so imports this
    module)."""

    @property
    def warm_seats(self) -> int | None: ...

    @property
    def start(self) -> Schedule: ...

    @property
    def identity(self) -> str: ...

    @property
    def budget_windows(self) -> tuple[Window, ...]: ...

    @property
    def term(self) -> _Term | None: ...

    def occurrences(
        self, first: datetime.date | None = None, last: datetime.date | None = None
    ) -> Iterator[class_calendar.Occurrence]: ...


class _Term(Protocol):
    """What these checks read of a class's term: domain.stack.model's Term."""

    @property
    def start(self) -> datetime.date: ...

    @property
    def end(self) -> datetime.date: ...

    @property
    def skip(self) -> Sequence[datetime.date]: ...


# How long before a class starts its seats are asked for, by default: Karpenter's batching, EC2 launch, boot and join
# of a GPU node with the NVIDIA AMI, the device plugin, and the pull of a multi-GiB notebook image (about five minutes
# to a Ready node and up to ten for a 10 GB image, as reported by practitioners; not measured by gpulab), plus room
# for a retry in another zone or instance type after an insufficient-capacity error.
DEFAULT_WARMUP = "20m"
# Longer warmups only pay for idle GPUs; below a day also keeps the warmup's shift to at most the day before.
MAX_WARMUP_MINUTES = 6 * 60
# Karpenter's budgets per NodePool (the NodePool CRD's maxItems).
MAX_BUDGETS = 50


def class_zone(time_zone: str | None, stack_zone: str | None) -> str:
    """The zone a class's schedule and term are read in: its own, else the stack's, else UTC."""
    return time_zone or stack_zone or zones.UTC


def class_schedule(value: str) -> str:
    cron_schedule(value, "so the class never starts")
    return value


def at_least_a_minute(value: str) -> str:
    if durations.duration_minutes(value) < 1:
        raise ValueError("must be at least 1m")
    return value


def warmup_range(value: str) -> str:
    if not 1 <= durations.duration_minutes(value) <= MAX_WARMUP_MINUTES:
        raise ValueError(f"must be between 1m and {durations.format_duration(MAX_WARMUP_MINUTES)}")
    return value


def shiftable(warmup: str, info: ValidationInfo) -> str:
    """The class's schedule, shifted warmup earlier, is still a cron schedule, and starts never overlap warmups."""
    if "schedule" not in info.data:
        return warmup
    start, minutes = cron.parse(info.data["schedule"]), durations.duration_minutes(warmup)
    try:
        cron.shift(start, -minutes)
    except cron.ScheduleError as error:
        stay = (
            f"; start at {minutes // 60:02d}:{minutes % 60:02d} or later, or shorten the warmup, so that the warmup "
            "stays within the day"
            if start.times_of_day()[0] < minutes
            else ""
        )
        raise FieldProblem("schedule", f"cannot be warmed up {warmup} ahead exactly: {error}{stay}") from None
    gap = cron.shortest_gap(start)
    if gap is not None and gap <= minutes:
        raise FieldProblem(
            "schedule",
            f"starts only {durations.format_duration(gap)} apart at times, not more than its warmup of "
            f"{warmup}: the next start's warmup would begin before this start has released its seats; "
            "make each start time a class of its own",
        )
    return warmup


def classes_fit(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> list[_LabClass]:
    """A lab's classes: warm seats within its seats, alone and with the classes they overlap, distinct starts, and
    budgets within the NodePool's maximum. Checked among the classes that pass their own checks when another does not,
    so that a wrong key of one class hides no problem of the others (a wrap validator: pydantic skips an after
    validator of a list with a wrong entry)."""
    try:
        classes = handler(value)
    except ValidationError as error:
        problems = _class_problems(list(valid_entries(value, error, handler).items()), info)
        if problems:
            raise errors_beside(error, problems) from None
        raise
    report(_class_problems(list(enumerate(classes)), info))
    return classes


def _class_problems(classes: list[tuple[int, _LabClass]], info: ValidationInfo) -> list[ValueError]:
    problems: list[ValueError] = []
    seats = None
    if {"max_gpus", "slices_per_gpu"} <= info.data.keys():
        seats = learner_seats(info.data["max_gpus"], info.data["slices_per_gpu"])
        for i, lab_class in classes:
            if (lab_class.warm_seats or 0) > seats:
                problems.append(
                    FieldProblem(f"classes[{i}].warmSeats", f"must be at most the lab's {seats} learner seats")
                )
    for n, (i, lab_class) in enumerate(classes):
        earlier = [j for j, other in classes[:n] if other.identity == lab_class.identity]
        if earlier:
            problems.append(FieldProblem(f"classes[{i}].schedule", f"starts when classes[{earlier[0]}] does"))
    if seats is not None:
        # A class with too many warm seats, or starting with another, is reported as such, not as an overlap too.
        repeated = {int(p.key[8 : p.key.index("]")]) for p in problems if isinstance(p, FieldProblem)}
        within = [(i, c) for i, c in classes if i not in repeated]
        problems += overlaps(within, seats)
    if "disruption" in info.data:
        added = sum(len(lab_class.budget_windows) for _, lab_class in classes)
        budgets = len(info.data["disruption"].budgets) + added
        if budgets > MAX_BUDGETS:
            problems.append(
                ValueError(
                    f"its classes add {added} disruption budgets (2 for each class and UTC offset it has), and a "
                    f"NodePool takes at most {MAX_BUDGETS}; this lab would have {budgets}"
                )
            )
    return problems


def overlaps(classes: list[tuple[int, _LabClass]], seats: int) -> list[FieldProblem]:
    """Classes whose times overlap, from one's warm-up to its end, on any day, whatever their terms and time zones,
    that together ask for more warm seats than the lab's `seats`: while one class warms up, the learners of the others
    hold their seats, and Karpenter warms seats only within the NodePool's limits. One problem for each set of classes
    that overlap, at the warmSeats of the last of them, naming the first moment they all overlap (in UTC)."""
    wants = {i: c.warm_seats or seats for i, c in classes}
    if len(classes) < 2 or sum(wants.values()) <= seats:
        return []
    first, last = _overlap_days([c for _, c in classes])
    events: list[tuple[datetime.datetime, int, int]] = []  # (moment, 0 for an end before 1 for a warm-up, class)
    for i, lab_class in classes:
        for occurrence in lab_class.occurrences(first, last):
            events += [(occurrence.warm, 1, i), (occurrence.end, 0, i)]
    events.sort()
    running: dict[int, int] = {}
    reported: set[frozenset[int]] = set()
    problems = []
    for moment, begins, i in events:
        if not begins:
            running[i] -= 1
            if not running[i]:
                del running[i]
            continue
        running[i] = running.get(i, 0) + 1
        together = frozenset(running)
        if sum(wants[j] for j in together) <= seats or together in reported:
            continue
        reported.add(together)
        last_one, others = max(together), sorted(together - {max(together)})
        problems.append(
            FieldProblem(
                f"classes[{last_one}].warmSeats",
                f"its warm-up or class overlaps those of {' and '.join(f'classes[{j}]' for j in others)} on "
                f"{moment:%a %Y-%m-%d} from {moment:%H:%M} UTC: together they ask for "
                f"{' + '.join(str(wants[j]) for j in sorted(together))} warm seats, more than the lab's {seats} "
                "learner seats (Karpenter warms seats only within them); warm fewer seats, or move a class",
            )
        )
    return problems


def _overlap_days(classes: list[_LabClass]) -> tuple[datetime.date, datetime.date]:
    """The days over which classes may overlap: the horizon when two repeat all year, else the days of the terms (a
    class without a term meets only those within them), a day wider either side for classes over midnight."""
    terms = [c.term for c in classes if c.term is not None]
    if len(classes) - len(terms) >= 2 or not terms:
        return class_calendar.horizon()
    day = datetime.timedelta(days=1)
    return min(t.start for t in terms) - day, max(t.end for t in terms) + day


_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def iso_day(value: Any) -> Any:
    """A day written YYYY-MM-DD, as the Pulumi CLI passes it (it reads stack files with gopkg.in/yaml.v2, which keeps
    an unquoted date as its text)."""
    if isinstance(value, str) and _DAY.fullmatch(value):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a day of the calendar") from None
    raise ValueError(f"must be a day written YYYY-MM-DD, such as 2027-01-11, got {value!r}")


def ends_after_start(end: datetime.date, info: ValidationInfo) -> datetime.date:
    if "start" in info.data and end < info.data["start"]:
        raise ValueError(f"must not be before the term's start, {info.data['start']}; got {end}")
    return end


def skips_within_term(skip: list[datetime.date], info: ValidationInfo) -> list[datetime.date]:
    if {"start", "end"} <= info.data.keys():
        first, last = info.data["start"], info.data["end"]
        report(
            [
                FieldProblem(f"skip[{i}]", f"{day} is outside the term ({first} to {last}); remove it")
                for i, day in enumerate(skip)
                if not first <= day <= last
            ]
        )
    return skip


def holds_every_day(term: _Term | None, info: ValidationInfo) -> _Term | None:
    """The term names only days the class meets on, and on every class day (of the term, or over the horizon without
    one) the start and the warm-up exist once on the zone's clock and its budget windows can be written in UTC.

    Each part reads only the keys it needs, so that a wrong timeZone, warmup or duration hides none of the others:
    the term's days need the schedule; the start on the clock, the time zone too; the warm-up, the warmup; the budget
    windows, the duration."""
    if "schedule" not in info.data:
        return term
    start = cron.parse(info.data["schedule"])
    if term is not None:
        report(
            [
                FieldProblem(f"term.skip[{i}]", f"{day} is a {day:%A}, on which the class does not start; remove it")
                for i, day in enumerate(term.skip)
                if not start.matches_day(day)
            ]
        )
        if next(class_calendar.class_days(start, term.start, term.end, term.skip), None) is None:
            raise ValueError(f"has no day on which the class starts ({info.data['schedule']})")
    if "time_zone" not in info.data:
        return term
    zone = class_zone(info.data["time_zone"], context.of(info.context).time_zone)
    # Without a valid warmup the start alone is checked (a warm-up of 0 is the start itself).
    warmup = durations.duration_minutes(info.data["warmup"]) if "warmup" in info.data else 0
    duration = durations.duration_minutes(info.data["duration"]) if "duration" in info.data else None
    days = None if term is None else (term.start, term.end, tuple(term.skip))
    planned = class_calendar.planned(start, zone, warmup, duration or 1, days)
    if missed := class_calendar.missed_days(start, zone, warmup, planned):
        raise FieldProblem("schedule", _missed(missed, zone, term is not None))
    if "warmup" in info.data and duration is not None:
        windows(start, warmup, duration, planned, class_calendar.fixed_offset(zone), term is not None)
    return term


def _missed(missed: list[tuple[datetime.date, str]], zone: str, has_term: bool) -> str:
    days = sorted({day for day, _ in missed})
    jobs = sorted({job for _, job in missed}, key=lambda job: not job.startswith("warm"))
    shown = ", ".join(f"{day:%a %Y-%m-%d}" for day in days[:3]) + (
        f" and {len(days) - 3} more" if len(days) > 3 else ""
    )
    them = "those days" if len(days) > 1 else "that day"
    fix = f"skip {them} (term.skip)" if has_term else f"give the class a term that skips {them}"
    return (
        f"the CronJob controller would not run its {' nor its '.join(jobs)} on {shown}: {zone} skips midnight on "
        f"{them} (its clocks go forward at 00:00), and the controller's cron "
        "library (robfig/cron v3.0.1) then misses the whole day unless the schedule fires the day before too; "
        f"{fix}, or choose another zone"
    )
