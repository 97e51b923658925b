"""What a lab's GPU nodes cost at the reference prices of domain/cost/prices.py: per learner seat-hour, and at the
NodePool's GPU limit.

A node costs its instance's hourly price plus its gp3 root volume's per node-hour (storage, and IOPS and throughput
above what gp3 includes; an instance store is part of the instance's price). A learner seat is one slice of one GPU, so
a seat-hour on an instance type costs that node-hour / its seats (its GPUs x slicesPerGpu, seats_per_node of
domain/capacity/node_capacity.py). The lab's NodePool limit lets
Karpenter run at most maxGpus GPUs, each costing at most the highest per-GPU node-hour among the lab's instance types:
that product is what the GPU limit costs per hour (the arithmetic bound). It is the lab's one "at most" figure only
where the planner did not run (domain/cost/learner_cost.py atMostPerHour, which says its basis); the program also uses
it where it needs a figure no fleet within the limit exceeds and the planner's is not known: maxHourlyCost is checked
against it, the NodePool states it for the policy pack beside the cap, and the hub's spend gate counts an unmeasured
minute at it. Figures cover the instance types that have a reference price; the others are listed, never priced.
Amounts are USD rounded to 4 decimals, the GPU limit's cost upwards so that it stays an upper bound.

Warm seats cost too: before each class, its warm seats' nodes run for the warmup with no learner on them yet. Their
cost is the nodes the warm seats need (a node seats slicesPerGpu x its GPUs) times the warmup at the node's price, root
volume included, given per class for the cheapest and the dearest of the lab's priced types (as if Karpenter launched
only that type).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from typing import Any

from pydantic import ValidationInfo

from domain.capacity.disks import GP3_INCLUDED_IOPS, GP3_INCLUDED_MIBPS, Volume, root_volume
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.node_capacity import seats_per_node
from domain.cost.price_book import LIST, Gp3, PriceBook, Where
from domain.cost.prices import HOURS_PER_MONTH
from domain.time import durations

DECIMALS = 4
# What the lab's seatHour and rootVolumePerNodeHour lines count (their `counts`).
SEAT_HOUR = (
    "per learner seat-hour: (a node's hour + its root volume's) / its seats (GPUs x slicesPerGpu), the cheapest and "
    "the dearest of the lab's priced types"
)
ROOT_VOLUME = "each node's gp3 root volume per node-hour (a 730-hour month)"


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
    gpu_limit_per_hour: float | None  # USD per hour: maxGpus x the highest per-GPU hourly price (the arithmetic bound)
    gpu_limit_basis: str | None  # how gpu_limit_per_hour is made up, for messages
    unpriced: tuple[str, ...]  # the lab's instance types without a reference price
    max_hourly_cost: float | None  # the lab's cap (maxHourlyCost), if it has one
    root_volume_per_node_hour: float | None = None  # USD per node-hour of each node's root volume, when it is counted
    warmups: tuple[ClassWarmup, ...] = ()  # one per class, in the order of the lab's classes
    source: str = LIST.source  # where the instances' prices are from (domain/cost/price_book.py)
    # Why each of the unpriced types has no price, where a look-up said (a live preview: components/live_prices.py).
    missing: tuple[tuple[str, str], ...] = ()
    disk_source: str = LIST.gp3_from.source  # where the root volumes' gp3 price is from (price_book.py Origin)

    @property
    def cap_problem(self) -> str | None:
        """Why the lab's cap refuses it, or None: its GPU limit's cost above the cap, or a cost that cannot be known."""
        if self.max_hourly_cost is None:
            return None
        if self.unpriced or self.gpu_limit_per_hour is None:
            # A cap that cannot be checked would be a silently ignored key: fail closed.
            return (
                f"cannot be checked: {', '.join(self.unpriced)} {'has' if len(self.unpriced) == 1 else 'have'} no "
                f"price ({self.source}){self._why}; leave out the instance types without a price, or the cap"
            )
        if self.gpu_limit_per_hour > self.max_hourly_cost:
            return (
                f"the lab may cost up to {usd(self.gpu_limit_per_hour)} USD per hour ({self.gpu_limit_basis}; "
                f"{self.sources}), more than this cap of {usd(self.max_hourly_cost)}: lower maxGpus, leave out the "
                "dearest instance type or raise the cap"
            )
        return None

    @property
    def sources(self) -> str:
        """The price sources behind the figures: the instances', and the disks' when they are counted."""
        return self.source if self.root_volume_per_node_hour is None else f"{self.source}; {self.disk_source}"

    @property
    def _why(self) -> str:
        return "".join(f" ({t}: {why})" for t, why in self.missing)

    def as_output(self, nodes: Where, disks: Where) -> dict[str, Any]:
        """The lab's figures in the `labs.<lab>.cost` stack output, each priced line naming the region and source of
        its own prices: the seat-hours `nodes`' (instances and EBS), the root volume `disks`' (EBS), which differ where
        a preview reads the instances in the stack's region and falls back to the list for EBS."""
        return {
            "seatHour": {
                "usd": list(self.seat_hour) if self.seat_hour else None,
                "region": nodes.region,
                "source": nodes.source,
                "counts": SEAT_HOUR,
            },
            "rootVolumePerNodeHour": {
                "usd": self.root_volume_per_node_hour,
                "region": disks.region,
                "source": disks.source,
                "counts": ROOT_VOLUME,
            },
            "maxHourlyCost": self.max_hourly_cost,
            "unpriced": list(self.unpriced),
            "warmups": [warmup.as_output() for warmup in self.warmups],
        }


