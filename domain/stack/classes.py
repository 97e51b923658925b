"""Checks of a lab's classes: schedules that fire, warmups that can be shifted exactly, terms whose days the class
meets on, local times that a daylight-saving change neither skips nor repeats, seats and budgets that fit."""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import ValidationInfo

from domain.capacity.node_capacity import learner_seats
from domain.problems import FieldProblem, report
from domain.stack import context
from domain.stack.disruption import cron_schedule
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


def classes_fit(classes: list[_LabClass], info: ValidationInfo) -> list[_LabClass]:
    """A lab's classes: warm seats within its seats, distinct starts, and budgets within the NodePool's maximum."""
    problems: list[ValueError] = []
    if {"max_gpus", "slices_per_gpu"} <= info.data.keys():
        seats = learner_seats(info.data["max_gpus"], info.data["slices_per_gpu"])
        for i, lab_class in enumerate(classes):
            if (lab_class.warm_seats or 0) > seats:
                problems.append(
                    FieldProblem(f"classes[{i}].warmSeats", f"must be at most the lab's {seats} learner seats")
                )
    for i, lab_class in enumerate(classes):
        earlier = [j for j, other in enumerate(classes[:i]) if other.identity == lab_class.identity]
        if earlier:
            problems.append(FieldProblem(f"classes[{i}].schedule", f"starts when classes[{earlier[0]}] does"))
    if "disruption" in info.data:
        added = sum(len(lab_class.budget_windows) for lab_class in classes)
        budgets = len(info.data["disruption"].budgets) + added
        if budgets > MAX_BUDGETS:
            problems.append(
                ValueError(
                    f"its classes add {added} disruption budgets (2 for each class and UTC offset it has), and a "
                    f"NodePool takes at most {MAX_BUDGETS}; this lab would have {budgets}"
                )
            )
    report(problems)
    return classes


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
    one) the start and the warm-up exist once on the zone's clock and its budget windows can be written in UTC. A
    class that names no zone is read in the stack's gpulab:timeZone: pydantic's validation context
    (domain/stack/context.py)."""
    if not {"schedule", "duration", "warmup", "time_zone"} <= info.data.keys():
        return term
    stack_zone = context.of(info.context).time_zone
    start, zone = cron.parse(info.data["schedule"]), class_zone(info.data["time_zone"], stack_zone)
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
    warmup, duration = (durations.duration_minutes(info.data[key]) for key in ("warmup", "duration"))
    days = None if term is None else (term.start, term.end, tuple(term.skip))
    planned = class_calendar.planned(start, zone, warmup, duration, days)
    windows(start, warmup, duration, planned, class_calendar.fixed_offset(zone), term is not None)
    return term
