"""`python -m tools.reconcile <stack> --aws-answers FILE --at TIME` (reports/reconcile.py): each budgeted lab's spend
this month as AWS Budgets counts it beside the meter's, from recorded answers. No test calls AWS: boto3 is made
unimportable while they run."""

import datetime
import json
import sys

import pytest
import yaml

from components.jupyterhub import spend_gate
from reports import reconcile
from tests.conftest import stack_values
from tests.support.synthetic import lab

ACCOUNT = "123456789012"
WORKSPACE = "ws-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"
AT = "2026-12-04T12:00:00Z"
# From 1 December 00:00 to the 4th at noon, UTC.
MONTH_SECONDS = int(datetime.timedelta(days=3, hours=12).total_seconds())
TERM = {"start": "2026-11-02", "end": "2027-01-25"}
VALUES = stack_values(
    **{
        "gpulab:labs": {
            "intro": lab(["g4dn.xlarge"], 3, budget=100),
            "vision": lab(
                ["g5.xlarge"],
                2,
                budget=600,
                classes=[{"schedule": "0 10 * * mon", "duration": "1h", "term": TERM}],
            ),
        },
        "gpulab:metrics": {},
        "gpulab:budgetAlerts": {"emails": ["teacher@example.edu"]},
    }
)
# vision's term from 23:40 UTC on 1 November (its first Monday's midnight, less the 20-minute warm-up).
TERM_SECONDS = int(
    (
        datetime.datetime(2026, 12, 4, 12, tzinfo=datetime.UTC)
        - datetime.datetime(2026, 11, 1, 23, 40, tzinfo=datetime.UTC)
    ).total_seconds()
)


def budget(actual: str) -> dict:
    # The shape of DescribeBudget's answer (AWS Budgets API Reference, DescribeBudget, Budget, CalculatedSpend).
    return {
        "Budget": {
            "BudgetName": "x",
            "BudgetType": "COST",
            "TimeUnit": "MONTHLY",
            "CalculatedSpend": {"ActualSpend": {"Amount": actual, "Unit": "USD"}},
        }
    }


def value(number: float) -> dict:
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [0, str(number)]}]},
    }


NONE = {"status": "success", "data": {"resultType": "vector", "result": []}}


def answers(**queries: dict) -> dict:
    """A ready account: intro's AWS budget at 80.00, vision's at 150.00; the meter's answers by query."""
    recorded = {
        "sts:GetCallerIdentity": {"": {"Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:role/ops"}},
        "budgets:DescribeBudget": {
            f"{ACCOUNT} lab-test-intro": budget("80.0"),
            f"{ACCOUNT} lab-test-vision": budget("150.0"),
        },
        "amp:ListWorkspaces": {
            "gpulab-lab-test": {"workspaces": [{"workspaceId": WORKSPACE, "alias": "gpulab-lab-test"}]}
        },
        reconcile.QUERY: {
            f"{WORKSPACE} {spend_gate.spend_query('intro', MONTH_SECONDS)}": value(92.5),
            f"{WORKSPACE} {spend_gate.unmeasured_query('intro', MONTH_SECONDS)}": value(0),
            f"{WORKSPACE} {spend_gate.spend_query('vision', MONTH_SECONDS)}": value(140),
            f"{WORKSPACE} {spend_gate.unmeasured_query('vision', MONTH_SECONDS)}": value(0),
            f"{WORKSPACE} {spend_gate.spend_query('vision', TERM_SECONDS)}": value(410),
            f"{WORKSPACE} {spend_gate.unmeasured_query('vision', TERM_SECONDS)}": value(0),
        },
    }
    recorded[reconcile.QUERY] |= {f"{WORKSPACE} {q}": a for q, a in queries.items()}
    return recorded


