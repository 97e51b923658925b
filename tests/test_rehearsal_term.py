"""The whole term (rehearsal/term.py): the days the rehearsal plays, from the classes' calendar, and rehearsal.json's
`days` and `labs` from them. The choice and the merge are pure and tested on synthetic stacks; one test plays a
two-day term across New York's spring change on the twin (it skips in one line without the twin and its stepper,
`make twin`).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import domain.stack
import rehearsal.run
from rehearsal import report, term
from tests.conftest import as_cli_config, run_config, stack_values
from tests.support import twin_tests
from tests.support.synthetic import lab

# Monday 4 January 2027, the day of the run; New York's clocks go forward on Sunday 14 March 2027.
TODAY = datetime.date(2027, 1, 4)
NEW_YORK = "America/New_York"


def _settings(values: dict[str, Any]) -> Any:
    return domain.stack.from_cli(as_cli_config(values)).settings


def _stack(classes: list[dict[str, Any]], **labs: dict[str, Any]) -> dict[str, Any]:
    return stack_values(**{"gpulab:labs": {"term": lab(["g4dn.xlarge"], 2, classes=classes), **labs}})


# One lab, two classes a week for fourteen weeks: Mondays and Thursdays at 09:00 in New York.
FOURTEEN_WEEKS = _stack(
    [
        {
            "schedule": "0 9 * * mon,thu",
            "duration": "1h30m",
            "timeZone": NEW_YORK,
            "term": {"start": "2027-01-04", "end": "2027-04-08"},
        }
    ]
)


def _dates(days: list[term.Day]) -> list[str]:
    return [d.date.isoformat() for d in days]


def test_a_fourteen_week_term_plays_its_first_and_last_day_each_weekday_and_the_day_after_the_change() -> None:
    days = term.days(_settings(FOURTEEN_WEEKS), TODAY)
    assert _dates(days) == ["2027-01-04", "2027-01-07", "2027-03-15", "2027-04-08"]
    change = days[2]
    assert change.why == (
        "term classes[0]: its first class after the clocks of America/New_York change from UTC-05:00 to UTC-04:00",
    )
    ((index, occurrence),) = change.classes["term"]
    # 09:00 in New York is 14:00 UTC in winter and 13:00 UTC from the change on.
    assert index == 0 and occurrence.start == datetime.datetime(2027, 3, 15, 13, tzinfo=datetime.UTC)
    assert not any(d.trickle for d in days)


def test_all_days_plays_every_class_day_of_the_term() -> None:
    days = term.days(_settings(FOURTEEN_WEEKS), TODAY, every_day=True)
    assert len(days) == 28 and _dates(days)[:3] == ["2027-01-04", "2027-01-07", "2027-01-11"]


def test_a_class_without_a_term_plays_the_year_from_the_run_and_a_lab_without_classes_the_run_day() -> None:
    all_year = _stack(
        [{"schedule": "0 9 * * wed", "duration": "1h", "timeZone": NEW_YORK}],
        trickle=lab(["g4dn.xlarge"], 2),
    )
    days = term.days(_settings(all_year), TODAY)
    # The run's Monday for the lab without classes, the first Wednesday, and the first Wednesday after each change of
    # 2027 (14 March, 7 November); no last day.
    assert _dates(days) == ["2027-01-04", "2027-01-06", "2027-03-17", "2027-11-10"]
    assert [d.trickle for d in days] == [True, False, False, False]
    assert days[0].classes == {} and list(days[1].classes) == ["term"]


def _lab(first: str, index: int, hours: float) -> dict[str, Any]:
    return {
        "events": [{"at": f"{first}T09:00:00Z", "what": "classStart", "class": index}],
        "classes": [{"index": index, "day": first}],
        "nodeHours": hours,
        "lowerBoundNodeHours": 1.0,
        "cost": hours,
        "lowerBoundCost": None,
    }


def test_together_keeps_each_class_at_its_first_day_and_every_days_findings() -> None:
    days = [term.Day(datetime.date(2027, 1, d), (f"day {d}",), {}, False) for d in (4, 6, 11)]
    refused = {"object": "Pod x", "source": "charts/hub.yaml", "message": "no"}
    answers = [
        {
            "kubernetes": "v1.36.5",
            "refused": [refused],
            "jobs": [{"job": f"ns/warm-{n}"}],
            "cronJobs": [],
            "cronJobsMissed": [],
            "jobsFailed": [],
            "unsettled": [],
            "rbacDenied": [],
            "substitutions": [],
            "unscheduled": [],
            "userScheduler": None,
            "labs": labs,
            "stepWall": {"arrive": {"moments": 1, "seconds": 1.5, "waitingFor": {"batch": 0.5}}},
        }
        for n, labs in enumerate(
            [
                {"term": _lab("2027-01-04", 0, 2.0)},
                {"term": _lab("2027-01-06", 1, 1.0)},
                {"term": _lab("2027-01-11", 0, 4.0)},
            ]
        )
    ]
    done = term.together(days, answers)
    assert [d["date"] for d in done["days"]] == ["2027-01-04", "2027-01-06", "2027-01-11"]
    assert done["days"][2]["labs"]["term"]["classes"] == [{"index": 0, "day": "2027-01-11"}]
    # labs: each class once, at its first day; the Monday and the Wednesday, not the Monday after.
    assert done["labs"]["term"]["classes"] == [{"index": 0, "day": "2027-01-04"}, {"index": 1, "day": "2027-01-06"}]
    assert done["labs"]["term"]["nodeHours"] == 3.0 and done["labs"]["term"]["lowerBoundCost"] is None
    assert len(done["labs"]["term"]["events"]) == 2
    assert [j["job"] for j in done["jobs"]] == ["ns/warm-0", "ns/warm-1", "ns/warm-2"]
    assert done["refused"] == [refused]  # each twin of the same render refuses it alike: said once
    assert done["stepWall"] == {"arrive": {"moments": 3, "seconds": 4.5, "waitingFor": {"batch": 1.5}}}


def test_an_unsettled_moment_on_any_day_fails_the_rehearsal_saying_when() -> None:
    """One answer per stack (#48): a moment at which Karpenter's controllers had not settled within the stepper's
    limit, on any day played, stays in rehearsal.json's `unsettled` and fails the rehearsal, saying when and what
    was still busy; a term whose days all settled has no such line."""
    days = [term.Day(datetime.date(2027, 1, d), (f"day {d}",), {}, False) for d in (4, 6)]
    moment = {"at": "2027-01-06T09:00:10Z", "waitingFor": "the disruption queue's command"}

    def answer(unsettled: list[dict[str, str]]) -> dict[str, Any]:
        return {
            "kubernetes": "v1.36.5",
            **{key: [] for key in ("refused", "jobs", "cronJobs", "cronJobsMissed", "jobsFailed", "rbacDenied")},
            **{key: [] for key in ("substitutions", "unscheduled")},
            "unsettled": unsettled,
            "userScheduler": None,
            "labs": {},
        }

    settled = term.together(days, [answer([]), answer([])])
    assert settled["unsettled"] == [] and rehearsal.run.problems(settled) == []
    done = term.together(days, [answer([]), answer([moment])])
    assert done["unsettled"] == [moment]
    assert rehearsal.run.problems(done) == [
        "rehearsal: at 2027-01-06T09:00:10Z the controllers had not settled within the stepper's limit (the "
        "disruption queue's command): the class day is not one answer from there on (its figures could differ from "
        "run to run)"
    ]


def test_a_terms_spot_warnings_and_reclaims_are_each_labs_summed_over_its_days() -> None:
    """rehearsal.json's `spot` over a term: each count per lab (rehearsal/spot.py COUNTED: the warnings and the warned
    nodes EC2 reclaimed, their drain not finished) is the days' summed, not the first day's, and the summary's spot
    line says the term's."""
    days = [term.Day(datetime.date(2027, 1, d), (f"day {d}",), {}, False) for d in (4, 6)]
    played = {"interruptionsPerNodeHour": 3.0, "warningSeconds": 120, "seed": 48, "pricedAs": "on-demand"}

    def answer(warnings: int, reclaimed: int) -> dict[str, Any]:
        return {
            "kubernetes": "v1.36.5",
            **{key: [] for key in ("refused", "jobs", "cronJobs", "cronJobsMissed", "jobsFailed", "rbacDenied")},
            **{key: [] for key in ("substitutions", "unscheduled", "unsettled")},
            "userScheduler": None,
            "labs": {},
            "spot": {
                **played,
                "priceSource": "on-demand",
                "labs": ["held"],
                "warnings": {"held": warnings, "other": 0},
                "reclaimed": {"held": reclaimed, "other": 0},
            },
        }

    done = term.together(days, [answer(2, 0), answer(3, 1)])
    assert done["spot"]["warnings"] == {"held": 5, "other": 0}
    assert done["spot"]["reclaimed"] == {"held": 1, "other": 0}
    (line,) = [line for line in report.table(done) if line.startswith("spot (")]
    assert "5 interruption warning(s)" in line
    assert "1 warned node(s) reclaimed by EC2 at the end of the warning, their drain not finished" in line


