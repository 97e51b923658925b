"""Spot interruptions on the rehearsal's clock (rehearsal/stepper/spot.go, rehearsal/spot.py): at a rate set on the
command line, EC2's two-minute warnings reach Karpenter's own interruption controller through a queue in memory, in
the EventBridge shape it parses; the controller deletes each warned node's NodeClaim and Karpenter drains it; the
learners it moved start their servers again at once and Karpenter launches for them, and they are counted per class
(`disruptedBySpot`). At rate 0 there are none. Given a preview's stack outputs (`--prices`), spot nodes are priced at
the spot price they record, with its source; without them at on-demand, and rehearsal.json says so. Without the twin
and its stepper (`make twin`) the rehearsals skip in one line.

The stack: one lab of spot g4dn.xlarge (1 slice, up to 4 GPUs, 4 seats) with a class on Monday 4 January 2027 at
09:00 for an hour, 3 seats warm; at 3 warnings per spot node-hour its nodes, a few node-hours in all, get several.
Three runs of it give one answer (docs/rehearsal.md, One answer per stack, says what once made them differ: a
learner's leave that Karpenter did not count, and kube-scheduler's pick between equal nodes).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

import rehearsal.run
from domain.time import durations
from rehearsal import report, spot
from tests.conftest import as_cli_config, run_config, stack_values
from tests.support import twin_tests
from tests.support.synthetic import lab

TODAY = datetime.date(2027, 1, 4)
LAB = "spotty"
RATE = 3.0
STACK = stack_values(
    **{
        "gpulab:labs": {
            LAB: lab(
                ["g4dn.xlarge"],
                1,
                max_gpus=4,
                capacityTypes=["spot"],
                learnerPod={"cpu": "250m", "memory": "1Gi"},
                disruption={"budgets": [{"nodes": "100%"}]},
                classes=[{"schedule": "0 9 * * mon", "duration": "1h", "warmSeats": 3, "warmup": "20m"}],
            )
        }
    }
)
# A spot price as a preview records it (domain/cost/price_book.py spot_line), below g4dn.xlarge's on-demand list
# price: synthetic, as the stack is.
SPOT_LINE = {
    "usdPerHour": 0.2104,
    "pricedAs": "spot",
    "source": "EC2 DescribeSpotPriceHistory, eu-west-1b, 2026-12-04T18:00:00Z (the highest of its zones)",
    "zones": {"eu-west-1b": 0.2104},
}


def _recorded_outputs(render_dir: Path, path: Path) -> Path:
    """A preview's stack outputs as `pulumi stack output --json` gives them: the render's, whose offline spot line
    is on-demand, with the spot price a preview records."""
    outputs = json.loads((render_dir / "outputs.json").read_text())
    outputs["labs"][LAB]["cost"]["spot"]["g4dn.xlarge"] = SPOT_LINE
    path.write_text(json.dumps(outputs))
    return path


def _rehearsed(tmp_path: Path, rate: float, priced: bool = False) -> dict[str, Any]:
    twin_tests.require_twin()
    twin_tests.require_stepper()
    run = run_config("spot", as_cli_config(STACK))
    out = tmp_path / "render"
    twin_tests.render_with_charts(run, out)
    prices = None
    if priced:
        prices = spot.prices(_recorded_outputs(out, tmp_path / "outputs.json"), run.stack.settings, run.stack.region)
    return rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region, spot_rate=rate, spot_prices=prices)


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _rehearsed(tmp_path_factory.mktemp("spot"), RATE, priced=True)


@pytest.fixture(scope="module")
def again(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Two more runs of the stack, each on a twin of its own, as `interrupted` was run."""
    return [_rehearsed(tmp_path_factory.mktemp("spot-again"), RATE, priced=True) for _ in range(2)]


def _events(done: dict[str, Any], what: str) -> list[dict[str, Any]]:
    return [e for e in done["labs"][LAB]["events"] if e["what"] == what]


def test_each_warned_node_is_deleted_by_the_interruption_controller_within_the_warning(interrupted) -> None:
    warnings = _events(interrupted, "spotWarning")
    assert warnings, "no spot warning at 3 per spot node-hour"
    assert interrupted["spot"]["warnings"] == {LAB: len(warnings)}
    deleted = {e["node"]: e for e in _events(interrupted, "nodeDeleted")}
    for warning in warnings:
        gone = deleted.get(warning["node"])
        assert gone is not None, f"warned node {warning['node']} never deleted"
        # The reason only the interruption controller's deletion gives (rehearsal/stepper/spot.go interruptingClient).
        assert gone["reason"] == spot.SPOT_INTERRUPTED, gone
        took = datetime.datetime.fromisoformat(gone["at"]) - datetime.datetime.fromisoformat(warning["at"])
        assert datetime.timedelta(0) <= took <= datetime.timedelta(minutes=2), (warning, gone)
        assert warning["instanceType"] == "g4dn.xlarge"
    assert {e["capacityType"] for e in _events(interrupted, "nodeLaunched")} == {"spot"}


