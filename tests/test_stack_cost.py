"""The whole stack's cost: the `cost` stack output, the summary's table of it, and the term
(domain/cost/stack_cost.py)."""

import datetime
from decimal import ROUND_CEILING, Decimal

import pytest

from domain.cost.prices import CLB_PRICE_SOURCE, DISK_PRICE_SOURCE, EKS_PRICE_SOURCE, PRICE_SOURCE
from domain.time import utc
from render import harness
from reports.summary import summary
from tests.conftest import BASE, STACK_FILES, as_cli_config, run_stack_file, run_values, stack_values
from tests.support import tables
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab

# BASE: eu-west-1, Kubernetes 1.36, two m7i.large system nodes, lab intro of 4 g4dn.xlarge GPUs in 3 slices.
# Control plane: 1.36 is in standard support on the tests' day (2026-12-04, tests/conftest.py RUN_DAY): 0.10 per hour.
# System nodes: 2 x (0.1008 + 20 GiB x 0.08 / 730 = 0.00219178) = 0.20598356, rounded up 0.2060.
# intro's ceiling: 4 x (0.526 + 0.00219178) = 2.11276712, rounded up 2.1128.
SYNTHETIC_HOUR = {"controlPlane": 0.1, "systemNodes": 0.206, "hub": 0, "labsCeiling": 2.1128, "total": 2.4188}


def cost(values: dict) -> dict:
    return run_values(values).outputs["cost"]


# What every line priced offline for a eu-west-1 stack adds to its sources.
ELSEWHERE = (
    "priced from us-east-1, not eu-west-1: gpulab has no eu-west-1 prices offline (`pulumi preview` prices them in "
    "eu-west-1)"
)


def offline(*sources: str) -> dict[str, str]:
    return {"region": "us-east-1", "source": "; ".join((*sources, ELSEWHERE))}


def test_cost_output_has_each_part_hourly_monthly_and_regions():
    assert cost(BASE) == {
        "region": "eu-west-1",
        "pricesFrom": "us-east-1 list",
        "perHour": SYNTHETIC_HOUR,
        # x 730: 0.1 -> 73, 0.206 -> 150.38, 2.1128 -> 1542.344, 2.4188 -> 1765.724
        "perMonth": {"controlPlane": 73, "systemNodes": 150.38, "hub": 0, "labsCeiling": 1542.344, "total": 1765.724},
        # Each part's prices, each said to be us-east-1's, not the stack's region's.
        "sources": {
            "controlPlane": offline(EKS_PRICE_SOURCE),
            "systemNodes": offline(PRICE_SOURCE, DISK_PRICE_SOURCE),
            "hub": offline(DISK_PRICE_SOURCE, CLB_PRICE_SOURCE),
            "labsCeiling": offline(PRICE_SOURCE, DISK_PRICE_SOURCE),
        },
    }


def test_the_hub_adds_its_load_balancer_and_database_volume():
    values = stack_values(
        **{
            "gpulab:jupyterhub": {**HUB, "notebookImage": NOTEBOOK_IMAGE},
            "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
        }
    )
    # 0.025 per load-balancer-hour + 1 GiB x 0.08 / 730 = 0.02510959, rounded up 0.0252.
    figures = cost(values)
    assert figures["perHour"] == {**SYNTHETIC_HOUR, "hub": 0.0252, "total": 2.444}
    # The data it processes: a rate beside the parts, in none of them, from the us-east-1 list, said so.
    assert figures["loadBalancerDataPerGb"] == {
        "usd": 0.008,
        **offline(CLB_PRICE_SOURCE),
        "counts": "per GB transferred through the hub's Classic Load Balancer; a rate, in no hourly, monthly or term "
        "figure (gpulab does not know the hub's traffic)",
    }


@pytest.mark.parametrize(
    ("version", "support", "per_hour"),
    [
        ("1.36", "STANDARD", 0.1),
        ("1.36", "EXTENDED", 0.1),  # in standard support on 2026-12-04 whatever the support type
        ("1.34", "EXTENDED", 0.6),  # 1.34 left standard support on 2026-12-02: extended until 2027-12-02
    ],
)
def test_control_plane_costs_eks_price_for_version_and_support(version, support, per_hour):
    cluster = {**BASE["gpulab:cluster"], "kubernetesVersion": version, "supportType": support}
    figures = cost(stack_values(**{"gpulab:cluster": cluster}))
    assert figures["perHour"]["controlPlane"] == per_hour
    assert figures["perMonth"]["controlPlane"] == pytest.approx(per_hour * 730)


