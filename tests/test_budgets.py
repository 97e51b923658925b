"""A spending limit AWS keeps: per budgeted lab an AWS Budgets cost budget over the tag every instance of the lab
carries, alerts to gpulab:budgetAlerts; none without a budget. The tag activated for cost allocation only with
gpulab:costAllocationTag: activate, by a step nothing waits for and that never fails (tests/test_tag_activation.py): a
first `pulumi up` makes the budgets whether or not AWS activates the tag (docs/cost.md, "The tag must be active")."""

import datetime
import re
from decimal import ROUND_CEILING, Decimal

import pytest
import yaml

import domain.stack
import render.run
from components.tag_activation import HOW_TO_ACTIVATE, TAG_ACTIVATION
from domain.cost.lab_cost import usd
from render import harness
from reports import cost_report
from reports.summary import summary
from tests.conftest import as_cli_config, run_values, stack_values
from tests.support.synthetic import lab

BUDGET = "aws:budgets/budget:Budget"
TAG = TAG_ACTIVATION
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
ALERTS = {"emails": ["ops@example.com", "finance@example.com"], "snsTopicArn": "arn:aws:sns:eu-west-1:123456789012:gpu"}
# AWS Budgets' filter of one value of a user-defined cost allocation tag: user:<tag key>$<tag value>.
TAG_FILTER = re.compile(r"user:(?P<key>[^$]+)\$(?P<value>.+)")


def budgeted(**extra) -> dict:
    """Two labs: intro on the stack's budget of 100 USD, advanced on its own 250; alerts to two addresses, a topic."""
    labs = {"intro": lab(["g4dn.xlarge"], 3), "advanced": lab(["g5.xlarge"], 2, budget=250)}
    return stack_values(**{"gpulab:labs": labs, "gpulab:budget": 100, "gpulab:budgetAlerts": ALERTS} | extra)


def budgets_of(run: harness.Run) -> dict[str, dict]:
    return {r.name: r.inputs for r in run.of_type(BUDGET)}


def test_a_budget_counts_instances_with_its_labs_tag():
    run = run_values(budgeted())
    node_class_tags = {r.name.removeprefix("ec2nodeclass-"): r.inputs["spec"]["tags"] for r in run.of_type(NODE_CLASS)}
    budgets = budgets_of(run)
    assert set(budgets) == {"budgets-intro", "budgets-advanced"}
    for name, budget in budgets.items():
        lab_name = name.removeprefix("budgets-")
        (cost_filter,) = budget["costFilters"]
        assert cost_filter["name"] == "TagKeyValue"
        (value,) = cost_filter["values"]
        match = TAG_FILTER.fullmatch(value)
        assert match, f"{value!r} is not AWS Budgets' user:<key>$<value>"
        # The key the budget filters on is the one activated, and every instance of the lab carries it.
        assert match["key"] == "gpulab.dev/lab" and match["value"] == lab_name
        assert node_class_tags[lab_name][match["key"]] == lab_name


def test_by_default_a_first_up_makes_budgets_and_no_activation():
    """The default, managementAccount: nothing AWS refuses before a lab's first node, or in a member account."""
    run = run_values(budgeted())
    assert run.stack.settings.cost_allocation_tag == "managementAccount"
    assert sorted(r.name for r in run.of_type(BUDGET)) == ["budgets-advanced", "budgets-intro"]
    assert run.of_type(TAG) == []
    assert not any("costexplorer" in r.type for r in run.resources)


def test_activate_makes_the_activation_and_nothing_waits_for_it():
    run = run_values(budgeted(**{"gpulab:costAllocationTag": "activate"}))
    (tag,) = run.of_type(TAG)
    assert tag.inputs == {"__provider": "[secret]", "tagKey": "gpulab.dev/lab"}
    assert tag.name == "budgets-lab-tag"
    assert not any(d.startswith(f"{TAG}::") for r in run.resources for d in r.dependencies)


def test_activate_without_a_budget_activates_the_tag_only():
    run = run_values(stack_values(**{"gpulab:costAllocationTag": "activate"}))
    assert run.of_type(BUDGET) == [] and len(run.of_type(TAG)) == 1


def budget_summary(values: dict) -> list[str]:
    lines = summary(run_values(values))
    start = next(i for i, line in enumerate(lines) if line.startswith("lab budgets"))
    return lines[start : lines.index("", start)]


