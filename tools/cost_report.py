"""A stack's cost table in Markdown, from its `labs` stack output: the render prints it, the PR comment shows it."""

from collections.abc import Collection, Mapping
from typing import Any

from config import StackConfig
from config.cost import DECIMALS, usd
from config.price_book import LIST
from config.prices import DISK_PRICE_SOURCE, HOURS_PER_MONTH, PRICE_SOURCE
from config.stack_cost import StackCost, labs_ceilings, stack_cost, term
from tools.table import Column, markdown

NONE = "-"

# Each lab's entry of the `labs` output, by name.
LabOutput = tuple[str, Mapping[str, Any]]


def _seat_hour(item: LabOutput) -> str:
    seat_hour = item[1]["cost"]["seatHour"]
    # [cheapest, dearest], shown once when they are equal.
    return " to ".join(dict.fromkeys(usd(amount) for amount in seat_hour)) if seat_hour else "no price"


def _or(value: float | None, otherwise: str) -> str:
    return usd(value) if value is not None else otherwise


def _warmups(item: LabOutput) -> str:
    """What warming each class costs: its warm seats' nodes for the warmup before it starts."""
    return (
        "; ".join(
            f"{' to '.join(dict.fromkeys(usd(a) for a in w['usd'])) if w['usd'] else 'no price'} for {w['warmSeats']} "
            f"seats {w['warmup']} before `{w['schedule']}`"
            for w in item[1]["cost"]["warmups"]
        )
        or NONE
    )


COLUMNS: tuple[Column[LabOutput], ...] = (
    Column("lab", lambda item: item[0]),
    Column("learner seats", lambda item: str(item[1]["learnerSeats"]), numeric=True),
    Column("per seat-hour", _seat_hour, numeric=True),
    Column("ceiling per hour", lambda item: _or(item[1]["cost"]["ceilingPerHour"], "no price"), numeric=True),
    # Already in the seat-hours and the ceiling; shown so that a costly root volume stands out.
    Column("root volume per node-hour", lambda item: usd(item[1]["cost"]["rootVolumePerNodeHour"]), numeric=True),
    Column("maxHourlyCost", lambda item: _or(item[1]["cost"]["maxHourlyCost"], NONE), numeric=True),
    Column("instance types without a price", lambda item: ", ".join(item[1]["cost"]["unpriced"]) or NONE),
    Column("warm seats per class", _warmups),
)


def _elsewhere(labs: Mapping[str, Any]) -> str:
    """The stack's region beside the prices' when they differ, as each lab's cost output names both."""
    costs = [lab["cost"] for lab in labs.values()]
    regions = {c["region"] for c in costs if not c["pricesFrom"].startswith(c["region"])}
    return "".join(f" (stack in {r}; `pulumi preview` prices {r})" for r in sorted(regions))


def table(labs: Mapping[str, Any], shown: Collection[str] | None = None) -> list[str]:
    """Per lab: seat-hour price range, ceiling per hour, each node's root volume, cap, and what warming each class
    costs; then the ceiling of all labs together. Seat-hours, ceilings and warm-ups include each node's root volume
    (config/cost.py). `shown` keeps the rows of those labs only (the pull-request comment's room); the last row still
    adds up every lab."""
    ceilings = [lab["cost"]["ceilingPerHour"] for lab in labs.values()]
    total = usd(round(sum(c for c in ceilings if c is not None), DECIMALS))
    if any(lab["cost"]["unpriced"] for lab in labs.values()):
        total += " (priced types only)"
    seats = sum(lab["learnerSeats"] for lab in labs.values())
    return [
        f"cost of the labs' GPU nodes in USD at {PRICE_SOURCE} and {DISK_PRICE_SOURCE}: list prices of one region"
        f"{_elsewhere(labs)}, not a bill (spot capacity costs less; docs/cost.md):",
        "",
        *markdown(
            COLUMNS,
            [item for item in labs.items() if shown is None or item[0] in shown],
            last=["all labs", str(seats), "", total, "", "", "", ""],
        ),
    ]


# The parts of the `cost` stack output as the tables name them.
PART_NAMES = {
    "controlPlane": "EKS control plane",
    "systemNodes": "system node group",
    "hub": "JupyterHub (load balancer, database volume)",
    "labsCeiling": "labs at their ceiling",
}


def whole_stack(stack: StackConfig, figures: Mapping[str, Any], planned: bool = False) -> StackCost:
    """The stack at the render's list prices, its labs at the ceilings shown (`figures`: the `labs` output with the
    planner's figures where it ran, tools/plan.py with_plan)."""
    hub = stack.settings.jupyterhub
    cost = stack_cost(
        stack.region,
        stack.settings.cluster,
        hub.hub_database_size_gib if hub else None,
        labs_ceilings({name: lab["cost"] for name, lab in figures.items()}),
        LIST,
    )
    if planned:
        ceiling, note = cost.per_hour["labsCeiling"], cost.notes["labsCeiling"]
        return cost.with_labs_ceiling(ceiling, f"{note}, Karpenter's (the planner's full lab) where it ran")
    return cost


def stack_table(stack: StackConfig, figures: Mapping[str, Any], planned: bool = False) -> list[str]:
    """The whole stack per hour and per 730-hour month, each part with what it counts, then the term (or, without
    one, the month at the ceiling)."""
    cost = whole_stack(stack, figures, planned)
    output = cost.as_output()
    rows = [(PART_NAMES[p], output["perHour"][p], output["perMonth"][p], cost.notes[p]) for p in PART_NAMES]
    rows.append(("total", output["perHour"]["total"], output["perMonth"]["total"], ""))
    columns: tuple[Column[tuple[str, float | None, float | None, str]], ...] = (
        Column("the whole stack", lambda row: row[0]),
        Column("USD per hour", lambda row: _or(row[1], "no price"), numeric=True),
        Column(f"USD per {HOURS_PER_MONTH}-hour month", lambda row: _or(row[2], "no price"), numeric=True),
        Column("counts", lambda row: row[3]),
    )
    lines = [
        f"the whole stack in {stack.region}, at most, in USD ({LIST.label(stack.region)}; not a bill: docs/cost.md):",
        "",
        *markdown(columns, rows),
        "",
    ]
    found = term(cost, stack.settings.labs, labs_ceilings({name: lab["cost"] for name, lab in figures.items()}))
    if found is None:
        return [
            *lines,
            f"no class has a term: a {HOURS_PER_MONTH}-hour month at the ceiling is "
            f"{_or(output['perMonth']['total'], 'not known (a part has no price)')} USD",
        ]
    return [
        *lines,
        f"the term, {found.first} to {found.last} ({found.hours} hours): "
        f"{_or(found.classes, 'no price')} USD for {found.class_hours:g} hours of warm-ups and classes at the full "
        f"labs' cost (labs without classes at their ceiling all term), beside {_or(found.always_on, 'no price')} USD "
        f"always on; {_or(found.total, 'not known')} USD in all",
    ]