# Two Mondays at 09:00 in New York, the second after its clocks went forward: its first day and, the last of its term,
# its first class at UTC-04:00.
ACROSS_THE_CHANGE = _stack(
    [
        {
            "schedule": "0 9 * * mon",
            "duration": "30m",
            "warmup": "20m",
            "warmSeats": 2,
            "timeZone": NEW_YORK,
            "term": {"start": "2027-03-08", "end": "2027-03-15"},
        }
    ]
)


def test_a_term_across_a_change_plays_each_day_on_the_clock_of_its_zone(tmp_path: Path) -> None:
    """Each day is played on a twin of its own: the CronJob controller runs the class's warm-up at 08:40 New York
    time on both, 13:40 UTC then 12:40 UTC, and the warm seats are ready at each start."""
    twin_tests.require_twin()
    twin_tests.require_stepper()
    run = run_config("across-the-change", as_cli_config(ACROSS_THE_CHANGE))
    out = tmp_path / "render"
    twin_tests.render_with_charts(run, out)
    done = rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region)
    assert rehearsal.run.problems(done) == []
    assert [d["date"] for d in done["days"]] == ["2027-03-08", "2027-03-15"]
    ((first,), (second,)) = [d["labs"]["term"]["classes"] for d in done["days"]]
    assert (first["day"], second["day"]) == ("2027-03-08", "2027-03-15")
    assert first["readyAtStart"] == second["readyAtStart"] == 2
    assert done["labs"]["term"]["classes"] == [first]
    warm = sorted(c["firedAt"] for c in done["cronJobs"] if c["name"].endswith("-warm"))
    assert warm == ["2027-03-08T13:40:00Z", "2027-03-15T12:40:00Z"]
