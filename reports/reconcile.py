"""`make reconcile STACK=<name>`: each budgeted lab's spend this month as AWS Budgets counts it beside the meter's, and
the difference, read with the user's credentials and read-only calls.

    python -m tools.reconcile <stack name or stack file> [--aws-answers FILE] [--at YYYY-MM-DDTHH:MM:SSZ]

AWS's figure is the lab's budget's actual spend (budgets:DescribeBudget, Budget.CalculatedSpend.ActualSpend: "how much
you've used" in the budget's current period, AWS Budgets API Reference, CalculatedSpend), the calendar month of the
AWS budget components/lab_budgets.py makes. The meter's is the same month's spend as the hub's spend gate counts it,
from the metrics workspace (its alias gpulab-<cluster>, amp:ListWorkspaces; the Prometheus query API, aps:QueryMetrics,
signed with SigV4): the lab's nodes at the prices its rules hold, each minute the meter ran without the lab's spend
counted at what its GPU limit costs (components/jupyterhub/spend_gate.py). For a term budget the meter's term so far
is shown too, while the term lasts: AWS Budgets watches the term month by month, and deletes its budget at the term's
end (docs/cost.md).

The two are not expected to agree: AWS counts what it bills for the resources tagged gpulab.dev/lab from the day the
tag is active, hours behind (billing data up to three times a day); the meter counts Karpenter's nodes at the
on-demand prices its rules hold (spot at on-demand) within a minute or two, and none of the volumes or data transfer.
The difference is what to look at: the meter well above AWS for days (the tag not active, a spot lab), or AWS above the
meter (what the meter leaves out; minutes the meter did not run). docs/cost.md, "Reconciling with AWS Budgets".

The calls: sts:GetCallerIdentity, budgets:DescribeBudget, amp:ListWorkspaces, aps:QueryMetrics. `--aws-answers`
answers them from a file (reports/aws_answers.py); the query's key is "<workspace id> <PromQL>", and `--at` fixes the
moment the month is counted to, which recorded answers need. Exit status 0 with the report, 1 when AWS cannot be asked,
2 for a stack file with problems.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import domain.stack
from components.jupyterhub import spend_gate
from domain.stack.budgets import MONTH, LabBudget, budget_name
from render import run
from reports.aws_answers import Aws, AwsError, Boto3, Call, Recorded

QUERY = "aps:QueryMetrics"
CALLS: dict[str, Call] = {
    "sts:GetCallerIdentity": ("sts", "get_caller_identity", lambda key: {}),
    "budgets:DescribeBudget": (
        "budgets",
        "describe_budget",
        lambda key: dict(zip(("AccountId", "BudgetName"), key.split(" ", 1), strict=True)),
    ),
    "amp:ListWorkspaces": ("amp", "list_workspaces", lambda key: {"alias": key}),
}


class Boto3Workspace(Boto3):
    """AWS through boto3, and the workspace's Prometheus query API, which boto3 has no method for: a GET signed with
    SigV4 for the service `aps`, as the hub's proxy signs (components/jupyterhub/culling.py)."""

    def call(self, operation: str, key: str) -> dict[str, Any]:
        if operation != QUERY:
            return super().call(operation, key)
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        workspace, query = key.split(" ", 1)
        region = self.session.region_name
        url = (
            f"https://aps-workspaces.{region}.amazonaws.com/workspaces/{workspace}/api/v1/query?"
            + urllib.parse.urlencode({"query": query})
        )
        request = AWSRequest(method="GET", url=url)
        credentials = self.session.get_credentials()
        if credentials is None:
            raise AwsError("NoCredentialsError", "boto3 found no AWS credentials")
        SigV4Auth(credentials, "aps", region).add_auth(request)
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=dict(request.headers)), timeout=30) as r:
                answer: dict[str, Any] = json.load(r)
        except urllib.error.HTTPError as error:
            raise AwsError(f"HTTP {error.code}", error.read().decode(errors="replace")[:300]) from None
        except urllib.error.URLError as error:
            raise AwsError("URLError", str(error.reason)) from None
        return answer


def month_start(at: datetime.datetime) -> datetime.datetime:
    return at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Meter:
    """The meter's spend of a period, as the gate counts it."""

    spent: float
    unmeasured: int  # minutes counted at what the lab's GPU limit costs


