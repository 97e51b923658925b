"""A stack's cost table in Markdown, from its `labs` stack output: the render prints it, the PR comment shows it."""

import datetime
from collections.abc import Callable, Collection, Mapping
from typing import Any

from components.labels import LAB_LABEL
from components.metrics.series import meter_output, stack_meter
from components.tag_activation import HOW_TO_ACTIVATE, MEANS
from domain.cost import stack_cost as stack_costs
from domain.cost.lab_cost import DECIMALS, usd
from domain.cost.meter_cost import BYTES_PER_SAMPLE, RETENTION_DAYS
from domain.cost.price_book import LIST, PriceBook
from domain.cost.prices import DISK_PRICE_SOURCE, HOURS_PER_MONTH, PRICE_SOURCE
from domain.cost.stack_cost import ALL_TERM, CLASSES, StackCost, labs_ceilings, stack_cost, term, term_days
from domain.stack import Settings, StackConfig
from domain.stack.budgets import ACTIVATE, MONTH, TERM, LabBudget, limit_amount
from domain.stack.metrics import SCRAPE_INTERVAL_SECONDS
from reports.table import Column, lead_in, markdown

NONE = "-"

# Each lab's entry of the `labs` output, by name.
LabOutput = tuple[str, Mapping[str, Any]]


def _or(value: float | None, otherwise: str) -> str:
    return usd(value) if value is not None else otherwise


# Each class's warm-up: (the lab's name, the class's entry of the lab's cost.warmups).
WarmupItem = tuple[str, Mapping[str, Any]]


def _range(amounts: list[float] | None) -> str:
    """[cheapest, dearest], shown once when they are equal."""
    return " to ".join(dict.fromkeys(usd(a) for a in amounts)) if amounts else "no price"


def _figure(name: str) -> Callable[[LabOutput], str]:
    """A cell of one of the lab's priced lines (domain/cost/learner_cost.py)."""
    return lambda item: _or(item[1]["cost"][name]["usd"], "no price")


COLUMNS: tuple[Column[LabOutput], ...] = (
    Column("lab", lambda item: item[0]),
    Column("learner seats", lambda item: str(item[1]["learnerSeats"]), numeric=True),
    # The one "at most" figure (atMostPerHour): Karpenter's full lab where the planner ran, else the arithmetic bound.
    Column("at most per hour", _figure("atMostPerHour"), numeric=True),
    # Already in the figures; shown so that a costly root volume stands out.
    Column(
        "root volume per node-hour", lambda item: usd(item[1]["cost"]["rootVolumePerNodeHour"]["usd"]), numeric=True
    ),
    Column("maxHourlyCost", lambda item: _or(item[1]["cost"]["maxHourlyCost"], NONE), numeric=True),
)
# What "at most" is, said once, then what it is made of per lab (each lab's atMostPerHour.counts, without its label).
AT_MOST = "at most per hour: "
AT_MOST_LEAD_IN = (
    "at most per hour: Karpenter's full lab where the planner ran, else the arithmetic bound (maxGpus x the dearest "
    "GPU-hour of the lab's types); each node's root volume included:"
)
PER_LEARNER_LEAD_IN = (
    "per learner (docs/cost.md): per learner-hour = at most per hour / learner seats; per learner over the {period} = "
    "(the lab's nodes for every hour they may run in it, at most per hour, + empty lab per hour x its hours) / learner "
    "seats; an empty lab runs no GPU node and costs its share, by learner seats, of what runs always (control plane, "
    "system nodes, hub):"
)


def per_learner_columns(period: str) -> tuple[Column[LabOutput], ...]:
    return (
        Column("lab", lambda item: item[0]),
        Column("per learner-hour", _figure("perLearnerHour"), numeric=True),
        Column(f"per learner, {period}", _figure("perLearnerTerm"), numeric=True),
        Column("empty lab per hour", _figure("emptyLabPerHour"), numeric=True),
    )