def root_volume_per_hour(volume: Volume, gp3: Gp3 = LIST.gp3) -> Decimal:
    """USD per node-hour of a gp3 root volume: its GiB, and its IOPS and MiB/s above what gp3 includes."""
    per_month = (
        volume.size_gib * Decimal(gp3.per_gb_month)
        + max(volume.iops - GP3_INCLUDED_IOPS, 0) * Decimal(gp3.per_iops_month)
        + max(volume.throughput_mibps - GP3_INCLUDED_MIBPS, 0) * Decimal(gp3.per_mibps_month)
    )
    return per_month / HOURS_PER_MONTH


def seat_hour(
    instance_type: str, slices_per_gpu: int, disk: Decimal = Decimal(0), book: PriceBook = LIST
) -> Decimal | None:
    """USD per learner seat-hour on a node of `instance_type`, unrounded: the node-hour (its price at `book`, plus
    `disk`, its root volume per node-hour: 0 for the instance alone) over the seats it holds (seats_per_node). None when
    the type has no price. The one home of a seat-hour: the lab's cost rounds it (lab_cost), the rehearsal picks its
    cheapest type by it (rehearsal/class_day.py cheapest_type)."""
    if instance_type not in book.on_demand:
        return None
    return (Decimal(str(book.on_demand[instance_type])) + disk) / seats_per_node(instance_type, slices_per_gpu)


def warmup_cost(
    instance_types: Sequence[str],
    slices_per_gpu: int,
    warm_seats: int,
    warmup: str,
    disk: Decimal = Decimal(0),
    book: PriceBook = LIST,
) -> tuple[float, float] | None:
    """USD to run the nodes of `warm_seats` seats for `warmup` before a class: (cheapest, dearest) over the priced
    types, each as if all the warm nodes were of that type; `disk` is each node's root volume per hour."""
    hours = Decimal(durations.duration_minutes(warmup)) / 60
    amounts = [
        rounded(
            math.ceil(warm_seats / seats_per_node(t, slices_per_gpu))
            * (Decimal(str(book.on_demand[t])) + disk)
            * hours,
            ROUND_HALF_UP,
        )
        for t in instance_types
        if t in book.on_demand
    ]
    return (min(amounts), max(amounts)) if amounts else None