@dataclass(frozen=True)
class Row:
    lab: str
    aws: float | None  # None: no such budget
    meter: Meter | None  # None: no meter
    term: Meter | None  # a term budget's term so far
    budget: LabBudget
    ended: bool = False  # a term budget's term is over: AWS has deleted its budget (LabBudget.aws_time_period)

    def lines(self, name: str) -> list[str]:
        if self.aws is not None:
            aws = f"{self.aws:.2f} USD"
        elif self.ended:
            assert self.budget.end is not None
            aws = f"no AWS budget of that name (AWS deleted it at the term's end, {self.budget.end:%Y-%m-%d %H:%M} UTC)"
        else:
            aws = "no AWS budget of that name (`pulumi up` makes it)"
        if self.meter is None:
            meter = "no meter (gpulab:metrics unset, or no workspace)"
        else:
            meter = f"{self.meter.spent:.2f} USD" + (
                f" ({self.meter.unmeasured} minutes unmeasured, counted at what the lab's GPU limit costs per hour)"
                if self.meter.unmeasured
                else ""
            )
        lines = [f"reconcile: {self.lab}: AWS Budgets ({name}) {aws}; meter {meter}"]
        if self.aws is not None and self.meter is not None:
            difference = self.meter.spent - self.aws
            share = f" ({difference / self.aws:+.1%} of AWS's)" if self.aws else ""
            lines.append(f"reconcile: {self.lab}: difference, meter less AWS: {difference:+.2f} USD{share}")
        if self.term is not None:
            lines.append(
                f"reconcile: {self.lab}: the term so far (meter): {self.term.spent:.2f} of its "
                f"{self.budget.amount:.2f} USD; AWS Budgets watches it month by month"
            )
        return lines


def _meter(aws: Aws, workspace: str, lab: str, since: datetime.datetime, at: datetime.datetime) -> Meter:
    seconds = int((at - since).total_seconds())

    def value(query: str) -> float | None:
        result = aws.call(QUERY, f"{workspace} {query}")
        if result.get("status") != "success":
            raise AwsError("QueryFailed", str(result.get("error") or result))
        found = result["data"]["result"]
        return float(found[0]["value"][1]) if found else None

    measured = value(spend_gate.spend_query(lab, seconds)) or 0.0
    unmeasured = max(int(value(spend_gate.unmeasured_query(lab, seconds)) or 0), 0)
    per_hour = value(spend_gate.gpu_limit_query(lab)) if unmeasured else None
    return Meter(spend_gate.counted(measured, unmeasured, per_hour), unmeasured if per_hour is not None else 0)


def _workspace(aws: Aws, alias: str) -> str | None:
    found = [w for w in aws.call("amp:ListWorkspaces", alias).get("workspaces", []) if w.get("alias") == alias]
    return found[0]["workspaceId"] if found else None


def rows(settings: domain.stack.Settings, account: str, aws: Aws, at: datetime.datetime) -> Iterator[Row]:
    workspace = _workspace(aws, f"gpulab-{settings.cluster.name}") if settings.metrics else None
    since = month_start(at)
    for lab, budget in settings.budgets.items():
        name = budget_name(settings.cluster.name, lab)
        try:
            answer = aws.call("budgets:DescribeBudget", f"{account} {name}")
            actual: float | None = float(answer["Budget"]["CalculatedSpend"]["ActualSpend"]["Amount"])
        except AwsError as error:
            if error.code != "NotFoundException":
                raise
            actual = None
        meter = term = None
        if workspace is not None:
            meter = _meter(aws, workspace, lab, since, at)
            # The meter's spend is counted back from now: a term over is not added up, its samples past it.
            if (
                budget.period != MONTH
                and budget.start is not None
                and budget.end is not None
                and budget.start < at < budget.end
            ):
                term = _meter(aws, workspace, lab, budget.start, at)
        ended = budget.period != MONTH and budget.end is not None and budget.end <= at
        yield Row(lab, actual, meter, term, budget, ended)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.reconcile", description=__doc__.split("\n\n")[0])
    run.add_stack_argument(parser)
    parser.add_argument("--aws-answers", type=Path, help="answer the AWS calls from this JSON file (the tests do)")
    parser.add_argument(
        "--at",
        type=lambda text: datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC),
        help="count the month to this moment, UTC (default: now)",
    )
    args = parser.parse_args(argv)
    try:
        stack_name, stack = run.checked_stack(args.stack)
    except domain.stack.ConfigError as error:
        print("\n".join(error.lines), file=sys.stderr)
        return 2
    at = args.at or datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    settings = stack.settings
    if not settings.budgets:
        print(f"reconcile: {stack_name} has no lab with a budget (labs.<lab>.budget): nothing to reconcile")
        return 0
    try:
        aws: Aws = (
            Recorded(json.loads(args.aws_answers.read_text()), str(args.aws_answers))
            if args.aws_answers
            else Boto3Workspace(stack.region, CALLS)
        )
        account = aws.call("sts:GetCallerIdentity", "")["Account"]
        found = list(rows(settings, account, aws, at))
    except AwsError as error:
        hint = "the report reads with your AWS credentials: `aws sts get-caller-identity` shows whose"
        print(f"reconcile: AWS cannot be asked: {error} ({hint})", file=sys.stderr)
        return 1
    print(
        f"reconcile: {stack_name} in {stack.region}, account {account}: this month (UTC), "
        f"{month_start(at):%Y-%m-%d %H:%M} to {at:%Y-%m-%d %H:%M}"
    )
    for row in found:
        for line in row.lines(budget_name(settings.cluster.name, row.lab)):
            print(line)
    print(
        "reconcile: AWS counts what it bills for the resources tagged gpulab.dev/lab, from the day the tag is active "
        "and hours behind; the meter counts Karpenter's nodes at on-demand prices within minutes (docs/cost.md, "
        '"Reconciling with AWS Budgets")'
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
