"""What Karpenter 1.14.1 would launch for each lab: builds the planner (planner/, Go) and runs it on a render.

The render (render/run.py; `python -m tools.render <stack> --out <dir> --plan` prints every scenario) calls it once
the charts are written: the planner needs the DaemonSets and the Karpenter controller's settings they install. It
writes <dir>/instance-types.json (gpulab's instance-type table, which the planner gives Karpenter as EC2's answer) and
<dir>/plan.json, and makes the plan's tables. docs/planner.md says what the planner predicts and what it does not.
"""

import json
import math
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from devtools import go_build
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.cost import learner_cost
from domain.cost.lab_cost import DECIMALS, usd
from domain.time.durations import duration_minutes
from reports.table import Column, lead_in, markdown

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "planner"
BINARY = go_build.HELPERS["planner"].binary
PLAN = "plan.json"
INSTANCE_TYPES = "instance-types.json"
# The whole lab, its learners all at once and one by one: the render summary and the pull-request comment show both
# rows, and each class at its start.
FULL = ("full", "full-trickle")
SUMMARY_PREFIX = "class-"
SUMMARY_SUFFIX = "-arrival"


# What a render without the planner cannot say (planner/gate.py checks it where the planner runs).
UNCHECKED = "Karpenter did not check what the labs promise"


class Unavailable(Exception):
    """The planner cannot run here (no Go toolchain, or turned off); the message says why, in one line."""


class Failed(Exception):
    """The planner did not build, or failed on the render: a bug to look at, not a missing tool."""


def go() -> str:
    """The go command: $GPULAB_GO where set, else the one on PATH."""
    found = os.environ.get("GPULAB_GO") or shutil.which("go")
    if not found:
        raise Unavailable(
            f"planner not run: Go 1.26 (go on PATH, or $GPULAB_GO) is needed to build planner/; {UNCHECKED}"
        )
    return found


def binary() -> Path:
    """The planner binary: $GPULAB_PLANNER where it names one, else the one build() makes; GPULAB_PLANNER=off (the
    tests' default, tests/conftest.py) leaves it out."""
    chosen = os.environ.get("GPULAB_PLANNER")
    if chosen == "off":
        raise Unavailable(f"planner not run: GPULAB_PLANNER=off; {UNCHECKED}")
    return Path(chosen) if chosen else build()


def build() -> Path:
    """planner/bin/planner, built from planner/go.mod and go.sum without downloading (the render is offline: `make
    planner` downloads the modules); go rebuilds only what changed. It says on stderr what it builds and, on a first
    build, its progress (devtools/go_build.py)."""
    errors = go_build.build("planner", go(), offline=True)
    if go_build.OFFLINE_REFUSAL in errors:
        raise Unavailable(
            "planner not run: planner/'s Go modules are not downloaded here, and the render downloads nothing: "
            f"`make planner` downloads and builds them; {UNCHECKED}"
        )
    if errors:
        raise Failed(f"go build of planner/ failed: {errors}")
    return BINARY


def write_instance_types(out: Path) -> None:
    """domain/capacity/instance_types.py as the planner reads it: per type its CPUs (count, maker, clock), memory,
    architecture, NVMe and GPUs."""
    rows = {
        name: {
            "architecture": t.architecture,
            "vcpus": t.vcpus,
            "memoryMib": t.memory_mib,
            "localNvmeGb": t.local_nvme_gb,
            "cpuManufacturer": t.cpu_manufacturer,
            "cpuClockMhz": t.cpu_clock_mhz,
            "gpu": {"model": t.gpu_model, "count": t.gpus, "memoryMib": t.gpu_memory_mib},
        }
        for name, t in sorted(GPU_INSTANCE_TYPES.items())
    }
    (out / INSTANCE_TYPES).write_text(json.dumps(rows, indent=2) + "\n")


