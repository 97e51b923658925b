"""A lab's class day on a simulated clock: the learners' timeline the rehearsal plays, and what it measures from the
events the day produced (docs/rehearsal.md, "The class day").

No cluster here: timeline() is the plan of the day from a stack's settings, and lab_section() reads a log of events
(the timeline's steps merged with what the Karpenter stepper and the driver observed) into rehearsal.json's
`labs.<lab>` entry. Both are pure, so that the stepper that plays the day and the tests share them.

The timeline, per lab:
- A lab with classes plays each of its classes that start on the day played (rehearsal/term.py: on the clock of the
  class's zone, in UTC here), at its first start that day: the warm-up CronJob fires at the start less the warmup,
  the release CronJob and the class start at the start. `warmSeats` learners arrive at
  the start at once, then the rest of the lab's `learnerSeats` one by one, ARRIVAL_SPACING apart, or closer when the
  first half of the class is too short for them (see arrival_spacing). At the middle of the class one learner in
  four leaves (the 1st, 5th, 9th... to arrive): a quarter of the seats freed across the lab's nodes, not one node
  emptied, which is what tempts consolidation and what the class's disruption budgets must refuse while it runs.
  The rest leave at its end. Classes that overlap are played overlapping, as they would run.
- A lab without classes gets learners trickling in from DAY_START of the day of the run (one of the days played),
  one ARRIVAL_SPACING apart, to `learnerSeats` + 1: the last one finds the lab full and must wait (or be refused).
  One spacing after it arrived they leave, one a spacing, in the order they came: the first to leave frees the seat
  the last one waits for.

At one instant, steps come in STEP_ORDER: leaving learners before the class end, the next class's start after it,
its release before its learners arrive.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.node_capacity import seats_per_node
from domain.cost.lab_cost import DECIMALS, seat_hour
from domain.cost.price_book import LIST
from domain.stack.model import Lab, Settings
from domain.time import durations, zones
from domain.time.utc import utc_text
from rehearsal.spot import SPOT_INTERRUPTED
from rehearsal.term import Day, Played

Step = dict[str, Any]
Event = Mapping[str, Any]

# Late learners arrive a minute apart: more than Karpenter's longest provisioning batch (--batch-max-duration 10 s,
# --batch-idle-duration 1 s; sigs.k8s.io/karpenter v1.14.1 pkg/operator/options/options.go), so that each is a
# provisioning decision of its own, as learners signing in one after another are, and not one batch of them all.
ARRIVAL_SPACING = datetime.timedelta(minutes=1)
# One learner in this many leaves at the middle of a class.
LEAVE_EVERY = 4
# A lab without classes starts its trickle at midnight UTC of the day of the run: any moment would do (its nodes'
# disruption budgets are the lab's own, in UTC), and this one names no invented class time.
DAY_START = datetime.time(0, 0)
# After a lab's learners are gone, Karpenter removes its empty nodes once they have stayed empty for the lab's
# consolidateAfter; then its disruption loop finds them (it polls every 10 s, pkg/controllers/disruption/
# controller.go pollingPeriod), validates the command (15 s, consolidation.go commandValidationDelay), retries with
# a backoff of up to 10 s (queue.go) and the termination controller drains and deletes the node. Five minutes
# covers those with room; it is a margin chosen here, not a figure of Karpenter's.
SETTLE_MARGIN = datetime.timedelta(minutes=5)
# KubeSpawner 7.0.0 keeps a username as it is (in the pod name jupyter-<name> and the username label) only when it is
# a DNS label of at most 48 characters without "--" (kubespawner/spawner.py _expand_user_properties, slugs.py
# safe_slug); else it hashes it. Learner names are made so, and are also valid pod names themselves.
MAX_LEARNER_NAME = 48
_KEPT_AS_IS = re.compile(r"[a-z](?:[a-z0-9]|-(?!-))*[a-z0-9]")

STEP_ORDER = ("leave", "classEnd", "warmup", "classStart", "release", "arrive")
STEPS = frozenset(STEP_ORDER)
# What the Karpenter stepper and the driver observe, and the keys each kind carries besides at, what and lab.
OBSERVED = {
    "nodeLaunched": ("node", "instanceType", "capacityType", "pricePerHour"),
    "nodeDeleted": ("node", "reason"),
    "disrupted": ("pod", "node", "reason"),
    "spotWarning": ("node", "instanceType"),
    # EC2 took a warned instance back at the end of its warning, its drain not finished (the stepper's spot.go reclaim).
    "spotReclaimed": ("node", "instanceType"),
    "bound": ("learner", "node"),
    "ready": ("learner", "node"),
}


def moment(text: str) -> datetime.datetime:
    """An event's `at`, as an aware UTC datetime."""
    return datetime.datetime.fromisoformat(text).astimezone(datetime.UTC)