def test_the_summary_says_when_budgets_count_how_to_activate():
    text = " ".join(budget_summary(budgeted()))
    assert text.startswith(
        "lab budgets (USD; AWS Budgets watches each month, alerts to gpulab:budgetAlerts; docs/cost.md): intro 100.00 "
        "a month; advanced 250.00 a month"
    )
    assert (
        "they count a lab's spend from the day the cost allocation tag gpulab.dev/lab is active, not before: AWS "
        "offers the key up to 24 hours after a lab's first node, and activation takes up to 24 hours more"
    ) in text
    assert "this stack does not activate it (gpulab:costAllocationTag: managementAccount)" in text
    assert " ".join(HOW_TO_ACTIVATE.split()) in text
    assert "TagKey=gpulab.dev/lab,Status=Active" in HOW_TO_ACTIVATE


def test_without_the_hub_the_summary_says_no_budget_stops_new_servers():
    text = " ".join(budget_summary(budgeted()))
    assert (
        "new servers are not stopped at a budget: the hub's spend gate needs gpulab:jupyterhub and gpulab:metrics"
        in text
    )


def test_without_the_meter_the_summary_names_no_meter_alert():
    assert "LabBudgetMostlySpent" not in " ".join(budget_summary(budgeted()))


def test_the_summary_of_activate_says_when_to_run_up_again():
    text = " ".join(budget_summary(budgeted(**{"gpulab:costAllocationTag": "activate"})))
    assert "this stack activates it (gpulab:costAllocationTag: activate) and never fails the update for it" in text
    assert "the next `pulumi up` a day after a lab's first node activates it" in text
    assert "does not activate" not in text


def test_without_a_budget_the_summary_has_no_budget_lines(base_run):
    assert not any(line.startswith("lab budgets") for line in summary(base_run))


def test_a_budget_alerts_every_address_at_80_and_100_percent_and_on_the_forecast():
    budgets = budgets_of(run_values(budgeted()))
    limits = {name: (b["limitAmount"], b["limitUnit"], b["timeUnit"], b["budgetType"]) for name, b in budgets.items()}
    assert limits == {
        "budgets-intro": ("100.00", "USD", "MONTHLY", "COST"),
        "budgets-advanced": ("250.00", "USD", "MONTHLY", "COST"),
    }
    assert budgets["budgets-intro"]["name"] == "lab-test-intro"
    for budget in budgets.values():
        # Percentages of the budget's own amount, never of the lab's ceiling.
        assert sorted((n["notificationType"], n["threshold"]) for n in budget["notifications"]) == [
            ("ACTUAL", 80),
            ("ACTUAL", 100),
            ("FORECASTED", 100),
        ]
        for notification in budget["notifications"]:
            assert notification["comparisonOperator"] == "GREATER_THAN"
            assert notification["thresholdType"] == "PERCENTAGE"
            assert notification["subscriberEmailAddresses"] == ALERTS["emails"]
            assert notification["subscriberSnsTopicArns"] == [ALERTS["snsTopicArn"]]


def test_without_a_budget_no_lab_gets_one_nor_a_tag_activated(base_run):
    assert base_run.of_type(BUDGET) == [] and base_run.of_type(TAG) == []


def test_without_a_stack_budget_only_labs_with_own_are_budgeted():
    values = budgeted()
    del values["gpulab:budget"]
    values["gpulab:budgetAlerts"] = {"emails": ["ops@example.com"]}
    (budget,) = run_values(values).of_type(BUDGET)
    assert budget.name == "budgets-advanced"
    assert all("subscriberSnsTopicArns" not in n for n in budget.inputs["notifications"])