def test_the_learners_moved_by_an_interruption_are_counted_per_class(interrupted) -> None:
    (c,) = interrupted["labs"][LAB]["classes"]
    moved = {
        e["learner"]
        for e in _events(interrupted, "disrupted")
        if e["reason"] == spot.SPOT_INTERRUPTED and e.get("learner")
    }
    assert c["disruptedBySpot"] == len(moved) > 0, (c, moved)
    # Learners moved while there waited for their notebook again, no longer than the class's hour.
    waits = c["spotMoveWaitSeconds"]
    assert 0 <= waits["p50"] <= waits["p95"] <= waits["max"] <= 3600, waits
    # A learner moved by a spot interruption is no budget's failure: counted, not named in a line of moved learners
    # (a warm seat a warning took before the start still fails warmSeats).
    assert not [line for line in rehearsal.run.problems(interrupted) if "moved" in line]


def test_a_moved_learner_still_there_starts_again_on_another_node(interrupted) -> None:
    """Each learner moved before they left is bound again, after the move, on a node other than the warned one,
    unless they left before a node launched then could have had its slices (the timing table's launch to slices), or
    launched once the interruption controller's 3-minute mark on the warned spot offering had ended."""
    log = interrupted["labs"][LAB]["events"]
    left = {e["learner"]: _at(e["at"]) for e in log if e["what"] == "leave"}
    timing = interrupted["timings"]["g4dn.xlarge"]
    boot = datetime.timedelta(seconds=180 + timing["launchToReadySeconds"] + timing["devicePluginReadySeconds"])
    moved = [e for e in _events(interrupted, "disrupted") if e["reason"] == spot.SPOT_INTERRUPTED and e.get("learner")]
    stayed = [e for e in moved if _at(e["at"]) + boot < left[e["learner"]]]
    assert stayed
    for e in stayed:
        again = [
            b for b in _events(interrupted, "bound") if b["learner"] == e["learner"] and _at(b["at"]) >= _at(e["at"])
        ]
        assert again and again[0]["node"] != e["node"], (e, again)


def _at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


def test_spot_nodes_are_priced_at_the_previews_spot_price_with_its_source(interrupted) -> None:
    record = interrupted["spot"]
    assert record["interruptionsPerNodeHour"] == RATE
    assert record["warningSeconds"] == 120
    assert record["labs"] == [LAB]
    assert record["pricedAs"] == "spot"
    assert record["prices"] == {"g4dn.xlarge": {k: SPOT_LINE[k] for k in ("usdPerHour", "pricedAs", "source")}}
    # Karpenter's offerings carry it (the stepper's EC2 answers its spot price update), so each node is billed at it.
    assert {e["pricePerHour"] for e in _events(interrupted, "nodeLaunched")} == {SPOT_LINE["usdPerHour"]}
    day = interrupted["labs"][LAB]
    assert day["cost"] == pytest.approx(day["nodeHours"] * SPOT_LINE["usdPerHour"], abs=0.001)
    # The summary's spot line names the price and its source.
    assert [line for line in report.table(interrupted) if SPOT_LINE["source"] in line and "0.2104 USD/h" in line]


def test_at_rate_zero_and_without_prices_no_spot_node_is_interrupted_and_spot_is_on_demand(tmp_path: Path) -> None:
    done = _rehearsed(tmp_path, 0.0)
    assert _events(done, "spotWarning") == []
    assert spot.SPOT_INTERRUPTED not in {e["reason"] for e in _events(done, "nodeDeleted")}
    assert [c["disruptedBySpot"] for c in done["labs"][LAB]["classes"]] == [0]
    assert done["spot"]["warnings"] == {LAB: 0}
    assert done["spot"]["pricedAs"] == "on-demand"
    assert "pricing.go" in done["spot"]["priceSource"]
    # g4dn.xlarge's on-demand list price in the AWS provider's generated file (domain/cost/prices.py copies it).
    from domain.cost.price_book import LIST

    prices = {e["pricePerHour"] for e in _events(done, "nodeLaunched")}
    assert prices == {float(LIST.on_demand["g4dn.xlarge"])}


