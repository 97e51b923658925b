"""What Karpenter 1.14.1's own scheduler does with what gpulab renders (planner/, run on each stack's render): every
seat, node and dollar gpulab promises, checked against Karpenter's decision rather than against gpulab's reading of it.

The invariants hold for every stack file and synthetic stack; exact counts are for the planner's own synthetic stack
(tests/support/synthetic.py PLANNER_STACK). The planner is built once per session; without Go these tests skip, saying
so.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

import render.run
from components.karpenter import class_seats, gpu_node_pool
from components.labels import LAB_LABEL
from domain.capacity.node_capacity import seats_per_node
from domain.capacity.quantity import quantity
from domain.cost.prices import ON_DEMAND_USD_PER_HOUR
from domain.upstream.versions import KARPENTER_CHART_VERSION
from planner import gate, plan
from render import charts, harness
from reports import preview_comment
from tests.conftest import STACK_FILES, as_cli_config, run_config, stack_values
from tests.support import tables
from tests.support.rendered import rendered
from tests.support.synthetic import PLANNER_STACK

PLANNER = "planner-synthetic"
_FOLDER = tempfile.TemporaryDirectory(prefix="gpulab-planner-")


@pytest.fixture(scope="session")
def binary() -> Path:
    try:
        return plan.build()  # offline: without the planner's modules (`make planner`), Unavailable
    except plan.Unavailable as missing:
        pytest.skip(str(missing))


@functools.cache
def _planned(stack: str, binary: Path) -> tuple[harness.Run, dict[str, Any], dict[str, Any]]:
    if stack == PLANNER:
        run = run_config(stack, as_cli_config(PLANNER_STACK))
        out = Path(_FOLDER.name) / stack
        render.run.write(run, out)
        not_rendered = charts.write(run, out)
    else:
        r = rendered(stack)
        run, out, not_rendered = r.run, r.out, r.not_rendered
    if not_rendered:
        pytest.skip("; ".join(not_rendered))
    return run, labs_output(out), plan.plan(out, run.stack.region, binary)


def labs_output(out: Path) -> dict[str, Any]:
    labs: dict[str, Any] = json.loads((out / "outputs.json").read_text())["labs"]
    return labs


def planned_labs(stack: str, binary: Path):
    """(name, settings, outputs, scenarios by name) of each lab Karpenter can launch offline: a lab that may only use
    capacity reservations gets no offering without EC2's answer about them (docs/planner.md)."""
    run, outputs, result = _planned(stack, binary)
    for name, lab_settings in run.stack.settings.labs.items():
        if lab_settings.capacity_types == ["reserved"]:
            continue
        scenarios = {s["name"]: s for s in result["labs"][name]["scenarios"]}
        yield name, lab_settings, outputs[name], scenarios


# Every stack file, whatever it holds, and the synthetic stack above (one, two and mixed instance types, time-slicing
# and MPS, spot and on-demand, classes).
ALL = [*(path.name.split(".")[1] for path in STACK_FILES), PLANNER]


placed = plan.placed


@pytest.mark.parametrize("stack", ALL)
def test_karpenter_places_or_refuses_every_pod_asked(stack, binary):
    for name, _, _, scenarios in planned_labs(stack, binary):
        for s in scenarios.values():
            asked = s["learners"] or s["bufferSeats"]
            assert (placed(s) + s["unschedulable"], s["undecided"], s["stopped"]) == (asked, 0, None), (name, s)


@pytest.mark.parametrize("stack", ALL)
def test_one_type_labs_need_a_node_per_seats_per_node_learners(stack, binary):
    """Its smoke workload's pods, while it runs, take their slices first (smokePods)."""
    for name, settings, _, scenarios in planned_labs(stack, binary):
        if len(settings.instance_types) != 1:
            continue
        per_node = seats_per_node(settings.instance_types[0], settings.slices_per_gpu)
        for key in ("one", "one-gpu", "full", "full-trickle"):
            s = scenarios[key]
            if not s["smokePods"]:
                assert (s["unschedulable"], s["reason"]) == (0, None), (name, key)
            assert len(s["nodeClaims"]) == math.ceil((placed(s) + s["smokePods"]) / per_node), (name, key, s)


