"""A lab's budget (labs.<lab>.budget, gpulab:budget): an amount of US dollars over a period, the lab's term or a
calendar month; the AWS Budgets cost budget that watches it, who hears when it is passed, and who activates the tag it
filters on (gpulab:budgetAlerts, gpulab:costAllocationTag; docs/cost.md).

A number is the amount per term for a lab with a term (every class of it has one: the term runs from the midnight
that begins its first class day, less the class's warm-up, to the end of its last class day, in the classes' time
zones), and per month (UTC) for any other lab;
`{amount, period: term|month}` names the period. The key was `monthlyBudget` until issue #49; that key is refused with
the new spelling (domain/stack/load.py RENAMED), not read as an alias: one spelling per setting.

AWS Budgets alerts; it stops nothing. gpulab sets no budget actions: they apply an IAM or SCP policy or run an SSM
document that stops EC2 instances, and a lab's stopped instances are Karpenter's to replace while learners wait (it
watches their state changes). The budget is a bell; the NodePool limit stays the brake. What stops new servers at
the budget is the hub's spend gate, from the meter's spend (components/jupyterhub/spend_gate.py, Settings.spend_gated).
"""

import calendar
import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, model_validator

from domain.cost.meter_cost import RETENTION_DAYS
from domain.problems import FieldProblem, report
from domain.stack import context
from domain.stack.fields import Model, labs_checked, matching, positive_amount, unique
from domain.time import durations

# AWS Budgets API reference, NotificationWithSubscribers: "one SNS subscriber and up to 10 email subscribers".
MAX_EMAILS = 10
# AWS Budgets API reference, Budget.BudgetName: 1 to 100 characters, no ':' or '\'.
MAX_BUDGET_NAME = 100
# The budget's limit is written in cents: AWS Budgets keeps the amount as text (Spend.Amount), and a dollar amount
# below a cent would be written as 0.00.
SMALLEST_BUDGET = 0.01

# Who activates the lab tag for cost allocation (gpulab:costAllocationTag; docs/cost.md, "The tag must be active"):
# - managementAccount (the default): not this stack. Only an organization's management account, or an account outside
#   any organization, may activate a cost allocation tag (AWS Billing User Guide, "Using user-defined cost allocation
#   tags"), and a key is offered for activation only up to 24 hours after a resource first carries it (pulumi-aws
#   7.51.1, costexplorer.CostAllocationTag; activating a key not yet offered fails, terraform-provider-aws #29068). A
#   first `pulumi up` therefore succeeds whatever the account, with no node yet run.
# - activate: this stack asks AWS to activate it on every `pulumi up` until AWS accepts (components/tag_activation.py),
#   and records AWS's answer (pending before the key is offered, refused in a member account) instead of failing.
# Either way the lab budgets are made, and never wait for the activation (components/lab_budgets.py).
TagActivation = Literal["managementAccount", "activate"]
MANAGEMENT_ACCOUNT: TagActivation = "managementAccount"
ACTIVATE: TagActivation = "activate"