def _cost_on(day: datetime.date, values: dict) -> dict:
    # Not through run_values, which keeps one run per configuration for the whole session, made on RUN_DAY.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(utc, "today", lambda: day)
        return harness.run("test", as_cli_config(values)).outputs["cost"]


def test_a_month_reaching_into_extended_support_counts_those_hours_at_its_price():
    # 1.35 leaves standard support on 2027-03-27 (00:00 UTC). The month from 2027-03-10: 17 days (408 hours) at 0.10,
    # the other 322 hours at 0.60: 40.8 + 193.2 = 234; with STANDARD, EKS upgrades the cluster: 730 x 0.10 = 73.
    cluster = {**BASE["gpulab:cluster"], "kubernetesVersion": "1.35"}
    extended = _cost_on(
        datetime.date(2027, 3, 10), stack_values(**{"gpulab:cluster": {**cluster, "supportType": "EXTENDED"}})
    )
    assert extended["perHour"]["controlPlane"] == 0.1
    assert extended["perMonth"]["controlPlane"] == pytest.approx(234)
    assert extended["perMonth"]["total"] == pytest.approx(234 + 150.38 + 1542.344)
    standard = _cost_on(datetime.date(2027, 3, 10), stack_values(**{"gpulab:cluster": cluster}))
    assert standard["perMonth"]["controlPlane"] == pytest.approx(73)


def test_unpriced_system_nodes_leave_an_unknown_total_explained():
    cluster = {**BASE["gpulab:cluster"], "systemNodes": {"instanceTypes": ["m8i.large", "m7i.large"]}}
    values = stack_values(**{"gpulab:cluster": cluster})
    figures = cost(values)
    assert figures["perHour"]["systemNodes"] is None and figures["perHour"]["total"] is None
    assert figures["perMonth"]["total"] is None
    lines = summary(run_values(values))
    assert whole_stack_rows(lines)["system node group"] == ["no price", "no price"]
    (counts,) = tables.lead_ins(lines, ("- system node group: ",))
    assert "m8i.large has no price" in counts


def whole_stack_rows(lines: list[str]) -> dict[str, list[str]]:
    return {row["the whole stack"]: list(row.values())[1:] for row in tables.table(lines, "the whole stack in")}


def test_summary_shows_stack_price_regions_and_termless_month():
    lines = summary(run_values(BASE))
    (title,) = tables.lead_ins(lines, ("the whole stack in eu-west-1",))
    assert "us-east-1 on-demand list prices" in title and "stack in eu-west-1" in title
    rows = whole_stack_rows(lines)
    assert rows["total"][:2] == ["2.4188", "1765.7240"]
    assert "no class has a term: a 730-hour month, at most, is 1765.7240 USD" in lines


def test_a_term_costs_warmups_and_classes_at_full_lab_plus_base():
    term = {"start": "2027-01-11", "end": "2027-01-24"}  # two Mondays, 14 days
    values = stack_values(
        **{
            "gpulab:labs": {
                "intro": lab(
                    ["g4dn.xlarge"],
                    3,
                    max_gpus=4,
                    classes=[{"schedule": "0 9 * * mon", "duration": "1h", "term": term}],
                )
            }
        }
    )
    (line,) = tables.lead_ins(summary(run_values(values)), ("the term",))
    # Classes: 2 x (20m warm-up + 1h + 10m consolidateAfter) = 3 hours x 2.1128 = 6.3384.
    # Always on: 336 hours x (0.1 + 0.206) = 102.816.
    assert line == (
        "the term, 2027-01-11 to 2027-01-24 (336 hours): 6.3384 USD for 3 hours of warm-ups, classes and "
        "consolidateAfter at each lab's at most per hour (labs without classes at it all term), beside 102.8160 USD "
        "always on; 109.1544 USD in all"
    )