def lab_cost(
    instance_types: Sequence[str],
    slices_per_gpu: int,
    max_gpus: int,
    max_hourly_cost: float | None = None,
    root: Volume | None = None,
    classes: Sequence[tuple[str, int, str]] = (),
    book: PriceBook = LIST,
) -> LabCost:
    """The figures of a lab at `book`'s prices; without `root`, of its instances alone. `classes`: (schedule, warm
    seats, warmup) of each of the lab's classes."""
    # Decimal arithmetic on the prices as upstream writes them, so that rounding happens once, at the end.
    disk = root_volume_per_hour(root, book.gp3) if root else Decimal(0)
    disk_figure = rounded(disk, ROUND_HALF_UP) if root else None
    warmups = tuple(
        ClassWarmup(schedule, seats, warmup, warmup_cost(instance_types, slices_per_gpu, seats, warmup, disk, book))
        for schedule, seats, warmup in classes
    )
    per_gpu = {
        t: (Decimal(str(book.on_demand[t])) + disk) / GPU_INSTANCE_TYPES[t].gpus
        for t in instance_types
        if t in book.on_demand
    }
    unpriced = tuple(t for t in instance_types if t not in book.on_demand)
    missing = tuple((t, book.missing[t]) for t in unpriced if t in book.missing)
    if not per_gpu:
        return LabCost(
            None,
            None,
            None,
            unpriced,
            max_hourly_cost,
            disk_figure,
            warmups,
            book.source,
            missing,
            book.gp3_from.source,
        )
    seat_hours = [
        rounded(amount, ROUND_HALF_UP)
        for t in per_gpu
        if (amount := seat_hour(t, slices_per_gpu, disk, book)) is not None
    ]
    dearest = max(per_gpu, key=per_gpu.__getitem__)
    # Six decimals say where the figure comes from without the endless digits of a disk's monthly price / 730.
    gpu_hour = f"{per_gpu[dearest].quantize(Decimal('1e-6'), rounding=ROUND_CEILING).normalize():f}"
    return LabCost(
        seat_hour=(min(seat_hours), max(seat_hours)),
        # Rounded up: it must never read lower than what the NodePool limit lets Karpenter run.
        gpu_limit_per_hour=rounded(max_gpus * per_gpu[dearest], ROUND_CEILING),
        gpu_limit_basis=f"maxGpus {max_gpus} x {gpu_hour} USD per GPU-hour of {dearest}"
        + (", its root volume included" if root else ""),
        unpriced=unpriced,
        max_hourly_cost=max_hourly_cost,
        root_volume_per_node_hour=disk_figure,
        warmups=warmups,
        source=book.source,
        missing=missing,
        disk_source=book.gp3_from.source,
    )


def rounded(amount: Decimal, rounding: str) -> float:
    """An amount in USD to the DECIMALS every figure is given in: ROUND_HALF_UP for a figure, ROUND_CEILING for an
    "at most" figure, which must never read lower than what it bounds."""
    return float(amount.quantize(Decimal(1).scaleb(-DECIMALS), rounding=rounding))


def within_max_hourly_cost(cap: float | None, info: ValidationInfo) -> float | None:
    """A lab's maxHourlyCost: at least what its GPU limit costs at the reference prices, so that the cap can hold."""
    if (
        cap is None
        or not {"instance_types", "slices_per_gpu", "max_gpus", "disk_strategy", "root_volume"} <= info.data.keys()
    ):
        return cap
    types = info.data["instance_types"]
    root = root_volume(types, info.data["disk_strategy"], info.data["root_volume"])
    cost = lab_cost(types, info.data["slices_per_gpu"], info.data["max_gpus"], cap, root=root)
    if problem := cost.cap_problem:
        raise ValueError(problem)
    return cap


# gpulab:costAlertThreshold: USD per hour (a number), or a percentage of the base's "at most" per hour ("10%").
PERCENT = "%"


def threshold_kind(value: Any) -> Any:
    """One message for a value of neither kind, where pydantic would give one per kind."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f'must be USD per hour (a number such as 2.5) or a percentage such as "10%", got {value!r}')
    return value


def alert_threshold(value: float | str) -> float | str:
    """gpulab:costAlertThreshold: a positive amount of USD per hour, or a positive percentage such as "10%"."""
    if isinstance(value, str):
        number = value.removesuffix(PERCENT)
        try:
            percent = float(number) if value.endswith(PERCENT) else math.nan
        except ValueError:
            percent = math.nan
        if not (math.isfinite(percent) and percent > 0):
            raise ValueError(
                f'must be USD per hour (a number such as 2.5) or a percentage such as "10%", got {value!r}'
            )
        return value
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be a positive amount of USD per hour, got {value:g}")
    return value


def raise_alerts(threshold: float | str | None, before: float, after: float) -> bool:
    """Whether an "at most" figure going from `before` to `after` USD per hour rises by more than `threshold`."""
    if threshold is None or after <= before:
        return False
    if isinstance(threshold, str):
        # From nothing, any rise is more than any percentage.
        return before == 0 or (after - before) / before * 100 > float(threshold.removesuffix(PERCENT))
    return after - before > threshold
