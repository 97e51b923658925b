"""What the rehearsal's class day says to a reader: the gate's lines on rehearsal.json's `labs` (rehearsal/class_day.py
makes it) and its tables in the render summary and the pull-request comment (docs/rehearsal.md).

Light on purpose: the summary and the comment read a rehearsal.json without the twin, the hub or Pulumi.

    python -m rehearsal.report [--charts] [<dir>/rehearsal.json]

prints the tables of one (the pull-request workflow's job summary, .ci/rehearse), with --charts its picture of the day
as Mermaid charts (rehearsal/day_chart.py), or the line saying the rehearsal did not run when none is given.
"""

import argparse
import datetime
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from domain.cost.lab_cost import usd
from rehearsal import day_chart
from rehearsal.spot import FLAG, SPOT_INTERRUPTED
from reports.table import Column, lead_in, markdown

REHEARSAL = "rehearsal.json"
NOT_RUN = "rehearsal not run: no class day was played on the twin (make rehearse STACK=<stack>; docs/rehearsal.md)"
NOT_PLAYED = "rehearsal: the class day was not played (rehearsal.json has no labs: Karpenter's stepper did not run)"

# Karpenter's disruption reasons that its NodePool budgets govern (sigs.k8s.io/karpenter v1.14.1 pkg/apis/v1
# nodepool.go DisruptionReason): a class's budget windows should have held them. Expiry ignores budgets (Karpenter
# 1.14.1 disruption docs), so a learner expired out of a class points at expireAfter.
BUDGETED = frozenset({"underutilized", "empty", "drifted"})
EXPIRED = "expired"


def _class_times(lab: Mapping[str, Any]) -> dict[int, tuple[str, str]]:
    """Each played class's (start, end), from the classStart and classEnd steps of the lab's log."""
    start = {e["class"]: e["at"] for e in lab["events"] if e["what"] == "classStart"}
    end = {e["class"]: e["at"] for e in lab["events"] if e["what"] == "classEnd"}
    return {i: (at, end[i]) for i, at in start.items()}


def _at(text: str) -> datetime.datetime:
    # Compared as moments: as text, 09:00:00.5Z would sort before 09:00:00Z.
    return datetime.datetime.fromisoformat(text)


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