def problems(values: dict) -> list[str]:
    with pytest.raises(domain.stack.ConfigError, match=r"^gpulab:") as caught:
        domain.stack.from_cli(as_cli_config(values))
    return caught.value.lines


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            {"gpulab:budgetAlerts": None},
            "gpulab:budgetAlerts: required when a lab has a budget (intro, advanced): the addresses its alerts go to, "
            "{emails: [...], snsTopicArn: ...}",
        ),
        (
            {"gpulab:budget": None, "gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3)}},
            "gpulab:budgetAlerts: no lab has a budget to alert on: set gpulab:budget or labs.<lab>.budget",
        ),
        (
            {"gpulab:budgetAlerts": {"emails": ["ops@example"]}},
            "gpulab:budgetAlerts.emails[0]: must be an email address, got 'ops@example'",
        ),
        (
            {"gpulab:budgetAlerts": {"snsTopicArn": "arn:aws:sns:eu-west-1:1234:gpu"}},
            "gpulab:budgetAlerts.snsTopicArn: must be an SNS topic ARN such as "
            "arn:aws:sns:eu-west-1:123456789012:gpulab-budgets, got 'arn:aws:sns:eu-west-1:1234:gpu'",
        ),
        (
            {"gpulab:budgetAlerts": {"emails": []}},
            "gpulab:budgetAlerts: needs emails, snsTopicArn or both: a budget alert must go somewhere",
        ),
        (
            {"gpulab:budgetAlerts": {"emails": [f"ops{i}@example.com" for i in range(11)]}},
            "gpulab:budgetAlerts.emails: must be at most 10, the addresses AWS Budgets mails an alert to, got 11",
        ),
        (
            {"gpulab:costAllocationTag": "yes"},
            "gpulab:costAllocationTag: must be one of 'managementAccount' or 'activate', got 'yes'",
        ),
        ({"gpulab:budget": 0}, "gpulab:budget.amount: must be a positive amount of US dollars, got 0"),
        ({"gpulab:budget": 0.001}, "gpulab:budget.amount: must be at least 0.01 US dollars, got 0.001"),
        (
            {"gpulab:budget": "lots"},
            "gpulab:budget: must be US dollars (a number such as 500), or {amount: 500, period: term} or "
            "{amount: 500, period: month}, got 'lots'",
        ),
        (
            {"gpulab:budget": {"amount": 100, "period": "year"}},
            "gpulab:budget.period: must be one of 'term' or 'month', got 'year'",
        ),
        (
            {"gpulab:budget": {"amount": 100, "period": "term"}},
            "gpulab:budget.period: term needs each lab's term, and lab intro has none (it has no classes): give it a "
            "term, its own budget, or write period: month",
        ),
        # The key before issue #49, refused with the spelling that keeps its meaning.
        (
            {"gpulab:budget": None, "gpulab:monthlyBudget": 100},
            "gpulab:monthlyBudget: renamed to budget, which is per term for a lab whose classes have one: for the "
            "same monthly budget write budget: {amount: 100, period: month}",
        ),
    ],
)
def test_a_budget_key_with_a_problem_is_one_line_naming_it(change, line):
    values = {k: v for k, v in (budgeted() | change).items() if v is not None}
    assert problems(values) == [line]


def test_a_budget_name_too_long_for_aws_is_refused_at_its_key():
    cluster = {**stack_values()["gpulab:cluster"], "name": "c" * 70}
    long_lab = "l" * 30
    values = budgeted(**{"gpulab:cluster": cluster, "gpulab:labs": {long_lab: lab(["g4dn.xlarge"], 3)}})
    (line,) = problems(values)
    assert line.startswith(f"gpulab:budget: the budget of lab {long_lab} is named cccccccccccccccccccc..., 101")
    assert line.endswith("AWS Budgets allows 100: shorten the lab's or the cluster's name")


def test_each_budgeted_labs_cost_output_names_its_budget():
    labs = run_values(budgeted()).outputs["labs"]
    # Without the hub and the meter nothing stops new servers at a budget: AWS Budgets alerts, and stopsSpawnsAt says
    # so with null (tests/test_spend_gate.py: with them).
    assert {name: lab["cost"]["budget"] for name, lab in labs.items()} == {
        "intro": {"amount": 100, "period": "month", "stopsSpawnsAt": None},
        "advanced": {"amount": 250, "period": "month", "stopsSpawnsAt": None},
    }


def test_a_lab_without_a_budget_has_a_null_budget_output(base_run):
    assert base_run.outputs["labs"]["intro"]["cost"]["budget"] is None


# A term of Mondays from 11 January to 22 March 2027, 10:00 UTC with a 20-minute warm-up: it runs from 23:40 on 10
# January (the first day's midnight, less the warm-up) to midnight after 22 March, and February is its fullest month.
TERM = {"start": "2027-01-11", "end": "2027-03-22"}
TERM_FROM = datetime.datetime(2027, 1, 10, 23, 40, tzinfo=datetime.UTC)
TERM_UNTIL = datetime.datetime(2027, 3, 23, tzinfo=datetime.UTC)


def termed(budget, schedule: str = "0 10 * * mon", term: dict = TERM, **more) -> dict:
    classes = [{"schedule": schedule, "duration": "1h", "term": term}]
    labs = {"intro": lab(["g4dn.xlarge"], 3, classes=classes, budget=budget, **more)}
    return stack_values(**{"gpulab:labs": labs, "gpulab:budgetAlerts": ALERTS})


