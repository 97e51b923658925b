"""The meter's budget rules, run by Prometheus's own promtool (`test rules`) on synthetic series: the spend of a lab
over its term and over its calendar month as the spend gate and the 80% alert count it, a lab whose NodePool has no
node spending 0 rather than nothing, the minutes Karpenter's metrics did not reach the workspace counted by the gate
and alerted on, a term's forecast over its class hours; and the planted defects those tests catch. promtool's clock
starts at 1970-01-01 00:00 UTC."""

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.jupyterhub import spend_gate
from components.metrics import recording_rules as R
from components.metrics.scrape import scrape_configuration
from domain.cost.price_book import LIST
from domain.stack.budgets import LabBudget
from domain.stack.load import parse
from tests.support.promtool import promtool
from tests.support.scraped import as_scraped
from tests.test_budgets import termed
from tests.test_metrics_rules import TYPES, planted, sample, settings

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
ALPHA, BETA = LIST.on_demand[TYPES["alpha"]], LIST.on_demand[TYPES["beta"]]


def minutes(m: int) -> datetime.datetime:
    return EPOCH + datetime.timedelta(minutes=m)


# alpha: a term from 00:10 to 01:40 on promtool's first day, of one node's 1.5 hours; beta: a monthly budget of one
# node's 2 hours.
BUDGETS = {
    "alpha": LabBudget(ALPHA, "term", minutes(10), minutes(100), ((minutes(10), minutes(100)),)),
    "beta": LabBudget(2 * BETA, "month"),
}


def rule_file(budgets: dict[str, LabBudget] = BUDGETS) -> dict[str, Any]:
    s = settings()
    file = R.rule_groups(s.labs, s.metrics, LIST, budgets)
    for rule in file["groups"][0]["rules"]:
        rule.pop("annotations", None)  # the tests hold to labels and values
    return file


def karpenter(pool: str, values: str, node_values: str) -> list[dict[str, str]]:
    """Karpenter's series of one NodePool (its cpu limit) and of its one node (allocatable cpu)."""
    return [
        {"series": f'karpenter_nodepools_limit{{nodepool="{pool}", resource_type="cpu"}}', "values": values},
        {
            "series": f'karpenter_nodes_allocatable{{node_name="{pool}-1", nodepool="{pool}", resource_type="cpu", '
            f'instance_type="{TYPES[pool]}"}}',
            "values": node_values,
        },
    ]


# Two hours, one sample a minute. alpha: its node all along. beta: its NodePool reported from minute 0, its node from
# minute 10; Karpenter's metrics stop reaching the workspace at minute 60 (a stale marker) and come back at minute 81.
TWO_HOURS = [
    *karpenter("alpha", "1x120", "4x120"),
    *karpenter("beta", "1x59 stale _x20 1x39", "_x10 4x49 stale _x20 4x39"),
]


def micro(expr: str) -> str:
    """`expr` in millionths of a dollar, rounded: compared exactly whatever the order of a float sum."""
    return f"round(({expr}) * 1000000)"


def usd(labels: str, value: float) -> list[dict[str, Any]]:
    return [{"labels": labels, "value": round(value * 1_000_000)}]


EXPECTED: dict[str, list[tuple[str, list[dict[str, Any]]]]] = {
    # Before beta's node: beta's spend recorded as 0, not missing.
    "5m": [(R.SPEND, [sample(R.SPEND, ALPHA, lab="alpha"), sample(R.SPEND, 0, lab="beta")])],
    # The term's last minute: alpha's samples of minutes 11 to 99 (a sample is the minute before it, as the gate sums
    # them from the term's start), one node's 89 minutes; none of the 10 before the term.
    "100m": [(micro(R.budget_spend("alpha", BUDGETS["alpha"])), usd('{lab="alpha"}', 89 / 60 * ALPHA))],
    "120m": [
        # beta's month: minutes 10 to 59 and 81 to 120 of one node; the 21 minutes without a sample are not spend.
        (micro(R.budget_spend("beta", BUDGETS["beta"])), usd('{lab="beta"}', 90 / 60 * BETA)),
        # What the gate reads: the minutes the meter ran without beta's spend (60 to 80), and what its GPU limit costs.
        (spend_gate.unmeasured_query("beta", 7200), [{"labels": "{}", "value": 21}]),
        (spend_gate.unmeasured_query("alpha", 7200), [{"labels": "{}", "value": 0}]),
        (
            spend_gate.gpu_limit_query("beta"),
            [{"labels": "{}", "value": settings().labs["beta"].cost_at(LIST).gpu_limit_per_hour}],
        ),
    ],
}
BUDGET_ALERTS = [
    # alpha: 80% of one node-hour is passed at minute 58 (the term's 48th sample, from minute 11): not at 50, at 60.
    ("50m", "LabBudgetMostlySpent", []),
    ("60m", "LabBudgetMostlySpent", [{"exp_labels": {"lab": "alpha", "severity": "warning"}}]),
    # beta is at 90 of its 120 minutes, under 80% (96).
    ("120m", "LabBudgetMostlySpent", [{"exp_labels": {"lab": "alpha", "severity": "warning"}}]),
    # beta unrecorded from minute 60: alerted once that lasts 10 minutes, and no more once the metrics are back.
    ("69m", "LabSpendUnmeasured", []),
    ("75m", "LabSpendUnmeasured", [{"exp_labels": {"lab": "beta", "severity": "warning"}}]),
    ("120m", "LabSpendUnmeasured", []),
]
# A month's turn: beta's node from 23:00 on 28 February 2027 on; at 00:30 on 1 March the month's spend is its samples
# since midnight, 31 of them (the one at 00:00 is in March), not the 91 of the last 31 days.
MONTH_TURN_FROM = "2027-02-28T23:00:00Z"
MONTH_TURN = [*karpenter("alpha", "1x120", "_x120"), *karpenter("beta", "1x120", "4x120")]
MONTH_EXPECTED = {"90m": [(micro(R.budget_spend("beta", BUDGETS["beta"])), usd('{lab="beta"}', 31 / 60 * BETA))]}


