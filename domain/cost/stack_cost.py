"""What the whole stack costs per hour and per 730-hour month: the EKS control plane, the system node group, the hub,
and the labs' ceiling; and a term of classes beside it.

Each part is rounded up to 4 decimals, as a lab's ceiling is (domain/cost/lab_cost.py), so that the total stays an upper
bound of what the parts can cost at the prices of the PriceBook; a part that cannot be priced (an instance type without
a price) is None, and so is the total, with a note that says why: a total that left a part out would read as a bill.
What no part counts (data transfer, NAT, the load balancer's data processed, the KMS key, SQS, logs, learners' home
volumes) is listed in docs/cost.md; the rate of the load balancer's data processed (loadBalancerDataPerGb), which has
a price but no quantity here, is beside the total. With gpulab:metrics the GPU meter (domain/cost/meter_cost.py) is
in the totals where it has a price, always on; what of it has none the totals leave out and say so
(StackCost.excludes), rather than being unknown: the meter's collector hours have no price here at all.
"""

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_CEILING, Decimal
from typing import Any, Protocol

from domain.capacity.disks import GP3_INCLUDED_IOPS, GP3_INCLUDED_MIBPS, Volume
from domain.cost.lab_cost import root_volume_per_hour, rounded
from domain.cost.price_book import PriceBook, Where
from domain.cost.prices import HOURS_PER_MONTH
from domain.time import durations, empty_nodes
from domain.upstream.eks_calendar import CALENDAR


class Meter(Protocol):
    """The GPU meter's cost as the whole stack counts it (domain/cost/meter_cost.py MeterCost, which reads term_hours
    from here): USD per hour and per month, None where unpriced; over `hours`; and what a total leaves out of it."""

    @property
    def per_hour(self) -> float | None: ...
    @property
    def per_month(self) -> float | None: ...
    @property
    def excluded(self) -> str: ...
    def over(self, hours: int) -> float | None: ...


# The EKS API's CreateNodegroup `diskSize`: "The default disk size is 20 GiB for Linux" (the system node group sets
# none: components/cluster.py). Priced as gp3 at gp3's included performance; that EKS gives it gp3 and not gp2 is not
# confirmed here.
SYSTEM_NODE_DISK_GIB = 20
PARTS = ("controlPlane", "systemNodes", "hub", "labsCeiling")
# The groups of prices (PriceBook.origins) each part is priced from: the control plane EKS's; the system nodes their
# instances and root volumes; the hub its load balancer and database volume; the labs their nodes and root volumes.
PRICED_FROM = {
    "controlPlane": ("EKS",),
    "systemNodes": ("instances", "EBS"),
    "hub": ("load balancer", "EBS"),
    "labsCeiling": ("instances", "EBS"),
}


@dataclass(frozen=True)
class ControlPlane:
    """What the EKS control plane costs over time: `standard` USD per hour, and `extended` from 00:00 UTC of
    `extended_from` on, the day the version leaves standard support when the cluster keeps it (supportType EXTENDED;
    EKS User Guide: "Billing for extended support starts at the beginning of the day that the version reaches end of
    standard support, in the UTC+0 timezone"); None when it never pays extended support's price."""

    standard: Decimal
    extended: Decimal
    extended_from: datetime.date | None

    def per_hour(self, day: datetime.date) -> float:
        return float(self.extended if self.extended_from is not None and day >= self.extended_from else self.standard)

    def over(self, first: datetime.date, hours: int) -> Decimal:
        """USD for `hours` hours from 00:00 UTC of `first`: extended support's price for those at or after its
        start."""
        if self.extended_from is None:
            return self.standard * hours
        extended = min(hours, max(0, hours - (self.extended_from - first).days * 24))
        return self.standard * (hours - extended) + self.extended * extended


