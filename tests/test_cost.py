"""What a lab costs: seat-hour prices and ceilings against figures worked out by hand, the maxHourlyCost cap, the stack
output and the NodePool annotations."""

import re

import pytest

import domain.stack
from components.karpenter.manifests import node_overlays, node_pool
from components.labels import GPU_LIMIT_COST_ANNOTATION, GPU_RESOURCE, MAX_HOURLY_COST_ANNOTATION
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.cost.lab_cost import ROOT_VOLUME, SEAT_HOUR, lab_cost, root_volume_per_hour, warmup_cost
from domain.cost.price_book import Where
from domain.cost.prices import (
    CLB_PRICE_SOURCE,
    DISK_PRICE_SOURCE,
    EKS_PRICE_SOURCE,
    ON_DEMAND_USD_PER_HOUR,
    PRICE_SOURCE,
)
from tests.conftest import STACK_FILES, run_stack_file, run_values, stack_values
from tests.support.synthetic import SYNTHETIC, lab

SOURCE = re.escape(PRICE_SOURCE)
DISK_SOURCE = re.escape(DISK_PRICE_SOURCE)

# --- the arithmetic, against figures worked out by hand from the upstream prices ------------------------------------


def test_g4dn_xlarge_by_3_is_0_1753_a_seat_hour_4_gpus_2_104():
    # 0.526 / (1 GPU x 3 slices) = 0.17533..; 4 GPUs x 0.526 = 2.104
    cost = lab_cost(["g4dn.xlarge"], slices_per_gpu=3, max_gpus=4)
    assert (cost.seat_hour, cost.gpu_limit_per_hour, cost.unpriced) == ((0.1753, 0.1753), 2.104, ())


def test_multi_gpu_types_are_priced_per_gpu():
    # g4dn.12xlarge: 3.912 / 4 GPUs = 0.978 per GPU-hour, / 2 slices = 0.489 per seat-hour; 8 GPUs x 0.978 = 7.824
    assert lab_cost(["g4dn.12xlarge"], 2, 8).seat_hour == (0.489, 0.489)
    assert lab_cost(["g4dn.12xlarge"], 2, 8).gpu_limit_per_hour == 7.824
    # p4d.24xlarge: 21.957642 / 8 = 2.74470525 per GPU-hour, / 4 slices = 0.68617631 -> 0.6862;
    # 3 x 2.74470525 = 8.23411575, rounded up (a ceiling never reads lower than it is) to 8.2342
    assert lab_cost(["p4d.24xlarge"], 4, 3).seat_hour == (0.6862, 0.6862)
    assert lab_cost(["p4d.24xlarge"], 4, 3).gpu_limit_per_hour == 8.2342


def test_seat_hours_span_the_types_the_ceiling_is_the_dearest():
    # g4dn.xlarge 0.526 per GPU-hour, g5.12xlarge 5.672 / 4 = 1.418: seats 0.263 to 0.709 with 2 slices; 4 x 1.418
    cost = lab_cost(["g4dn.xlarge", "g5.12xlarge"], 2, 4)
    assert (cost.seat_hour, cost.gpu_limit_per_hour) == ((0.263, 0.709), 5.672)
    assert cost.gpu_limit_basis == "maxGpus 4 x 1.418 USD per GPU-hour of g5.12xlarge"


def test_a_lab_with_no_priced_type_has_no_figures_says_which():
    cost = lab_cost(["g7.2xlarge", "p5e.48xlarge"], 2, 4)
    assert (cost.seat_hour, cost.gpu_limit_per_hour) == (None, None)
    # Each line names the prices it is made of: the seat-hours the nodes' (instances, EBS), the volume the disks'.
    nodes, disks = Where("us-east-1", "the nodes' prices"), Where("us-east-1", "the disks' prices")
    assert cost.as_output(nodes, disks) == {
        "seatHour": {"usd": None, "region": "us-east-1", "source": "the nodes' prices", "counts": SEAT_HOUR},
        "rootVolumePerNodeHour": {
            "usd": None,
            "region": "us-east-1",
            "source": "the disks' prices",
            "counts": ROOT_VOLUME,
        },
        "maxHourlyCost": None,
        "unpriced": ["g7.2xlarge", "p5e.48xlarge"],
        "warmups": [],
    }