@pytest.mark.parametrize("stack", ALL)
def test_full_labs_use_every_seat_burst_or_trickle_then_refuse(stack, binary):
    for name, _, out, scenarios in planned_labs(stack, binary):
        full, trickle, over = scenarios["full"], scenarios["full-trickle"], scenarios["over"]
        seats = out["learnerSeats"] - full["smokePods"]
        for s in (full, trickle):
            expected = (out["learnerSeats"], full["smokePods"], seats)
            assert (s["learners"], s["unschedulable"], placed(s)) == expected, (name, s["name"])
        expected = (out["learnerSeats"] + 1, 1 + full["smokePods"], seats)
        assert (over["learners"], over["unschedulable"], placed(over)) == expected, name
        assert "limit" in over["reason"] and out["nodePool"] in over["reason"], over["reason"]


@pytest.mark.parametrize("stack", ALL)
def test_each_labs_cluster_holds_exactly_its_components_objects(stack, binary):
    """planner/render/render.go ForLab: a lab's objects recognised as no lab's would sit in every lab's cluster."""
    run, _, result = _planned(stack, binary)
    for name in run.stack.settings.labs:
        own = [r for r in run.resources if r.parent in {f"{gpu_node_pool.TYPE}::{name}", f"{class_seats.TYPE}::{name}"}]
        counted = {k: v for k, v in result["labs"][name]["objects"].items() if k not in ("DaemonSet", "Deployment")}
        expected = {kind: sum(1 for r in own if r.type.rsplit(":", 1)[1] == kind) for kind in counted}
        assert counted == expected, name


@functools.cache
def _planned_among_all_labs(binary: Path) -> dict[str, Any]:
    """The planner stack's plan with every lab's objects in each lab's cluster (planner -all-labs), as the cluster
    holds them; only this small stack, as its time grows with the square of the labs."""
    region = _planned(PLANNER, binary)[0].stack.region
    out = Path(_FOLDER.name) / PLANNER
    command = [str(binary), "-region", region, "-all-labs", str(out)]
    result: dict[str, Any] = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    return result


def test_no_learner_or_warm_seat_lands_on_another_labs_nodes(binary):
    outputs = _planned(PLANNER, binary)[1]
    for name, lab_plan in _planned_among_all_labs(binary)["labs"].items():
        pools = {claim["nodePool"] for s in lab_plan["scenarios"] for claim in s["nodeClaims"]}
        assert pools == {outputs[name]["nodePool"]}, name


def test_the_planner_knows_lab_objects_by_component_type_tokens():
    """planner/render/render.go cannot import them: a component renamed on one side alone would put its objects in every
    lab's cluster again."""
    source = (plan.MODULE / "render" / "render.go").read_text()
    for token in (gpu_node_pool.TYPE, class_seats.TYPE, LAB_LABEL):
        assert f'= "{token}"' in source, token


def test_a_lab_planned_alone_gets_what_it_gets_among_every_lab(binary):
    """The planner simulates each lab with its own objects only (planner/render.go forLab). Among every lab, Karpenter
    decides the same and says more only where it could not place a pod: that each other NodePool wants another lab
    (the gpulab.dev/lab requirement a learner's nodeSelector sets)."""
    alone, together = _planned(PLANNER, binary)[2], _planned_among_all_labs(binary)
    assert alone["labs"].keys() == together["labs"].keys()
    for name in alone["labs"]:
        for a, t in zip(alone["labs"][name]["scenarios"], together["labs"][name]["scenarios"], strict=True):
            assert {**a, "reason": None} == {**t, "reason": None}, (name, a["name"])
            if a["reason"] is None:
                assert t["reason"] is None, (name, a["name"])
                continue
            own, among = set(a["reason"].split("; ")), set(t["reason"].split("; "))
            others = among - own
            assert own <= among and len(others) == len(alone["labs"]) - 1, (name, a["name"], t["reason"])
            assert all(r.startswith(f"incompatible requirements, key {LAB_LABEL},") for r in others), t["reason"]