@dataclass(frozen=True)
class StackCost:
    """The stack's parts per hour on `day` (None: not priced), and a note per part saying what it counts."""

    region: str
    prices_from: str
    per_hour: Mapping[str, float | None]  # PARTS
    notes: Mapping[str, str]  # PARTS: what the part counts, or why it has no price
    day: datetime.date  # the day of the hourly figures, and the first of the month's
    control_plane: ControlPlane
    # PARTS, and the meter with it: the region and source of each part's prices.
    sources: Mapping[str, Mapping[str, str | None]]
    # Priced lines beside the parts, each {usd, region, source, counts}: rates with no quantity to multiply here.
    rates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    meter: Meter | None = None  # the GPU meter (gpulab:metrics), always on; None without it

    @property
    def _meter_per_hour(self) -> list[float]:
        """The meter's priced hourly figure, as a part to add (none where unpriced: `excludes` says so)."""
        return [self.meter.per_hour] if self.meter is not None and self.meter.per_hour is not None else []

    @property
    def excludes(self) -> str:
        """What of the stack the totals leave out for want of a price, as the summary, the PR comment and the `cost`
        output's `excludes` say it; "" when nothing."""
        return self.meter.excluded if self.meter is not None else ""

    @property
    def total(self) -> float | None:
        parts = [self.per_hour[p] for p in PARTS]
        if any(p is None for p in parts):
            return None
        return _sum([*(p for p in parts if p is not None), *self._meter_per_hour])

    @property
    def always_on(self) -> float | None:
        """What runs whether or not a learner does, per hour on the day: everything but the labs."""
        parts = [self.per_hour[p] for p in PARTS if p != "labsCeiling"]
        if any(p is None for p in parts):
            return None
        return _sum([*(p for p in parts if p is not None), *self._meter_per_hour])

    def always_on_over(self, first: datetime.date, hours: int) -> float | None:
        """What runs whether or not a learner does, over `hours` hours from 00:00 UTC of `first`: the control plane
        at its price of each hour, the meter at its month's figure, the rest at their hourly price; rounded up."""
        others = [self.per_hour[p] for p in PARTS if p not in ("labsCeiling", "controlPlane")]
        if any(p is None for p in others):
            return None
        rest = sum((Decimal(str(p)) for p in others if p is not None), Decimal(0)) * hours
        meter = self.meter.over(hours) if self.meter is not None else None
        return _up(rest + self.control_plane.over(first, hours) + Decimal(str(meter or 0)))

    def always_on_in_term(self, days: tuple[datetime.date, datetime.date] | None) -> float | None:
        """What runs always over the stack's term `days` (term_days), or over the 730-hour month from the day without
        one, each hour at its own price."""
        if days is None:
            return self.always_on_over(self.day, HOURS_PER_MONTH)
        return self.always_on_over(days[0], term_hours(days))

    def with_labs_ceiling(self, ceiling: float | None, note: str) -> "StackCost":
        """The same stack with another labs' ceiling, e.g. Karpenter's where the planner ran (planner/plan.py)."""
        return replace(
            self, per_hour={**self.per_hour, "labsCeiling": ceiling}, notes={**self.notes, "labsCeiling": note}
        )

    def as_output(self) -> dict[str, Any]:
        """The `cost` stack output. A month is the 730 hours from 00:00 UTC of the day: the control plane's hours in
        it at their own price, so that a month that reaches into extended support counts those hours at its price.
        With the meter, its part (null where unpriced) and `excludes`, what the totals leave out."""
        hourly = {**{p: self.per_hour[p] for p in PARTS}, "total": self.total}
        monthly = {p: per_month(v) for p, v in hourly.items()}
        month_of_plane = float(self.control_plane.over(self.day, HOURS_PER_MONTH))
        monthly["controlPlane"] = month_of_plane
        meter_month = [] if self.meter is None or self.meter.per_month is None else [self.meter.per_month]
        if monthly["total"] is not None:
            others = [monthly[p] for p in PARTS if p != "controlPlane"]
            monthly["total"] = _sum([month_of_plane, *(m for m in others if m is not None), *meter_month])
        output = {
            "region": self.region,
            "pricesFrom": self.prices_from,
            "perHour": hourly,
            "perMonth": monthly,
            "sources": {part: dict(where) for part, where in self.sources.items()},
            **self.rates,
        }
        if self.meter is not None:
            hourly["meter"], monthly["meter"] = self.meter.per_hour, self.meter.per_month
            output["excludes"] = self.excludes
        return output


def per_month(per_hour: float | None) -> float | None:
    """A 730-hour month of an hourly amount (domain/cost/prices.py HOURS_PER_MONTH), to 4 decimals."""
    return None if per_hour is None else float(Decimal(str(per_hour)) * HOURS_PER_MONTH)