def pace(amount: float, start: datetime.datetime, end: datetime.datetime, fullest: datetime.timedelta) -> str:
    """The share of `amount` of a term's fullest month, rounded up to a cent."""
    share = Decimal(str(amount)) * Decimal(fullest.total_seconds()) / Decimal((end - start).total_seconds())
    return str(share.quantize(Decimal("0.01"), rounding=ROUND_CEILING))


def test_a_number_is_per_term_for_a_lab_whose_classes_have_one_and_aws_watches_its_pace_monthly():
    run = run_values(termed(1000))
    assert run.outputs["labs"]["intro"]["cost"]["budget"] == {
        "amount": 1000,
        "period": "term",
        "from": "2027-01-10T23:40:00Z",
        "until": "2027-03-23T00:00:00Z",
        "stopsSpawnsAt": None,
    }
    (budget,) = run.of_type(BUDGET)
    # AWS Budgets has no term (time_unit MONTHLY, QUARTERLY, ANNUALLY, DAILY): each month may spend the term's share
    # of its fullest month, February's 28 days: 394.29 of 1000, not 1000 a month.
    february = datetime.timedelta(days=28)
    assert (budget.inputs["timeUnit"], budget.inputs["limitAmount"]) == (
        "MONTHLY",
        pace(1000, TERM_FROM, TERM_UNTIL, february),
    )
    assert float(budget.inputs["limitAmount"]) < 1000
    text = " ".join(budget_summary(termed(1000)))
    assert (
        "intro 1000.00 a term (2027-01-10 23:40 to 2027-03-23 00:00 UTC; AWS Budgets at its pace, 394.29 a month)"
        in (text)
    )


def test_a_term_budget_counts_only_within_its_term_and_a_month_budget_has_no_end():
    """AWS Budgets gets the term's span as the budget's TimePeriod, in UTC: it counts no month before the term nor after
    it (and deletes the budget after its end). A New York term from Monday 4 January 2027 (warm-up 23:40 on 3 January,
    04:40 UTC on 4 January) to Monday 22 March (its midnight after, 04:00 UTC on 23 March: New York is on daylight
    time from 14 March). A term's new end replaces the budget, the old deleted first; a month's budget has no span."""
    values = termed(1000, term={"start": "2027-01-04", "end": "2027-03-22"})
    values["gpulab:labs"]["intro"]["classes"][0]["timeZone"] = "America/New_York"
    values["gpulab:labs"]["advanced"] = lab(["g5.xlarge"], 2, budget=250)
    run = run_values(values)
    budgets = {r.name: r for r in run.of_type(BUDGET)}
    term, month = budgets["budgets-intro"], budgets["budgets-advanced"]
    assert (term.inputs["timePeriodStart"], term.inputs["timePeriodEnd"]) == ("2027-01-04_04:40", "2027-03-23_04:00")
    assert run.outputs["labs"]["intro"]["cost"]["budget"]["until"] == "2027-03-23T04:00:00Z"
    # The forecast alert stays: within the term it is the month's forecast against the month's pace.
    assert ("FORECASTED", 100) in [(n["notificationType"], n["threshold"]) for n in term.inputs["notifications"]]
    assert term.replacement_options == ("replaceOnChanges: timePeriodEnd", "deleteBeforeReplace")
    assert "timePeriodStart" not in month.inputs and "timePeriodEnd" not in month.inputs
    assert (month.inputs["timeUnit"], month.inputs["limitAmount"]) == ("MONTHLY", "250.00")


def test_a_term_from_a_monday_the_1st_at_midnight_keeps_its_warm_up_on_the_last_day_of_february():
    """The warm-up of a class at 00:00 on 1 March 2027 falls at 23:40 on 28 February: the term, the spend the hub
    adds up and the months AWS watches begin there."""
    values = termed(300, schedule="0 0 * * mon", term={"start": "2027-03-01", "end": "2027-03-29"})
    run = run_values(values)
    start = datetime.datetime(2027, 2, 28, 23, 40, tzinfo=datetime.UTC)
    end = datetime.datetime(2027, 3, 30, tzinfo=datetime.UTC)
    assert run.outputs["labs"]["intro"]["cost"]["budget"]["from"] == "2027-02-28T23:40:00Z"
    (budget,) = run.of_type(BUDGET)
    assert budget.inputs["limitAmount"] == pace(300, start, end, datetime.timedelta(days=29))
    assert budget.inputs["timePeriodStart"] == "2027-02-28_23:40"


