"""The year-long proof: on every day of 2027, in Europe/Berlin, America/New_York, Australia/Sydney (southern
hemisphere), Asia/Kolkata (half an hour off UTC, no daylight saving) and Australia/Lord_Howe (a half-hour change), the
rendered CronJobs and NodePool budgets of tests/support/synthetic.py TIME_ZONE_STACK do what each class's calendar says
(domain/time/class_calendar.py), read by the code the cluster runs: planner/classyear (Go) answers with Karpenter
1.14.1's own budget code (NodePool.GetAllowedDisruptionsByReason with a clock set to the minute) and robfig/cron v3 as
Karpenter and kube-controller-manager v1.34 call it, and each CronJob's own container command is run for each firing.

- Every minute of every class, from its warm-up to its end, the lab's NodePool allows no Drifted or Underutilized
  disruption, and from its warm-up until 15 minutes into it no Empty one.
- No window holds a day longer than domain/time/budget_windows.py says: a class day at most its window and the change of
  offset, a day the schedule names but the term does not at most that within the term's months, any other day not at
  all. And a NodePool with the planted defect (windows at the winter offset all year) fails the first check.
- Each warm CronJob calls kubectl exactly `warmup` before each start of the class and at no other time, each release
  CronJob at each start: robfig's firings with spec.timeZone, through the class-day check of the term's classes.
- The tz data agree: the zone files robfig reads here (the pinned tzdata package's, through $ZONEINFO), Go's own copy
  (the one time/tzdata embeds in kube-controller-manager) and Python's zoneinfo, change for change.

The Go program is built once per session (about half a minute with the planner's modules in Go's caches); the run
takes a few seconds. Without Go these tests skip.
"""

import bisect
import datetime
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import tzdata

from components.karpenter.class_seats_manifests import budget, class_key
from domain.stack.model import LabClass
from domain.time import budget_windows, class_calendar, durations
from domain.time import zones as time_zones
from planner import plan
from tests.conftest import run_values
from tests.support.class_jobs import patches, requires_sh
from tests.support.synthetic import TIME_ZONE_STACK

UTC = datetime.UTC
YEAR = 2027
# The whole year, with room for a class on 1 January in Kolkata (20:00 UTC the day before) and for windows that
# end after 31 December.
FROM, TO = datetime.datetime(2026, 12, 30, tzinfo=UTC), datetime.datetime(2028, 1, 2, tzinfo=UTC)
ZONES = ["Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata", "Australia/Lord_Howe"]
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
CRON_JOB = "kubernetes:batch/v1:CronJob"
MOVES, EMPTY = budget_windows.MOVES_LEARNERS, budget_windows.EMPTY


