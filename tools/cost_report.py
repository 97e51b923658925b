"""A stack's cost table in Markdown, from its `labs` stack output: the render prints it, the PR comment shows it."""

from collections.abc import Mapping
from typing import Any

from config.cost import DECIMALS, usd
from config.prices import PRICE_SOURCE

NONE = "-"


def table(labs: Mapping[str, Any]) -> list[str]:
    """Per lab: seat-hour price range, ceiling per hour and cap; then the ceiling of all labs together."""
    lines = [
        f"cost of the labs' GPU nodes in USD at {PRICE_SOURCE}: list prices of one region, not a bill (spot "
        "capacity costs less; docs/cost.md):",
        "",
        "| lab | learner seats | per seat-hour | ceiling per hour | maxHourlyCost | instance types without a price |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, lab in labs.items():
        cost = lab["cost"]
        seat_hour = cost["seatHour"]
        # [cheapest, dearest], shown once when they are equal.
        low_high = list(dict.fromkeys(usd(amount) for amount in seat_hour)) if seat_hour else ["no price"]
        ceiling, cap = cost["ceilingPerHour"], cost["maxHourlyCost"]
        cells = [
            name,
            str(lab["learnerSeats"]),
            " to ".join(low_high),
            usd(ceiling) if ceiling is not None else "no price",
            usd(cap) if cap is not None else NONE,
            ", ".join(cost["unpriced"]) or NONE,
        ]
        lines.append(f"| {' | '.join(cells)} |")
    ceilings = [lab["cost"]["ceilingPerHour"] for lab in labs.values()]
    total = usd(round(sum(c for c in ceilings if c is not None), DECIMALS))
    if any(lab["cost"]["unpriced"] for lab in labs.values()):
        total += " (priced types only)"
    seats = sum(lab["learnerSeats"] for lab in labs.values())
    lines.append(f"| all labs | {seats} |  | {total} |  |  |")
    return lines