def test_a_term_lab_may_keep_a_monthly_budget():
    run = run_values(termed({"amount": 120, "period": "month"}))
    assert run.outputs["labs"]["intro"]["cost"]["budget"] == {"amount": 120, "period": "month", "stopsSpawnsAt": None}
    (budget,) = run.of_type(BUDGET)
    assert budget.inputs["limitAmount"] == "120.00"


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (
            stack_values(
                **{
                    "gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, budget={"amount": 100, "period": "term"})},
                    "gpulab:budgetAlerts": ALERTS,
                }
            ),
            "gpulab:labs.intro.budget.period: term needs the lab's term, and it has no classes: give every class a "
            "term, or write period: month",
        ),
        (
            stack_values(
                **{
                    "gpulab:labs": {
                        "intro": lab(
                            ["g4dn.xlarge"],
                            3,
                            classes=[
                                {"schedule": "0 10 * * mon", "duration": "1h", "term": TERM},
                                {"schedule": "0 10 * * thu", "duration": "1h"},
                            ],
                            budget={"amount": 100, "period": "term"},
                        )
                    },
                    "gpulab:budgetAlerts": ALERTS,
                }
            ),
            "gpulab:labs.intro.budget.period: term needs the lab's term, and classes[1] has none (a class without a "
            "term repeats all year): give every class a term, or write period: month",
        ),
        (
            termed(None, monthlyBudget=100),
            "gpulab:labs.intro.monthlyBudget: renamed to budget, which is per term for a lab whose classes have one: "
            "for the same monthly budget write budget: {amount: 100, period: month}",
        ),
    ],
)
def test_a_lab_budget_with_a_problem_is_one_line_naming_its_key(values, line):
    values["gpulab:labs"]["intro"] = {k: v for k, v in values["gpulab:labs"]["intro"].items() if v is not None}
    assert problems(values) == [line]


def test_a_term_longer_than_the_meter_keeps_its_spend_is_refused_where_the_meter_adds_it_up():
    """The workspace keeps samples 150 days (AMP's default): a term of Mondays from 11 January to 26 July 2027 would
    lose its first weeks from the gate's sum. Without the meter nothing sums it, and the term budget is AWS's alone."""
    long_term = {"start": "2027-01-11", "end": "2027-07-26"}
    values = termed(900, term=long_term) | {"gpulab:metrics": {}}
    (line,) = problems(values)
    assert line.startswith(
        "gpulab:labs.intro.budget: the term lasts 197 days, longer than the 150 days the metrics workspace keeps the "
        "spend it adds up"
    )
    assert line.endswith("write period: month, or give the classes shorter terms")
    assert run_values(termed(900, term=long_term)).outputs["labs"]["intro"]["cost"]["budget"]["period"] == "term"
    monthly = termed({"amount": 300, "period": "month"}, term=long_term) | {"gpulab:metrics": {}}
    assert run_values(monthly).outputs["labs"]["intro"]["cost"]["budget"]["period"] == "month"


def test_a_budget_under_what_the_lab_may_cost_over_its_period_is_warned_like_with_like():
    term_labs = run_values(termed(10)).outputs["labs"]
    (line,) = cost_report.budget_warnings(term_labs)
    figure = term_labs["intro"]["cost"]["term"]
    assert line.startswith(
        f"gpulab:labs.intro.budget: the lab's nodes may cost up to {usd(figure['usd'])} USD over its term at its "
        f"ceiling ({figure['hours']:g} hours at atMostPerHour), above its budget of 10.00"
    )
    assert cost_report.budget_warnings(run_values(termed(1_000_000)).outputs["labs"]) == []
    # A month's budget is not held against a term's figure, nor a term's against a month.
    assert cost_report.budget_warnings(run_values(termed({"amount": 10, "period": "month"})).outputs["labs"]) == []
    month_labs = run_values(budgeted()).outputs["labs"]
    warned = cost_report.budget_warnings(month_labs)
    assert sorted(line.split(":")[1] for line in warned) == ["labs.advanced.budget", "labs.intro.budget"]
    assert all("over a 730-hour month at its ceiling (730 hours at atMostPerHour)" in line for line in warned)


def test_the_render_prints_the_budget_warning(tmp_path, capsys):
    stack = tmp_path / "Pulumi.lab.yaml"
    stack.write_text(yaml.safe_dump({"config": termed(10)}))
    assert render.run.main([str(stack), "--out", str(tmp_path / "out"), "--no-charts"]) == 0
    err = capsys.readouterr().err
    assert "gpulab:labs.intro.budget: the lab's nodes may cost up to " in err