def learner_name(lab: str, number: int) -> str:
    """The `number`th learner of the lab's day: `<lab>-<number>`, or, when that is too long or is not kept as it is by
    KubeSpawner (a lab name with "--" or starting with a digit), the lab's name cut short, a hash of it that keeps labs
    apart, and the number. The same for the same lab and number, on every run."""
    plain = f"{lab}-{number}"
    if len(plain) <= MAX_LEARNER_NAME and _KEPT_AS_IS.fullmatch(plain):
        return plain
    tail = f"-{hashlib.sha256(lab.encode()).hexdigest()[:8]}-{number}"
    head = re.sub("-+", "-", lab)
    head = head if head[0].isalpha() else f"lab-{head}"
    return head[: MAX_LEARNER_NAME - len(tail)].rstrip("-") + tail


def arrival_spacing(duration: datetime.timedelta, late: int) -> datetime.timedelta:
    """How far apart a class's `late` learners (those beyond its warm seats) arrive: ARRIVAL_SPACING, or closer so
    that all of them have arrived before the middle of the class, when its mid-class leavers go. Also the window
    after the start within which a warm learner's binding counts as at the start (class_metrics)."""
    return min(ARRIVAL_SPACING, duration / 2 / (late + 1))


@dataclass(frozen=True)
class PlayedClass:
    """One class of a lab as the day plays it: its index in the lab's classes, warm seats and moments (UTC)."""

    index: int
    warm_seats: int
    warm: datetime.datetime
    start: datetime.datetime
    end: datetime.datetime
    spacing: datetime.timedelta


def played_classes(lab: Lab, classes: Played) -> list[PlayedClass]:
    """The lab's classes as the day plays them (`classes`: their occurrences that day, rehearsal/term.py), in order of
    their start."""
    played = []
    for index, occurrence in classes:
        lab_class = lab.classes[index]
        seats = lab.warm_seats(lab_class)
        spacing = arrival_spacing(occurrence.end - occurrence.start, lab.learner_seats - seats)
        played.append(PlayedClass(index, seats, occurrence.warm, occurrence.start, occurrence.end, spacing))
    return sorted(played, key=lambda c: (c.start, c.index))


def _step(at: datetime.datetime, what: str, lab: str, index: int | None, learner: str | None) -> Step:
    return {"at": utc_text(at), "what": what, "lab": lab, "class": index, "learner": learner}


def lab_timeline(lab_name: str, lab: Lab, day: Day) -> list[Step]:
    """The lab's steps on the day, in order of time (module docstring)."""
    steps: list[Step] = []
    number = 0
    for c in played_classes(lab, day.classes.get(lab_name, ())):
        steps += [
            _step(c.warm, "warmup", lab_name, c.index, None),
            _step(c.start, "classStart", lab_name, c.index, None),
            _step(c.start, "release", lab_name, c.index, None),
        ]
        middle = c.start + (c.end - c.start) / 2
        for k in range(lab.learner_seats):
            number += 1
            name = learner_name(lab_name, number)
            at = c.start if k < c.warm_seats else c.start + (k - c.warm_seats + 1) * c.spacing
            steps.append(_step(at, "arrive", lab_name, c.index, name))
            steps.append(_step(middle if k % LEAVE_EVERY == 0 else c.end, "leave", lab_name, c.index, name))
        steps.append(_step(c.end, "classEnd", lab_name, c.index, None))
    if not lab.classes and day.trickle:
        first = datetime.datetime.combine(day.date, DAY_START, tzinfo=datetime.UTC)
        learners = lab.learner_seats + 1
        for k in range(learners):
            name = learner_name(lab_name, k + 1)
            steps.append(_step(first + k * ARRIVAL_SPACING, "arrive", lab_name, None, name))
            steps.append(_step(first + (learners + k) * ARRIVAL_SPACING, "leave", lab_name, None, name))
    return sorted(steps, key=lambda s: (moment(s["at"]), STEP_ORDER.index(s["what"])))


