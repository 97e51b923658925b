"""What a lab's GPU nodes cost at the reference prices of config/prices.py: per learner seat-hour, and at most per hour.

A learner seat is one slice of one GPU, so a seat-hour on an instance type costs its hourly price / (its GPUs x
slicesPerGpu). The lab's NodePool limit lets Karpenter run at most maxGpus GPUs, each costing at most the highest
per-GPU price among the lab's instance types: that product is the lab's ceiling per hour. Figures cover the instance
types that have a reference price; the others are listed, never priced. Amounts are USD rounded to 4 decimals, the
ceiling upwards so that it stays an upper bound.

Warm seats cost too: before each class, its warm seats' nodes run for the warmup with no learner on them yet. Their
cost is the nodes the warm seats need (a node seats slicesPerGpu x its GPUs) times the warmup at the node's price,
given per class for the cheapest and the dearest of the lab's priced types (as if Karpenter launched only that type).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from typing import Any

from pydantic import ValidationInfo

from config import durations
from config.instance_types import GPU_INSTANCE_TYPES
from config.prices import ON_DEMAND_USD_PER_HOUR, PRICE_SOURCE

DECIMALS = 4


def usd(amount: float) -> str:
    """An amount as every gpulab report writes it: 4 decimals, the precision the figures are rounded to."""
    return f"{amount:.{DECIMALS}f}"


@dataclass(frozen=True)
class ClassWarmup:
    """One class's warm seats, and what warming them costs before it starts."""

    schedule: str
    warm_seats: int
    warmup: str  # a ClockDuration, e.g. 20m
    usd: tuple[float, float] | None  # (cheapest, dearest) over the priced types; None when none has a price

    def as_output(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule,
            "warmSeats": self.warm_seats,
            "warmup": self.warmup,
            "usd": list(self.usd) if self.usd else None,
        }


@dataclass(frozen=True)
class LabCost:
    """One lab's figures at the reference prices; all None when none of its instance types has a price."""

    seat_hour: tuple[float, float] | None  # (cheapest, dearest) USD per learner seat-hour over the priced types
    ceiling_per_hour: float | None  # USD per hour: maxGpus x the highest per-GPU hourly price
    ceiling_basis: str | None  # how the ceiling is made up, for messages
    unpriced: tuple[str, ...]  # the lab's instance types without a reference price
    max_hourly_cost: float | None  # the lab's cap (maxHourlyCost), if it has one
    warmups: tuple[ClassWarmup, ...] = ()  # one per class, in the order of the lab's classes

    @property
    def cap_problem(self) -> str | None:
        """Why the lab's cap refuses it, or None: a ceiling above the cap, or a ceiling that cannot be known."""
        if self.max_hourly_cost is None:
            return None
        if self.unpriced or self.ceiling_per_hour is None:
            # A cap that cannot be checked would be a silently ignored key: fail closed.
            return (
                f"cannot be checked: {', '.join(self.unpriced)} {'has' if len(self.unpriced) == 1 else 'have'} no "
                f"reference price ({PRICE_SOURCE}); leave out the instance types without a price, or the cap"
            )
        if self.ceiling_per_hour > self.max_hourly_cost:
            return (
                f"the lab may cost up to {usd(self.ceiling_per_hour)} USD per hour ({self.ceiling_basis}; "
                f"{PRICE_SOURCE}), more than this cap of {usd(self.max_hourly_cost)}: lower maxGpus, leave out the "
                "dearest instance type or raise the cap"
            )
        return None

    def as_output(self) -> dict[str, Any]:
        """The `labs.<lab>.cost` stack output."""
        return {
            "seatHour": list(self.seat_hour) if self.seat_hour else None,
            "ceilingPerHour": self.ceiling_per_hour,
            "maxHourlyCost": self.max_hourly_cost,
            "unpriced": list(self.unpriced),
            "warmups": [warmup.as_output() for warmup in self.warmups],
            "source": PRICE_SOURCE,
        }


def warmup_cost(
    instance_types: Sequence[str], slices_per_gpu: int, warm_seats: int, warmup: str
) -> tuple[float, float] | None:
    """USD to run the nodes of `warm_seats` seats for `warmup` before a class: (cheapest, dearest) over the priced
    types, each as if all the warm nodes were of that type."""
    hours = Decimal(durations.duration_minutes(warmup)) / 60
    amounts = [
        _rounded(
            math.ceil(warm_seats / (slices_per_gpu * GPU_INSTANCE_TYPES[t].gpus))
            * Decimal(str(ON_DEMAND_USD_PER_HOUR[t]))
            * hours,
            ROUND_HALF_UP,
        )
        for t in instance_types
        if t in ON_DEMAND_USD_PER_HOUR
    ]
    return (min(amounts), max(amounts)) if amounts else None


def lab_cost(
    instance_types: Sequence[str],
    slices_per_gpu: int,
    max_gpus: int,
    max_hourly_cost: float | None = None,
    classes: Sequence[tuple[str, int, str]] = (),
) -> LabCost:
    """`classes`: (schedule, warm seats, warmup) of each of the lab's classes."""
    warmups = tuple(
        ClassWarmup(schedule, seats, warmup, warmup_cost(instance_types, slices_per_gpu, seats, warmup))
        for schedule, seats, warmup in classes
    )
    # Decimal arithmetic on the prices as upstream writes them, so that rounding happens once, at the end.
    per_gpu = {
        t: Decimal(str(ON_DEMAND_USD_PER_HOUR[t])) / GPU_INSTANCE_TYPES[t].gpus
        for t in instance_types
        if t in ON_DEMAND_USD_PER_HOUR
    }
    unpriced = tuple(t for t in instance_types if t not in ON_DEMAND_USD_PER_HOUR)
    if not per_gpu:
        return LabCost(None, None, None, unpriced, max_hourly_cost, warmups)
    seat_hours = [_rounded(price / slices_per_gpu, ROUND_HALF_UP) for price in per_gpu.values()]
    dearest = max(per_gpu, key=per_gpu.__getitem__)
    return LabCost(
        seat_hour=(min(seat_hours), max(seat_hours)),
        # Rounded up: a ceiling must never read lower than what the NodePool limit lets Karpenter run.
        ceiling_per_hour=_rounded(max_gpus * per_gpu[dearest], ROUND_CEILING),
        ceiling_basis=f"maxGpus {max_gpus} x {per_gpu[dearest].normalize():f} USD per GPU-hour of {dearest}",
        unpriced=unpriced,
        max_hourly_cost=max_hourly_cost,
        warmups=warmups,
    )


def _rounded(amount: Decimal, rounding: str) -> float:
    return float(amount.quantize(Decimal(1).scaleb(-DECIMALS), rounding=rounding))


def within_max_hourly_cost(cap: float | None, info: ValidationInfo) -> float | None:
    """A lab's maxHourlyCost: at least its ceiling at the reference prices, so that the cap can hold."""
    if cap is None or not {"instance_types", "slices_per_gpu", "max_gpus"} <= info.data.keys():
        return cap
    cost = lab_cost(info.data["instance_types"], info.data["slices_per_gpu"], info.data["max_gpus"], cap)
    if problem := cost.cap_problem:
        raise ValueError(problem)
    return cap