def _count(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _usd(value: float | None) -> str:
    return "n/a" if value is None else usd(value)


def _waits(c: Mapping[str, Any], key: str = "waitSeconds") -> str:
    """A class's waits, to the binding (waitSeconds) or to the notebook running (waitToReadySeconds)."""
    what = "wait" if key == "waitSeconds" else "wait to ready"
    return f"{what} p95 {_seconds(c[key]['p95'])} s, max {_seconds(c[key]['max'])} s"


def problems(labs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per class that broke a promise on the clock: a warm-up shorter than its warm seats need on the timing
    table (then its warm seats are short because of it), else fewer warm seats ready at its start (notebooks running)
    than warmSeats; a learner the lab owed a seat never bound before they left, or a learner moved (disrupted) while
    it ran; each names the key to look at, the class by its start, and the figures. Then one per promise a lab
    without classes broke as its learners trickled in (_trickle)."""
    lines: list[str] = []
    for name, lab in sorted(labs.items()):
        times = _class_times(lab)
        for c in lab["classes"]:
            i = c["index"]
            start, end = times[i]
            key = f"gpulab:labs.{name}.classes[{i}]"
            what = f"lab {name}'s class classes[{i}] starting {start}"
            ready = f"{c['readyAtStart']} of its {c['warmSeats']} warm seats ready at its start (notebooks running)"
            if c["warmupSeconds"] < c["leastWarmupSeconds"]:
                lines.append(
                    f"rehearsal: {key}.warmup: {what} warms up {c['warmupSeconds']:g} s ahead, less than the "
                    f"{c['leastWarmupSeconds']:g} s its warm seats need on its lab's timings (Karpenter's batch, a "
                    f"node's boot to its GPU slices and its learner image's pre-pull; docs/rehearsal.md, What the "
                    f"clock models): {ready} ({_waits(c, 'waitToReadySeconds')})"
                )
            elif c["readyAtStart"] < c["warmSeats"]:
                lines.append(
                    f"rehearsal: {key}.warmSeats: {what} found {ready}; the others waited for a node launched or "
                    f"an image pulled after the start, or were never bound ({_waits(c, 'waitToReadySeconds')})"
                )
            if c["neverSeated"]:
                # A class plays the lab's learnerSeats learners (rehearsal/class_day.py), the seats maxGpus makes, as a
                # lab without classes does, whose line names maxGpus too (_trickle).
                lines.append(
                    f"rehearsal: gpulab:labs.{name}.maxGpus: {what} never seated {len(c['neverSeated'])} of its "
                    f"{c['learnersArrived']} learners: {', '.join(c['neverSeated'])} never bound before they left, "
                    f"though the lab held no more learners than its learner seats (maxGpus x slicesPerGpu) when they "
                    f"arrived ({_waits(c)})"
                )
            if c["disruptedDuringClass"]:
                # Each pod once, at its first disruption, as disruptedDuringClass counts them: the log can hold two
                # disrupted events of one pod (a fresh-clone CI run named default/seats-8 twice beside a count of 2).
                first: dict[str, dict[str, Any]] = {}
                for e in lab["events"]:
                    if e["what"] == "disrupted" and _at(start) <= _at(e["at"]) < _at(end):
                        first.setdefault(e["pod"], e)
                # A spot interruption, which no budget holds and the stack cannot refuse, is counted in disruptedBySpot
                # and the table, not failed.
                moved = [e for e in first.values() if e["reason"] != SPOT_INTERRUPTED]
                reasons = sorted({str(e.get("reason")) for e in moved})
                cause = (
                    f"gpulab:labs.{name}.expireAfter (expiry ignores disruption budgets)"
                    if {r.lower() for r in reasons} == {EXPIRED}
                    else f"{key} (its disruption budget windows should hold every node from the warm-up to the end)"
                )
                if not moved:
                    continue
                lines.append(
                    f"rehearsal: {cause}: {what} had {len(moved)} learner pod(s) moved before its end "
                    f"at {end}: "
                    + ", ".join(f"{e['pod']} from {e['node']} at {e['at']} ({e['reason']})" for e in moved)
                )
    return lines + [line for name, lab in sorted(labs.items()) if "trickle" in lab for line in _trickle(name, lab)]


def _trickle(name: str, lab: Mapping[str, Any]) -> list[str]:
    """The lines of a lab without classes whose trickle broke what it promises: its learnerSeats learners seated at
    once, the one more kept waiting until a seat was freed, no more GPUs than maxGpus (docs/configuration.md). Each
    names maxGpus, as the planner's gate does for a full lab (docs/planner.md)."""
    t = lab["trickle"]
    key = f"rehearsal: gpulab:labs.{name}.maxGpus: lab {name} (no classes)"
    seats = f"its {t['learnerSeats']} learner seats (maxGpus x slicesPerGpu)"
    lines = []
    if t["mostSeatedAtOnce"] < t["learnerSeats"]:
        waited = f": {', '.join(t['unseated'])} not bound before the first learner left" if t["unseated"] else ""
        lines.append(
            f"{key} seated at most {t['mostSeatedAtOnce']} at once of {seats} as {t['learnersArrived']} learners "
            f"trickled in{waited}"
        )
    if t["othersSeatedThen"] is not None and t["othersSeatedThen"] >= t["learnerSeats"]:
        lines.append(
            f"{key} seated its extra learner {t['extraLearner']} at {t['extraBound']} (arrived {t['extraArrived']}) "
            f"beside {t['othersSeatedThen']} others: beyond {seats}, which should have kept it waiting until a seat "
            "was freed"
        )
    if t["mostGpusAtOnce"] > t["maxGpus"]:
        lines.append(f"{key} ran {t['mostGpusAtOnce']} GPUs at once, more than its maxGpus {t['maxGpus']}")
    return lines


# One row per played class: (lab name, its class figures, its start).
ClassRow = tuple[str, Mapping[str, Any], str]
CLASS_COLUMNS: tuple[Column[ClassRow], ...] = (
    Column("lab", lambda row: row[0]),
    Column("class", lambda row: f"classes[{row[1]['index']}]"),
    Column("start (UTC)", lambda row: row[2]),
    Column("ready at start", lambda row: f"{row[1]['readyAtStart']} of {row[1]['warmSeats']}", numeric=True),
    Column("learners", lambda row: str(row[1]["learnersArrived"]), numeric=True),
    Column("disrupted", lambda row: str(row[1]["disruptedDuringClass"]), numeric=True),
    Column("moved by spot", lambda row: str(row[1]["disruptedBySpot"]), numeric=True),
    Column("p95 wait to ready s", lambda row: _seconds(row[1]["waitToReadySeconds"]["p95"]), numeric=True),
    Column("nodes after", lambda row: str(row[1]["nodesAfterEnd"]), numeric=True),
)
LabRow = tuple[str, Mapping[str, Any]]
# One row per lab without classes: its trickle of learnerSeats + 1 learners (class_day.trickle_metrics).
TRICKLE_COLUMNS: tuple[Column[LabRow], ...] = (
    Column("lab (no classes)", lambda row: row[0]),
    Column(
        "seated at once",
        lambda row: f"{row[1]['trickle']['mostSeatedAtOnce']} of {row[1]['trickle']['learnerSeats']}",
        numeric=True,
    ),
    Column("extra learner", lambda row: row[1]["trickle"]["extraLearner"]),
    Column("extra bound (UTC)", lambda row: row[1]["trickle"]["extraBound"] or "never"),
    Column("extra wait s", lambda row: f"{row[1]['trickle']['extraWaitSeconds']:g}", numeric=True),
    Column("others seated then", lambda row: _count(row[1]["trickle"]["othersSeatedThen"]), numeric=True),
    Column("p95 wait to ready s", lambda row: _seconds(row[1]["trickle"]["waitToReadySeconds"]["p95"]), numeric=True),
    Column(
        "most GPUs",
        lambda row: f"{row[1]['trickle']['mostGpusAtOnce']} of {row[1]['trickle']['maxGpus']}",
        numeric=True,
    ),
)
LAB_COLUMNS: tuple[Column[LabRow], ...] = (
    Column("lab", lambda row: row[0]),
    Column("node-hours", lambda row: f"{row[1]['nodeHours']:g}", numeric=True),
    Column("lower bound", lambda row: f"{row[1]['lowerBoundNodeHours']:g}", numeric=True),
    Column("USD", lambda row: usd(row[1]["cost"]), numeric=True),
    Column("lower bound USD", lambda row: _usd(row[1]["lowerBoundCost"]), numeric=True),
)


def table(rehearsal: Mapping[str, Any] | None, shown: set[str] | None = None) -> list[str]:
    """The class day in Markdown: per class and day of the term played, warm seats ready at its start against warmSeats,
    learners disrupted, the p95 wait until a learner's notebook ran; per lab without classes, its learners seated
    against learnerSeats, the extra learner's binding and the p95 wait until a notebook ran; per lab, the day's
    node-hours and their cost in USD against the lower bound's. One line when the rehearsal did not run or played no
    class day. `shown` keeps those labs only (the pull-request comment's)."""
    if rehearsal is None:
        return [NOT_RUN]
    if "labs" not in rehearsal:
        return [NOT_PLAYED]
    labs = {n: lab for n, lab in sorted(rehearsal["labs"].items()) if shown is None or n in shown}
    # Each class on each day of the term played (rehearsal/term.py), in order of date.
    days = [d["labs"] for d in rehearsal.get("days", [])] or [rehearsal["labs"]]
    classes = [
        (n, c, _class_times(lab)[c["index"]][0])
        for day in days
        for n, lab in sorted(day.items())
        if shown is None or n in shown
        for c in lab["classes"]
    ]
    trickles = [(n, lab) for n, lab in labs.items() if "trickle" in lab]
    played = f"{len(days)} days of the term" if len(days) > 1 else "one day"
    return [
        *lead_in(
            f"the class day on the twin (Kubernetes {rehearsal['kubernetes']}, Karpenter "
            f"{rehearsal.get('karpenter', 'n/a')}; {played}, docs/rehearsal.md):"
        ),
        "",
        *_spot(rehearsal.get("spot")),
        *([*markdown(CLASS_COLUMNS, classes), ""] if classes else []),
        *([*markdown(TRICKLE_COLUMNS, trickles), ""] if trickles else []),
        *markdown(LAB_COLUMNS, labs.items()),
    ]


def _spot(spot: Mapping[str, Any] | None) -> list[str]:
    """The lines saying how the day played spot, where a lab allows it: the warnings and their rate, the warned nodes
    EC2 reclaimed before their drain finished, the price."""
    if not spot or not spot["labs"]:
        return []
    warnings = sum(spot["warnings"].values())
    # With --prices each type's price and source (rehearsal/spot.py prices); else why spot is at on-demand.
    priced = (
        "; ".join(f"{t} {p['usdPerHour']:g} USD/h, {p['pricedAs']}: {p['source']}" for t, p in sorted(prices.items()))
        if (prices := spot.get("prices")) is not None
        else f"{spot['pricedAs']}: {spot['priceSource']}"
    )
    # A warned node still draining at the end of its warning is taken by EC2 with its learners' servers on it.
    reclaimed = sum(spot["reclaimed"].values())
    cut_short = f", {reclaimed} warned node(s) reclaimed by EC2 at the end of the warning, their drain not finished"
    return [
        f"spot ({', '.join(spot['labs'])}): {warnings} interruption warning(s) of {spot['warningSeconds']:g} s at "
        f"{spot['interruptionsPerNodeHour']:g} per spot node-hour ({FLAG}){cut_short if reclaimed else ''}; spot "
        f"nodes priced at {priced}",
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rehearsal.report", description=__doc__.splitlines()[0])
    parser.add_argument(
        "rehearsal", nargs="?", type=Path, help="a rehearsal.json (rehearsal/run.py); none if it did not run"
    )
    parser.add_argument(
        "--charts", action="store_true", help="and the day's nodes, seats and waits per lab as Mermaid charts"
    )
    args = parser.parse_args(argv)
    try:
        rehearsal = json.loads(args.rehearsal.read_text()) if args.rehearsal else None
    except (OSError, ValueError) as error:
        print(f"gpulab: cannot read the rehearsal {args.rehearsal}: {error}", file=sys.stderr)
        return 1
    print("\n".join(table(rehearsal)))
    if args.charts and rehearsal is not None:
        print("\n".join(["", *day_chart.mermaid(rehearsal)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
