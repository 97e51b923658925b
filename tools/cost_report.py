"""A stack's cost table in Markdown, from its `labs` stack output: the render prints it, the PR comment shows it."""

from collections.abc import Mapping
from typing import Any

from config.cost import DECIMALS, usd
from config.prices import DISK_PRICE_SOURCE, PRICE_SOURCE

NONE = "-"


def table(labs: Mapping[str, Any]) -> list[str]:
    """Per lab: seat-hour price range, ceiling per hour, each node's root volume and the cap; then all labs together.

    Seat-hours and ceilings include the root volume of each node (config/cost.py).
    """
    lines = [
        f"cost of the labs' GPU nodes in USD at {PRICE_SOURCE} and {DISK_PRICE_SOURCE}: list prices of one region, "
        "not a bill (spot capacity costs less; README, What a lab costs):",
        "",
        "| lab | learner seats | per seat-hour | ceiling per hour | root volume per node-hour | maxHourlyCost "
        "| instance types without a price |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, lab in labs.items():
        cost = lab["cost"]
        seat_hour = cost["seatHour"]
        # [cheapest, dearest], shown once when they are equal.
        low_high = list(dict.fromkeys(usd(amount) for amount in seat_hour)) if seat_hour else ["no price"]
        ceiling, cap, disk = cost["ceilingPerHour"], cost["maxHourlyCost"], cost["rootVolumePerNodeHour"]
        cells = [
            name,
            str(lab["learnerSeats"]),
            " to ".join(low_high),
            usd(ceiling) if ceiling is not None else "no price",
            usd(disk),
            usd(cap) if cap is not None else NONE,
            ", ".join(cost["unpriced"]) or NONE,
        ]
        lines.append(f"| {' | '.join(cells)} |")
    ceilings = [lab["cost"]["ceilingPerHour"] for lab in labs.values()]
    total = usd(round(sum(c for c in ceilings if c is not None), DECIMALS))
    if any(lab["cost"]["unpriced"] for lab in labs.values()):
        total += " (priced types only)"
    seats = sum(lab["learnerSeats"] for lab in labs.values())
    lines.append(f"| all labs | {seats} |  | {total} |  |  |  |")
    return lines
