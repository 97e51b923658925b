"""Checks of a lab's classes: schedules that fire, warmups that can be shifted exactly, seats and budgets that fit."""

from __future__ import annotations

from typing import Protocol

from pydantic import ValidationInfo

from config import durations, schedule
from config.disruption import cron
from config.fields import FieldProblem
from config.schedule import Schedule


class _LabClass(Protocol):
    """What these checks read of a class: config.model's LabClass, which attaches them (and so imports this module)."""

    @property
    def warm_seats(self) -> int | None: ...

    @property
    def start(self) -> Schedule: ...


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


def class_schedule(value: str) -> str:
    cron(value, "so the class never starts")
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


def classes_fit(classes: list[_LabClass], info: ValidationInfo) -> list[_LabClass]:
    """A lab's classes: warm seats within its seats, distinct starts, and budgets within the NodePool's maximum."""
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
