"""A lab's one "at most" figure and what a learner costs, each a priced line that names the region its prices are from,
their source and what it counts: the `labs.<lab>.cost` outputs atMostPerHour, perLearnerHour, perLearnerTerm and
emptyLabPerHour, which the summary, the pull-request comment and its cost diff show (docs/cost.md, "Per learner").

- atMostPerHour: the most the lab's GPU nodes cost per hour, root volumes included. Karpenter's full lab where the
  planner ran (planner/plan.py ceiling: the dearer of all learners at once and one by one), else the arithmetic bound
  (domain/cost/lab_cost.py: maxGpus x the dearest GPU-hour of the lab's types). Its `basis` says which; no other
  figure is shown as the lab's maximum.
- perLearnerHour: atMostPerHour / the lab's learner seats.
- emptyLabPerHour: an empty lab runs no GPU node (its NodePool has no minimum, and Karpenter removes a node that has
  been empty for consolidateAfter), so what it costs is its share of what runs whatever the learners do (the EKS
  control plane, the system node group, the hub): that per hour x its learner seats / all the labs' learner seats.
- emptyLabTerm: the same share of what runs always over the term's hours (a 730-hour month from the day without a
  term), each hour at its own price: the control plane's is extended support's from the day its version leaves
  standard support when the stack keeps it (domain/cost/stack_cost.py ControlPlane), so it is not emptyLabPerHour x
  the hours when the term outlives standard support.
- perLearnerTerm: (the lab's term figure, every hour its nodes may run at atMostPerHour (domain/cost/stack_cost.py
  lab_term), + emptyLabTerm) / its learner seats; over a 730-hour month when no class of the stack has a term.

Amounts are USD rounded up to 4 decimals, as every "at most" figure is (lab_cost.rounded); None where a figure has no
price (an instance type without one).
"""

import datetime
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

from domain.cost.lab_cost import rounded, usd
from domain.cost.price_book import PriceBook, Where
from domain.cost.prices import HOURS_PER_MONTH
from domain.cost.stack_cost import ALL_TERM, CLASSES, MONTH, term_usd

# What atMostPerHour is (its `basis`).
PLANNER, BOUND = "planner", "bound"
# The hours a lab's term figure counts, by its `counts` (domain/cost/stack_cost.py LabTerm).
NODE_HOURS = {
    CLASSES: "each warm-up and class, and consolidateAfter after it, overlaps once",
    ALL_TERM: "a lab without classes: any hour of the term",
    MONTH: "any hour of the month",
}


def prices(book: PriceBook, stack_region: str, always_on: bool = False) -> Where:
    """The regions and sources of a line at `book`'s prices: the instances' and the disks', and with `always_on` also
    the control plane's and the load balancer's."""
    return book.where(stack_region, book.origins(always_on))


def _where(where: Mapping[str, Any] | Where) -> dict[str, str]:
    """A line's `region` and `source`, from Where or from another line that has them."""
    region, source = (where.region, where.source) if isinstance(where, Where) else (where["region"], where["source"])
    return {"region": region, "source": source}


def _line(amount: Decimal | None, where: Mapping[str, Any] | Where, counts: str) -> dict[str, Any]:
    figure = None if amount is None else rounded(amount, ROUND_CEILING)
    return {"usd": figure, **_where(where), "counts": counts}


def empty_lab(
    always_on: float | None, seats: int, all_seats: int, where: Where, parts: str = "control plane, system nodes, hub"
) -> dict[str, Any]:
    """The emptyLabPerHour line: the lab's share, by learner seats, of `always_on` USD per hour."""
    amount = None if always_on is None else Decimal(str(always_on)) * seats / all_seats
    share = "all" if seats == all_seats else f"{seats} of {all_seats} learner seats' share"
    counts = (
        f"no GPU node (Karpenter removes a lab's empty nodes after consolidateAfter); {share} of what runs always "
        f"({parts}: {'no price' if always_on is None else usd(always_on)} USD per hour)"
    )
    return _line(amount, where, counts)


def empty_lab_term(always_on: float | None, seats: int, all_seats: int, where: Where) -> dict[str, Any]:
    """The emptyLabTerm line: the lab's share, by learner seats, of `always_on` USD over the stack's term (a 730-hour
    month without one: domain/cost/stack_cost.py StackCost.always_on_in_term)."""
    amount = None if always_on is None else Decimal(str(always_on)) * seats / all_seats
    share = "all" if seats == all_seats else f"{seats} of {all_seats} learner seats' share"
    counts = (
        f"{share} of what runs always (control plane, system nodes, hub) over the term, or a {HOURS_PER_MONTH}-hour "
        "month without one, each hour at its own price"
    )
    return _line(amount, where, counts)


def always_on_hours(term: Mapping[str, Any]) -> int:
    """The hours of the stack's term (its `labs.<lab>.cost.term` output), midnight to midnight in UTC, or a 730-hour
    month without one: the hours the always-on parts run."""
    if term["first"] is None:
        return HOURS_PER_MONTH
    first, last = (datetime.date.fromisoformat(term[key]) for key in ("first", "last"))
    return ((last - first).days + 1) * 24


def with_at_most(
    cost: Mapping[str, Any], amount: float | None, basis: str, how: str, seats: int, where: Where | None = None
) -> dict[str, Any]:
    """The `labs.<lab>.cost` output `cost` with `amount` as its atMostPerHour (`basis` PLANNER or BOUND, `how` what
    it is made of) and the figures that follow from it: the term's USD, perLearnerHour and perLearnerTerm over `seats`.
    `cost` must hold `term` and `emptyLabTerm`; the hourly lines keep its atMostPerHour's regions and sources, or
    take `where`'s; perLearnerTerm those of emptyLabTerm, which adds the always-on parts' sources."""
    where_from: Mapping[str, Any] | Where = where if where is not None else cost["atMostPerHour"]
    at_most = None if amount is None else Decimal(str(amount))
    # The term's and the warm-ups' USD are the lab's nodes at the prices of atMostPerHour: they name its region and
    # source, as every priced line does.
    term = {**cost["term"], "usd": term_usd(Decimal(str(cost["term"]["hours"])), amount), **_where(where_from)}
    empty = cost["emptyLabTerm"]["usd"]
    hours = always_on_hours(term)
    if term["usd"] is None or empty is None:
        per_term = None
    else:
        per_term = (Decimal(str(term["usd"])) + Decimal(str(empty))) / seats
    period = (
        f"a {HOURS_PER_MONTH}-hour month (no class has a term)"
        if term["first"] is None
        else f"the term, {term['first']} to {term['last']}"
    )
    nodes = f"the lab's nodes {term['hours']:g} hours at atMostPerHour ({NODE_HOURS[term['counts']]})"
    if term.get("keptByBudgets"):
        kept = term["keptByBudgets"]
        nodes = f"{nodes}, of them {kept['hours']:g} hours {kept['counts']}"
    return {
        **cost,
        "term": term,
        "warmups": [{**warmup, **_where(where_from)} for warmup in cost["warmups"]],
        "atMostPerHour": {**_line(at_most, where_from, f"at most per hour: {how}"), "basis": basis},
        "perLearnerHour": _line(
            None if at_most is None else at_most / seats, where_from, f"atMostPerHour over {seats} learner seats"
        ),
        "perLearnerTerm": _line(
            per_term,
            cost["emptyLabTerm"],
            f"{period}: {nodes}, plus emptyLabTerm ({hours} hours), over {seats} learner seats",
        ),
    }
