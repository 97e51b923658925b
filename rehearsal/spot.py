"""Spot in the rehearsal: the rate the rehearse command sets (`--spot-interruptions-per-node-hour`), at which EC2 warns
the spot instances of the labs that allow spot that it reclaims them (the stepper's rehearsal/stepper/spot.go, read by
Karpenter's own interruption controller); the spot prices a preview recorded in the stack's outputs or in its cost
file (`--prices`), which the stepper's EC2 answers Karpenter's spot price update with; and rehearsal.json's `spot`
(docs/rehearsal.md, Spot interruptions)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from domain.cost import preview_cost

if TYPE_CHECKING:  # rehearsal/report.py reads this module's names without the stack's model
    from domain.stack.model import Settings

FLAG = "--spot-interruptions-per-node-hour"
PRICES_FLAG = "--prices"
PRICED_AS = ("spot", "on-demand")
# The reason Karpenter's interruption controller gives a NodeClaim it deletes on a spot warning: the message kind
# (github.com/aws/karpenter-provider-aws v1.14.1 pkg/controllers/interruption/messages/types.go SpotInterruptionKind),
# which the stepper's events carry (rehearsal/stepper/journal.go reasonOf).
SPOT_INTERRUPTED = "spot_interrupted"


class BadRate(ValueError):
    """A rate the rehearsal cannot take; the message is one line naming the flag."""


class BadPrices(ValueError):
    """A --prices file the rehearsal cannot take; the message is one line naming the flag and the file."""


def rate(value: str | None) -> float:
    """The command line's rate of spot warnings per hour a spot node runs: 0 without it (no warnings)."""
    if value is None:
        return 0.0
    try:
        number = float(value)
    except ValueError:
        raise BadRate(f"{FLAG}: must be a number of warnings per spot node-hour, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise BadRate(f"{FLAG}: must be a number at least 0 (warnings per spot node-hour), got {value!r}")
    return number


# rehearsal.json's spot counts per lab, and the event each counts.
COUNTED = {"warnings": "spotWarning", "reclaimed": "spotReclaimed"}


def _count(labs: Mapping[str, Mapping[str, Any]], what: str) -> dict[str, int]:
    return {n: sum(1 for e in lab["events"] if e["what"] == what) for n, lab in sorted(labs.items())}


def section(settings: Settings, stepper: Mapping[str, Any], labs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """rehearsal.json's `spot`: how the stepper plays spot (its rate, EC2's warning, its seed, the price it bills a
    spot node at and that price's source), the labs that allow spot, and per lab the warnings the day had and the
    warned nodes EC2 reclaimed at the end of their warning because their drain had not finished."""
    return {
        **stepper,
        "labs": sorted(n for n, lab in settings.labs.items() if "spot" in lab.capacity_types),
        **{key: _count(labs, what) for key, what in COUNTED.items()},
    }


def prices(path: Path, settings: Settings, region: str) -> dict[str, dict[str, Any]]:
    """The spot price of each instance type of the stack's spot labs, from `path`: either a preview's stack outputs as
    `pulumi stack output --json` writes them (the render's outputs.json has the same shape), or the cost file a
    `pulumi preview` writes where GPULAB_PREVIEW_COST says (domain/cost/preview_cost.py, which tells the two apart:
    is_written). Both have each lab's `labs.<lab>.cost.spot.<instance type>`, domain/cost/price_book.py spot_line's
    `{usdPerHour, pricedAs, source, zones}`. Returns `{<instance type>: {usdPerHour, pricedAs, source}}` for the
    stepper's -spot-prices. Refuses a file that is neither, either of another stack's cluster (`clusterName`), a cost
    file priced in another region than the stack's `region`, and a file without a price for a type a spot lab of this
    stack may launch."""
    where = f"{PRICES_FLAG} {path}"
    wanted = (
        f"want `pulumi stack output --json` of a preview or the file a preview writes where {preview_cost.ENV} says"
    )
    try:
        found = json.loads(path.read_text())
    except OSError as error:
        raise BadPrices(f"{where}: cannot read it ({error.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BadPrices(f"{where}: not JSON ({error}); {wanted}") from None
    if preview_cost.is_written(found):
        if found["region"] != region:
            raise BadPrices(f"{where}: prices of {found['region']!r}, not of this stack's region ({region!r})")
    elif not (isinstance(found, dict) and isinstance(found.get("labs"), dict)):
        raise BadPrices(f"{where}: neither a stack's outputs nor a preview's cost file (no `labs`); {wanted}")
    cluster = found.get("clusterName")
    if isinstance(cluster, str) and cluster != settings.cluster.name:
        own = settings.cluster.name
        raise BadPrices(f"{where}: the figures of cluster {cluster!r}, not this stack's ({own!r})")
    spot: dict[str, dict[str, Any]] = {}
    for name, lab in sorted(settings.labs.items()):
        if "spot" not in lab.capacity_types:
            continue
        lines = _at(found, "labs", name, "cost", "spot")
        for instance_type in lab.instance_types:
            line = _at(lines, instance_type)
            if not _is_line(line):
                raise BadPrices(
                    f"{where}: labs.{name}.cost.spot.{instance_type} wants usdPerHour above 0, pricedAs spot or "
                    f"on-demand and a source (as a preview writes it), got {line!r}"
                )
            spot[instance_type] = {k: line[k] for k in ("usdPerHour", "pricedAs", "source")}
    return spot


def _at(value: object, *keys: str) -> object:
    """The value at `keys` down nested objects; None where one is missing or not an object."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _is_line(line: object) -> TypeGuard[dict[str, Any]]:
    if not isinstance(line, dict):
        return False
    usd = line.get("usdPerHour")
    return (
        isinstance(usd, (int, float))
        and not isinstance(usd, bool)
        and math.isfinite(usd)
        and usd > 0
        and line.get("pricedAs") in PRICED_AS
        and isinstance(line.get("source"), str)
        and bool(line["source"])
    )