def unit_tests(series, expected, alerts, start: str | None = None) -> dict[str, Any]:
    return {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": R.EVALUATION_INTERVAL,
        "tests": [
            {
                **({"start_timestamp": start} if start else {}),
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": expr, "eval_time": at, "exp_samples": exp}
                    for at, checks in expected.items()
                    for expr, exp in checks
                ],
                "alert_rule_test": [
                    {"eval_time": at, "alertname": name, "exp_alerts": exp} for at, name, exp in alerts
                ],
            }
        ],
    }


def run(folder: Path, file: dict[str, Any], tests: dict[str, Any]) -> tuple[int, str]:
    """promtool test rules of `tests` against `file`, their input series as the stack's scraper keeps them."""
    s = settings()
    scraped = as_scraped(tests, scrape_configuration(s.metrics, s.karpenter, file))
    (folder / "rules.yaml").write_text(yaml.safe_dump(file, sort_keys=False))
    (folder / "tests.yaml").write_text(yaml.safe_dump(scraped, sort_keys=False))
    done = promtool("test", "rules", "tests.yaml", cwd=folder)
    return done.returncode, done.stdout + done.stderr


def test_the_gates_series_are_the_meters():
    assert (spend_gate.SPEND_SERIES, spend_gate.METER_SERIES, spend_gate.GPU_LIMIT_SERIES) == (
        R.SPEND,
        R.METER_UP,
        R.GPU_LIMIT_COST,
    )


def test_the_budget_rules_count_the_period_and_the_gaps(tmp_path):
    status, output = run(tmp_path, rule_file(), unit_tests(TWO_HOURS, EXPECTED, BUDGET_ALERTS))
    assert status == 0 and "SUCCESS" in output, output


def test_a_month_budget_counts_from_the_months_first_minute(tmp_path):
    status, output = run(tmp_path, rule_file(), unit_tests(MONTH_TURN, MONTH_EXPECTED, [], MONTH_TURN_FROM))
    assert status == 0 and "SUCCESS" in output, output


# A term of 13 hours with six class days of an hour (warm-up included), one every two hours from minute 60: six class
# hours. Both labs run one node through each class: 6 nodes' hours over the term. alpha's budget is 5 of them (on
# course to exceed it), beta's 7 (under).
CLASS_HOURS = tuple((minutes(60 + 120 * k), minutes(120 + 120 * k)) for k in range(6))
TERM_END = 780
FORECAST_BUDGETS = {
    "alpha": LabBudget(5 * ALPHA, "term", minutes(0), minutes(TERM_END), CLASS_HOURS),
    "beta": LabBudget(7 * BETA, "term", minutes(0), minutes(TERM_END), CLASS_HOURS),
}
CLASS_NODE = "_x60 " + " ".join(["4x59 stale _x59"] * 6) + " _x20"
THIRTEEN_HOURS = [*karpenter("alpha", "1x800", CLASS_NODE), *karpenter("beta", "1x800", CLASS_NODE)]
FORECAST_EXPECTED = {
    # After the second class: two nodes' hours in two class hours of six, each lab on course for six nodes' hours.
    "240m": [
        (micro(f'{R.FORECAST}{{lab="alpha"}}'), usd('{lab="alpha"}', 6 * ALPHA)),
        (micro(f'{R.FORECAST}{{lab="beta"}}'), usd('{lab="beta"}', 6 * BETA)),
    ],
    # The first class over (one class hour of six): under a fifth of the class hours, no forecast yet.
    "130m": [(R.FORECAST, [])],
}
FORECAST_ALERTS = [
    # alpha on course for 6 against 5 from the first minute, forecast from 192m (a fifth of 360 class minutes, 72,
    # passed 12 minutes into the second class): not after the first class alone...
    ("130m", "LabBudgetForecastOver", []),
    # ...pending for its longest class day, 60 minutes, ...
    ("200m", "LabBudgetForecastOver", []),
    # ...then firing, through the gaps between classes; beta, on course for 6 of 7, never.
    ("260m", "LabBudgetForecastOver", [{"exp_labels": {"lab": "alpha", "severity": "warning"}}]),
    ("770m", "LabBudgetForecastOver", [{"exp_labels": {"lab": "alpha", "severity": "warning"}}]),
    # After the term, silent.
    ("790m", "LabBudgetForecastOver", []),
]