# --- what warming a class's seats costs ------------------------------------------------------------------------------


def test_warming_12_g4dn_thirds_20m_costs_4_nodes_a_third_hour():
    # 12 seats / 3 per node = 4 nodes x 0.526 x 20/60 = 0.70133..
    assert warmup_cost(["g4dn.xlarge"], 3, 12, "20m") == (0.7013, 0.7013)


def test_a_part_filled_node_is_billed_whole():
    # 4 seats / 3 per node: 2 nodes x 0.526 x 1/3 = 0.35066..
    assert warmup_cost(["g4dn.xlarge"], 3, 4, "20m") == (0.3507, 0.3507)


def test_warming_spans_cheapest_to_dearest_leaving_unpriced_out():
    # g4dn.xlarge: 4 nodes x 0.526 x 1.5 h = 3.156; g4dn.12xlarge seats 12: 1 node x 3.912 x 1.5 = 5.868
    assert warmup_cost(["g4dn.12xlarge", "g7.2xlarge", "g4dn.xlarge"], 3, 12, "1h30m") == (3.156, 5.868)
    assert warmup_cost(["g7.2xlarge"], 3, 12, "20m") is None


def test_stack_output_carries_each_classs_warm_up_cost():
    classes = [
        {"schedule": "0 9 * * mon", "duration": "1h"},
        {"schedule": "0 14 * * fri", "duration": "2h", "warmSeats": 4, "warmup": "1h"},
    ]
    run = run_values(stack_values(**{"gpulab:labs": {"c": lab(["g4dn.xlarge"], 3, max_gpus=4, classes=classes)}}))
    # Each node 0.526 + its 20 GiB root volume's 1.60 / 730 = 0.52819178 per hour. 12 seats (4 GPUs x 3): 4 nodes x
    # 0.52819178 x 20m = 0.70425571; 4 seats: 2 nodes x 0.52819178 x 1 h = 1.05638356
    cost = run.outputs["labs"]["c"]["cost"]
    # Priced as atMostPerHour is (the lab's nodes), and named so.
    where = {"region": cost["atMostPerHour"]["region"], "source": cost["atMostPerHour"]["source"]}
    assert cost["warmups"] == [
        {"schedule": "0 9 * * mon", "warmSeats": 12, "warmup": "20m", "usd": [0.7043, 0.7043], **where},
        {"schedule": "0 14 * * fri", "warmSeats": 4, "warmup": "1h", "usd": [1.0564, 1.0564], **where},
    ]


def test_a_partly_priced_lab_has_figures_for_priced_types():
    cost = lab_cost(["g7.2xlarge", "g4dn.xlarge"], 3, 4)
    assert (cost.seat_hour, cost.gpu_limit_per_hour, cost.unpriced) == ((0.1753, 0.1753), 2.104, ("g7.2xlarge",))


@pytest.mark.parametrize("name", sorted(SYNTHETIC), ids=str)
def test_the_ceiling_bounds_any_one_type_the_limit_lets_run(name):
    # The NodePool's nvidia.com/gpu limit counts what a node advertises: slices x GPUs with the lab's NodeOverlays.
    for lab_name, lab_config in domain.stack.parse(_labs_only(SYNTHETIC[name]), "eu-west-1").settings.labs.items():
        limit = int(node_pool(lab_name, lab_config)["spec"]["limits"][GPU_RESOURCE])
        overlays = {o["spec"]["requirements"][1]["values"][0]: o for o in node_overlays(lab_name, lab_config)}
        ceiling = lab_config.cost.gpu_limit_per_hour
        disk = float(root_volume_per_hour(lab_config.disk.root))  # every node has its root volume
        most = {}  # the dearest fleet of each priced type that fits in the limit
        for instance_type in set(lab_config.instance_types) & set(ON_DEMAND_USD_PER_HOUR):
            gpus = GPU_INSTANCE_TYPES[instance_type].gpus
            advertised = int(overlays[str(gpus)]["spec"]["capacity"][GPU_RESOURCE]) if overlays else gpus
            most[instance_type] = limit // advertised * (ON_DEMAND_USD_PER_HOUR[instance_type] + disk)
        if not most:
            continue
        assert ceiling is not None and max(most.values()) <= ceiling + 1e-9, (lab_name, most, ceiling)
        if all(lab_config.max_gpus % GPU_INSTANCE_TYPES[t].gpus == 0 for t in most):
            # Then a fleet of the dearest type fills the limit exactly: the ceiling is reached, not only bounded.
            assert ceiling - max(most.values()) < 0.0001, (lab_name, most, ceiling)