# A mailbox as SES and SNS accept one: local part, @, a domain with a dot. AWS Budgets itself checks only that an
# address has no line break (Subscriber.Address), so a typo would be an alert nobody gets.
Email = Annotated[
    str, matching(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+", "an email address")
]
# An SNS topic's ARN (SNS CreateTopic: a name of up to 256 letters, digits, '-' and '_', a FIFO topic's ending in
# '.fifo').
SnsTopicArn = Annotated[
    str,
    matching(
        r"arn:aws(-[a-z]+)*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?",
        "an SNS topic ARN such as arn:aws:sns:eu-west-1:123456789012:gpulab-budgets",
    ),
]


def at_most_ten(emails: list[str]) -> list[str]:
    if len(emails) > MAX_EMAILS:
        raise ValueError(
            f"must be at most {MAX_EMAILS}, the addresses AWS Budgets mails an alert to, got {len(emails)}"
        )
    return emails


def budget_amount(amount: float) -> float:
    if amount < SMALLEST_BUDGET:
        raise ValueError(f"must be at least {SMALLEST_BUDGET} US dollars, got {amount:g}")
    return amount


def limit_amount(amount: float) -> str:
    """The amount as AWS Budgets' BudgetLimit takes it: text, in US dollars and cents."""
    return f"{amount:.2f}"


Period = Literal["term", "month"]
TERM: Period = "term"
MONTH: Period = "month"
SPELLING = "US dollars (a number such as 500), or {amount: 500, period: term} or {amount: 500, period: month}"


def number_or_mapping(value: Any) -> Any:
    """A bare number is the amount over the lab's own period (the term where it has one)."""
    if isinstance(value, bool) or not isinstance(value, int | float | dict):
        raise ValueError(f"must be {SPELLING}, got {value!r}")
    return value if isinstance(value, dict) else {"amount": value}


class BudgetSetting(Model):
    """A budget as the stack file writes it: an amount, and the period it is over (unset: the lab's term where it has
    one, else a month)."""

    amount: Annotated[float, AfterValidator(positive_amount), AfterValidator(budget_amount)] = Field(
        description=f"US dollars over the period, at least {SMALLEST_BUDGET}."
    )
    period: Period | None = Field(
        default=None,
        description="term (from the midnight of the lab's first class day, less the class's warm-up, to the end of "
        "its last; every class needs a term) or month (a calendar month, UTC); unset, term where the lab has one, "
        "else month.",
    )


BudgetKey = Annotated[BudgetSetting, BeforeValidator(number_or_mapping)]


@dataclass(frozen=True)
class LabBudget:
    """A lab's budget as gpulab keeps it: `amount` USD over `period`; a term's span `[start, end)` in UTC."""

    amount: float
    period: Period
    start: datetime.datetime | None = None  # the term's
    end: datetime.datetime | None = None
    # A term's class hours, UTC: each class day's [warm-up, end), those that overlap merged; what the meter's forecast
    # projects the term's spend over (components/metrics/recording_rules.py, LabBudgetForecastOver).
    class_hours: tuple[tuple[datetime.datetime, datetime.datetime], ...] = ()

    def aws_monthly_limit(self) -> float:
        """The monthly limit of the lab's AWS Budgets budget. AWS Budgets resets a cost budget each DAILY, MONTHLY,
        QUARTERLY or ANNUALLY period (pulumi-aws 7.51.1 budgets.Budget time_unit; the API reference also lists CUSTOM,
        which neither it nor the pinned provider describes), so a term is watched month by month within the term's span
        (aws_time_period), at the term's pace:
        each month may spend the share of the amount that the term's fullest UTC month holds of its hours, rounded up
        to a cent. A month over it is ahead of the pace; the term's total is the hub's spend gate's and the meter's
        alert's to watch (components/jupyterhub/spend_gate.py, components/metrics/recording_rules.py)."""
        if self.period == MONTH:
            return self.amount
        assert self.start is not None and self.end is not None
        hours = max(_hours_by_month(self.start, self.end).values())
        total = Decimal(int((self.end - self.start).total_seconds())) / 3600
        share = Decimal(str(self.amount)) * hours / total
        return float(share.quantize(Decimal("0.01"), rounding=ROUND_CEILING))

    def aws_time_period(self) -> tuple[str, str] | None:
        """The start and end of the lab's AWS Budgets budget, UTC, as pulumi-aws 7.51.1 budgets.Budget takes them
        (time_period_start, time_period_end): a term's span, so that the budget counts no month before the term and
        none after it; None for a month (AWS's default: from the month the budget is made, with no end). AWS deletes a
        budget, with its notifications, after its end (AWS Budgets API Reference, TimePeriod), so a term's budget is
        gone once the term is; components/lab_budgets.py makes the next term's."""
        if self.period == MONTH:
            return None
        assert self.start is not None and self.end is not None
        return _aws_time(self.start), _aws_time(self.end)


# The time format of pulumi-aws 7.51.1 budgets.Budget time_period_start and time_period_end ("Format:
# `2017-01-01_12:00`", pulumi_aws/budgets/budget.py), in UTC: the bridged provider parses it with the Go layout
# "2006-01-02_15:04", which carries no zone (hashicorp/terraform-provider-aws internal/service/budgets/budget.go,
# timePeriodLayout, read at commit 01d5888a; the provider version pulumi-aws 7.51.1 bridges was not read). CONFIRMED
# in the SDK, REPORTED for the layout. A term's instants fall on whole minutes (warm-ups are minutes, zone offsets too).
AWS_TIME_FORMAT = "%Y-%m-%d_%H:%M"


def _aws_time(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime(AWS_TIME_FORMAT)


def _hours_by_month(start: datetime.datetime, end: datetime.datetime) -> dict[tuple[int, int], Decimal]:
    """The hours of `[start, end)` in each UTC month it touches."""
    result: dict[tuple[int, int], Decimal] = {}
    at = start.astimezone(datetime.UTC)
    stop = end.astimezone(datetime.UTC)
    while at < stop:
        days = calendar.monthrange(at.year, at.month)[1]
        month_end = datetime.datetime(at.year, at.month, 1, tzinfo=datetime.UTC) + datetime.timedelta(days=days)
        upto = min(month_end, stop)
        result[(at.year, at.month)] = Decimal(int((upto - at).total_seconds())) / 3600
        at = upto
    return result


def lab_term(classes: Iterable[Any]) -> tuple[datetime.datetime, datetime.datetime] | None:
    """The term of a lab whose every class has one (domain.stack.model's LabClass), in UTC: from the earliest first
    class day's midnight, less that class's warm-up (the warm-up of a class at midnight falls the day before), to the
    midnight after the latest last day, each in its class's time zone. None for a lab without classes, or with a class
    without a term (it repeats all year)."""
    classes = list(classes)
    if not classes or any(c.term is None for c in classes):
        return None
    starts, ends = [], []
    for c in classes:
        zone = ZoneInfo(c.zone)
        first = datetime.datetime.combine(c.term.start, datetime.time(), zone)
        starts.append(
            (first - datetime.timedelta(minutes=durations.duration_minutes(c.warmup))).astimezone(datetime.UTC)
        )
        after = datetime.datetime.combine(c.term.end + datetime.timedelta(days=1), datetime.time(), zone)
        ends.append(after.astimezone(datetime.UTC))
    return min(starts), max(ends)


def no_term_reason(classes: list[Any]) -> str:
    """Why a lab has no term, for the message of a budget that asks for one."""
    if not classes:
        return "it has no classes"
    missing = [i for i, c in enumerate(classes) if c.term is None]
    return f"classes[{missing[0]}] has none (a class without a term repeats all year)"


def lab_budget(own: BudgetSetting | None, default: BudgetSetting | None, classes: list[Any]) -> LabBudget | None:
    """A lab's budget: its own setting, else the stack's; its period the setting's, else the lab's term where it has
    one, else a month. None for none. A term asked of a lab without one is a validation problem (term_fits), never
    resolved here."""
    setting = own if own is not None else default
    if setting is None:
        return None
    term = lab_term(classes)
    period = setting.period or (TERM if term is not None else MONTH)
    if period == MONTH:
        return LabBudget(setting.amount, MONTH)
    assert term is not None, "a term budget of a lab without a term passed validation"
    return LabBudget(setting.amount, TERM, *term, class_hours(classes))


def class_hours(classes: Iterable[Any]) -> tuple[tuple[datetime.datetime, datetime.datetime], ...]:
    """The class hours of a lab whose every class has a term: each occurrence's [warm-up, end), sorted, those that
    overlap or touch merged (an hour two classes share counts once)."""
    merged: list[tuple[datetime.datetime, datetime.datetime]] = []
    for start, end in sorted((o.warm, o.end) for c in classes for o in c.occurrences()):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def kept_long_enough(term: tuple[datetime.datetime, datetime.datetime], info: ValidationInfo) -> str | None:
    """Why the meter cannot add up a term's spend, or None: with gpulab:metrics, the hub's spend gate and the 80%
    alert sum the term's samples from the workspace, which keeps them RETENTION_DAYS (AMP's default; gpulab sets
    none); a longer term would lose its first days and read as less spent."""
    days = (term[1] - term[0]) / datetime.timedelta(days=1)
    if not context.of(info.context).runs_metrics or days <= RETENTION_DAYS:
        return None
    return (
        f"the term lasts {days:.0f} days, longer than the {RETENTION_DAYS} days the metrics workspace keeps the "
        "spend it adds up (Amazon Managed Service for Prometheus's default retention): its first days would read as "
        "nothing spent; write period: month, or give the classes shorter terms"
    )


def term_fits(setting: BudgetSetting | None, info: ValidationInfo) -> BudgetSetting | None:
    """labs.<lab>.budget: a term period needs the lab's term, one the meter keeps whole. A number is the term's only
    where the lab has one, and is checked so too."""
    if setting is None or setting.period == MONTH or "classes" not in info.data:
        return setting
    classes = info.data["classes"]
    term = lab_term(classes)
    if term is None:
        if setting.period == TERM:
            raise FieldProblem(
                "budget.period",
                f"term needs the lab's term, and {no_term_reason(classes)}: give every class a term, or write "
                f"period: month",
            )
        return setting
    if problem := kept_long_enough(term, info):
        raise FieldProblem("budget.period" if setting.period == TERM else "budget", problem)
    return setting


def default_fits(setting: BudgetSetting | None, info: ValidationInfo) -> BudgetSetting | None:
    """gpulab:budget with period term: every lab it applies to (those without a budget of their own) has a term."""
    if setting is None or setting.period != TERM:
        return setting
    labs, _ = labs_checked(info)
    without = [
        (name, no_term_reason(lab.classes))
        for name, lab in labs.items()
        if lab.budget is None and lab_term(lab.classes) is None
    ]
    if without:
        name, reason = without[0]
        raise FieldProblem(
            "budget.period",
            f"term needs each lab's term, and lab {name} has none ({reason}): give it a term, its own budget, or "
            "write period: month",
        )
    return setting


def default_terms_kept(setting: BudgetSetting | None, info: ValidationInfo) -> BudgetSetting | None:
    """gpulab:budget read as a term's (a number, or period term) by a lab without its own: the meter keeps the term
    whole."""
    if setting is None or setting.period == MONTH:
        return setting
    labs, _ = labs_checked(info)
    for name, lab in labs.items():
        if lab.budget is None and (term := lab_term(lab.classes)) is not None and (why := kept_long_enough(term, info)):
            raise FieldProblem("budget.period" if setting.period == TERM else "budget", f"lab {name}: {why}")
    return setting


def budget_output(budget: LabBudget | None, gated: bool) -> dict[str, Any] | None:
    """The `labs.<lab>.cost.budget` output: the lab's budget in USD and its period (a term's first and last instant
    too, UTC), and `stopsSpawnsAt`, the spend in USD over the period at which the hub refuses the lab's learners new
    servers: the amount where the hub's spend gate watches the lab (`gated`, Settings.spend_gated), else null (AWS
    Budgets alerts and stops nothing; docs/cost.md). None without a budget."""
    if budget is None:
        return None
    output: dict[str, Any] = {"amount": budget.amount, "period": budget.period}
    if budget.period == TERM:
        assert budget.start is not None and budget.end is not None
        output |= {"from": _utc_text(budget.start), "until": _utc_text(budget.end)}
    return output | {"stopsSpawnsAt": budget.amount if gated else None}


def _utc_text(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def budget_name(cluster: str, lab: str) -> str:
    """The name of a lab's budget in the AWS Budgets console and in its alerts: unique in the account, as two stacks'
    clusters are."""
    return f"{cluster}-{lab}"


class BudgetAlerts(Model):
    """Who AWS Budgets tells when a lab's spend passes its budget, or is forecast to by the month's end."""

    emails: Annotated[list[Email], AfterValidator(unique), AfterValidator(at_most_ten)] = Field(
        default_factory=list, description=f"Addresses AWS Budgets mails, at most {MAX_EMAILS}."
    )
    sns_topic_arn: SnsTopicArn | None = Field(
        default=None,
        description="An SNS topic AWS Budgets publishes to; its access policy must let budgets.amazonaws.com publish.",
    )

    @model_validator(mode="after")
    def _someone(self) -> "BudgetAlerts":
        if not self.emails and self.sns_topic_arn is None:
            raise ValueError("needs emails, snsTopicArn or both: a budget alert must go somewhere")
        return self


def alerts_fit(alerts: BudgetAlerts | None, info: ValidationInfo) -> BudgetAlerts | None:
    """gpulab:budgetAlerts, checked against the budgets: needed by any, read by none otherwise; and each budget's name
    within what AWS Budgets accepts. With a wrong lab, the other labs' budgets are checked, and "no lab has a budget" is
    not judged (the wrong one may have one)."""
    if not {"cluster", "budget"} <= info.data.keys():
        return alerts
    labs, every_lab = labs_checked(info)
    default = info.data["budget"]
    budgeted = [name for name, lab in labs.items() if (lab.budget or default) is not None]
    problems: list[ValueError] = []
    if budgeted and alerts is None:
        problems.append(
            ValueError(
                f"required when a lab has a budget ({', '.join(budgeted[:3])}"
                f"{', ...' if len(budgeted) > 3 else ''}): the addresses its alerts go to, "
                "{emails: [...], snsTopicArn: ...}"
            )
        )
    if alerts is not None and not budgeted and every_lab:
        problems.append(ValueError("no lab has a budget to alert on: set gpulab:budget or labs.<lab>.budget"))
    cluster = info.data["cluster"].name
    for name in budgeted:
        if len(budget_name(cluster, name)) > MAX_BUDGET_NAME:
            key = "budget" if labs[name].budget is None else f"labs.{name}.budget"
            problems.append(
                FieldProblem(
                    key,
                    f"the budget of lab {name} is named {budget_name(cluster, name)[:20]}..., "
                    f"{len(budget_name(cluster, name))} characters, and AWS Budgets allows {MAX_BUDGET_NAME}: "
                    "shorten the lab's or the cluster's name",
                )
            )
    report(problems)
    return alerts