@pytest.mark.parametrize("stack", ALL)
def test_a_buffer_warms_its_seats_and_learners_need_no_new_node(stack, binary):
    for name, settings, out, scenarios in planned_labs(stack, binary):
        for i, lab_class in enumerate(out["classes"]):
            buffer, arrival = scenarios[f"class-{i}-buffer"], scenarios[f"class-{i}-arrival"]
            seats = lab_class["warmSeats"]
            assert (buffer["bufferSeats"], buffer["unschedulable"], placed(buffer)) == (seats, 0, seats), name
            # Enough slices for the seats, and not a node more than they need.
            slices = [seats_per_node(claim["instanceType"], settings.slices_per_gpu) for claim in buffer["nodeClaims"]]
            assert sum(slices) >= seats > sum(slices) - min(slices), (name, i, buffer)
            assert (arrival["learners"], arrival["unschedulable"], placed(arrival)) == (seats, 0, seats), name
            assert not any(claim["new"] for claim in arrival["nodeClaims"]), (name, i, arrival)
            assert len(arrival["nodeClaims"]) == len(buffer["nodeClaims"])


@pytest.mark.parametrize("stack", ALL)
def test_the_plans_cost_is_its_nodes_price_within_lab_figures(stack, binary):
    """Karpenter prices instances only; gpulab's figures add each node's root volume (rootVolumePerNodeHour)."""
    for name, settings, out, scenarios in planned_labs(stack, binary):
        cost, at_limit = out["cost"], settings.cost.gpu_limit_per_hour
        if at_limit is None:  # no priced type: Karpenter launches none offline (docs/planner.md)
            continue
        disk = cost["rootVolumePerNodeHour"]["usd"]
        for s in scenarios.values():
            prices = [ON_DEMAND_USD_PER_HOUR[claim["instanceType"]] for claim in s["nodeClaims"]]
            assert s["costPerHour"] == pytest.approx(sum(prices), abs=1e-6), (name, s["name"])
            # No scenario runs more GPUs than the NodePool's limit lets Karpenter run: what the limit costs bounds it.
            assert s["costPerHour"] + disk * len(prices) <= at_limit + 1e-4, (name, s["name"])
            for claim in s["nodeClaims"]:
                instance_type = claim["instanceType"]
                node_hour = ON_DEMAND_USD_PER_HOUR[instance_type] + disk
                seat_hour = node_hour / seats_per_node(instance_type, settings.slices_per_gpu)
                low, high = cost["seatHour"]["usd"]
                assert low - 1e-4 <= seat_hour <= high + 1e-4, (name, claim)
        # A full single-type lab is its GPU limit's cost itself.
        if len(settings.instance_types) == 1 and not cost["unpriced"]:
            full = scenarios["full"]
            assert full["costPerHour"] + disk * len(full["nodeClaims"]) == pytest.approx(
                at_limit, abs=1e-4 * len(full["nodeClaims"])
            ), name


@pytest.mark.parametrize("stack", ALL)
def test_a_node_is_spot_exactly_when_the_lab_allows_spot(stack, binary):
    for name, settings, _, scenarios in planned_labs(stack, binary):
        expected = "spot" if "spot" in settings.capacity_types else "on-demand"
        assert {c["capacityType"] for s in scenarios.values() for c in s["nodeClaims"]} <= {expected}, name