def control_plane(
    kubernetes_version: str, support_type: str, day: datetime.date, book: PriceBook
) -> tuple[ControlPlane, str]:
    """The cluster's price over time (ControlPlane), and what it counts on `day`: extended support's price from the
    day its version leaves standard support, when the cluster keeps it (supportType EXTENDED), else standard's (EKS
    upgrades it)."""
    window = CALENDAR[kubernetes_version]
    extended = support_type == "EXTENDED"
    plane = ControlPlane(
        Decimal(book.eks_per_hour["standard"]),
        Decimal(book.eks_per_hour["extended"]),
        window.end_of_standard if extended else None,
    )
    standard_ends, extended_ends = window.end_of_standard, window.end_of_extended
    if extended and day >= standard_ends:
        note = f"Kubernetes {kubernetes_version} in extended support on {day} (until {extended_ends})"
    elif day < standard_ends:
        then = (
            f"then extended support at {book.eks_per_hour['extended']} USD per hour until {extended_ends}"
            if extended
            else "then EKS upgrades the cluster (supportType STANDARD)"
        )
        note = f"Kubernetes {kubernetes_version} in standard support on {day}, until {standard_ends}; {then}"
    else:
        note = f"Kubernetes {kubernetes_version} past standard support on {day}: EKS upgrades the cluster"
    return plane, f"{note}; {book.eks_from.where}: {book.eks_from.source}"


def system_nodes(instance_types: Sequence[str], size: int, book: PriceBook) -> tuple[float | None, str]:
    """The managed node group's `size` nodes of its first type, each with its root volume. EKS launches On-Demand
    capacity of a managed node group in the order its types are listed ("The allocation strategy to provision
    On-Demand capacity is set to prioritized", EKS User Guide, managed-node-groups)."""
    first = instance_types[0]
    if first not in book.on_demand:
        why = f": {book.missing[first]}" if first in book.missing else ""
        return None, f"{first} has no price ({book.source}){why}"
    disk = root_volume_per_hour(
        Volume(SYSTEM_NODE_DISK_GIB, GP3_INCLUDED_IOPS, GP3_INCLUDED_MIBPS, encrypted=False), book.gp3
    )
    amount = size * (Decimal(str(book.on_demand[first])) + disk)
    return _up(
        amount
    ), f"{size} x {first} ({book.on_demand[first]} USD per hour), each with a {SYSTEM_NODE_DISK_GIB} GiB root volume"


def hub(database_gib: int | None, book: PriceBook) -> tuple[float, str]:
    """The hub's Classic Load Balancer and its database volume, when the stack has gpulab:jupyterhub."""
    if database_gib is None:
        return 0.0, "no gpulab:jupyterhub"
    volume = root_volume_per_hour(Volume(database_gib, GP3_INCLUDED_IOPS, GP3_INCLUDED_MIBPS, encrypted=True), book.gp3)
    amount = Decimal(book.clb_per_hour) + volume
    return _up(amount), (
        f"Classic Load Balancer ({book.clb_per_hour} USD per hour, {book.clb_from.where}; data processed not counted: "
        f"loadBalancerDataPerGb) and the {database_gib} GiB database volume; learners' home volumes not counted"
    )


def load_balancer_data(book: PriceBook, stack_region: str) -> dict[str, Any]:
    """The loadBalancerDataPerGb line: what the hub's Classic Load Balancer costs per GB it processes, a rate only
    (how much learners' sessions move through it is not known here), with the region and source of its price."""
    where = book.where(stack_region, ("load balancer",))
    return {
        "usd": float(Decimal(book.clb_per_gb)),
        "region": where.region,
        "source": where.source,
        "counts": "per GB transferred through the hub's Classic Load Balancer; a rate, in no hourly, monthly or term "
        "figure (gpulab does not know the hub's traffic)",
    }


def labs_ceiling(ceilings: Mapping[str, float | None]) -> tuple[float | None, str]:
    """The sum of the labs' ceilings; None when a lab has none (an instance type without a price)."""
    unpriced = sorted(name for name, ceiling in ceilings.items() if ceiling is None)
    if unpriced:
        return None, f"lab {', '.join(unpriced)} has an instance type without a price"
    counted = "1 lab" if len(ceilings) == 1 else f"{len(ceilings)} labs"
    counted += ", each at its at most per hour"
    return _sum(c for c in ceilings.values() if c is not None), counted