def test_a_term_on_course_over_its_budget_is_forecast_once_a_fifth_of_its_classes_are_over(tmp_path):
    tests = unit_tests(THIRTEEN_HOURS, FORECAST_EXPECTED, FORECAST_ALERTS)
    status, output = run(tmp_path, rule_file(FORECAST_BUDGETS), tests)
    assert status == 0 and "SUCCESS" in output, output


def test_a_term_of_eleven_mondays_is_forecast_over_its_eleven_class_days_and_waits_one():
    """tests/test_budgets.py's term: Mondays 11 January to 22 March 2027, 10:00 UTC for an hour after a 20-minute
    warm-up: eleven class days of 80 minutes, the forecast's class hours; it waits 80 minutes over the budget."""
    values = termed(1000)
    stack = {k.removeprefix("gpulab:"): v for k, v in values.items() if k.startswith("gpulab:")}
    budget = parse(stack, values["aws:region"]).settings.budgets
    first = datetime.datetime(2027, 1, 11, 9, 40, tzinfo=datetime.UTC)
    assert budget["intro"].class_hours == tuple(
        (first + datetime.timedelta(weeks=k), first + datetime.timedelta(weeks=k, minutes=80)) for k in range(11)
    )
    assert f" * {11 * 80 * 60} / " in R.term_forecast("intro", budget["intro"])
    assert R.forecast_for(budget["intro"]) == "80m"


FORECAST_PLANTED = {
    # No minimum share: the first class alone decides the forecast.
    "from-the-first-minute": (R.FORECAST, f" >= {6 * 3600 * R.FORECAST_FROM_PERCENT // 100}", " >= 1", "time: 2h10m"),
    # The forecast kept after the term: a spent term's alert never ends.
    "after-the-term": (R.FORECAST, f" < {TERM_END * 60})", " < 99999)", "time: 13h10m"),
    # Per elapsed term time, not class time: after the first class (60 of 780 minutes) reads 13 classes.
    "per-term-time": (R.FORECAST, " * 21600 /", " * 46800 /", "time: 4h"),
}


@pytest.mark.parametrize("case", FORECAST_PLANTED)
def test_a_planted_forecast_defect_fails_promtools_unit_tests(tmp_path, case):
    record, old, new, caught = FORECAST_PLANTED[case]
    tests = unit_tests(THIRTEEN_HOURS, FORECAST_EXPECTED, FORECAST_ALERTS)
    status, output = run(tmp_path, planted(rule_file(FORECAST_BUDGETS), record, old, new), tests)
    assert status == 1 and caught in output, output


def test_a_forecast_without_its_wait_fires_on_the_second_class(tmp_path):
    """Planted: no `for:`, the forecast fires the minute it is first read."""
    file = rule_file(FORECAST_BUDGETS)
    for rule in file["groups"][0]["rules"]:
        if rule.get("alert") == "LabBudgetForecastOver":
            del rule["for"]
    status, output = run(tmp_path, file, unit_tests(THIRTEEN_HOURS, FORECAST_EXPECTED, FORECAST_ALERTS))
    assert status == 1 and "time: 3h20m" in output, output


PLANTED = {
    # A lab without nodes records nothing: its minutes read as unmeasured, and a gap as nothing spent.
    "spend-without-zero": (R.SPEND, "\nor 0 * max by (lab)", "\nand 0 * max by (lab)", "time: 5m"),
    # The term's window lost: alpha's minutes before its term counted.
    "term-from-anytime": (R.TERM_SPEND, " >= 600 <", " >= 0 <", "alertname: LabBudgetMostlySpent, time: 50m"),
}


@pytest.mark.parametrize("case", PLANTED)
def test_a_planted_budget_rule_defect_fails_promtools_unit_tests(tmp_path, case):
    record, old, new, caught = PLANTED[case]
    status, output = run(
        tmp_path, planted(rule_file(), record, old, new), unit_tests(TWO_HOURS, EXPECTED, BUDGET_ALERTS)
    )
    assert status == 1 and caught in output, output


def test_a_month_budget_summed_over_its_window_regardless_of_the_month_fails(tmp_path):
    """Planted: the alert's sum without the month's filter counts February's last hour into March."""
    file = planted(rule_file(), "LabBudgetMostlySpent", f" and on ({R.MONTH_LABEL}) {R.THIS_MONTH}", "")
    changed = next(
        r["expr"]
        for r in file["groups"][0]["rules"]
        if r.get("alert") == "LabBudgetMostlySpent" and "beta" in r["expr"]
    )
    expected = {"90m": [(micro(changed.split(" >= ")[0]), usd('{lab="beta"}', 31 / 60 * BETA))]}
    status, output = run(tmp_path, file, unit_tests(MONTH_TURN, expected, [], MONTH_TURN_FROM))
    assert status == 1 and "FAILED" in output, output
