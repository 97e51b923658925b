"""The days of a term the rehearsal plays (docs/rehearsal.md, "The whole term"): by default the class days that may
play differently from each other (domain/time/class_calendar.py distinct_days: each class's first day and the last of
its term, its first class on each weekday, its first after each change of its zone's clocks), with `--all-days` every
class day; each day on a twin of its own, from an empty cluster, as the class day always was.

A class with a term is played over its term, whatever the day of the run; a class without one repeats all year and is
played over the YEAR from the day of the run, in which every daylight-saving change of its zone falls once. Labs without
classes trickle in on the day of the run (rehearsal/class_day.py), with the classes of that day if it is one.

Pure: the days and what each plays, from a stack's settings; rehearsal/run.py plays them.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from domain.cost.lab_cost import DECIMALS
from domain.stack.model import Settings
from domain.time.class_calendar import ClassTerm, Occurrence, all_days, class_day, distinct_days
from rehearsal import spot
from rehearsal.karpenter import add_walls, rounded_walls

# A class without a term is rehearsed over this many days from the day of the run: a year and a day, so that each
# change of its zone's clocks (once a year each way, on a weekday rule such as "the last Sunday of March", whose dates
# move by a day or two from year to year) falls in it once at least.
YEAR = 366

# One lab's classes played on a day: (class index, its occurrence), in order of start.
Played = tuple[tuple[int, Occurrence], ...]


@dataclass(frozen=True)
class Day:
    """One day the rehearsal plays: its date, why it was chosen, each lab's classes that start on it (on the clock of
    each class's zone), and whether labs without classes trickle in on it."""

    date: datetime.date
    why: tuple[str, ...]
    classes: Mapping[str, Played]
    trickle: bool


def class_terms(settings: Settings, today: datetime.date) -> dict[tuple[str, int], ClassTerm]:
    """Each class of each lab, by (lab, index), with its occurrences: over its term, or over the YEAR from `today`."""
    terms = {}
    for name, lab in sorted(settings.labs.items()):
        for index, lab_class in enumerate(lab.classes):
            if lab_class.term is None:
                found = lab_class.occurrences(today, today + datetime.timedelta(days=YEAR - 1))
            else:
                found = lab_class.occurrences()
            terms[name, index] = ClassTerm(f"{name} classes[{index}]", tuple(found), lab_class.term is not None)
    return terms


def days(settings: Settings, today: datetime.date, every_day: bool = False) -> list[Day]:
    """The days to play, in order of date: the distinct class days (every class day with `every_day`), and the day of
    the run where a lab has no classes."""
    terms = class_terms(settings, today)
    chosen = dict((all_days if every_day else distinct_days)(terms.values()))
    trickles = any(not lab.classes for lab in settings.labs.values())
    if trickles:
        chosen[today] = (*chosen.get(today, ()), "the day of the run, when labs without classes trickle in")
    played = []
    for date in sorted(chosen):
        classes: dict[str, list[tuple[int, Occurrence]]] = {}
        for (lab, index), term in terms.items():
            # A class that starts twice on one day plays its first start (the class day's figures are per class).
            first = next((o for o in term.occurrences if class_day(o) == date), None)
            if first is not None:
                classes.setdefault(lab, []).append((index, first))
        played.append(
            Day(
                date,
                chosen[date],
                {lab: tuple(sorted(c, key=lambda p: (p[1].start, p[0]))) for lab, c in classes.items()},
                trickles and date == today,
            )
        )
    return played


def first_classes(settings: Settings, today: datetime.date) -> dict[str, Played]:
    """Each class's first occurrence (of its term, or from `today`), by lab: the class runs whose CronJobs the
    rehearsal runs without a class day."""
    firsts: dict[str, list[tuple[int, Occurrence]]] = {}
    for (lab, index), term in class_terms(settings, today).items():
        if term.occurrences:
            firsts.setdefault(lab, []).append((index, term.occurrences[0]))
    return {lab: tuple(sorted(c, key=lambda p: (p[1].start, p[0]))) for lab, c in firsts.items()}