def stack_cost(
    region: str,
    kubernetes_version: str,
    support_type: str,
    system_node_types: Sequence[str],
    system_node_count: int,
    database_gib: int | None,
    ceilings: Mapping[str, float | None],
    book: PriceBook,
    day: datetime.date,
    meter: Meter | None = None,
) -> StackCost:
    """The stack's cost at `book`'s prices, per hour on `day` (the day of the run, domain/time/utc.py today). The
    cluster's figures are passed, as gpulab:cluster's keys hold them (kubernetesVersion, supportType,
    systemNodes.instanceTypes and .size), so that this floor reads no stack model; `ceilings`: each lab's ceiling per
    hour (None: not priced); `meter`: the GPU meter at `book`'s prices, with gpulab:metrics."""
    plane, plane_note = control_plane(kubernetes_version, support_type, day, book)
    parts = {
        "controlPlane": (plane.per_hour(day), plane_note),
        "systemNodes": system_nodes(system_node_types, system_node_count, book),
        "hub": hub(database_gib, book),
        "labsCeiling": labs_ceiling(ceilings),
    }
    return StackCost(
        region,
        book.prices_from,
        {name: amount for name, (amount, _) in parts.items()},
        {name: note for name, (_, note) in parts.items()},
        day,
        plane,
        {
            **{part: _named(book.where(region, groups)) for part, groups in PRICED_FROM.items()},
            **({"meter": book.meter_where()} if meter is not None else {}),
        },
        {} if database_gib is None else {"loadBalancerDataPerGb": load_balancer_data(book, region)},
        meter,
    )


def _named(where: Where) -> dict[str, str | None]:
    return {"region": where.region, "source": where.source}


def _up(amount: Decimal) -> float:
    return rounded(amount, ROUND_CEILING)


def _sum(amounts: Iterable[float]) -> float:
    return float(sum((Decimal(str(a)) for a in amounts), Decimal(0)))


def full_cost(cost: Mapping[str, Any]) -> float | None:
    """A lab's full cost per hour from its `labs.<lab>.cost` output: its one "at most" figure (atMostPerHour,
    domain/cost/learner_cost.py), None where a type has no price: Karpenter may launch that type, so the priced
    types' ceiling would not bound the lab."""
    amount: float | None = cost["atMostPerHour"]["usd"]
    return amount


