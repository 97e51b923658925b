"""What a change does to the labs' cost, against the base branch's render, as Infracost's diff shows a change: each
added lab (+), removed lab (-) and changed lab (~) with its figures before and after (seats, seat-hour, ceiling, term
cost) and the changes of its ceiling and term cost, then the ceiling and term cost of all labs before and after; and
whether the rise is more than gpulab:costAlertThreshold.

Both sides are the renders' `labs` outputs (outputs.json): gpulab's own figures at the reference prices, never the
planner's, which only the head's render may have. A lab's term cost is its `cost.term` (domain/cost/stack_cost.py
lab_term), which a base rendered before that output existed lacks: the diff then says so and compares the rest.
"""

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from domain.cost.lab_cost import DECIMALS, raise_alerts, usd
from domain.cost.prices import HOURS_PER_MONTH
from reports.cost_report import total_ceiling
from reports.table import Column, lead_in, markdown

LEAD_IN = "what this change does to the labs' cost per hour and per term against the base branch's render"
ADDED, REMOVED, CHANGED = "+", "-", "~"
NONE = "-"
NO_PRICE = "no price"


def _seat_hour(lab: Mapping[str, Any] | None) -> str | None:
    if lab is None:
        return None
    seat_hour = lab["cost"]["seatHour"]
    return " to ".join(dict.fromkeys(usd(a) for a in seat_hour)) if seat_hour else NO_PRICE


def _ceiling(lab: Mapping[str, Any] | None) -> float | None:
    return None if lab is None else lab["cost"]["ceilingPerHour"]


def _ceiling_text(lab: Mapping[str, Any] | None) -> str | None:
    if lab is None:
        return None
    ceiling = _ceiling(lab)
    return usd(ceiling) if ceiling is not None else NO_PRICE


# A base rendered before `labs.<lab>.cost.term` existed: its term figure is not known, never taken for zero.
NOT_RENDERED = "n/a"
NOT_RENDERED_NOTE = f"{NOT_RENDERED}: the base's render has no term cost per lab (it predates `labs.<lab>.cost.term`)"


def _term(lab: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return lab["cost"].get("term")


def _term_text(lab: Mapping[str, Any] | None) -> str | None:
    if lab is None:
        return None
    if (term := _term(lab)) is None:
        return NOT_RENDERED
    return usd(term["usd"]) if term["usd"] is not None else NO_PRICE


# The figures a lab's row compares, each as its cell reads.
FIGURES: tuple[tuple[str, Callable[[Mapping[str, Any] | None], str | None]], ...] = (
    ("learner seats", lambda lab: None if lab is None else str(lab["learnerSeats"])),
    ("per seat-hour", _seat_hour),
    ("ceiling per hour", _ceiling_text),
    ("term cost", _term_text),
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

    @property
    def term_change(self) -> str:
        """The term cost's change: from nothing for an added lab, to nothing for a removed one; NOT_RENDERED when the
        base's render lacks it, "no price" when a side has none."""
        sides = [_term_text(lab) for lab in (self.before, self.after)]
        for unknown in (NOT_RENDERED, NO_PRICE):
            if unknown in sides:
                return unknown
        before, after = (0.0 if lab is None else lab["cost"]["term"]["usd"] for lab in (self.before, self.after))
        return _signed(after - before)


def changes(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[LabChange]:
    """The labs added, removed or with a figure changed, by name."""
    found = []
    for name in sorted(set(base) | set(head)):
        before, after = base.get(name), head.get(name)
        if before is None:
            found.append(LabChange(name, ADDED, None, after))
        elif after is None:
            found.append(LabChange(name, REMOVED, before, None))
        elif any(_differ(figure(before), figure(after)) for _, figure in FIGURES):
            found.append(LabChange(name, CHANGED, before, after))
    return found


def _differ(before: str | None, after: str | None) -> bool:
    """Whether a figure changed; one the base did not render is no change of the lab's."""
    return NOT_RENDERED not in (before, after) and before != after


def total_term(labs: Mapping[str, Any]) -> float | None:
    """The term cost of all the labs, those without a price left out as in total_ceiling; None when a lab's render
    has no term cost (a base that predates it)."""
    terms = [_term(lab) for lab in labs.values()]
    if None in terms:
        return None
    return round(sum(t["usd"] for t in terms if t is not None and t["usd"] is not None), DECIMALS)


def term_period(labs: Mapping[str, Any]) -> str | None:
    """What a render's term costs cover (domain/cost/stack_cost.py LabTerm: every lab of a stack has the same period);
    None without labs, or for a base that predates the term output."""
    terms = [_term(lab) for lab in labs.values()]
    if not terms or None in terms:
        return None
    term = next(t for t in terms if t is not None)
    if term["first"] is None:
        return f"a {HOURS_PER_MONTH}-hour month at the ceiling (no class has a term)"
    return (
        f"the term, {term['first']} to {term['last']}: each warm-up and class at the lab's ceiling, a lab without "
        "classes at it all term"
    )


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
    Column("term change", lambda change: change.term_change, numeric=True),
)


def table(base: Mapping[str, Any], head: Mapping[str, Any], shown: Collection[str] | None = None) -> list[str]:
    """The diff's lead-in and table: the changed labs (those in `shown` only, the comment's room), then all labs'
    ceiling and term cost before and after, which add up every lab; then what the term costs cover."""
    found = changes(base, head)
    before, after = total_ceiling(base), total_ceiling(head)
    counts = {kind: sum(c.kind == kind for c in found) for kind in (ADDED, REMOVED, CHANGED)}
    unchanged = len(set(base) & set(head)) - counts[CHANGED]
    summary = (
        f"{counts[ADDED]} added, {counts[REMOVED]} removed, {counts[CHANGED]} changed, {unchanged} unchanged; USD at "
        "the reference prices of the cost table below"
    )
    term_before, term_after = total_term(base), total_term(head)
    terms = [NOT_RENDERED if t is None else usd(t) for t in (term_before, term_after)]
    term_change = (
        _change(term_before, term_after) if term_before is not None and term_after is not None else NOT_RENDERED
    )
    last = ["", "all labs", "", "", f"{usd(before)} → {usd(after)}", " → ".join(terms), _change(before, after)]
    rows = [c for c in found if shown is None or c.name in shown]
    # A paragraph each: GitHub's Markdown runs consecutive lines into one.
    notes = [line for note in _term_notes(base, head) for line in ["", *lead_in(note)]]
    return [
        f"{LEAD_IN} ({summary}):",
        "",
        *markdown(COLUMNS, rows, last=[*last, term_change]),
        *notes,
    ]


def _change(before: float, after: float) -> str:
    """A total's change in USD, and in percent of `before`."""
    percent = _percent(before, after)
    return _signed(after - before) + (f" ({percent})" if percent else "")


def _term_notes(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    """What the term costs cover, the base's too where it differs; that the base has none where it predates them."""
    before, after = term_period(base), term_period(head)
    period = f"term cost: {after or before}"
    if before and after and before != after:
        period += f"; in the base, {before}"
    notes = [period] if before or after else []
    if any(_term_text(lab) == NOT_RENDERED for lab in base.values()):
        notes.append(NOT_RENDERED_NOTE)
    return notes


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
    return usd(amount) if amount is not None else NO_PRICE


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