def _labs_only(values):
    # JupyterHub's keys (its client secret is a Pulumi secret, which parse() does not see as one) are not the labs',
    # nor are gpuIdleTimeout and internet, which need the hub.
    labs = {
        name: {key: value for key, value in lab.items() if key not in ("gpuIdleTimeout", "internet")}
        for name, lab in values.get("gpulab:labs", {}).items()
    }
    return {
        key.removeprefix("gpulab:"): value
        for key, value in {**values, "gpulab:labs": labs}.items()
        if key.startswith("gpulab:") and not key.startswith("gpulab:jupyterhub")
    }


# --- maxHourlyCost ------------------------------------------------------------------------------------------------


def with_cap(cap, instance_types=("g4dn.xlarge",), max_gpus=4):
    return stack_values(**{"gpulab:labs": {"intro": lab(list(instance_types), 3, max_gpus, maxHourlyCost=cap)}})


def test_a_ceiling_over_the_cap_is_refused_naming_it_and_prices():
    with pytest.raises(domain.stack.ConfigError, match=r"^gpulab:labs\.intro\.maxHourlyCost: ") as refused:
        run_values(with_cap(2))
    # 0.526 + 20 GiB x 0.08 / 730 for the root volume = 0.5281918 per GPU-hour, shown rounded up to 6 decimals
    expected = (
        r"the lab may cost up to 2\.1128 USD per hour \(maxGpus 4 x 0\.528192 USD per GPU-hour of g4dn\.xlarge, its "
        rf"root volume included; {SOURCE}; {DISK_SOURCE}\), more than this cap of 2\.0000"
    )
    assert re.search(expected, refused.value.lines[0])


@pytest.mark.parametrize("cap", [2.1128, 3, 100.5])
def test_a_cap_at_or_above_the_ceiling_is_accepted_and_output(cap):
    run = run_values(with_cap(cap))
    assert run.outputs["labs"]["intro"]["cost"]["maxHourlyCost"] == cap


def test_a_cap_is_refused_when_a_type_has_no_price_to_check():
    with pytest.raises(domain.stack.ConfigError, match=r"^gpulab:labs\.intro\.maxHourlyCost: cannot be checked: "):
        run_values(with_cap(1000, ["g4dn.xlarge", "p5e.48xlarge"], max_gpus=8))
    with pytest.raises(domain.stack.ConfigError, match=rf"p5e\.48xlarge has no price \({SOURCE}\)"):
        run_values(with_cap(1000, ["g4dn.xlarge", "p5e.48xlarge"], max_gpus=8))


@pytest.mark.parametrize(
    ("cap", "expected"),
    [
        (0, r"must be a positive amount of US dollars, got 0"),
        (-1.5, r"must be a positive amount of US dollars, got -1\.5"),
        (float("inf"), r"must be a positive amount of US dollars, got inf"),
        ("20", r"must be a number, got '20'"),
        (True, r"must be a number, got True"),
    ],
)
def test_a_cap_that_is_not_a_positive_amount_is_refused(cap, expected):
    with pytest.raises(domain.stack.ConfigError, match=rf"^gpulab:labs\.intro\.maxHourlyCost: {expected}$"):
        run_values(with_cap(cap))


# --- what the stack exports and what the NodePool carries ----------------------------------------------------------