def labs_ceilings(costs: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    """Each lab's full cost per hour (full_cost) from its `labs.<lab>.cost` output, by name."""
    return {name: full_cost(cost) for name, cost in costs.items()}


# What a lab's term figure counts (LabTerm.counts).
CLASSES, ALL_TERM, MONTH = "classes", "all term", "month"


def term_days(labs: Mapping[str, Any]) -> tuple[datetime.date, datetime.date] | None:
    """The stack's term: from the first day of its classes' terms to the last, or None when no class has one.
    `labs`: domain.stack.model's Lab by name."""
    terms = [c.term for lab in labs.values() for c in lab.classes if c.term is not None]
    return (min(t.start for t in terms), max(t.end for t in terms)) if terms else None


def term_hours(days: tuple[datetime.date, datetime.date]) -> int:
    """The hours of a term: from its first day's midnight to its last day's end, in UTC."""
    return ((days[1] - days[0]).days + 1) * 24


@dataclass(frozen=True)
class LabTerm:
    """What one lab costs over the stack's term at its full cost, or over a 730-hour month when the stack has no
    term: the one figure the `labs.<lab>.cost.term` output, the PR comment's diff and the stack's term add up."""

    counts: str  # CLASSES: its warm-ups and classes; ALL_TERM: a lab without classes, at any time; MONTH: no term
    days: tuple[datetime.date, datetime.date] | None  # the stack's term; None for MONTH
    hours: float  # the hours counted at the full cost
    usd: float | None  # rounded up; None when the lab has no full cost (an instance type without a price)
    # Of `hours`, those past consolidateAfter in which the NodePool's disruption budgets keep emptied nodes
    # (domain/time/empty_nodes.py), and what kept them; (0, "") when none.
    kept_hours: float = 0.0
    kept_by: str = ""

    def as_output(self) -> dict[str, Any]:
        first, last = (d.isoformat() for d in self.days) if self.days else (None, None)
        kept = {"hours": self.kept_hours, "counts": self.kept_by} if self.kept_hours else None
        # Not rounded: the figures at another hourly amount (Karpenter's, domain/cost/learner_cost.py) are made from it.
        return {
            "counts": self.counts,
            "first": first,
            "last": last,
            "hours": self.hours,
            "usd": self.usd,
            "keptByBudgets": kept,
        }


def lab_term(lab: Any, days: tuple[datetime.date, datetime.date] | None, ceiling: float | None) -> LabTerm:
    """A lab's term figure: with the stack's term (`days`, term_days), every hour its nodes may run at `ceiling` per
    hour: from each class's warm-up (LabClass.occurrences) to its end and consolidateAfter after it, when Karpenter
    removes the emptied nodes, or later, when its NodePool's disruption budgets allow it (empty_nodes.removable; no
    later than the term's end); an hour two classes share counted once; a lab without classes at it all term. Without
    a term, a 730-hour month at it. `lab`: domain.stack.model's Lab; `ceiling`: its atMostPerHour, Karpenter's where
    the planner ran."""
    if days is None:
        return LabTerm(MONTH, days, float(HOURS_PER_MONTH), term_usd(Decimal(HOURS_PER_MONTH), ceiling))
    if not lab.classes:
        hours = Decimal(((days[1] - days[0]).days + 1) * 24)  # it may run at any time
        return LabTerm(ALL_TERM, days, float(hours), term_usd(hours, ceiling))
    after = datetime.timedelta(minutes=durations.duration_minutes(lab.disruption.consolidate_after))
    term_end = datetime.datetime.combine(days[1] + datetime.timedelta(days=1), datetime.time(), datetime.UTC)
    found = empty_nodes.holds(lab)
    freed: list[tuple[datetime.datetime, datetime.datetime]] = []
    kept: list[tuple[datetime.datetime, datetime.datetime]] = []
    said: dict[str, None] = {}  # what kept nodes, each once, in the order first seen
    for occurrence in (o for c in lab.classes for o in c.occurrences(*days)):
        emptied = occurrence.end + after
        removal = empty_nodes.removable(found, emptied, term_end)
        freed.append((occurrence.warm, emptied))
        if removal.kept_by is None:  # nothing held them (or they empty after the term's end, counted as before)
            kept.append((occurrence.warm, emptied))
        else:
            kept.append((occurrence.warm, max(emptied, term_end) if removal.at is None else removal.at))
            until = "the term's end" if removal.at is None else f"{removal.at.astimezone(datetime.UTC):%H:%M} UTC"
            said.setdefault(f"until {until} by {removal.kept_by.said}", None)
    hours = Decimal(_covered(sorted(kept)).total_seconds()) / 3600
    kept_hours = hours - Decimal(_covered(sorted(freed)).total_seconds()) / 3600
    kept_by = "emptied nodes kept past consolidateAfter by the NodePool's disruption budgets: " + "; ".join(said)
    return LabTerm(CLASSES, days, float(hours), term_usd(hours, ceiling), float(kept_hours), kept_by if said else "")


def _covered(spans: list[tuple[datetime.datetime, datetime.datetime]]) -> datetime.timedelta:
    """How long the sorted `spans` cover, a moment in two of them once."""
    total, reached = datetime.timedelta(0), None
    for start, end in spans:
        if reached is not None and start < reached:
            start = reached
        if end > start:
            total += end - start
            reached = end
    return total


def term_usd(hours: Decimal, per_hour: float | None) -> float | None:
    """`hours` at `per_hour` USD, rounded up; None without a price. The one product of a term's hours and an hourly
    figure (lab_term; domain/cost/learner_cost.py with Karpenter's figure)."""
    return None if per_hour is None else _up(hours * Decimal(str(per_hour)))


@dataclass(frozen=True)
class Term:
    """A term of classes: its days, and what it costs at the full labs' cost beside what runs all along."""

    first: datetime.date
    last: datetime.date
    hours: int  # from the first day's midnight to the last day's end, in UTC
    always_on: float | None  # USD over the term: control plane (each hour at its price), system nodes, hub
    classes: float | None  # USD: the labs' term figures added up (LabTerm: every warm-up and class at its lab's full
    # cost, labs without classes at their ceiling all term)
    class_hours: float  # the hours of warm-ups and classes counted
    kept_hours: float = 0.0  # of class_hours, those the NodePools' disruption budgets keep emptied nodes (LabTerm)

    @property
    def total(self) -> float | None:
        return None if self.always_on is None or self.classes is None else _sum((self.always_on, self.classes))


def term(cost: StackCost, labs: Mapping[str, Any], ceilings: Mapping[str, float | None]) -> Term | None:
    """The stack's term (term_days), or None when no class has one (then the month at the ceiling is the figure:
    StackCost.as_output()["perMonth"]["total"]). `labs`: domain.stack.model's Lab by name; `ceilings`: each lab's full
    cost per hour, Karpenter's where the planner ran."""
    days = term_days(labs)
    if days is None:
        return None
    figures = [lab_term(lab, days, ceilings[name]) for name, lab in labs.items()]
    amounts = [f.usd for f in figures]
    hours = term_hours(days)
    return Term(
        days[0],
        days[1],
        hours,
        cost.always_on_over(days[0], hours),
        None if None in amounts else _sum(a for a in amounts if a is not None),
        _sum(f.hours for f in figures if f.counts == CLASSES),
        _sum(f.kept_hours for f in figures),
    )