def timeline(settings: Settings, day: Day) -> dict[str, list[Step]]:
    """Every lab's steps on one day of the term (rehearsal/term.py), by lab name; a lab with nothing that day has
    none."""
    return {name: lab_timeline(name, lab, day) for name, lab in sorted(settings.labs.items())}


def settle(lab: Lab) -> datetime.timedelta:
    """How long after its last learner leaves the lab's empty nodes should be gone: consolidateAfter + SETTLE_MARGIN."""
    return datetime.timedelta(seconds=durations.seconds(lab.disruption.consolidate_after)) + SETTLE_MARGIN


def day_end(lab: Lab, steps: Sequence[Step]) -> datetime.datetime:
    """The moment the lab's day ends: its last step, then settle(lab). The stepper plays the clock at least this far;
    a node still up then is billed to it and counted after the last class."""
    return moment(steps[-1]["at"]) + settle(lab)


def merged(steps: Iterable[Step], observed: Iterable[Event]) -> list[dict[str, Any]]:
    """The timeline and the observed events in one log, in order of time; at one instant the timeline's steps come
    first (what was observed then is their consequence), each side in its own order."""
    log = [(moment(e["at"]), 0, i, dict(e)) for i, e in enumerate(steps)]
    log += [(moment(e["at"]), 1, i, dict(e)) for i, e in enumerate(observed)]
    return [e for *_, e in sorted(log, key=lambda item: item[:3])]


class BadLog(ValueError):
    """An event log that contradicts itself (a node deleted before it launched, an unknown kind): a driver's bug."""


@dataclass
class _Node:
    name: str
    launched: datetime.datetime
    price: float
    deleted: datetime.datetime | None = None

    def up_at(self, at: datetime.datetime) -> bool:
        return self.launched <= at and (self.deleted is None or at < self.deleted)


def _nodes(events: Sequence[Event]) -> dict[str, _Node]:
    nodes: dict[str, _Node] = {}
    for e in events:
        if e["what"] == "nodeLaunched":
            if e["node"] in nodes:
                raise BadLog(f"node {e['node']} of lab {e['lab']} launched twice (at {e['at']})")
            nodes[e["node"]] = _Node(e["node"], moment(e["at"]), float(e["pricePerHour"]))
        elif e["what"] == "nodeDeleted":
            node = nodes.get(e["node"])
            if node is None or node.deleted is not None:
                raise BadLog(f"node {e['node']} of lab {e['lab']} deleted at {e['at']} without being up")
            node.deleted = moment(e["at"])
    return nodes