def test_planner_stack_launches_exactly_what_labs_promise(binary):
    scenarios = {name: s for name, _, _, s in planned_labs(PLANNER, binary)}

    def shape(lab_name: str, scenario: str) -> tuple[int, int, list[str]]:
        s = scenarios[lab_name][scenario]
        return len(s["nodeClaims"]), s["unschedulable"], sorted(c["instanceType"] for c in s["nodeClaims"])

    assert shape("single", "one") == (1, 0, ["g4dn.xlarge"])
    assert shape("single", "one-gpu") == (1, 0, ["g4dn.xlarge"])
    assert shape("single", "full") == (4, 0, ["g4dn.xlarge"] * 4)
    assert shape("single", "over") == (4, 1, ["g4dn.xlarge"] * 4)
    # maxPods changes the pods a node takes, not the memory Karpenter reserves: three learners still share a node.
    assert shape("max-pods", "one-gpu") == (1, 0, ["g4dn.xlarge"])
    assert shape("max-pods", "full") == (4, 0, ["g4dn.xlarge"] * 4)
    assert scenarios["single"]["full"]["costPerHour"] == pytest.approx(4 * ON_DEMAND_USD_PER_HOUR["g4dn.xlarge"])
    # Five warm seats on three-slice nodes: two nodes; the second class warms the whole lab (12 seats).
    assert shape("classy", "class-0-buffer") == (2, 0, ["g4dn.xlarge"] * 2)
    assert shape("classy", "class-0-arrival") == (2, 0, ["g4dn.xlarge"] * 2)
    assert shape("classy", "class-1-buffer") == (4, 0, ["g4dn.xlarge"] * 4)
    assert scenarios["spot-only"]["full"]["nodeClaims"][0]["capacityType"] == "spot"
    assert shape("mps", "full") == (2, 0, ["g6.xlarge"] * 2)
    # One learner gets the cheapest type that seats it; all at once, 16 learners pack two four-GPU nodes, and one by
    # one each gets a one-GPU node: the ceiling is the dearer of the two.
    assert shape("two-types", "one") == (1, 0, ["g4dn.xlarge"])
    assert shape("two-types", "full") == (2, 0, ["g4dn.12xlarge"] * 2)
    assert shape("two-types", "full-trickle") == (8, 0, ["g4dn.xlarge"] * 8)
    # The smoke workload's 3 pods take two nodes, as docs/sharing.md says; the lab then seats 3 learners, not 6.
    smoke = scenarios["smoke"]["full"]
    assert (smoke["smokePods"], placed(smoke), len(smoke["nodeClaims"])) == (3, 3, 3)
    assert [c["new"] for c in scenarios["smoke"]["one"]["nodeClaims"]] == [False, False]