def test_stack_output_carries_the_cost_of_each_lab(base_run):
    assert base_run.outputs["labs"]["intro"]["cost"] == {
        # (0.526 + 20 GiB x 0.08 / 730) / 3 slices = 0.176064; x 4 GPUs = 2.112767, rounded up
        # us-east-1's prices, for a eu-west-1 stack: said so, as on every priced line.
        "seatHour": {
            "usd": [0.1761, 0.1761],
            "region": "us-east-1",
            "source": f"{PRICE_SOURCE}; {DISK_PRICE_SOURCE}; {ELSEWHERE}",
            "counts": SEAT_HOUR,
        },
        "rootVolumePerNodeHour": {
            "usd": 0.0022,
            "region": "us-east-1",
            "source": f"{DISK_PRICE_SOURCE}; {ELSEWHERE}",
            "counts": ROOT_VOLUME,
        },
        "maxHourlyCost": None,
        "unpriced": [],
        "warmups": [],
        # The list of one region, beside the stack's own (BASE is in eu-west-1): never one without the other.
        "region": "eu-west-1",
        "pricesFrom": "us-east-1 list",
        "spot": {},  # the lab does not allow spot (tests/test_live_prices.py prices a spot lab's nodes)
        # No class has a term: a 730-hour month at the ceiling (tests/test_stack_cost.py has a term's).
        "term": {
            "counts": "month",
            "first": None,
            "last": None,
            "hours": 730,
            "usd": 1542.344,
            "keptByBudgets": None,
            "region": "us-east-1",
            "source": f"{PRICE_SOURCE}; {DISK_PRICE_SOURCE}; {ELSEWHERE}",
        },
        "budget": None,  # no gpulab:budget (tests/test_budgets.py has budgets)
        # The one "at most" figure: without the planner, the arithmetic bound, which is the ceiling.
        "atMostPerHour": {
            "usd": 2.1128,
            "basis": "bound",
            "region": "us-east-1",
            "source": f"{PRICE_SOURCE}; {DISK_PRICE_SOURCE}; {ELSEWHERE}",
            "counts": "at most per hour: the arithmetic bound, maxGpus 4 x 0.528192 USD per GPU-hour of g4dn.xlarge, "
            "its root volume included",
        },
        # 2.1128 / 12 seats = 0.17606667, rounded up.
        "perLearnerHour": {
            "usd": 0.1761,
            "region": "us-east-1",
            "source": f"{PRICE_SOURCE}; {DISK_PRICE_SOURCE}; {ELSEWHERE}",
            "counts": "atMostPerHour over 12 learner seats",
        },
        # The control plane (0.1) and two m7i.large system nodes (0.206), the only lab's.
        "emptyLabPerHour": {
            "usd": 0.306,
            "region": "us-east-1",
            "source": f"{PRICE_SOURCE}; {DISK_PRICE_SOURCE}; {CLB_PRICE_SOURCE}; {EKS_PRICE_SOURCE}; {ELSEWHERE}",
            "counts": "no GPU node (Karpenter removes a lab's empty nodes after consolidateAfter); all of what runs "
            "always (control plane, system nodes, hub: 0.3060 USD per hour)",
        },
        # The same over the 730-hour month from the tests' day: 730 x 0.306.
        "emptyLabTerm": {
            "usd": 223.38,
            "region": "us-east-1",
            "source": f"{PRICE_SOURCE}; {DISK_PRICE_SOURCE}; {CLB_PRICE_SOURCE}; {EKS_PRICE_SOURCE}; {ELSEWHERE}",
            "counts": "all of what runs always (control plane, system nodes, hub) over the term, or a 730-hour month "
            "without one, each hour at its own price",
        },
        # (1542.344 + 223.38) / 12 = 147.14366667, rounded up.
        "perLearnerTerm": {
            "usd": 147.1437,
            "region": "us-east-1",
            "source": f"{PRICE_SOURCE}; {DISK_PRICE_SOURCE}; {CLB_PRICE_SOURCE}; {EKS_PRICE_SOURCE}; {ELSEWHERE}",
            "counts": "a 730-hour month (no class has a term): the lab's nodes 730 hours at atMostPerHour (any hour of "
            "the month), plus emptyLabTerm (730 hours), over 12 learner seats",
        },
    }