@pytest.mark.parametrize(
    ("support", "always_on"),
    [
        # 1.36 leaves standard support on 2027-08-02, the term's eighth day: 168 hours at 0.10 and 168 at 0.60 (117.6),
        # beside 336 x 0.206 of system nodes (69.216).
        ("EXTENDED", "186.8160"),
        # EKS upgrades the cluster instead: 336 x (0.1 + 0.206).
        ("STANDARD", "102.8160"),
    ],
)
def test_a_term_straddling_the_end_of_standard_support(support, always_on):
    term = {"start": "2027-07-26", "end": "2027-08-08"}  # two Mondays, 14 days
    classes = [{"schedule": "0 9 * * mon", "duration": "1h", "term": term}]
    cluster = {**BASE["gpulab:cluster"], "supportType": support}
    values = stack_values(
        **{"gpulab:cluster": cluster, "gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, max_gpus=4, classes=classes)}}
    )
    run = run_values(values)
    (line,) = tables.lead_ins(summary(run), ("the term",))
    assert f"beside {always_on} USD always on" in line
    # The lab's share of it, all 12 seats being its, is what a learner's term counts beside the lab's nodes.
    cost = run.outputs["labs"]["intro"]["cost"]
    assert cost["emptyLabTerm"]["usd"] == float(always_on)
    per_learner = (Decimal(str(cost["term"]["usd"])) + Decimal(always_on)) / 12
    assert cost["perLearnerTerm"]["usd"] == float(per_learner.quantize(Decimal("0.0001"), rounding=ROUND_CEILING))


def test_a_termless_lab_costs_a_730_hour_month_at_its_ceiling():
    cost = run_values(stack_values()).outputs["labs"]["intro"]["cost"]
    # 730 x 2.1128 = 1542.344, at the prices of the lab's atMostPerHour, which it names.
    assert cost["term"] == {
        "counts": "month",
        "first": None,
        "last": None,
        "hours": 730,
        "usd": 1542.344,
        "keptByBudgets": None,
        "region": cost["atMostPerHour"]["region"],
        "source": cost["atMostPerHour"]["source"],
    }


def test_the_labs_term_costs_add_up_to_the_stacks_term():
    values = stack_values(
        **{
            "gpulab:labs": {
                "intro": lab(
                    ["g4dn.xlarge"],
                    3,
                    max_gpus=4,
                    classes=[
                        {
                            "schedule": "0 9 * * mon",
                            "duration": "1h",
                            "term": {"start": "2027-01-11", "end": "2027-01-24"},
                        }
                    ],
                ),
                "open": lab(["g4dn.xlarge"], 1, max_gpus=1),
            }
        }
    )
    run = run_values(values)
    # Each term without its prices' region and source (test_a_termless_lab_costs_a_730_hour_month_at_its_ceiling).
    terms = {
        name: {k: v for k, v in lab["cost"]["term"].items() if k not in ("region", "source")}
        for name, lab in run.outputs["labs"].items()
    }
    # intro: 2 x (20m + 1h + 10m) at 2.1128; open, without classes, at 0.5282 all the 336 hours of the term:
    # 177.4752.
    assert terms["intro"] == {
        "counts": "classes",
        "first": "2027-01-11",
        "last": "2027-01-24",
        "hours": 3,
        "usd": 6.3384,
        "keptByBudgets": None,
    }
    assert terms["open"] == {
        "counts": "all term",
        "first": "2027-01-11",
        "last": "2027-01-24",
        "hours": 336,
        "usd": 177.4752,
        "keptByBudgets": None,
    }
    (line,) = tables.lead_ins(summary(run), ("the term",))
    assert line.startswith("the term, 2027-01-11 to 2027-01-24 (336 hours): 183.8136 USD for 3 hours of warm-ups")


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_figure_names_its_price_region_and_the_stacks(path):
    """The render prices every stack from the us-east-1 list: a stack elsewhere (staging: eu-west-1) must never read
    as priced in its own region."""
    run = run_stack_file(path)
    region = run.stack.region
    for figures in [run.outputs["cost"], *(each["cost"] for each in run.outputs["labs"].values())]:
        assert (figures["region"], figures["pricesFrom"]) == (region, "us-east-1 list")
    lines = summary(run)
    titles = tables.lead_ins(lines, ("cost of the labs' GPU nodes", "the whole stack in"))
    assert len(titles) == 2
    for title in titles:
        assert "us-east-1" in title
        if region != "us-east-1":
            assert f"stack in {region}; `pulumi preview` prices {region}" in title


def test_a_term_counts_consolidate_after_and_an_overlap_once():
    classes = [
        {
            "schedule": "0 9 * * mon",
            "duration": "1h",
            "warmSeats": 6,
            "term": {"start": "2027-01-11", "end": "2027-01-17"},
        },
        {
            "schedule": "30 9 * * mon",
            "duration": "1h",
            "warmSeats": 6,
            "term": {"start": "2027-01-11", "end": "2027-01-17"},
        },
    ]
    one = lab(["g4dn.xlarge"], 3, max_gpus=4, classes=classes, disruption={"consolidateAfter": "30m"})
    cost = run_values(stack_values(**{"gpulab:labs": {"intro": one}})).outputs["labs"]["intro"]["cost"]
    # 08:40 (the first warm-up) to 11:00 (the second class's end + 30m), not 2 x (20m + 1h + 30m) = 3h40m; x 2.1128 =
    # 4.92986667, rounded up 4.9299.
    assert (cost["term"]["hours"], cost["term"]["usd"]) == (pytest.approx(7 / 3), 4.9299)
    # (4.9299 + 7 days x 24 h x 0.306 always on) / 12 seats = 4.694825, rounded up.
    assert cost["perLearnerTerm"]["usd"] == 4.6949
    assert cost["perLearnerTerm"]["counts"] == (
        "the term, 2027-01-11 to 2027-01-17: the lab's nodes 2.33333 hours at atMostPerHour (each warm-up and class, "
        "and consolidateAfter after it, overlaps once), plus emptyLabTerm (168 hours), over 12 learner seats"
    )


def _monday_run(budgets: list[dict] | None) -> harness.Run:
    """intro (2.1128 at most) with a one-hour 09:00 UTC Monday class over a two-Monday term, consolidateAfter 10m."""
    disruption = {} if budgets is None else {"disruption": {"budgets": budgets}}
    classes = [{"schedule": "0 9 * * mon", "duration": "1h", "term": {"start": "2027-01-11", "end": "2027-01-24"}}]
    values = stack_values(
        **{"gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, max_gpus=4, classes=classes, **disruption)}}
    )
    return run_values(values)


def _monday_lab(budgets: list[dict] | None) -> dict:
    return _monday_run(budgets).outputs["labs"]["intro"]["cost"]


def test_a_budget_that_blocks_disruption_past_the_class_counts_the_hours_it_keeps_the_nodes():
    run = _monday_run([{"nodes": "1"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "4h"}])
    cost = run.outputs["labs"]["intro"]["cost"]
    # Each Monday from the 08:40 warm-up to 13:00, when the budget (09:00 for 4h) lets Karpenter remove the nodes
    # emptied at 10:10 (the end + consolidateAfter): 2 x 4h20m = 26/3 hours x 2.1128 = 18.31093333, rounded up.
    assert (cost["term"]["hours"], cost["term"]["usd"]) == (pytest.approx(26 / 3), 18.311)
    # 2 x (13:00 - 10:10) of them kept by the budget, and said so.
    kept = "until 13:00 UTC by disruption.budgets[1] (0 9 * * mon-fri UTC for 4h)"
    assert cost["term"]["keptByBudgets"] == {
        "hours": pytest.approx(17 / 3),
        "counts": f"emptied nodes kept past consolidateAfter by the NodePool's disruption budgets: {kept}",
    }
    assert (
        f"8.66667 hours at atMostPerHour (each warm-up and class, and consolidateAfter after it, overlaps once), of "
        f"them 5.66667 hours emptied nodes kept past consolidateAfter by the NodePool's disruption budgets: {kept}"
        in (cost["perLearnerTerm"]["counts"])
    )
    (line,) = tables.lead_ins(summary(run), ("the term",))
    # Beside 336 hours x 0.306 always on (test_a_term_costs_warmups_and_classes_at_full_lab_plus_base).
    assert line == (
        "the term, 2027-01-11 to 2027-01-24 (336 hours): 18.3110 USD for 8.66667 hours of warm-ups, classes and "
        "consolidateAfter (of them 5.66667 hours emptied nodes kept later by NodePool disruption budgets) at each "
        "lab's at most per hour (labs without classes at it all term), beside 102.8160 USD always on; 121.1270 USD "
        "in all"
    )


@pytest.mark.parametrize(
    "budgets",
    [
        None,  # the default: one node at a time
        [{"nodes": "0", "reasons": ["Drifted", "Underutilized"], "schedule": "0 9 * * mon-fri", "duration": "4h"}],
        [{"nodes": "10%", "schedule": "0 9 * * mon-fri", "duration": "4h"}],  # rounded up: one node of any
        [{"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "1h10m"}],  # over by the end + consolidateAfter
    ],
)
def test_budgets_that_let_empty_nodes_go_at_consolidate_after_count_no_more(budgets):
    cost = _monday_lab(budgets)
    # 2 x (20m + 1h + 10m) = 3 hours x 2.1128, as without budgets.
    assert (cost["term"]["hours"], cost["term"]["usd"], cost["term"]["keptByBudgets"]) == (3, 6.3384, None)


def test_a_budget_that_never_lets_empty_nodes_go_keeps_them_to_the_terms_end():
    cost = _monday_lab([{"nodes": "0", "reasons": ["Empty"]}])
    # From the first warm-up, 2027-01-11 08:40, to the end of 2027-01-24: 13 days and 15h20m.
    assert cost["term"]["hours"] == pytest.approx(13 * 24 + 15 + 1 / 3)
    assert cost["term"]["keptByBudgets"]["counts"].endswith("until the term's end by disruption.budgets[0]")
