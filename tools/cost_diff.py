"""What a change does to the labs' cost, against the base branch's render, as Infracost's diff shows a change: each
added lab (+), removed lab (-) and changed lab (~) with its figures before and after, then the ceiling of all labs
before and after; and whether the rise is more than gpulab:costAlertThreshold.

Both sides are the renders' `labs` outputs (outputs.json): gpulab's own figures at the reference prices, never the
planner's, which only the head's render may have.
"""

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from config.cost import DECIMALS, raise_alerts, usd
from tools.table import Column, markdown

LEAD_IN = "what this change does to the labs' cost per hour against the base branch's render"
ADDED, REMOVED, CHANGED = "+", "-", "~"
NONE = "-"


def _seat_hour(lab: Mapping[str, Any] | None) -> str | None:
    if lab is None:
        return None
    seat_hour = lab["cost"]["seatHour"]
    return " to ".join(dict.fromkeys(usd(a) for a in seat_hour)) if seat_hour else "no price"


def _ceiling(lab: Mapping[str, Any] | None) -> float | None:
    return None if lab is None else lab["cost"]["ceilingPerHour"]


def _ceiling_text(lab: Mapping[str, Any] | None) -> str | None:
    if lab is None:
        return None
    ceiling = _ceiling(lab)
    return usd(ceiling) if ceiling is not None else "no price"


# The figures a lab's row compares, each as its cell reads.
FIGURES: tuple[tuple[str, Callable[[Mapping[str, Any] | None], str | None]], ...] = (
    ("learner seats", lambda lab: None if lab is None else str(lab["learnerSeats"])),
    ("per seat-hour", _seat_hour),
    ("ceiling per hour", _ceiling_text),
)


@dataclass(frozen=True)
class LabChange:
    name: str
    kind: str  # ADDED, REMOVED or CHANGED
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None

    @property
    def ceiling_change(self) -> float:
        return round((_ceiling(self.after) or 0.0) - (_ceiling(self.before) or 0.0), DECIMALS)


def changes(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[LabChange]:
    """The labs added, removed or with a figure changed, by name."""
    found = []
    for name in sorted(set(base) | set(head)):
        before, after = base.get(name), head.get(name)
        if before is None:
            found.append(LabChange(name, ADDED, None, after))
        elif after is None:
            found.append(LabChange(name, REMOVED, before, None))
        elif any(figure(before) != figure(after) for _, figure in FIGURES):
            found.append(LabChange(name, CHANGED, before, after))
    return found


def total_ceiling(labs: Mapping[str, Any]) -> float:
    """The ceiling per hour of all the labs, those without a price left out (the cost table says so)."""
    return round(sum(c for lab in labs.values() if (c := _ceiling(lab)) is not None), DECIMALS)


def _cell(change: LabChange, figure: Callable[[Mapping[str, Any] | None], str | None]) -> str:
    before, after = figure(change.before), figure(change.after)
    if before is None or after is None:
        return before or after or NONE
    return after if before == after else f"{before} → {after}"


def _signed(amount: float) -> str:
    return f"{'+' if amount >= 0 else ''}{usd(amount)}"


def _percent(before: float, after: float) -> str:
    """The change as a percentage of `before`; none from nothing."""
    return f"{'+' if after >= before else ''}{(after - before) / before * 100:.1f}%" if before else ""


def _figure_column(header: str, figure: Callable[[Mapping[str, Any] | None], str | None]) -> Column[LabChange]:
    return Column(header, lambda change: _cell(change, figure), numeric=True)


COLUMNS: tuple[Column[LabChange], ...] = (
    Column("", lambda change: change.kind),
    Column("lab", lambda change: change.name),
    *(_figure_column(header, figure) for header, figure in FIGURES),
    Column("ceiling change", lambda change: _signed(change.ceiling_change), numeric=True),
)


def table(base: Mapping[str, Any], head: Mapping[str, Any], shown: Collection[str] | None = None) -> list[str]:
    """The diff's lead-in and table: the changed labs (those in `shown` only, the comment's room), then all labs'
    ceiling before and after, which adds up every lab."""
    found = changes(base, head)
    before, after = total_ceiling(base), total_ceiling(head)
    counts = {kind: sum(c.kind == kind for c in found) for kind in (ADDED, REMOVED, CHANGED)}
    unchanged = len(set(base) & set(head)) - counts[CHANGED]
    summary = (
        f"{counts[ADDED]} added, {counts[REMOVED]} removed, {counts[CHANGED]} changed, {unchanged} unchanged; USD at "
        "the reference prices of the cost table below"
    )
    percent = _percent(before, after)
    change = _signed(after - before) + (f" ({percent})" if percent else "")
    last = ["", "all labs", "", "", f"{usd(before)} → {usd(after)}", change]
    rows = [c for c in found if shown is None or c.name in shown]
    return [f"{LEAD_IN} ({summary}):", "", *markdown(COLUMNS, rows, last=last)]


def stack_total(base_cost: Mapping[str, Any] | None, head_cost: Mapping[str, Any] | None) -> list[str]:
    """The whole stack's total (the `cost` stack output) per hour and per month, before and after; nothing when
    either render has no `cost` output."""
    if not base_cost or not head_cost:
        return []

    def figure(period: str) -> str:
        before, after = base_cost[period]["total"], head_cost[period]["total"]
        if before is None or after is None:
            return f"{_or_none(before)} → {_or_none(after)}"
        return f"{usd(before)} → {usd(after)} ({_signed(after - before)})"

    return [
        f"the whole stack (the `cost` output, control plane to labs' ceiling), USD per hour: {figure('perHour')}; "
        f"per 730-hour month: {figure('perMonth')}"
    ]


def _or_none(amount: float | None) -> str:
    return usd(amount) if amount is not None else "no price"


def alert(base: Mapping[str, Any], head: Mapping[str, Any], threshold: float | str | None) -> str | None:
    """The line at the top of the comment when the change raises all labs' ceiling by more than the threshold."""
    before, after = total_ceiling(base), total_ceiling(head)
    if not raise_alerts(threshold, before, after):
        return None
    limit = threshold if isinstance(threshold, str) else f"{threshold:g} USD per hour"
    percent = _percent(before, after)
    return (
        f"> [!WARNING]\n> This change raises the labs' ceiling by {_signed(after - before)} USD per hour "
        f"({usd(before)} → {usd(after)}{', ' + percent if percent else ''}), more than gpulab:costAlertThreshold "
        f"({limit})."
    )