def period(labs: Mapping[str, Any]) -> str:
    """What perLearnerTerm covers: the stack's term, or a 730-hour month without one (the same for every lab)."""
    terms = [lab["cost"]["term"] for lab in labs.values()]
    return "month" if not terms or terms[0]["first"] is None else "term"


# The total of all labs covers the priced types only: the lead-in of the table of the others says so.
UNPRICED_LEAD_IN = "instance types without a reference price (left out of the figures above, and of their total):"
UNPRICED_COLUMNS: tuple[Column[LabOutput], ...] = (
    Column("lab", lambda item: item[0]),
    Column("instance types without a price", lambda item: ", ".join(item[1]["cost"]["unpriced"])),
)
WARMUP_LEAD_IN = (
    "what warming each class costs: its warm seats' nodes for the warmup before it starts, cheapest type first:"
)
WARMUP_COLUMNS: tuple[Column[WarmupItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("class", lambda item: item[1]["schedule"]),
    Column("warm seats", lambda item: str(item[1]["warmSeats"]), numeric=True),
    Column("ahead", lambda item: item[1]["warmup"]),
    Column("USD", lambda item: _range(item[1]["usd"]), numeric=True),
)


def _elsewhere(labs: Mapping[str, Any]) -> str:
    """The stack's region beside the prices' when they differ, as each lab's cost output names both."""
    costs = [lab["cost"] for lab in labs.values()]
    regions = {c["region"] for c in costs if not c["pricesFrom"].startswith(c["region"])}
    return "".join(f" (stack in {r}; `pulumi preview` prices {r})" for r in sorted(regions))


def total_ceiling(labs: Mapping[str, Any]) -> float:
    """The "at most" per hour of all the labs (each lab's atMostPerHour), those without a price left out (the cost
    table says so): its last row, and what the cost diff compares (reports/cost_diff.py)."""
    return round(sum(c for lab in labs.values() if (c := lab["cost"]["atMostPerHour"]["usd"]) is not None), DECIMALS)


def table(
    labs: Mapping[str, Any], shown: Collection[str] | None = None, preview_region: str | None = None
) -> list[str]:
    """Per lab: its one "at most" figure per hour, each node's root volume, its cap; then the "at most" of all labs
    together, and what each lab's is made of; then per learner: per learner-hour, over the term (or month), an empty
    lab per hour; then the instance types without a price and what warming each class costs, where there are any.
    Every figure includes each node's root volume (domain/cost/lab_cost.py). `shown` keeps the rows of those labs only
    (the pull-request comment's room); the last row still adds up every lab. `preview_region`: the figures are those a
    `pulumi preview` priced in that region (domain/cost/preview_cost.py), not the render's list."""
    total = usd(total_ceiling(labs))
    seats = sum(lab["learnerSeats"] for lab in labs.values())
    rows = [item for item in labs.items() if shown is None or item[0] in shown]
    unpriced = [item for item in rows if item[1]["cost"]["unpriced"]]
    warmups = [(name, w) for name, lab in rows for w in lab["cost"]["warmups"]]
    made_of = [
        f"- {name}: {lab['cost']['atMostPerHour']['counts'].removeprefix('at most per hour: ')}" for name, lab in rows
    ]
    over = period(labs)
    return [
        *lead_in(
            f"cost of the labs' GPU nodes in USD, priced by `pulumi preview` from {preview_region}'s prices (each "
            "line's source in the preview's `labs.<lab>.cost` output), not a bill (spot capacity costs less; "
            "docs/cost.md):"
            if preview_region
            else f"cost of the labs' GPU nodes in USD at {PRICE_SOURCE} and {DISK_PRICE_SOURCE}: list prices of one "
            f"region{_elsewhere(labs)}, not a bill (spot capacity costs less; docs/cost.md):"
        ),
        "",
        *markdown(COLUMNS, rows, last=["all labs", str(seats), total, "", ""]),
        "",
        *lead_in(AT_MOST_LEAD_IN),
        *[line for each in made_of for line in lead_in(each)],
        "",
        *lead_in(PER_LEARNER_LEAD_IN.format(period="term" if over == "term" else f"{HOURS_PER_MONTH}-hour month")),
        "",
        *markdown(per_learner_columns(over), rows),
        *(["", UNPRICED_LEAD_IN, "", *markdown(UNPRICED_COLUMNS, unpriced)] if unpriced else []),
        *(["", WARMUP_LEAD_IN, "", *markdown(WARMUP_COLUMNS, warmups)] if warmups else []),
    ]


# The parts of the `cost` stack output as the tables name them.
PART_NAMES = {
    "controlPlane": "EKS control plane",
    "systemNodes": "system node group",
    "hub": "JupyterHub (load balancer, database volume)",
    "labsCeiling": "labs, at most",
}


# The GPU meter's row of the whole stack's table, and what it counts (its volumes: the lines under the table).
METER_NAME = "GPU meter"
METER_NOTE = 'the metrics workspace\'s samples and storage, and its collector (docs/cost.md, "The meter")'


def whole_stack(
    stack: StackConfig, figures: Mapping[str, Any], day: datetime.date, planned: bool = False, book: PriceBook = LIST
) -> StackCost:
    """The stack at `book`'s prices (the render's list, or a preview's: domain/cost/preview_cost.py) on `day`, its labs
    at the ceilings shown (`figures`: the `labs` output with the planner's figures where it ran, planner/plan.py
    with_plan)."""
    hub, cluster = stack.settings.jupyterhub, stack.settings.cluster
    cost = stack_cost(
        stack.region,
        cluster.kubernetes_version,
        cluster.support_type,
        cluster.system_nodes.instance_types,
        cluster.system_nodes.size,
        hub.hub_database_size_gib if hub else None,
        labs_ceilings({name: lab["cost"] for name, lab in figures.items()}),
        book,
        day,
        stack_meter(stack.settings, book),
    )
    if planned:
        ceiling, note = cost.per_hour["labsCeiling"], cost.notes["labsCeiling"]
        return cost.with_labs_ceiling(ceiling, f"{note}, Karpenter's (the planner's full lab) where it ran")
    return cost


def stack_table(
    stack: StackConfig, figures: Mapping[str, Any], day: datetime.date, planned: bool = False, book: PriceBook = LIST
) -> list[str]:
    """The whole stack per hour on `day` and over the 730-hour month from it, each part with what it counts, then the
    term (or, without one, the month at the ceiling)."""
    cost = whole_stack(stack, figures, day, planned, book)
    output = cost.as_output()
    rows = [(PART_NAMES[p], output["perHour"][p], output["perMonth"][p], cost.notes[p]) for p in PART_NAMES]
    if cost.meter is not None:
        rows.append((METER_NAME, output["perHour"]["meter"], output["perMonth"]["meter"], METER_NOTE))
    rows.append(("total", output["perHour"]["total"], output["perMonth"]["total"], cost.excludes))
    columns: tuple[Column[tuple[str, float | None, float | None, str]], ...] = (
        Column("the whole stack", lambda row: row[0]),
        Column("USD per hour", lambda row: _or(row[1], "no price"), numeric=True),
        Column(f"USD per {HOURS_PER_MONTH}-hour month", lambda row: _or(row[2], "no price"), numeric=True),
    )
    # What each part counts, below the table: a sentence each, which as a column made the table 250 columns wide.
    counts = [line for name, _, _, note in rows if note for line in lead_in(f"- {name}: {note}")]
    lines = [
        *lead_in(
            f"the whole stack in {stack.region}, at most, in USD ({book.label(stack.region)}; not a bill: "
            "docs/cost.md):"
        ),
        "",
        *markdown(columns, rows),
        "",
        "what each part counts:",
        *counts,
        "",
        *meter(stack, book),
    ]
    found = term(cost, stack.settings.labs, labs_ceilings({name: lab["cost"] for name, lab in figures.items()}))
    if found is None:
        return [
            *lines,
            *lead_in(
                f"no class has a term: a {HOURS_PER_MONTH}-hour month, at most, is "
                f"{_or(output['perMonth']['total'], 'not known (a part has no price)')} USD"
            ),
        ]
    return [
        *lines,
        *lead_in(
            f"the term, {found.first} to {found.last} ({found.hours} hours): "
            f"{_or(found.classes, 'no price')} USD for {found.class_hours:g} hours of warm-ups, classes and "
            f"consolidateAfter{_kept(found.kept_hours)} at each lab's at most per hour (labs without classes at it "
            "all term), beside "
            f"{_or(found.always_on, 'no price')} "
            f"USD always on; {_or(found.total, 'not known')} USD in all"
        ),
    ]


def _kept(hours: float) -> str:
    """What of the term's class hours the NodePools' disruption budgets add (labs.<lab>.cost.term.keptByBudgets)."""
    return f" (of them {hours:g} hours emptied nodes kept later by NodePool disruption budgets)" if hours else ""


def meter(stack: StackConfig, book: PriceBook = LIST) -> list[str]:
    """The GPU meter's volumes, and its cost where priced (components/metrics/series.py meter_output at `book`'s
    prices): beside the whole stack's total, not in it. Nothing without gpulab:metrics."""
    if not stack.settings.metrics:
        return []
    found = meter_output(stack.settings, book, term_days(stack.settings.labs))
    jobs = "; ".join(f"{job} {each['series']:,}: {each['counts']}" for job, each in found["seriesByJob"].items())
    priced = "" if found["perMonth"] is None else f"{usd(found['perMonth'])} USD a month for samples and storage; "
    return [
        *lead_in(
            'the GPU meter (gpulab:metrics; docs/cost.md, "The meter"), in the total above where priced: '
            f"{found['series']:,} series every {SCRAPE_INTERVAL_SECONDS} s with the labs full ({jobs}) = "
            f"{found['samplesPerMonth']:,} samples ingested a {HOURS_PER_MONTH}-hour month, {found['storedGb']:g} GB "
            f"stored ({RETENTION_DAYS} days at {BYTES_PER_SAMPLE} bytes a sample), the collector "
            f"{found['collectorHoursPerMonth']} hours a "
            f"month: {priced}{'; '.join(found['unpriced'])}"
        ),
        "",
    ]


def budgets(settings: Settings) -> list[str]:
    """The labs' AWS Budgets budgets and, plainly, from when their tag filter counts and who activates the tag: until
    it is active a budget reads 0 whatever the lab spends (docs/cost.md, "The tag must be active"). Nothing without a
    budget."""
    if not settings.budgets:
        return []
    amounts = "; ".join(_budget_text(lab, budget) for lab, budget in settings.budgets.items())
    if settings.cost_allocation_tag == ACTIVATE:
        answers = "; ".join(f"{status}: {means}" for status, means in MEANS.items())
        who = (
            "this stack activates it (gpulab:costAllocationTag: activate) and never fails the update for it: a first "
            "`pulumi up` gets pending in a new account and refused in a member account; the stack output "
            f"costAllocationTag says what AWS answered the last `pulumi up`. {answers}"
        )
    else:
        who = (
            "this stack does not activate it (gpulab:costAllocationTag: managementAccount): the organization's "
            f"management account, or this account if it is in no organization, activates it once offered: "
            f"{HOW_TO_ACTIVATE}"
        )
    return [
        *lead_in(
            f"lab budgets (USD; AWS Budgets watches each month, alerts to gpulab:budgetAlerts; docs/cost.md): {amounts}"
        ),
        *lead_in(
            f"- they count a lab's spend from the day the cost allocation tag {LAB_LABEL} is active, not before: AWS "
            "offers the key up to 24 hours after a lab's first node, and activation takes up to 24 hours more"
        ),
        *lead_in(f"- {who}"),
        *lead_in(f"- {stops(settings)}"),
        *(
            lead_in(
                "- the meter's workspace raises LabBudgetMostlySpent at 80% of a lab's budget over its period, and "
                "LabSpendUnmeasured when a lab's spend goes unrecorded (read them in the workspace: no alert manager "
                "is configured; docs/metrics.md)"
            )
            if settings.metrics
            else []
        ),
    ]


# The `labs.<lab>.cost.term` figure's `counts` that are a budget's period: a term's hours, or a 730-hour month
# (domain/cost/stack_cost.py LabTerm).
_LIKE_PERIOD = {TERM: (CLASSES, ALL_TERM), MONTH: (stack_costs.MONTH,)}


def budget_warnings(labs: dict[str, Any]) -> list[str]:
    """A line per lab whose nodes may cost more over its budget's period than the budget, from the render's `labs`
    output: its term figure (every hour its nodes may run, at atMostPerHour, the one ceiling) against the budget, like
    with like (a term's budget against the term figure of a stack with a term; a month's against the 730-hour month of
    one without)."""
    lines = []
    for name, lab in labs.items():
        cost = lab["cost"]
        budget, figure = cost.get("budget"), cost.get("term")
        if not budget or not figure or figure.get("usd") is None:
            continue
        if figure["counts"] in _LIKE_PERIOD[budget["period"]] and figure["usd"] > budget["amount"]:
            over = "its term" if budget["period"] == TERM else f"a {HOURS_PER_MONTH}-hour month"
            amount, most = limit_amount(budget["amount"]), usd(figure["usd"])
            lines.append(
                f"gpulab:labs.{name}.budget: the lab's nodes may cost up to {most} USD over {over} at its "
                f"ceiling ({figure['hours']:g} hours at atMostPerHour), above its budget of {amount}"
                ": at its ceiling the budget runs out before the period ends (where the hub's spend gate watches the "
                "lab, its learners then get no new server); raise the budget, or lower maxGpus (a warning)"
            )
    return lines


def _budget_text(lab: str, budget: LabBudget) -> str:
    if budget.period == MONTH:
        return f"{lab} {limit_amount(budget.amount)} a month"
    assert budget.start is not None and budget.end is not None
    return (
        f"{lab} {limit_amount(budget.amount)} a term ({budget.start:%Y-%m-%d %H:%M} to {budget.end:%Y-%m-%d %H:%M} "
        f"UTC; AWS Budgets at its pace, {limit_amount(budget.aws_monthly_limit())} a month)"
    )


def stops(settings: Settings) -> str:
    """Whether a budget stops new servers: the hub's spend gate, in the labs it watches (Settings.spend_gated)."""
    gated = settings.spend_gated
    if not gated:
        return (
            "new servers are not stopped at a budget: the hub's spend gate needs gpulab:jupyterhub and gpulab:metrics "
            "(the spend it reads) and the lab on the spawn page"
        )
    labs = ", ".join(gated)
    others = [lab for lab in settings.budgets if lab not in gated]
    return (
        f"at its budget, the hub refuses new servers to the learners of {labs} (running ones go on; raise the budget "
        "to let them start): the spend it reads is the lab's nodes at the stack's region's on-demand prices as "
        "`pulumi up` read them (spot at on-demand; the us-east-1 list where it had none) since its budget's period "
        "(term or month) began, "
        "from the metrics workspace, a minute or two behind"
        + (
            "; after a term's end it refuses them too, until the term is extended or the budget made monthly"
            if any(budget.period == TERM for budget in gated.values())
            else ""
        )
        + (f"; {', '.join(others)} not stopped (not on the spawn page)" if others else "")
    )