@pytest.mark.parametrize("given", ["-1", "nan", "inf", "often"])
def test_a_bad_rate_is_refused_naming_the_flag(given, tmp_path, capsys) -> None:
    status = rehearsal.run.main(["staging", "--out", str(tmp_path), spot.FLAG, given])
    assert status == 2
    assert capsys.readouterr().err.startswith(f"gpulab: {spot.FLAG}: must be a number")


def test_without_the_flag_the_rate_is_zero() -> None:
    assert spot.rate(None) == 0.0
    assert spot.rate("0.25") == 0.25


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", "not JSON"),
        (
            '{"clusterName": "learninglab-staging"}',
            "neither a stack's outputs nor a preview's cost file (no `labs`); want `pulumi stack output --json` of a "
            "preview or the file a preview writes where GPULAB_PREVIEW_COST says",
        ),
        ("[]", "neither a stack's outputs nor a preview's cost file"),
        (
            '{"clusterName": "learninglab-prod", "labs": {}}',
            "the figures of cluster 'learninglab-prod', not this stack's",
        ),
    ],
)
def test_a_bad_prices_file_is_refused_naming_the_flag(content, said, tmp_path, capsys) -> None:
    bad = tmp_path / "outputs.json"
    bad.write_text(content)
    status = rehearsal.run.main(["staging", "--out", str(tmp_path / "out"), spot.PRICES_FLAG, str(bad)])
    assert status == 2
    (line,) = capsys.readouterr().err.splitlines()  # one line, no traceback
    assert line.startswith(f"gpulab: {spot.PRICES_FLAG} {bad}: {said}")


def test_outputs_without_a_spot_labs_price_are_refused(tmp_path) -> None:
    """The offline render's outputs have the line; a preview's of an older gpulab, or another stack's, may not."""
    run = run_config("spot", as_cli_config(STACK))
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({"labs": {LAB: {"cost": {"spot": {}}}}}))
    with pytest.raises(spot.BadPrices, match=rf"labs\.{LAB}\.cost\.spot\.g4dn\.xlarge wants usdPerHour above 0"):
        spot.prices(path, run.stack.settings, run.stack.region)


def test_no_node_emptied_by_learners_goes_before_its_consolidate_after(interrupted, again) -> None:
    """Karpenter counts consolidateAfter from the last pod event on a node, a learner's leaving included: a node whose
    last learner left is removed as Empty no sooner than consolidateAfter later (less the 10 s in which Karpenter
    records one pod event per node, podevents/controller.go dedupeTimeout), in every run. The stepper's kubelet once
    removed a deleted pod before Karpenter saw it going, and a node went 20 s after its learner left."""
    settings = run_config("spot", as_cli_config(STACK)).stack.settings
    consolidate_after = durations.seconds(settings.labs[LAB].disruption.consolidate_after)
    wait = datetime.timedelta(seconds=consolidate_after - 10)
    for done in [interrupted, *again]:
        log = done["labs"][LAB]["events"]
        on: dict[str, str] = {}  # each learner's node while bound
        last_left: dict[str, datetime.datetime] = {}
        for e in sorted(log, key=lambda e: e["at"]):
            if e["what"] == "bound":
                on[e["learner"]] = e["node"]
            elif e["what"] == "leave" and e["learner"] in on:
                last_left[on.pop(e["learner"])] = _at(e["at"])
            elif e["what"] == "disrupted" and e.get("learner"):
                on.pop(e["learner"], None)
        empty = [e for e in _events(done, "nodeDeleted") if e["reason"] == "Empty" and e["node"] in last_left]
        assert empty, log
        for e in empty:
            assert _at(e["at"]) - last_left[e["node"]] >= wait, (e, last_left[e["node"]])


def test_three_runs_of_the_spot_stack_give_one_answer(interrupted, again) -> None:
    """rehearsal.json of the same spot stack, played three times on fresh twins, is the same but for its wall-clock
    times, the node names Karpenter generates and which alike system node a class Job went to (docs/rehearsal.md,
    One answer per stack): the same warnings, learners moved, nodes and figures."""
    assert _events(interrupted, "spotWarning")
    first = twin_tests.without_wall_times(interrupted)
    for done in again:
        assert twin_tests.without_wall_times(done)["labs"] == first["labs"]
        assert twin_tests.without_wall_times(done) == first