def _once(entries: Iterable[Any]) -> list[Any]:
    """Entries each once, in order: what every twin says alike of the same render (a refused object, a substitution)
    is said once."""
    kept: list[Any] = []
    for entry in entries:
        if entry not in kept:
            kept.append(entry)
    return kept


def _summed(days: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Each lab's count over the days."""
    total: dict[str, int] = {}
    for day in days:
        for lab, count in day.items():
            total[lab] = total.get(lab, 0) + count
    return dict(sorted(total.items()))


def first_days(labs_by_day: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """rehearsal.json's `labs`: each lab's section (rehearsal/class_day.py lab_section) over the days on which one of
    its classes is first played, or it trickles: their events one after the other, each class's entry of its first
    day, the node-hours and costs summed. A lab with classes on Mondays and Wednesdays so reads as one day from its
    Monday class to its Wednesday class did before the whole term was played."""
    labs: dict[str, dict[str, Any]] = {}
    for day in labs_by_day:
        for name, lab in day.items():
            seen = labs.get(name)
            if seen is None:
                labs[name] = dict(lab)
                continue
            new = [c for c in lab["classes"] if c["index"] not in {s["index"] for s in seen["classes"]}]
            if not new:
                continue
            seen["events"] = [*seen["events"], *lab["events"]]
            seen["classes"] = sorted([*seen["classes"], *new], key=lambda c: c["index"])
            for key in ("nodeHours", "lowerBoundNodeHours", "cost", "lowerBoundCost"):
                both = (seen[key], lab[key])
                seen[key] = None if None in both else round(both[0] + both[1], DECIMALS)
    return labs


def together(days: Sequence[Day], answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """rehearsal.json from the days played, each day's answer (rehearsal/run.py on_twin) beside it: `days`, each with
    its date, why and labs; `labs`, each lab over its first days (first_days); every finding of every day (jobs,
    CronJob runs, refusals, denials, unsettled moments), what every twin says alike once; the stepWall and the spot
    counts (rehearsal/spot.py COUNTED: warnings, nodes reclaimed) of all days summed; the user-scheduler of the first
    day, or of the first day it did not run."""
    first = answers[0]
    walls: dict[str, dict[str, Any]] = {}
    for answer in answers:
        for kind, wall in answer.get("stepWall", {}).items():
            walls[kind] = wall if kind not in walls else add_walls(walls[kind], wall)
    schedulers = [a["userScheduler"] for a in answers if a["userScheduler"]]
    together = {
        **first,
        **{key: [e for a in answers for e in a.get(key, [])] for key in ("jobs", "cronJobs", "cronJobsMissed")},
        **{key: [e for a in answers for e in a.get(key, [])] for key in ("jobsFailed", "unsettled")},
        **{key: _once(e for a in answers for e in a.get(key, [])) for key in _SAID_ALIKE},
        "userScheduler": next((s for s in schedulers if s["problem"]), schedulers[0] if schedulers else None),
        "labs": first_days([a["labs"] for a in answers if "labs" in a]),
        "stepWall": {kind: rounded_walls(wall) for kind, wall in sorted(walls.items())},
    }
    if spots := [a["spot"] for a in answers if "spot" in a]:
        # Every day's stepper plays spot alike (rate, seed, price); the term's counts are the days' summed.
        together["spot"] = {**spots[0], **{key: _summed(one[key] for one in spots) for key in spot.COUNTED}}
    if days:
        together["days"] = [
            {"date": d.date.isoformat(), "why": list(d.why), "labs": a.get("labs", {})}
            for d, a in zip(days, answers, strict=True)
        ]
    return together


# What each twin of the same render says alike, said once: the refusals of the render's objects, its denials, the
# substitutions, and learners naming a scheduler the twin does not run.
_SAID_ALIKE = ("refused", "rbacDenied", "substitutions", "unscheduled")