@pytest.fixture(scope="session")
def classyear() -> Path:
    try:
        go = plan.go()
    except plan.Unavailable as missing:
        pytest.skip(str(missing))
    binary = plan.MODULE / "bin" / "classyear"
    done = subprocess.run(
        [go, "build", "-o", str(binary), "./classyear"], cwd=plan.MODULE, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return binary


@pytest.fixture(scope="module")
def zones():
    return run_values(TIME_ZONE_STACK)


def minute(moment: datetime.datetime) -> int:
    return int(moment.timestamp()) // 60


def in_span(lab_class: LabClass) -> list[class_calendar.Occurrence]:
    """The class's occurrences whose warm-up and end fall within the span."""
    days = (FROM.date() - datetime.timedelta(days=1), TO.date())
    found = lab_class.occurrences() if lab_class.term else lab_class.occurrences(*days)
    return [o for o in found if o.warm >= FROM and o.end <= TO]


def held(occurrences: list[class_calendar.Occurrence], reasons: tuple[str, ...]) -> list[range]:
    """The minutes each class needs held for the reasons: warm-up to end, or to its first ARRIVAL_MINUTES for Empty."""
    arrival = datetime.timedelta(minutes=budget_windows.ARRIVAL_MINUTES)
    return [
        range(minute(o.warm), minute(min(o.start + arrival, o.end)))
        if reasons == EMPTY
        else range(minute(o.warm), minute(o.end))
        for o in occurrences
    ]


def edges(ranges: list[range]) -> list[int]:
    """The first and last minute of each range: where Karpenter itself is asked."""
    return [at for r in ranges for at in (r[0], r[-1])]


def unheld(ranges: list[range], windows: list[list[int]]) -> list[int]:
    """The minutes of the ranges outside every window."""
    starts = [w[0] for w in windows]
    return [
        at
        for r in ranges
        for at in r
        if (i := bisect.bisect_right(starts, at) - 1) < 0 or not windows[i][0] <= at < windows[i][1]
    ]


def class_pool(pool: dict[str, Any], name: str, budgets: list[dict[str, Any]]) -> dict[str, Any]:
    """The lab's NodePool with other budgets: one class's alone, or the planted defect's."""
    return {
        **pool,
        "metadata": {**pool["metadata"], "name": name},
        "spec": {**pool["spec"], "disruption": {**pool["spec"]["disruption"], "budgets": budgets}},
    }


def winter_all_year(lab_class: LabClass) -> list[dict[str, Any]]:
    """The planted defect: the class's windows at its winter (standard, lesser) offset, in every month."""
    winter = min(o.offset for o in in_span(lab_class))
    minutes = durations.duration_minutes(lab_class.warmup), durations.duration_minutes(lab_class.duration)
    return [budget(w) for w in budget_windows.windows(lab_class.start, *minutes, None, winter, False)]


@pytest.fixture(scope="module")
def proof(classyear, zones) -> dict[str, Any]:
    """planner/classyear's answer for every lab's NodePool, each class's own budgets and the planted defect's."""
    pools, asked = [], {}
    for name, lab in zones.stack.settings.labs.items():
        pool = zones.one(NODE_POOL, f"nodepool-{name}").inputs
        every = [o for c in lab.classes for o in in_span(c)]
        pools.append(pool)
        asked[name] = {r: edges(held(every, reasons_of(r))) for r in REASONS}
        budgets, at = pool["spec"]["disruption"]["budgets"], len(lab.disruption.budgets)
        for i, lab_class in enumerate(lab.classes):
            own = budgets[at : at + len(lab_class.budget_windows)]
            at += len(lab_class.budget_windows)
            pools.append(class_pool(pool, f"{name}-class-{i}", own))
            pools.append(class_pool(pool, f"{name}-class-{i}-winter", winter_all_year(lab_class)))
            asked[f"{name}-class-{i}-winter"] = {"Drifted": edges(held(in_span(lab_class), MOVES))}
    jobs = [
        {
            "name": r.inputs["metadata"]["name"],
            "schedule": r.inputs["spec"]["schedule"],
            "timeZone": r.inputs["spec"]["timeZone"],
        }
        for r in zones.of_type(CRON_JOB)
    ]
    request = {
        "from": FROM.isoformat(),
        "to": TO.isoformat(),
        "nodePools": pools,
        "cronJobs": jobs,
        "zones": ZONES,
        "minutes": asked,
    }
    # robfig loads spec.timeZone as kube-controller-manager does, with time.LoadLocation: $ZONEINFO first, here the
    # pinned tzdata package's files, the ones Python reads.
    env = {**os.environ, "ZONEINFO": str(Path(tzdata.__file__).parent / "zoneinfo")}
    done = subprocess.run(
        [str(classyear)], input=json.dumps(request), env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


REASONS = ("Drifted", "Underutilized", "Empty")


def reasons_of(reason: str) -> tuple[str, ...]:
    return EMPTY if reason in EMPTY else MOVES


def classes(zones) -> list[tuple[str, int, LabClass]]:
    return [(name, i, c) for name, lab in zones.stack.settings.labs.items() for i, c in enumerate(lab.classes)]


def test_the_proof_covers_each_zone_and_every_day_of_the_year(zones):
    assert sorted({c.zone for _, _, c in classes(zones)}) == sorted(ZONES)
    assert FROM.date() < datetime.date(YEAR, 1, 1) and datetime.date(YEAR, 12, 31) < TO.date()


def test_karpenters_budgets_hold_every_minute_of_every_class(zones, proof):
    for name, lab in zones.stack.settings.labs.items():
        every = [o for c in lab.classes for o in in_span(c)]
        for reason in REASONS:
            answer = proof["budgets"][name][reason]
            # Every minute, in the windows robfig fires as Karpenter calls it; Karpenter's own answer at the first and
            # last minute of each class, as at every edge of every window (next test): between edges nothing changes.
            assert unheld(held(every, reasons_of(reason)), answer["active"]) == [], (name, reason)
            assert answer["allowed"] and set(answer["allowed"]) == {0}, (name, reason)


def test_karpenters_windows_are_robfigs_firings_to_the_minute(zones, proof):
    # At both edges of every window, Karpenter's own answer agrees with the windows read from robfig's firings.
    assert {
        pool: {r: a["edgeMismatches"] for r, a in answers.items()} for pool, answers in proof["budgets"].items()
    } == {pool: {r: [] for r in answers} for pool, answers in proof["budgets"].items()}


def test_winter_offset_windows_all_year_leave_summer_unheld(zones, proof):
    # The planted defect: every zone with daylight saving has class minutes Karpenter would disrupt.
    missed: dict[str, int] = {}
    for name, i, lab_class in classes(zones):
        answer = proof["budgets"][f"{name}-class-{i}-winter"]["Drifted"]
        missed[lab_class.zone] = missed.get(lab_class.zone, 0) + len(
            unheld(held(in_span(lab_class), MOVES), answer["active"])
        )
        # Karpenter itself would disrupt a summer class at its first or last minute.
        assert (0 in answer["allowed"]) and (set(answer["allowed"]) != {0}) == (lab_class.zone != "Asia/Kolkata")
    assert {zone: count > 0 for zone, count in missed.items()} == {z: z != "Asia/Kolkata" for z in ZONES}


def protected_by_day(windows: list[list[int]], zone: str) -> dict[datetime.date, int]:
    """The held minutes of each local day of the year."""
    held: dict[datetime.date, int] = {}
    for first, last in windows:
        for at in range(first, last):
            day = datetime.datetime.fromtimestamp(at * 60, UTC).astimezone(time_zones.zone(zone)).date()
            held[day] = held.get(day, 0) + 1
    return held


def test_no_window_holds_a_day_longer_than_the_scheme_says(zones, proof):
    """domain/time/budget_windows.py: each offset's windows fire on the days the schedule names, in the UTC months in
    which the class has a window at that offset; so a class day is held for its window and at most the change of offset,
    a day the schedule names without class for as long where a window falls in such a month, any other day not at
    all."""
    for name, i, lab_class in classes(zones):
        occurrences = in_span(lab_class)
        offsets = {o.offset for o in occurrences}
        spread = int((max(offsets) - min(offsets)).total_seconds()) // 60
        times = [datetime.timedelta(minutes=t) for t in lab_class.start.times_of_day()]
        class_days = {o.local(o.start).date() for o in occurrences}
        warmup, duration = (durations.duration_minutes(v) for v in (lab_class.warmup, lab_class.duration))
        arrival = warmup + min(budget_windows.ARRIVAL_MINUTES, duration)
        for reasons, lead, window in ((MOVES, warmup, warmup + duration), (EMPTY, warmup, arrival)):
            ahead = datetime.timedelta(minutes=lead)
            months = {(o.offset, (o.start - ahead).month) for o in occurrences}
            held = protected_by_day(proof["budgets"][f"{name}-class-{i}"][reasons[0]]["active"], lab_class.zone)
            day = datetime.date(YEAR, 1, 1)
            while day.year == YEAR:
                midnight = datetime.datetime.combine(day, datetime.time())
                fires = lab_class.start.matches_day(day) and any(
                    (o, (midnight + t - o - ahead).month) in months for o in offsets for t in times
                )
                most = len(times) * (window + spread) if fires else 0
                least = len(times) * window if day in class_days else 0
                assert least <= held.get(day, 0) <= most, (name, i, reasons, day, held.get(day, 0), least, most)
                day += datetime.timedelta(days=1)


@requires_sh
def test_warm_jobs_patch_the_warmup_early_release_jobs_at_start(zones, proof):
    jobs = {r.inputs["metadata"]["name"]: r.inputs for r in zones.of_type(CRON_JOB)}
    for name, _, lab_class in classes(zones):
        for suffix, expected in (
            ("warm", {o.warm for o in in_span(lab_class)}),
            ("release", {o.start for o in in_span(lab_class)}),
        ):
            job = f"{class_key(lab_class)}-{suffix}"
            (container,) = jobs[job]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
            fired = {f"{job}-{at // 60}": datetime.datetime.fromtimestamp(at, UTC) for at in proof["fires"][job]}
            ran = patches(container, list(fired))
            assert {fired[j] for j in ran} == {e for e in expected if FROM <= e < TO}, (name, job)


def python_changes(zone: str) -> list[list[int]]:
    """The zone's offset at FROM and each change of it before TO, to the minute, in Python's zoneinfo."""

    def offset(at: datetime.datetime) -> int:
        found = at.astimezone(time_zones.zone(zone)).utcoffset()
        assert found is not None
        return int(found.total_seconds())

    changes, hour, step = [[minute(FROM), offset(FROM)]], datetime.timedelta(hours=1), datetime.timedelta(minutes=1)
    at = FROM
    while at < TO:
        if offset(at + hour) != offset(at):
            moment = at + step
            while offset(moment) == offset(at):
                moment += step
            changes.append([minute(moment), offset(moment)])
        at += hour
    return changes


def test_robfig_go_and_python_tz_data_agree_change_for_change(proof):
    for zone in ZONES:
        changes = {source: [[c["at"], c["offset"]] for c in found] for source, found in proof["zones"][zone].items()}
        assert changes == {"loaded": python_changes(zone), "go": python_changes(zone)}, zone
    # Two changes a year in each zone with daylight saving, none in Kolkata.
    assert {zone: len(proof["zones"][zone]["go"]) - 1 for zone in ZONES} == {
        z: 0 if z == "Asia/Kolkata" else 2 for z in ZONES
    }
    assert proof["zoneinfo"] == str(Path(tzdata.__file__).parent / "zoneinfo")
