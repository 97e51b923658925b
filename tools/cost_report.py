"""A stack's cost table in Markdown, from its `labs` stack output: the render prints it, the PR comment shows it."""

from collections.abc import Collection, Mapping
from typing import Any

from config.cost import DECIMALS, usd
from config.prices import DISK_PRICE_SOURCE, PRICE_SOURCE
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
        f"cost of the labs' GPU nodes in USD at {PRICE_SOURCE} and {DISK_PRICE_SOURCE}: list prices of one region, "
        "not a bill (spot capacity costs less; docs/cost.md):",
        "",
        *markdown(
            COLUMNS,
            [item for item in labs.items() if shown is None or item[0] in shown],
            last=["all labs", str(seats), "", total, "", "", "", ""],
        ),
    ]