def test_summary_and_comment_show_full_lab_and_class_starts(binary, tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_PLANNER", str(binary))
    stack_file = tmp_path / "Pulumi.classy.yaml"
    classy = stack_values(**{"gpulab:labs": {"classy": PLANNER_STACK["gpulab:labs"]["classy"]}})
    stack_file.write_text(yaml.safe_dump({"config": classy}))
    out = tmp_path / "out"
    printed, status = _printed(monkeypatch, render.run.main, [str(stack_file), "--out", str(out)])
    assert status == 0
    if not (out / plan.PLAN).exists():
        pytest.skip("the render wrote no charts here (no helm or charts), so no plan")
    assert scenario_rows(printed) == ["full", "full-trickle", "class-0-arrival", "class-1-arrival"]
    planned = json.loads((out / plan.PLAN).read_text())
    comment = preview_comment.comment("classy", labs_output(out), "preview", planned=planned)
    assert scenario_rows(comment.splitlines()) == ["full", "full-trickle", "class-0-arrival", "class-1-arrival"]


def scenario_rows(lines: list[str]) -> list[str]:
    """The classy lab's scenarios in the plan's table among the lines (the cost table's rows have no scenario)."""
    return [row["scenario"] for row in tables.table(lines, tables.PLAN_TABLE) if row["lab"] == "classy"]


def _printed(monkeypatch, main, argv: list[str]) -> tuple[list[str], int]:
    """What a command's main prints (as lines), and its status."""
    lines: list[str] = []
    monkeypatch.setattr("builtins.print", lambda *a, **k: lines.extend(" ".join(map(str, a)).splitlines()))
    return lines, main(argv)


def test_without_go_the_planner_says_what_is_missing(monkeypatch):
    monkeypatch.setenv("PATH", os.devnull)
    monkeypatch.delenv("GPULAB_GO", raising=False)
    with pytest.raises(plan.Unavailable, match=r"Go 1\.26"):
        plan.go()


def test_the_same_render_plans_to_the_same_bytes(binary):
    _, _, first = _planned(PLANNER, binary)
    out = Path(_FOLDER.name) / PLANNER
    written = (out / plan.PLAN).read_text()
    assert json.loads(written) == first  # what the session's first planner run wrote
    plan.plan(out, "eu-west-1", binary)
    assert (out / plan.PLAN).read_text() == written


def test_render_plan_writes_plan_json_and_prints_every_scenario(binary, tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_PLANNER", str(binary))
    stack_file = tmp_path / "Pulumi.single.yaml"
    single = stack_values(**{"gpulab:labs": {"single": PLANNER_STACK["gpulab:labs"]["single"]}})
    stack_file.write_text(yaml.safe_dump({"config": single}))
    lines, status = _printed(monkeypatch, render.run.main, [str(stack_file), "--out", str(tmp_path / "out"), "--plan"])
    if not (tmp_path / "out" / "charts").is_dir():
        pytest.skip("no charts rendered here (no helm or charts), so no plan")
    assert status == 0
    written = json.loads((tmp_path / "out" / plan.PLAN).read_text())
    # The planner's Karpenter (planner/go.mod) is the one the stack deploys (domain/upstream/versions.py): a bump of one
    # alone would have the plan judge a controller the cluster does not run.
    assert written["karpenter"] == f"v{KARPENTER_CHART_VERSION}"
    assert [s["name"] for s in written["labs"]["single"]["scenarios"]] == [
        "one",
        "one-gpu",
        "full",
        "full-trickle",
        "over",
    ]
    # The last plan table: the render's summary prints its own before it.
    last = max(i for i, line in enumerate(lines) if line.startswith(tables.PLAN_TABLE))
    assert [row["scenario"] for row in tables.table(lines[last:], tables.PLAN_TABLE)] == [
        "one",
        "one-gpu",
        "full",
        "full-trickle",
        "over",
    ]


def _replanned(binary: Path, tmp_path: Path, change, file: str = "resources.json") -> dict[str, Any]:
    """The planner stack's plan after `change` edited a file of its render (resources.json, a list of resources, by
    default; outputs.json, the stack outputs), in place."""
    out = tmp_path / "render"
    shutil.copytree(Path(_FOLDER.name) / PLANNER, out)
    content = json.loads((out / file).read_text())
    change(content)
    (out / file).write_text(json.dumps(content))
    return plan.plan(out, _planned(PLANNER, binary)[0].stack.region, binary)


def _node_pool(resources: list[dict[str, Any]], lab: str) -> dict[str, Any]:
    return next(r for r in resources if r["type"].endswith(":NodePool") and r["inputs"]["metadata"]["name"] == lab)


def test_a_price_overlay_steers_karpenter_never_the_plans_bill(binary, tmp_path):
    """Karpenter launches by an overlay's price (the fleet's priorities), but AWS bills its own: the plan's cost is the
    provider's offering price, not the decorator's."""
    _planned(PLANNER, binary)

    def cheap_12xlarge(resources):
        pool = _node_pool(resources, "two-types")
        overlay = {
            "apiVersion": "karpenter.sh/v1alpha1",
            "kind": "NodeOverlay",
            "metadata": {"name": "two-types-price"},
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["two-types"]},
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g4dn.12xlarge"]},
                ],
                "price": "0.01",
            },
        }
        resources.append({**pool, "type": "kubernetes:karpenter.sh/v1alpha1:NodeOverlay", "inputs": overlay})

    one = {s["name"]: s for s in _replanned(binary, tmp_path, cheap_12xlarge)["labs"]["two-types"]["scenarios"]}["one"]
    assert [c["instanceType"] for c in one["nodeClaims"]] == ["g4dn.12xlarge"]
    assert one["costPerHour"] == pytest.approx(ON_DEMAND_USD_PER_HOUR["g4dn.12xlarge"])


