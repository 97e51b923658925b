"""A spending limit AWS keeps: per lab, an AWS Budgets cost budget of the lab's instances, who hears when it is passed,
and who activates the tag it filters on (gpulab:monthlyBudget, labs.<lab>.monthlyBudget, gpulab:budgetAlerts,
gpulab:costAllocationTag; docs/cost.md).

AWS Budgets alerts; it stops nothing. gpulab sets no budget actions: they apply an IAM or SCP policy or run an SSM
document that stops EC2 instances, and a lab's stopped instances are Karpenter's to replace while learners wait (it
watches their state changes). The budget is a bell; the NodePool limit stays the brake. What stops new servers at
the budget is the hub's spend gate, from the meter's spend (components/jupyterhub/spend_gate.py, Settings.spend_gated).
"""

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo, model_validator

from domain.problems import FieldProblem, report
from domain.stack.fields import Model, labs_checked, matching, unique

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
# - activate: this stack activates it (aws.costexplorer.CostAllocationTag), for a management or standalone account once
#   the key is offered. Refused, it fails the update, and Pulumi starts no further step after a failed one (Pulumi blog,
#   "Continue on Error in the Pulumi CLI"), hence not the default.
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
        raise ValueError(f"must be at least {SMALLEST_BUDGET} US dollars a month, got {amount:g}")
    return amount


def limit_amount(amount: float) -> str:
    """The amount as AWS Budgets' BudgetLimit takes it: text, in US dollars and cents."""
    return f"{amount:.2f}"


def lab_budget(own: float | None, default: float | None) -> float | None:
    """A lab's monthly budget in USD: its own, else the stack's; None for none."""
    return own if own is not None else default


# A lab budget's period: AWS Budgets' monthly cost budget (components/lab_budgets.py), the only kind gpulab makes.
MONTH = "month"


def budget_output(amount: float | None, gated: bool) -> dict[str, Any] | None:
    """The `labs.<lab>.cost.budget` output: the lab's budget in USD and its period, and `stopsSpawnsAt`, the spend in
    USD at which the hub refuses the lab's learners new servers: the amount where the hub's spend gate watches the lab
    (`gated`, Settings.spend_gated), else null (AWS Budgets alerts and stops nothing; docs/cost.md). None without a
    budget."""
    if amount is None:
        return None
    return {"amount": amount, "period": MONTH, "stopsSpawnsAt": amount if gated else None}


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
    if not {"cluster", "monthly_budget"} <= info.data.keys():
        return alerts
    labs, every_lab = labs_checked(info)
    default = info.data["monthly_budget"]
    budgeted = [name for name, lab in labs.items() if lab_budget(lab.monthly_budget, default) is not None]
    problems: list[ValueError] = []
    if budgeted and alerts is None:
        problems.append(
            ValueError(
                f"required when a lab has a monthly budget ({', '.join(budgeted[:3])}"
                f"{', ...' if len(budgeted) > 3 else ''}): the addresses its alerts go to, "
                "{emails: [...], snsTopicArn: ...}"
            )
        )
    if alerts is not None and not budgeted and every_lab:
        problems.append(
            ValueError("no lab has a monthly budget to alert on: set gpulab:monthlyBudget or labs.<lab>.monthlyBudget")
        )
    cluster = info.data["cluster"].name
    for name in budgeted:
        if len(budget_name(cluster, name)) > MAX_BUDGET_NAME:
            key = "monthlyBudget" if labs[name].monthly_budget is None else f"labs.{name}.monthlyBudget"
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
