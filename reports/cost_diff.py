"""What a change does to the labs' cost, against the base branch's render, as Infracost's diff shows a change: each
added lab (+), removed lab (-) and changed lab (~) with its figures before and after (learner seats, at most per hour,
per learner-hour, term cost) and the changes of its "at most" figure and term cost, then those of all labs before and
after; and whether the rise is more than gpulab:costAlertThreshold.

Both sides are the renders' `labs` outputs (outputs.json), and like is compared with like only: an hour with an hour,
a term with the same term (a month with a month), Karpenter's full lab with Karpenter's full lab and the arithmetic
bound with the bound (domain/cost/learner_cost.py basis); a change between figures of two kinds or periods is "not
compared", with the reason under the table. A figure a base rendered before it existed lacks is "n/a", never zero.
"""

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from domain.cost.lab_cost import DECIMALS, raise_alerts, usd
from domain.cost.learner_cost import BOUND
from domain.cost.prices import HOURS_PER_MONTH
from reports.cost_report import total_ceiling
from reports.table import Column, lead_in, markdown

LEAD_IN = "what this change does to the labs' cost per hour and per term against the base branch's render"
ADDED, REMOVED, CHANGED = "+", "-", "~"
NONE = "-"
NO_PRICE = "no price"


# A base rendered before `labs.<lab>.cost.atMostPerHour` existed: its figure is not known, never taken for zero.
def _line(lab: Mapping[str, Any] | None, name: str) -> Mapping[str, Any] | None:
    return None if lab is None else lab["cost"].get(name)


def _line_text(name: str) -> Callable[[Mapping[str, Any] | None], str | None]:
    def text(lab: Mapping[str, Any] | None) -> str | None:
        if lab is None:
            return None
        if (line := _line(lab, name)) is None:
            return NOT_RENDERED
        return usd(line["usd"]) if line["usd"] is not None else NO_PRICE

    return text


def _ceiling(lab: Mapping[str, Any] | None) -> float | None:
    line = _line(lab, "atMostPerHour")
    return None if line is None else line["usd"]


def basis(lab: Mapping[str, Any] | None) -> str | None:
    """What a lab's atMostPerHour is (domain/cost/learner_cost.py PLANNER or BOUND); None without one."""
    line = _line(lab, "atMostPerHour")
    return None if line is None else line["basis"]


NOT_RENDERED = "n/a"
NOT_RENDERED_NOTE = (
    f"{NOT_RENDERED}: the base's render has no such figure (it predates `labs.<lab>.cost.term` or "
    "`labs.<lab>.cost.atMostPerHour`)"
)
# Figures of two kinds, or over two periods, are not compared (like with like): the change is NOT_COMPARED.
NOT_COMPARED = "not compared"


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
    ("at most per hour", _line_text("atMostPerHour")),
    ("per learner-hour", _line_text("perLearnerHour")),
    ("term cost", _term_text),
)


@dataclass(frozen=True)
class LabChange:
    name: str
    kind: str  # ADDED, REMOVED or CHANGED
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None

    @property
    def ceiling_change(self) -> str:
        """The "at most" figure's change: NOT_RENDERED when the base's render lacks it, NOT_COMPARED when the two are
        of different kinds (Karpenter's full lab beside the arithmetic bound)."""
        sides = [_line_text("atMostPerHour")(lab) for lab in (self.before, self.after)]
        if NOT_RENDERED in sides:
            return NOT_RENDERED
        if None not in (self.before, self.after) and basis(self.before) != basis(self.after):
            return NOT_COMPARED
        return _signed(round((_ceiling(self.after) or 0.0) - (_ceiling(self.before) or 0.0), DECIMALS))

    @property
    def term_change(self) -> str:
        """The term cost's change: from nothing for an added lab, to nothing for a removed one; NOT_RENDERED when the
        base's render lacks it, "no price" when a side has none, NOT_COMPARED when the two count other periods or
        are at "at most" figures of different kinds."""
        sides = [_term_text(lab) for lab in (self.before, self.after)]
        for unknown in (NOT_RENDERED, NO_PRICE):
            if unknown in sides:
                return unknown
        if self.before is not None and self.after is not None:
            periods = [_period(lab["cost"]["term"]) for lab in (self.before, self.after)]
            if periods[0] != periods[1] or self.ceiling_change == NOT_COMPARED:
                return NOT_COMPARED
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


def _period(term: Mapping[str, Any]) -> str:
    """What a lab's term cost covers (domain/cost/stack_cost.py LabTerm: every lab of a stack has the same period)."""
    if term["first"] is None:
        return f"a {HOURS_PER_MONTH}-hour month at the labs' at most per hour (no class has a term)"
    return (
        f"the term, {term['first']} to {term['last']}: each warm-up and class and consolidateAfter after it at the "
        "lab's at most per hour, a lab without classes at it all term"
    )


def term_period(labs: Mapping[str, Any]) -> str | None:
    """What a render's term costs cover; None without labs, or for a base that predates the term output."""
    terms = [_term(lab) for lab in labs.values()]
    if not terms or None in terms:
        return None
    return _period(next(t for t in terms if t is not None))


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
    Column("at most change", lambda change: change.ceiling_change, numeric=True),
    Column("term change", lambda change: change.term_change, numeric=True),
)


def total_at_most(labs: Mapping[str, Any]) -> float | None:
    """All labs' "at most" per hour (reports/cost_report.py total_ceiling); None when a lab's render has none (a base
    that predates it)."""
    if any(_line(lab, "atMostPerHour") is None for lab in labs.values()):
        return None
    return total_ceiling(labs)


