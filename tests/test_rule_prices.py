"""The prices the workspace's rules count a lab's nodes at, as a eu-west-1 stack's rule file carries them: at a
preview (the Price List API answered by tests/test_live_prices.py's mocks) eu-west-1's on-demand prices, a spot lab's
too, no date, a type eu-west-1 has no price for at the us-east-1 list, named; offline the us-east-1 list, said so."""

import dataclasses
import re
from typing import Any

import pytest
import yaml

from components.metrics import recording_rules as R
from domain.cost.price_book import LIST
from domain.stack.load import parse
from render import harness
from tests.conftest import as_cli_config
from tests.support.synthetic import NOTEBOOK_IMAGE, lab
from tests.test_live_prices import EU_WEST_1, EVERY_KIND, REGIONAL, TODAY, live, market  # noqa: F401 (market: a fixture)

RULES = "aws:amp/ruleGroupNamespace:RuleGroupNamespace"
# EVERY_KIND's labs (intro on-demand g4dn.xlarge with a term; vision spot g5.xlarge and g4dn.xlarge), each budgeted.
BUDGETED = {**EVERY_KIND, "gpulab:budget": 100, "gpulab:budgetAlerts": {"emails": ["teacher@example.com"]}}


def rule_file(run: harness.Run) -> tuple[str, dict[str, Any]]:
    (namespace,) = run.of_type(RULES)
    return namespace.inputs["data"], yaml.safe_load(namespace.inputs["data"])


def prices(file: dict[str, Any]) -> dict[str, float]:
    """The price per hour the rules count each instance type at (gpulab:instance_price_usd_per_hour)."""
    (rule,) = [r for r in file["groups"][0]["rules"] if r.get("record") == R.PRICE]
    found = re.findall(r'label_replace\(vector\(([0-9.]+)\), "instance_type", "([^"]+)"', rule["expr"])
    return {t: float(usd) for usd, t in found}


def descriptions(file: dict[str, Any]) -> list[str]:
    rules = file["groups"][0]["rules"]
    return [r["annotations"]["description"] for r in rules if r.get("alert") == "LabBudgetMostlySpent"]


@pytest.mark.usefixtures("market")
def test_a_eu_west_1_preview_writes_eu_west_1s_on_demand_prices_into_the_rules():
    data, file = rule_file(live(BUDGETED))
    # g5.xlarge is a spot lab's: EC2's spot prices of its zones (0.40-0.47) move every few minutes; on-demand it is.
    assert prices(file) == {t: float(EU_WEST_1[t]) for t in ("g4dn.xlarge", "g5.xlarge")}
    assert all(d.startswith("At the whole budget") for d in descriptions(file))
    assert all(
        "at eu-west-1 on-demand prices (AWS Price List API, as `pulumi up` read them)" in d for d in descriptions(file)
    )
    # Nothing of the day the Price List API answered: the workspace's rules change when a price does, not daily.
    assert not re.search(TODAY, data)


@pytest.mark.usefixtures("market")
def test_what_the_gate_counts_an_unmeasured_minute_at_is_the_labs_gpu_limit_at_the_regions_prices():
    _, file = rule_file(live(BUDGETED))
    (rule,) = [r for r in file["groups"][0]["rules"] if r.get("record") == R.GPU_LIMIT_COST]
    stack = {k.removeprefix("gpulab:"): v for k, v in BUDGETED.items() if k.startswith("gpulab:")}
    stack["jupyterhubClientSecret"] = "stand-in"  # the stack file's is a Pulumi secret
    intro = parse(stack, BUDGETED["aws:region"]).settings.labs["intro"]
    # The mocked eu-west-1 instance and gp3 prices (the root volumes' storage, the only gp3 price a default lab pays).
    eu_west_1 = dataclasses.replace(
        LIST,
        on_demand={**LIST.on_demand, **{t: float(u) for t, u in EU_WEST_1.items()}},
        gp3=dataclasses.replace(LIST.gp3, per_gb_month=str(float(REGIONAL["gp3"][2]))),
    )
    at_eu_west_1 = intro.cost_at(eu_west_1).gpu_limit_per_hour
    assert at_eu_west_1 != intro.cost_at(LIST).gpu_limit_per_hour
    assert f'vector({at_eu_west_1}), "lab", "intro"' in rule["expr"]


@pytest.mark.usefixtures("market")
def test_a_type_without_a_eu_west_1_price_is_counted_at_the_us_east_1_list_said_so():
    values = {
        **BUDGETED,
        "gpulab:labs": {**BUDGETED["gpulab:labs"], "big": lab(["g6.xlarge"], 2, notebookImage=NOTEBOOK_IMAGE)},
    }
    _, file = rule_file(live(values))
    assert prices(file)["g6.xlarge"] == LIST.on_demand["g6.xlarge"]
    assert all(f"g6.xlarge at the us-east-1 list ({LIST.source}): no eu-west-1 price" in d for d in descriptions(file))


def test_offline_the_rules_count_the_us_east_1_list_and_say_it_is_not_eu_west_1s():
    _, file = rule_file(harness.run("test", as_cli_config(BUDGETED)))
    assert prices(file) == {t: LIST.on_demand[t] for t in ("g4dn.xlarge", "g5.xlarge")}
    assert all(
        f"at {LIST.source}, not eu-west-1's: the render has no eu-west-1 prices; `pulumi up` writes eu-west-1's" in d
        for d in descriptions(file)
    )