# Every line of a eu-west-1 stack priced offline says it is priced from another region, and why.
ELSEWHERE = (
    "priced from us-east-1, not eu-west-1: gpulab has no eu-west-1 prices offline (`pulumi preview` prices them in "
    "eu-west-1)"
)


def test_an_unpriced_labs_stack_output_has_null_figures():
    run = run_values(stack_values(**{"gpulab:labs": {"new": lab(["p5e.48xlarge"], 2, 8)}}))
    cost = run.outputs["labs"]["new"]["cost"]
    assert (cost["seatHour"]["usd"], cost["atMostPerHour"]["usd"], cost["unpriced"]) == (None, None, ["p5e.48xlarge"])
    assert cost["term"]["usd"] is None


def nodepool_annotations(run, lab_name):
    """The NodePool's cost annotations (it also carries pulumi.com/waitFor)."""
    pool = run.one("kubernetes:karpenter.sh/v1:NodePool", f"nodepool-{lab_name}").inputs
    cost_keys = (GPU_LIMIT_COST_ANNOTATION, MAX_HOURLY_COST_ANNOTATION)
    return {k: v for k, v in pool["metadata"].get("annotations", {}).items() if k in cost_keys}


def test_a_capped_nodepool_carries_its_cap_and_what_its_gpu_limit_costs_for_the_policy():
    annotations = nodepool_annotations(run_values(with_cap(3)), "intro")
    assert annotations == {GPU_LIMIT_COST_ANNOTATION: "2.1128", MAX_HOURLY_COST_ANNOTATION: "3.0000"}


def test_an_uncapped_priced_nodepool_states_no_cost(base_run):
    # The lab's one "at most" figure is labs.<lab>.cost.atMostPerHour (the planner's where the render runs it); the
    # NodePool states its GPU limit's cost only beside a cap, for the policy pack's check.
    assert base_run.outputs["labs"]["intro"]["cost"]["atMostPerHour"]["usd"] == 2.1128
    assert nodepool_annotations(base_run, "intro") == {}


def test_an_unpriced_uncapped_nodepool_has_no_cost_annotation():
    run = run_values(stack_values(**{"gpulab:labs": {"new": lab(["p5e.48xlarge"], 2, 8)}}))
    assert nodepool_annotations(run, "new") == {}


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_stack_files_capped_nodepools_carry_their_gpu_limits_cost(path):
    run = run_stack_file(path)
    for lab_name, lab_config in run.stack.settings.labs.items():
        at_limit = lab_config.cost.gpu_limit_per_hour
        annotation = nodepool_annotations(run, lab_name).get(GPU_LIMIT_COST_ANNOTATION)
        capped = lab_config.max_hourly_cost is not None and at_limit is not None
        assert annotation == (f"{at_limit:.4f}" if capped else None)


def _keys(value):
    """Every key of a JSON value, at any depth."""
    if isinstance(value, dict):
        return [k for key, inner in value.items() for k in (key, *_keys(inner))]
    return [k for inner in value for k in _keys(inner)] if isinstance(value, list) else []


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_a_reader_of_a_labs_cost_output_or_nodepool_finds_one_at_most_figure(path):
    """#49 'one ceiling': atMostPerHour is the lab's one "at most" per hour; no other output or annotation is named as
    a maximum of what the lab costs (maxHourlyCost is the stack's cap, a setting)."""
    run = run_stack_file(path)
    for lab_name, lab_output in run.outputs["labs"].items():
        maxima = [k for k in _keys(lab_output["cost"]) if re.search(r"ceiling|atmost|upto", k, re.IGNORECASE)]
        assert maxima == ["atMostPerHour"], lab_name
        pool = run.one("kubernetes:karpenter.sh/v1:NodePool", f"nodepool-{lab_name}").inputs
        assert not [k for k in pool["metadata"].get("annotations", {}) if "ceiling" in k], lab_name