def comparable(base: Mapping[str, Any], head: Mapping[str, Any]) -> bool:
    """Whether every lab on both sides has an "at most" figure of one kind on both (like with like); a base that
    predates the figure is "n/a", not of another kind."""
    kinds = [(basis(base[name]), basis(head[name])) for name in set(base) & set(head)]
    return all(before == after for before, after in kinds if None not in (before, after))


def totals_alike(base: Mapping[str, Any], head: Mapping[str, Any]) -> bool:
    """Whether the renders' `cost` outputs count the labs at figures of one kind: a base that predates atMostPerHour
    counted them at the arithmetic bound (no render wrote Karpenter's figure into outputs.json before it)."""
    kinds = [(basis(base[name]) or BOUND, basis(head[name]) or BOUND) for name in set(base) & set(head)]
    return all(before == after for before, after in kinds)


def table(base: Mapping[str, Any], head: Mapping[str, Any], shown: Collection[str] | None = None) -> list[str]:
    """The diff's lead-in and table: the changed labs (those in `shown` only, the comment's room), then all labs'
    "at most" per hour and term cost before and after, which add up every lab; then what the term costs cover, and
    why a change is not compared where one is not."""
    found = changes(base, head)
    counts = {kind: sum(c.kind == kind for c in found) for kind in (ADDED, REMOVED, CHANGED)}
    unchanged = len(set(base) & set(head)) - counts[CHANGED]
    summary = (
        f"{counts[ADDED]} added, {counts[REMOVED]} removed, {counts[CHANGED]} changed, {unchanged} unchanged; USD at "
        "the offline renders' prices (the cost table's below unless a preview priced it in the stack's region)"
    )
    kinds = comparable(base, head)
    periods = term_period(base) == term_period(head) or None in (term_period(base), term_period(head))
    at_most = (total_at_most(base), total_at_most(head))
    terms = (total_term(base), total_term(head))
    last = [
        "",
        "all labs",
        "",
        _total_cell(*at_most),
        "",
        _total_cell(*terms),
        _total_change(*at_most, kinds),
        _total_change(*terms, kinds and periods),
    ]
    rows = [c for c in found if shown is None or c.name in shown]
    # A paragraph each: GitHub's Markdown runs consecutive lines into one.
    notes = [line for note in _notes(base, head, kinds) for line in ["", *lead_in(note)]]
    return [
        f"{LEAD_IN} ({summary}):",
        "",
        *markdown(COLUMNS, rows, last=last),
        *notes,
    ]


def _total_cell(before: float | None, after: float | None) -> str:
    return " → ".join(NOT_RENDERED if t is None else usd(t) for t in (before, after))


def _total_change(before: float | None, after: float | None, alike: bool) -> str:
    if before is None or after is None:
        return NOT_RENDERED
    return _change(before, after) if alike else NOT_COMPARED


def _change(before: float, after: float) -> str:
    """A total's change in USD, and in percent of `before`."""
    percent = _percent(before, after)
    return _signed(after - before) + (f" ({percent})" if percent else "")


def _notes(base: Mapping[str, Any], head: Mapping[str, Any], kinds: bool) -> list[str]:
    """What the term costs cover, the base's too where it differs; why a change is not compared; that the base has
    a figure missing where it predates it."""
    before, after = term_period(base), term_period(head)
    period = f"term cost: {after or before}"
    if before and after and before != after:
        period += f"; in the base, {before}: {NOT_COMPARED}, a term beside another period"
    notes = [period] if before or after else []
    if not kinds:
        notes.append(
            f"{NOT_COMPARED}: at most per hour is Karpenter's full lab on one side and the arithmetic bound (maxGpus x "
            "the dearest GPU-hour) on the other, where one render ran the planner and the other did not"
        )
    if any(NOT_RENDERED in (_term_text(lab), _line_text("atMostPerHour")(lab)) for lab in base.values()):
        notes.append(NOT_RENDERED_NOTE)
    return notes


def stack_total(
    base_cost: Mapping[str, Any] | None, head_cost: Mapping[str, Any] | None, alike: bool = True
) -> list[str]:
    """The whole stack's total (the `cost` stack output) per hour and per month, before and after; the change "not
    compared" unless the labs' "at most" figures are `alike` (comparable); nothing when either render has no `cost`
    output."""
    if not base_cost or not head_cost:
        return []

    def figure(period: str) -> str:
        before, after = base_cost[period]["total"], head_cost[period]["total"]
        if before is None or after is None:
            return f"{_or_none(before)} → {_or_none(after)}"
        return f"{usd(before)} → {usd(after)} ({_signed(after - before) if alike else NOT_COMPARED})"

    return [
        f"the whole stack (the `cost` output, control plane to the labs at most), USD per hour: {figure('perHour')}; "
        f"per 730-hour month: {figure('perMonth')}"
    ]


def _or_none(amount: float | None) -> str:
    return usd(amount) if amount is not None else NO_PRICE


def alert(base: Mapping[str, Any], head: Mapping[str, Any], threshold: float | str | None) -> str | None:
    """The line at the top of the comment when the change raises all labs' "at most" per hour by more than the
    threshold; none where the two sides' figures are not of one kind, or the base has none (the diff says why)."""
    before, after = total_at_most(base), total_at_most(head)
    if before is None or after is None or not comparable(base, head) or not raise_alerts(threshold, before, after):
        return None
    limit = threshold if isinstance(threshold, str) else f"{threshold:g} USD per hour"
    percent = _percent(before, after)
    return (
        f"> [!WARNING]\n> This change raises the labs' at most by {_signed(after - before)} USD per hour "
        f"({usd(before)} → {usd(after)}{', ' + percent if percent else ''}), more than gpulab:costAlertThreshold "
        f"({limit})."
    )