def test_the_required_cpu_limit_is_exactly_enough_for_max_gpus(binary, tmp_path):
    """domain/stack/limits.py cpu_needed, which refuses a lower cpuLimit and is the NodePool's by default, is
    Karpenter's own bound: single's 4 g4dn.xlarge of 4 vCPUs need 16, and at 15 Karpenter launches 3 nodes."""
    run, _, result = _planned(PLANNER, binary)
    lab = run.stack.settings.labs["single"]
    assert lab.node_pool_cpu_limit == 16
    full = plan.scenarios(result, "single")["full"]
    assert (len(full["nodeClaims"]), plan.placed(full)) == (4, lab.learner_seats)

    def one_vcpu_short(resources):
        _node_pool(resources, "single")["inputs"]["spec"]["limits"]["cpu"] = "15"

    short = plan.scenarios(_replanned(binary, tmp_path, one_vcpu_short), "single")["full"]
    assert (len(short["nodeClaims"]), plan.placed(short), short["unschedulable"]) == (3, 9, 3)


@pytest.mark.parametrize(("maker", "launches"), [("intel", True), ("amd", False)])
def test_karpenter_sees_the_cpu_maker_and_clock_of_each_type(binary, tmp_path, maker, launches):
    """g4dn is Intel at 2500 MHz (domain/capacity/instance_types.py): a NodePool asking for that launches, another does
    not."""
    _planned(PLANNER, binary)

    def require(resources):
        requirements = _node_pool(resources, "single")["inputs"]["spec"]["template"]["spec"]["requirements"]
        requirements += [
            {"key": "karpenter.k8s.aws/instance-cpu-manufacturer", "operator": "In", "values": [maker]},
            {"key": "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "operator": "In", "values": ["2500"]},
        ]

    one = _replanned(binary, tmp_path, require)["labs"]["single"]["scenarios"][0]
    assert (one["name"], one["unschedulable"] == 0) == ("one", launches), one["reason"]


def test_the_plan_names_its_prices_region_beside_the_stacks(binary):
    """Karpenter's generated price list has us-east-1 only of the commercial regions (pkg/providers/pricing)."""
    run, _, result = _planned(PLANNER, binary)
    expected = run.stack.region if run.stack.region == "us-east-1" else "us-east-1"
    assert (result["region"], result["pricesRegion"]) == (run.stack.region, expected)
    # The plan's table (render summary, pull-request comment) says whose prices its USD are.
    lead = " ".join(plan.table(result))
    assert f"USD at Karpenter's {expected} list prices, for a stack in {run.stack.region}, instances without" in lead


def test_planner_stack_labs_keep_every_promise_karpenter_checks(binary):
    run, _, result = _planned(PLANNER, binary)
    assert gate.problems(run.stack.settings.labs, result) == ([], [])


def _broken(binary: Path, change) -> list[str]:
    """The gate's lines for the planner stack's plan after `change` edited it (a scenario by lab and name)."""
    run, _, result = _planned(PLANNER, binary)
    edited = copy.deepcopy(result)
    change(lambda lab, name: plan.scenarios(edited, lab)[name])
    return gate.problems(run.stack.settings.labs, edited)[0]


@pytest.mark.parametrize(("scenario_name", "how"), [("full", "all at once"), ("full-trickle", "one by one")])
def test_a_full_lab_seated_short_fails_naming_maxgpus(binary, scenario_name, how):
    def one_node_short(scenario):
        scenario("single", scenario_name)["nodeClaims"].pop()

    assert _broken(binary, one_node_short) == [
        f"gpulab:labs.single.maxGpus: Karpenter 1.14.1 seats 9 learners when they arrive {how}, gpulab promises "
        "12 (maxGpus 4 x slicesPerGpu 3): None"
    ]


def test_a_gpu_split_over_nodes_or_a_placed_extra_fails(binary):
    def spread(scenario):
        one_gpu = scenario("single", "one-gpu")
        one_gpu["nodeClaims"] = [{**one_gpu["nodeClaims"][0], "pods": 1}] * 3
        scenario("single", "over")["nodeClaims"][0]["pods"] += 1

    assert _broken(binary, spread) == [
        "gpulab:labs.single.slicesPerGpu: Karpenter 1.14.1 needs 3 nodes for 3 learners, gpulab promises they share "
        "one GPU; lower learnerPod's requests or slicesPerGpu",
        "gpulab:labs.single.maxGpus: Karpenter 1.14.1 seats learner 13, gpulab promises at most 12: the NodePool's "
        "limit lets the lab run more GPUs than maxGpus",
    ]


def test_a_class_warmed_short_fails_naming_warm_seats(binary):
    def cold(scenario):
        scenario("classy", "class-0-buffer")["nodeClaims"].pop()
        scenario("classy", "class-0-arrival")["nodeClaims"][0]["new"] = True

    assert _broken(binary, cold) == [
        "gpulab:labs.classy.classes[0].warmSeats: Karpenter 1.14.1 warms 3 seats, gpulab promises 5",
        "gpulab:labs.classy.classes[0].warmSeats: the class's 5 learners need 1 new node at its start (Karpenter "
        "1.14.1), gpulab promises them warm seats",
    ]


def test_render_prints_seats_and_the_dearest_scenario_ceiling(binary, tmp_path, monkeypatch):
    """two-types: 2 x g4dn.12xlarge all at once, 8 x g4dn.xlarge one by one; the ceiling is the dearer, disks in."""
    monkeypatch.setenv("GPULAB_PLANNER", str(binary))
    stack_file = tmp_path / "Pulumi.two.yaml"
    two = stack_values(**{"gpulab:labs": {"two-types": PLANNER_STACK["gpulab:labs"]["two-types"]}})
    stack_file.write_text(yaml.safe_dump({"config": two}))
    printed, status = _printed(monkeypatch, render.run.main, [str(stack_file), "--out", str(tmp_path / "out")])
    if not (tmp_path / "out" / plan.PLAN).exists():
        pytest.skip("the render wrote no charts here (no helm or charts), so no plan")
    assert status == 0
    out = labs_output(tmp_path / "out")["two-types"]
    burst, trickle = (
        plan.scenarios(json.loads((tmp_path / "out" / plan.PLAN).read_text()), "two-types")[n] for n in plan.FULL
    )
    disk = out["cost"]["rootVolumePerNodeHour"]["usd"]
    dearer = max(s["costPerHour"] + disk * len(s["nodeClaims"]) for s in (burst, trickle))
    (row,) = [r for r in tables.table(printed, "cost of the labs") if r["lab"] == "two-types"]
    assert float(row["at most per hour"]) == pytest.approx(dearer, abs=1e-4)
    assert row["learner seats"] == str(min(placed(burst), placed(trickle)))
    # outputs.json holds the one figure the summary shows, Karpenter's, and what follows from it.
    at_most = out["cost"]["atMostPerHour"]
    assert (at_most["usd"], at_most["basis"]) == (float(row["at most per hour"]), "planner")
    assert at_most["counts"].startswith("at most per hour: Karpenter v1.14.1's full lab (the planner's ")
    seats = min(placed(burst), placed(trickle))
    assert out["cost"]["perLearnerHour"]["usd"] == pytest.approx(at_most["usd"] / seats, abs=1e-4)


def test_learners_bigger_than_sized_fail_the_render_one_by_one(binary, tmp_path):
    """gpulab's share of a node larger than Karpenter's (as kube-reserved from maxPods made it): 2 of 3 learners fit a
    node. One by one, the learners the slices have room for arrive together and Karpenter puts only some of them on
    the nodes there (it orders like pods by UID: learner-10 before learner-8); the trickle still ends with each learner
    placed or refused, and the gate fails the lab with Karpenter's 8 seats beside gpulab's 12."""
    run, _, _ = _planned(PLANNER, binary)

    def two_a_node(outputs):
        requests = outputs["labs"]["single"]["learnerPodSpec"]["containers"][0]["resources"]["requests"]
        requests["memory"] = f"{math.floor(quantity(requests['memory']) * 7 / 5 / 2**20)}Mi"

    planned = _replanned(binary, tmp_path, two_a_node, "outputs.json")
    trickle = plan.scenarios(planned, "single")["full-trickle"]
    assert (trickle["learners"], placed(trickle), trickle["unschedulable"], trickle["stopped"]) == (12, 8, 4, None)
    assert [claim["pods"] for claim in trickle["nodeClaims"]] == [2] * 4
    lines = gate.problems(run.stack.settings.labs, planned)[0]
    assert (
        "gpulab:labs.single.maxGpus: Karpenter 1.14.1 seats 8 learners when they arrive one by one, gpulab promises "
        f"12 (maxGpus 4 x slicesPerGpu 3): {trickle['reason']}"
    ) in lines


def _unfinished(binary: Path):
    """The planner stack's plan with the single lab's trickle stopped at the planner's budget after 6 of its 12
    learners (2 nodes), and its burst's solve stopped at Karpenter's timeout with 3 learners undecided."""
    run, outputs, result = _planned(PLANNER, binary)
    edited = copy.deepcopy(result)
    scenarios = plan.scenarios(edited, "single")
    trickle, full = scenarios["full-trickle"], scenarios["full"]
    stopped = "stopped after 6 of 12 learners: ... (-trickle-budget)"
    trickle.update(learners=6, nodeClaims=trickle["nodeClaims"][:2], stopped=stopped)
    full["nodeClaims"][0]["pods"] = 0
    full.update(unschedulable=3, undecided=3, reason="not decided: Karpenter's solve stopped at its timeout")
    return run, outputs, edited


def test_an_unfinished_scenario_is_said_so_and_gates_nothing(binary):
    run, _, edited = _unfinished(binary)
    broken, unchecked = gate.problems(run.stack.settings.labs, edited)
    assert broken == []
    assert unchecked == [
        "Karpenter 1.14.1 did not decide 3 of lab single's learners arriving all at once: its solve stopped at its "
        "one-minute timeout (the planner's machine too busy, or the lab too large)",
        "Karpenter 1.14.1 did not check lab single's learners arriving one by one to the end: stopped after 6 of 12 "
        "learners: ... (-trickle-budget)",
    ]
    lines = plan.summary_table(edited)
    (row,) = [
        r for r in tables.table(lines, tables.PLAN_TABLE) if (r["lab"], r["scenario"]) == ("single", "full-trickle")
    ]
    assert row["learners"] == "6 (stopped)"
    assert "single full-trickle: the planner stopped after 6 of 12 learners: ... (-trickle-budget)" in lines


def test_no_unfinished_scenarios_seats_or_ceiling_is_printed(binary):
    """A partial trickle or an undecided burst seated some learners only: the summary keeps gpulab's own figures."""
    _, outputs, edited = _unfinished(binary)
    single = plan.with_plan(outputs, edited)["single"]
    assert (single["learnerSeats"], single["cost"]["atMostPerHour"]) == (
        12,
        outputs["single"]["cost"]["atMostPerHour"],
    )