@pytest.fixture(autouse=True)
def no_aws(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # an import of boto3 would fail the test


def reconcile_of(tmp_path, capsys, recorded: dict, values: dict = VALUES) -> tuple[int, list[str], str]:
    stack = tmp_path / "Pulumi.lab.yaml"
    stack.write_text(yaml.safe_dump({"config": values}))
    (tmp_path / "answers.json").write_text(json.dumps(recorded))
    status = reconcile.main([str(stack), "--aws-answers", str(tmp_path / "answers.json"), "--at", AT])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def test_each_budgeted_lab_shows_aws_and_the_meter_and_their_difference(tmp_path, capsys):
    status, lines, _ = reconcile_of(tmp_path, capsys, answers())
    assert status == 0
    assert lines[0] == (
        f"reconcile: lab in eu-west-1, account {ACCOUNT}: this month (UTC), 2026-12-01 00:00 to 2026-12-04 12:00"
    )
    assert "reconcile: intro: AWS Budgets (lab-test-intro) 80.00 USD; meter 92.50 USD" in lines
    assert "reconcile: intro: difference, meter less AWS: +12.50 USD (+15.6% of AWS's)" in lines
    assert "reconcile: vision: difference, meter less AWS: -10.00 USD (-6.7% of AWS's)" in lines
    # A term budget: AWS watches the month; the meter adds the term up since its start.
    assert (
        "reconcile: vision: the term so far (meter): 410.00 of its 600.00 USD; AWS Budgets watches it month by month"
        in lines
    )
    assert "intro: the term" not in " ".join(lines)


def test_the_meters_unmeasured_minutes_are_counted_at_the_gpu_limits_cost_and_said(tmp_path, capsys):
    recorded = answers(
        **{
            spend_gate.unmeasured_query("intro", MONTH_SECONDS): value(30),
            spend_gate.gpu_limit_query("intro"): value(1.2),
        }
    )
    status, lines, _ = reconcile_of(tmp_path, capsys, recorded)
    assert status == 0
    # 92.50 recorded, and 30 minutes at 1.20 an hour: 93.10.
    assert (
        "reconcile: intro: AWS Budgets (lab-test-intro) 80.00 USD; meter 93.10 USD (30 minutes unmeasured, counted at "
        "what the lab's GPU limit costs per hour)" in lines
    )
    assert "reconcile: intro: difference, meter less AWS: +13.10 USD (+16.4% of AWS's)" in lines


def test_a_budget_aws_does_not_have_is_said_not_compared(tmp_path, capsys):
    recorded = answers()
    recorded["budgets:DescribeBudget"][f"{ACCOUNT} lab-test-intro"] = {
        "Error": {
            "Code": "NotFoundException",
            "Message": "Unable to get budget: lab-test-intro - the budget doesn't exist.",
        }
    }
    status, lines, _ = reconcile_of(tmp_path, capsys, recorded)
    assert status == 0
    assert (
        "reconcile: intro: AWS Budgets (lab-test-intro) no AWS budget of that name (`pulumi up` makes it); "
        "meter 92.50 USD" in lines
    )
    assert not any(line.startswith("reconcile: intro: difference") for line in lines)


def test_a_term_over_says_aws_deleted_its_budget_and_adds_no_term_up(tmp_path, capsys):
    """vision's term ended at midnight after Monday 30 November 2026: AWS deleted its budget then (its TimePeriod's
    end), and the meter's term, counted back from now, is not added up."""
    values = yaml.safe_load(yaml.safe_dump(VALUES))
    values["gpulab:labs"]["vision"]["classes"][0]["term"] = {"start": "2026-09-07", "end": "2026-11-30"}
    recorded = answers()
    recorded["budgets:DescribeBudget"][f"{ACCOUNT} lab-test-vision"] = {
        "Error": {"Code": "NotFoundException", "Message": "Unable to get budget: lab-test-vision"}
    }
    status, lines, _ = reconcile_of(tmp_path, capsys, recorded, values)
    assert status == 0
    assert (
        "reconcile: vision: AWS Budgets (lab-test-vision) no AWS budget of that name (AWS deleted it at the term's "
        "end, 2026-12-01 00:00 UTC); meter 140.00 USD" in lines
    )
    assert not any("vision: the term so far" in line for line in lines)


def test_a_stack_without_the_meter_shows_aws_alone(tmp_path, capsys):
    values = {k: v for k, v in VALUES.items() if k != "gpulab:metrics"}
    status, lines, _ = reconcile_of(tmp_path, capsys, answers(), values)
    assert status == 0
    meter = "no meter (gpulab:metrics unset, or no workspace)"
    assert f"reconcile: intro: AWS Budgets (lab-test-intro) 80.00 USD; meter {meter}" in lines


def test_an_account_that_cannot_be_asked_exits_1_saying_why(tmp_path, capsys):
    recorded = answers()
    recorded["sts:GetCallerIdentity"][""] = {"Error": {"Code": "ExpiredToken", "Message": "The security token expired"}}
    status, lines, err = reconcile_of(tmp_path, capsys, recorded)
    assert status == 1 and lines == []
    assert err.startswith("reconcile: AWS cannot be asked: ExpiredToken: The security token expired")


def test_a_stack_without_budgets_has_nothing_to_reconcile(tmp_path, capsys):
    values = stack_values(**{"gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3)}})
    status, lines, _ = reconcile_of(tmp_path, capsys, {}, values)
    assert (status, lines) == (0, ["reconcile: lab has no lab with a budget (labs.<lab>.budget): nothing to reconcile"])