def plan(out: Path, region: str, binary: Path) -> dict[str, Any]:
    """Runs the planner on the render in `out`, writes out/plan.json and returns it."""
    write_instance_types(out)
    done = subprocess.run([str(binary), "-region", region, str(out)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Failed(f"the planner failed on {out}: {done.stderr.strip()}")
    (out / PLAN).write_text(done.stdout)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def placed(scenario: Mapping[str, Any]) -> int:
    """The learners or buffer copies Karpenter placed in a scenario."""
    return sum(claim["pods"] for claim in scenario["nodeClaims"])


def scenarios(planned: Mapping[str, Any], lab: str) -> dict[str, Mapping[str, Any]]:
    """A lab's scenarios by name."""
    return {s["name"]: s for s in planned["labs"][lab]["scenarios"]}


# The figures gpulab prints of a lab, as Karpenter's plan has them (reports/summary.py, reports/cost_report.py). A
# scenario the planner or Karpenter did not finish (a trickle stopped at the planner's budget, a solve stopped at its
# timeout with learners undecided) seated only some of the learners: its figures are of those, not of the full lab.
def finished(scenario: Mapping[str, Any]) -> bool:
    return not scenario["stopped"] and not scenario["undecided"]


def seats(planned: Mapping[str, Any], lab: str) -> int | None:
    """The learners a full lab seats: the fewer of all at once and one by one; None when neither finished."""
    counts = [placed(s) for s in _full(planned, lab) if finished(s)]
    return min(counts) if counts else None


def ceiling(planned: Mapping[str, Any], lab: str, disk: float) -> float | None:
    """USD an hour of the full lab, all at once or one by one, whichever launches the dearer nodes, each with its
    root volume (`disk` per node-hour); rounded up, as gpulab's own ceiling (domain/cost/lab_cost.py). None when either
    did not finish: its nodes so far bound nothing."""
    dearest = dearer_full(planned, lab, disk)
    return None if dearest is None else _scenario_cost(dearest, disk)


def dearer_full(planned: Mapping[str, Any], lab: str, disk: float) -> Mapping[str, Any] | None:
    """The full scenario (all at once, one by one) whose nodes cost more, root volumes included; None when either did
    not finish."""
    full = _full(planned, lab)
    if not all(finished(s) for s in full):
        return None
    return max(full, key=lambda s: _scenario_cost(s, disk))


def _scenario_cost(scenario: Mapping[str, Any], disk: float) -> float:
    return _up(scenario["costPerHour"] + disk * len(scenario["nodeClaims"]))


def _full(planned: Mapping[str, Any], lab: str) -> list[Mapping[str, Any]]:
    return [scenarios(planned, lab)[name] for name in FULL]


def warmup(planned: Mapping[str, Any], lab: str, index: int, minutes: int, disk: float) -> float:
    """USD to run the nodes class `index`'s buffer warms for its warmup, each with its root volume."""
    buffer = scenarios(planned, lab)[f"class-{index}-buffer"]
    return round((buffer["costPerHour"] + disk * len(buffer["nodeClaims"])) * minutes / 60, DECIMALS)


def with_plan(labs: Mapping[str, Any], planned: Mapping[str, Any] | None) -> dict[str, Any]:
    """The `labs` stack output with the figures gpulab prints (learner seats, the one "at most" figure and the
    per-learner figures that follow from it, what warming each class costs) made Karpenter's where the planner ran
    (domain/cost/learner_cost.py with_at_most). A lab Karpenter launched nothing for offline (only capacity
    reservations, which only EC2 knows) keeps gpulab's own, and so does one with an instance type without a price; so
    does the "at most" figure of a lab whose full scenarios did not both finish (the arithmetic bound: the dearest type
    at maxGpus, which no fleet within the NodePool's limit exceeds), and its seats when neither did. The render writes
    these into outputs.json (render/run.py), so that every report reads one figure."""
    if planned is None:
        return dict(labs)
    shown: dict[str, Any] = {}
    for name, lab in labs.items():
        cost = lab["cost"]
        if not placed(scenarios(planned, name)["one"]) or cost["atMostPerHour"]["usd"] is None or cost["unpriced"]:
            shown[name] = lab
            continue
        disk = cost["rootVolumePerNodeHour"]["usd"] or 0.0
        warmups = []
        for i, w in enumerate(cost["warmups"]):
            amount = warmup(planned, name, i, duration_minutes(w["warmup"]), disk)
            warmups.append({**w, "usd": [amount, amount]})
        karpenter_seats = seats(planned, name)
        learner_seats = lab["learnerSeats"] if karpenter_seats is None else karpenter_seats
        figures = {**cost, "warmups": warmups}
        dearest = dearer_full(planned, name, disk)
        if dearest is not None:
            how = (
                f"Karpenter {planned['karpenter']}'s full lab (the planner's {dearest['name']}: {_nodes(dearest)}), "
                "root volumes included"
            )
            amount = _scenario_cost(dearest, disk)
            figures = learner_cost.with_at_most(figures, amount, learner_cost.PLANNER, how, learner_seats)
        shown[name] = {**lab, "learnerSeats": learner_seats, "cost": figures}
    return shown


def _up(amount: float) -> float:
    return math.ceil(round(amount * 10**DECIMALS, 6)) / 10**DECIMALS


def _nodes(scenario: Mapping[str, Any]) -> str:
    counts: dict[str, int] = {}
    for claim in scenario["nodeClaims"]:
        key = f"{claim['instanceType']} {claim['capacityType']}" + (" new" if claim.get("new") else "")
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} x {key}" for key, n in sorted(counts.items())) or "none"


def _refused(scenario: dict[str, Any]) -> str:
    return str(scenario["unschedulable"]) + (f" ({scenario['reason']})" if scenario["reason"] else "")


# One row per lab and scenario: (the lab's name, the scenario).
Row = tuple[str, dict[str, Any]]
COLUMNS: tuple[Column[Row], ...] = (
    Column("lab", lambda row: row[0]),
    Column("scenario", lambda row: row[1]["name"]),
    Column("learners", lambda row: str(row[1]["learners"]) + (" (stopped)" if row[1]["stopped"] else ""), numeric=True),
    Column("buffer seats", lambda row: str(row[1]["bufferSeats"]), numeric=True),
    Column("nodes", lambda row: _nodes(row[1])),
    Column("unschedulable", lambda row: _refused(row[1]), numeric=True),
    # The instances alone: the lab's one "at most" figure (the cost table's, domain/cost/learner_cost.py) adds their
    # root volumes to the dearer full row, so this column is not headed as a second maximum.
    Column("instances, USD per hour", lambda row: usd(row[1]["costPerHour"]), numeric=True),
)


def table(result: dict[str, Any], rows: tuple[str, ...] | None = None) -> list[str]:
    """The plan in Markdown: per lab and scenario, what Karpenter launches, what it cannot place and why, the cost.
    `rows` keeps only the full lab and the class starts (the render summary, the pull-request comment)."""

    def shown(name: str) -> bool:
        return rows is None or name in rows or (name.startswith(SUMMARY_PREFIX) and name.endswith(SUMMARY_SUFFIX))

    items = [
        (lab, s) for lab, lab_plan in sorted(result["labs"].items()) for s in lab_plan["scenarios"] if shown(s["name"])
    ]
    # A trickle stopped at the planner's budget: its row is of the learners that had arrived, not of the full lab.
    stopped = [f"{lab} {s['name']}: the planner {s['stopped']}" for lab, s in items if s["stopped"]]
    return [
        *lead_in(
            f"what Karpenter {result['karpenter']} launches (its own scheduler, offline: not EC2 capacity, boot times "
            f"or later consolidation; USD at Karpenter's {result['pricesRegion']} list prices, for a stack in "
            f"{result['region']}, instances without their root volumes; docs/planner.md):"
        ),
        "",
        *markdown(COLUMNS, items),
        *(["", *stopped] if stopped else []),
    ]


def summary_table(result: dict[str, Any]) -> list[str]:
    return table(result, FULL)