def _percentile(values: Sequence[float], percent: int) -> float:
    """The nearest-rank percentile: the smallest value with at least `percent` % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(math.ceil(percent / 100 * len(ordered)), 1) - 1]


def _waits(waits: Sequence[float]) -> dict[str, float | None]:
    """Nearest-rank p50 and p95, and the max, of waits in seconds; None each without any."""
    return {
        "p50": round(_percentile(waits, 50), 3) if waits else None,
        "p95": round(_percentile(waits, 95), 3) if waits else None,
        "max": round(max(waits), 3) if waits else None,
    }


def class_metrics(
    c: PlayedClass,
    steps: Sequence[Step],
    events: Sequence[Event],
    after: datetime.datetime,
    seats: int,
    least_warmup: float,
    zone: str,
) -> dict[str, Any]:
    """One class's figures from the lab's log (rehearsal.json `labs.<lab>.classes[]`), with real event times:

    - `day`: the class's day played, on the clock of its `zone`.
    - `readyAtStart`: learners who arrived at the start (the warm ones) whose notebook ran (their pod `ready`: bound,
      and its node's image there) at the start: what the gate reads.
    - `waitToReadySeconds`: from each learner's arrival until their notebook ran (p50, p95, max as waitSeconds); a
      learner whose notebook never ran waits until they leave. `coldWaitToReadySeconds`: the same of the learners
      beyond the class's warm seats (those who arrived after the start).
    - `warmupSeconds` and `leastWarmupSeconds`: the class's warm-up lead, and the least that has its warm seats ready
      at its start on the timing table (domain/capacity/boot_timings.py, the lab's `timings` and the command line's),
      which the gate compares.

    - `warmAtStart`: learners who arrived at the start (the warm ones, all at once) and whose pod was bound to a node
      launched before the start (strictly), the binding no later than one arrival spacing after the start (when the
      first late learner arrives; arrival_spacing): what the nodes warmed before the start held, before any later
      arrival could change it. A stepper that stamps a binding at its next step still lands within it.
    - `boundWithoutNewNode`: the class's learners whose first binding was on a node launched before they arrived.
    - `waitSeconds`: from each learner's arrival to their first binding (nearest-rank p50 and p95, and the max); a
      learner never bound waits until they leave, a lower bound of their wait, so that they weigh in the figures.
    - `neverSeated`: the class's learners never bound before they left who arrived when the lab's learners there
      (they included, of every class; at one instant counted in the timeline's order, leavers first) were at most
      its `seats` (learnerSeats), in the order they arrived: the lab owed each of them a seat. One who arrived beyond
      them (classes that overlap) may have to wait.
    - `disruptedDuringClass`: the lab's pods the log says were disrupted from the start to the end (end excluded).
    - `disruptedBySpot`: the class's learners whose pod was moved off a node that Karpenter's interruption controller
      deleted on EC2's spot warning (reason spot_interrupted; rehearsal/spot.py), at any time of their stay.
    - `spotMoveWaitSeconds`: for each such move before the learner left, from the move until their notebook ran again
      (their next `ready`, on another node), or until they left if it never did (p50, p95, max as waitSeconds).
    - `nodesAfterEnd`: the lab's nodes up at `after` (the end plus settle(), at most the day's end): those Karpenter
      kept once the class's learners had left, the class's own or, if another class runs or warms then, that one's.
    """
    nodes = _nodes(events)
    arrived = {s["learner"]: moment(s["at"]) for s in steps if s["what"] == "arrive" and s["class"] == c.index}
    left = {s["learner"]: moment(s["at"]) for s in steps if s["what"] == "leave" and s["class"] == c.index}
    bound: dict[str, tuple[datetime.datetime, str]] = {}
    for e in events:
        if e["what"] == "bound" and e["learner"] in arrived and e["learner"] not in bound:
            bound[e["learner"]] = (moment(e["at"]), e["node"])

    def launched_before(node: str, at: datetime.datetime) -> bool:
        if node not in nodes:
            raise BadLog(f"learner bound to node {node}, which the log never launched")
        return nodes[node].launched < at

    ready: dict[str, datetime.datetime] = {}
    for e in events:
        if e["what"] == "ready" and e["learner"] in arrived:
            ready.setdefault(e["learner"], moment(e["at"]))
    to_ready = {n: ((ready[n] if n in ready else left[n]) - at).total_seconds() for n, at in arrived.items()}
    warm = sum(
        1
        for learner, at in arrived.items()
        if at == c.start
        and learner in bound
        and bound[learner][0] <= c.start + c.spacing
        and launched_before(bound[learner][1], c.start)
    )
    without_new = sum(1 for learner, (_, node) in bound.items() if launched_before(node, arrived[learner]))
    waits = [((bound[n][0] if n in bound else left[n]) - at).total_seconds() for n, at in arrived.items()]
    there: dict[str, int] = {}  # the lab's learners there as each arrived, they included, in the timeline's order
    present = 0
    for s in steps:
        if s["what"] == "arrive":
            present += 1
            there[s["learner"]] = present
        elif s["what"] == "leave":
            present -= 1
    never_seated = [learner for learner in arrived if learner not in bound and there[learner] <= seats]
    disrupted = {e["pod"] for e in events if e["what"] == "disrupted" and c.start <= moment(e["at"]) < c.end}
    spot_moves = [
        e
        for e in events
        if e["what"] == "disrupted" and e["reason"] == SPOT_INTERRUPTED and e.get("learner") in arrived
    ]
    by_spot = {e["learner"] for e in spot_moves}
    spot_waits = []
    for move in spot_moves:
        learner, at = move["learner"], moment(move["at"])
        if at >= left[learner]:
            continue
        again = [
            moment(e["at"])
            for e in events
            if e["what"] == "ready" and e["learner"] == learner and e["node"] != move["node"] and moment(e["at"]) >= at
        ]
        spot_waits.append((min([*again, left[learner]]) - at).total_seconds())
    return {
        "index": c.index,
        "day": c.start.astimezone(zones.zone(zone)).date().isoformat(),
        "warmSeats": c.warm_seats,
        "warmAtStart": warm,
        "readyAtStart": sum(1 for n, at in arrived.items() if at == c.start and n in ready and ready[n] <= c.start),
        "warmupSeconds": (c.start - c.warm).total_seconds(),
        "leastWarmupSeconds": least_warmup,
        "learnersArrived": len(arrived),
        "boundWithoutNewNode": without_new,
        "waitSeconds": _waits(waits),
        "waitToReadySeconds": _waits(list(to_ready.values())),
        "coldWaitToReadySeconds": _waits([w for n, w in to_ready.items() if arrived[n] > c.start]),
        "neverSeated": never_seated,
        "disruptedDuringClass": len(disrupted),
        "disruptedBySpot": len(by_spot),
        "spotMoveWaitSeconds": _waits(spot_waits),
        "nodesAfterEnd": sum(1 for n in nodes.values() if n.up_at(after)),
    }


def _gpus(node: str, instance_type: str) -> int:
    if instance_type not in GPU_INSTANCE_TYPES:
        raise BadLog(f"node {node} launched as {instance_type}, which is not a GPU instance type gpulab knows")
    return GPU_INSTANCE_TYPES[instance_type].gpus


def trickle_metrics(lab: Lab, steps: Sequence[Step], events: Sequence[Event]) -> dict[str, Any]:
    """A lab without classes: what its trickle of learnerSeats + 1 learners found (rehearsal.json
    `labs.<lab>.trickle`), against what the lab promises (docs/configuration.md): it seats `learnerSeats` (maxGpus x
    slicesPerGpu) learners at once, on at most `maxGpus` GPUs (its NodePool's limit), and no more.

    - `mostSeatedAtOnce`: the most of the lab's learners bound at one moment, each from their first binding to their
      leaving (at one instant a leaving comes first): the lab's seats, all held, are learnerSeats. `unseated` names
      the first learnerSeats learners to arrive who were not bound before the first of them left: the ones a lab of
      fewer seats kept waiting.
    - `extraLearner`, `extraArrived`, `extraBound` (None when never bound) and `extraWaitSeconds` (to their binding,
      or to their leaving when never bound): the one learner more than the lab seats.
    - `othersSeatedThen`: at the extra learner's binding, the lab's other learners bound and not yet left, less the
      lab's pods disrupted before it (each may have freed a seat): learnerSeats or more, and the extra learner's seat
      was one beyond the lab's.
    - `mostGpusAtOnce`: the most GPUs (domain/capacity/instance_types.py) of the lab's nodes up at one moment, beside
    `maxGpus`.
    - `waitToReadySeconds`: from each learner's arrival until their notebook ran (their pod `ready`), or until they
      left if it never did; p50, p95 and max as a class's (class_metrics).
    """
    arrived = [(moment(s["at"]), s["learner"]) for s in steps if s["what"] == "arrive"]
    left = {s["learner"]: moment(s["at"]) for s in steps if s["what"] == "leave"}
    bound: dict[str, datetime.datetime] = {}
    for e in events:
        if e["what"] == "bound" and e["learner"] in left:
            bound.setdefault(e["learner"], moment(e["at"]))
    promised, (extra_arrived, extra) = arrived[: lab.learner_seats], arrived[lab.learner_seats]
    first_leaving = min(left.values())
    unseated = [learner for _, learner in promised if not (learner in bound and bound[learner] < first_leaving)]
    # Seats taken (+1) and freed (-1) in order of time, a freeing first at one instant (the leave step comes first).
    changes = sorted(
        [(at, 1) for n, at in bound.items() if at < left[n]]
        + [(left[n], -1) for n, at in bound.items() if at < left[n]]
    )
    seated = most_seated = 0
    for _, change in changes:
        seated += change
        most_seated = max(most_seated, seated)
    ready: dict[str, datetime.datetime] = {}
    for e in events:
        if e["what"] == "ready" and e["learner"] in left:
            ready.setdefault(e["learner"], moment(e["at"]))
    to_ready = [((ready[n] if n in ready else left[n]) - at).total_seconds() for at, n in arrived]
    extra_bound = bound.get(extra)
    others_then = None
    if extra_bound is not None:
        present = sum(1 for _, n in promised if n in bound and bound[n] <= extra_bound < left[n])
        freed = sum(1 for e in events if e["what"] == "disrupted" and moment(e["at"]) <= extra_bound)
        others_then = max(present - freed, 0)
    up: dict[str, int] = {}  # the GPUs of each node up, in the log's order (of time; at one instant as logged)
    most_gpus = 0
    for e in events:
        if e["what"] == "nodeLaunched":
            up[e["node"]] = _gpus(e["node"], e["instanceType"])
            most_gpus = max(most_gpus, sum(up.values()))
        elif e["what"] == "nodeDeleted":
            up.pop(e["node"], None)
    return {
        "learnerSeats": lab.learner_seats,
        "maxGpus": lab.max_gpus,
        "learnersArrived": len(arrived),
        "mostSeatedAtOnce": most_seated,
        "unseated": unseated,
        "extraLearner": extra,
        "extraArrived": utc_text(extra_arrived),
        "extraBound": None if extra_bound is None else utc_text(extra_bound),
        "extraWaitSeconds": round(((extra_bound or left[extra]) - extra_arrived).total_seconds(), 3),
        "othersSeatedThen": others_then,
        "mostGpusAtOnce": most_gpus,
        "waitToReadySeconds": _waits(to_ready),
    }


def cheapest_type(lab: Lab) -> str:
    """The lab's instance type of the cheapest seat-hour of the instance alone (domain/cost/lab_cost.py seat_hour with
    no disk: its on-demand list price, domain/cost/prices.py, over its seats per node); of the most seats per node
    among equals, and when no type has a price. The instance alone, its root volume left out, because the day's `cost`
    the lower bound stands beside prices each node as the planner's stand-in bills it (planner/standin/aws.go Price: the
    instance's list price, no disk), and the lower bound is costed the same way (lower_bound_price)."""

    def key(t: str) -> tuple[Decimal | float, int]:
        price = seat_hour(t, lab.slices_per_gpu)
        return (math.inf if price is None else price, -seats_per_node(t, lab.slices_per_gpu))

    return min(lab.instance_types, key=key)


def _lower_bound_hours(lab: Lab, steps: Sequence[Step], end: datetime.datetime) -> float:
    """The least node-hours that hold the day's learners: at each moment, ceil(learners there / seats per node) of
    the lab's cheapest type (cheapest_type; seats per node from domain/capacity/node_capacity.py), learners counted from
    their arrival to their leaving whether seated or not, at most the lab's learnerSeats (one more waits or is refused).
    Unrounded: the hours and their cost are each rounded once, from it."""
    seats = seats_per_node(cheapest_type(lab), lab.slices_per_gpu)
    changes = sorted((moment(s["at"]), 1 if s["what"] == "arrive" else -1) for s in steps if s["learner"])
    total = 0.0
    active = 0
    for (at, change), until in zip(changes, [*(t for t, _ in changes[1:]), end], strict=True):
        active += change
        total += math.ceil(min(active, lab.learner_seats) / seats) * (until - at).total_seconds()
    return total / 3600


def lower_bound_price(lab: Lab) -> float | None:
    """USD an hour of a node of the lab's cheapest type (cheapest_type), the price its lower bound is costed at: the
    list price domain/cost/prices.py copies from the file the AWS provider's pricing starts from
    (zz_generated.pricing_aws.go), which is also where the planner's stand-in prices each node the day launches
    (planner/standin/aws.go; spot as on-demand, offline). None when the type has no list price."""
    return LIST.on_demand.get(cheapest_type(lab))


def _classes_of(lab: Lab, steps: Sequence[Step]) -> list[PlayedClass]:
    """The classes the lab's steps play, as played_classes made them, in order of their start."""
    at = {(s["class"], s["what"]): moment(s["at"]) for s in steps if s["what"] in ("warmup", "classStart", "classEnd")}
    played = []
    for index in sorted({i for i, _ in at}):
        seats = lab.warm_seats(lab.classes[index])
        start, end = at[index, "classStart"], at[index, "classEnd"]
        spacing = arrival_spacing(end - start, lab.learner_seats - seats)
        played.append(PlayedClass(index, seats, at[index, "warmup"], start, end, spacing))
    return sorted(played, key=lambda c: (c.start, c.index))


def lab_section(
    lab_name: str, lab: Lab, steps: Sequence[Step], observed: Iterable[Event], least_warmup: float
) -> dict[str, Any]:
    """rehearsal.json's `labs.<lab>`: the day's log (the lab's steps and the events observed of it, merged), each
    played class's figures (class_metrics; `least_warmup`, the lab's least warm-up lead, lab.least_warmup_seconds),
    and over the day (its last step plus settle()): `nodeHours`, each node of
    the lab from its launch to its deletion or the day's end; `lowerBoundNodeHours` (_lower_bound_hours); `cost`,
    USD, each node's pricePerHour over those hours; `lowerBoundCost`, USD, the lower bound's node-hours at
    lower_bound_price (None without a price)."""
    end = day_end(lab, steps)
    events = [e for e in observed if e.get("lab") == lab_name]
    for e in events:
        if e.get("what") not in OBSERVED:
            raise BadLog(f"lab {lab_name}: an event of unknown kind {e.get('what')!r}: {dict(e)}")
        if missing := [key for key in ("at", *OBSERVED[e["what"]]) if key not in e]:
            raise BadLog(f"lab {lab_name}: a {e['what']} event without {', '.join(missing)}: {dict(e)}")
    log = merged(steps, events)
    nodes = _nodes(log)
    lower_bound = _lower_bound_hours(lab, steps, end)
    price = lower_bound_price(lab)
    hours = {n.name: max((min(n.deleted or end, end) - n.launched).total_seconds(), 0.0) / 3600 for n in nodes.values()}
    return {
        "events": log,
        "classes": [
            class_metrics(
                c, steps, log, min(c.end + settle(lab), end), lab.learner_seats, least_warmup, lab.classes[c.index].zone
            )
            for c in _classes_of(lab, steps)
        ],
        **({} if lab.classes else {"trickle": trickle_metrics(lab, steps, log)}),
        "nodeHours": round(sum(hours.values()), DECIMALS),
        "lowerBoundNodeHours": round(lower_bound, DECIMALS),
        "cost": round(sum(nodes[n].price * h for n, h in hours.items()), DECIMALS),
        "lowerBoundCost": None if price is None else round(lower_bound * price, DECIMALS),
    }
