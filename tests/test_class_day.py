"""The class day's pure parts (rehearsal/class_day.py, rehearsal/report.py): the learners' timeline from a stack's
settings, the figures read from an event log, the gate's lines and the tables. The stacks and logs are synthetic, so
the counts are exact."""

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from kubespawner.slugs import safe_slug  # type: ignore[import-untyped]

import domain.stack
from domain.cost.lab_cost import usd
from domain.cost.price_book import LIST
from rehearsal import class_day, report, spot, term
from rehearsal import run as rehearse
from tests.conftest import ROOT, as_cli_config, stack_values
from tests.support import tables
from tests.support.synthetic import lab

TODAY = datetime.date(2027, 1, 4)  # a Monday, the first day of the classes' term
TERM = {"start": "2027-01-04", "end": "2027-01-25"}
# "two": g4dn.xlarge, 3 slices, 2 GPUs: 6 seats, 3 a node; a class of 4 warm seats at 09:00 for 1h and one of all 6
# at 14:00 for 2h with a 30m warmup. "none": 2 seats and no class.
STACK = stack_values(
    **{
        "gpulab:labs": {
            "two": lab(
                ["g4dn.xlarge"],
                3,
                max_gpus=2,
                classes=[
                    {"schedule": "0 9 * * mon", "duration": "1h", "warmSeats": 4, "term": TERM},
                    {"schedule": "0 14 * * mon", "duration": "2h", "warmup": "30m", "term": TERM},
                ],
            ),
            "none": lab(["g6.xlarge"], 2, max_gpus=1),
        }
    }
)


def _settings(values: dict[str, Any]) -> Any:
    return domain.stack.from_cli(as_cli_config(values)).settings


SETTINGS = _settings(STACK)
DAY = class_day.timeline(SETTINGS, term.days(SETTINGS, TODAY)[0])


def _brief(steps: list[dict[str, Any]]) -> list[tuple[str, str, int | None, str | None]]:
    return [(s["at"][11:19], s["what"], s["class"], s["learner"]) for s in steps]


def test_two_classes_warm_fill_thin_and_empty_a_lab_in_turn() -> None:
    at_nine = [("09:00:00", "arrive", 0, f"two-{n}") for n in range(1, 5)]
    at_two = [("14:00:00", "arrive", 1, f"two-{n}") for n in range(7, 13)]
    assert _brief(DAY["two"]) == [
        ("08:40:00", "warmup", 0, None),
        ("09:00:00", "classStart", 0, None),
        ("09:00:00", "release", 0, None),
        *at_nine,
        ("09:01:00", "arrive", 0, "two-5"),  # the lab's other seats one a minute
        ("09:02:00", "arrive", 0, "two-6"),
        ("09:30:00", "leave", 0, "two-1"),  # one in four, at the middle
        ("09:30:00", "leave", 0, "two-5"),
        *[("10:00:00", "leave", 0, f"two-{n}") for n in (2, 3, 4, 6)],
        ("10:00:00", "classEnd", 0, None),
        ("13:30:00", "warmup", 1, None),
        ("14:00:00", "classStart", 1, None),
        ("14:00:00", "release", 1, None),
        *at_two,
        ("15:00:00", "leave", 1, "two-7"),
        ("15:00:00", "leave", 1, "two-11"),
        *[("16:00:00", "leave", 1, f"two-{n}") for n in (8, 9, 10, 12)],
        ("16:00:00", "classEnd", 1, None),
    ]
    assert {s["at"][:10] for s in DAY["two"]} == {"2027-01-04"}
    assert all(s["lab"] == "two" and s["at"].endswith("Z") for s in DAY["two"])


def test_a_classless_labs_extra_learner_waits_for_the_first_out() -> None:
    assert _brief(DAY["none"]) == [
        ("00:00:00", "arrive", None, "none-1"),
        ("00:01:00", "arrive", None, "none-2"),
        ("00:02:00", "arrive", None, "none-3"),  # the lab holds 2
        ("00:03:00", "leave", None, "none-1"),
        ("00:04:00", "leave", None, "none-2"),
        ("00:05:00", "leave", None, "none-3"),
    ]


def test_a_big_labs_late_learners_arrive_before_mid_class() -> None:
    big = _settings(
        stack_values(
            **{
                "gpulab:labs": {
                    "big": lab(
                        ["g4dn.xlarge"],
                        8,
                        max_gpus=12,
                        classes=[{"schedule": "0 9 * * mon", "duration": "1h", "warmSeats": 1, "term": TERM}],
                    )
                }
            }
        )
    )
    steps = class_day.timeline(big, term.days(big, TODAY)[0])["big"]
    arrivals = [class_day.moment(s["at"]) for s in steps if s["what"] == "arrive"]
    assert len(arrivals) == 96
    # 95 late learners over the first half hour: 30 min / 96 apart, 18.75 s.
    assert arrivals[1] - arrivals[0] == datetime.timedelta(seconds=18.75)
    assert max(arrivals) < datetime.datetime(2027, 1, 4, 9, 30, tzinfo=datetime.UTC)
    assert [s["learner"] for s in steps if s["what"] == "leave"][:2] == ["big-1", "big-5"]


@pytest.mark.parametrize("name", ["l" * 63, "9lives", "a--b", "intro"])
def test_learner_names_are_pod_names_the_hub_keeps_as_they_are(name: str) -> None:
    learners = [class_day.learner_name(name, n) for n in (1, 2, 1536)]
    for learner in learners:
        assert len(learner) <= class_day.MAX_LEARNER_NAME
        assert safe_slug(learner, max_length=class_day.MAX_LEARNER_NAME) == learner, learner
    assert len(set(learners)) == 3
    assert learners == [class_day.learner_name(name, n) for n in (1, 2, 1536)]
    assert class_day.learner_name("intro", 7) == "intro-7"
    assert class_day.learner_name("a--b", 1) != class_day.learner_name("a-b", 1)


def _launched(
    at: str, node: str, price: float = 0.526, lab: str = "two", instance_type: str = "g4dn.xlarge"
) -> dict[str, Any]:
    return {
        "at": f"2027-01-04T{at}Z",
        "what": "nodeLaunched",
        "lab": lab,
        "node": node,
        "instanceType": instance_type,
        "capacityType": "on-demand",
        "pricePerHour": price,
    }


def _deleted(at: str, node: str, lab: str = "two") -> dict[str, Any]:
    return {"at": f"2027-01-04T{at}Z", "what": "nodeDeleted", "lab": lab, "node": node, "reason": "Empty"}


def _bound(at: str, learner: str, node: str, lab: str = "two") -> dict[str, Any]:
    return {"at": f"2027-01-04T{at}Z", "what": "bound", "lab": lab, "learner": learner, "node": node}


def _ready(at: str, learner: str, node: str, lab: str = "two") -> dict[str, Any]:
    return {"at": f"2027-01-04T{at}Z", "what": "ready", "lab": lab, "learner": learner, "node": node}


def _seated(at: str, learner: str, node: str, lab: str = "two", ready: str | None = None) -> list[dict[str, Any]]:
    """A learner bound at `at` whose notebook runs then (its node had its image), or at `ready`."""
    return [_bound(at, learner, node, lab), _ready(ready or at, learner, node, lab)]


def _disrupted(at: str, pod: str, node: str, reason: str = "Underutilized", lab: str = "two") -> dict[str, Any]:
    return {"at": f"2027-01-04T{at}Z", "what": "disrupted", "lab": lab, "pod": pod, "node": node, "reason": reason}


# The second class, all warm: two nodes warmed at 13:31, every learner bound and running at the start.
SECOND_CLASS = [
    _launched("13:31:00", "n3"),
    _launched("13:31:00", "n4"),
    *[e for n in range(7, 13) for e in _seated("14:00:00", f"two-{n}", "n3" if n < 10 else "n4")],
    _deleted("16:11:00", "n3"),
    _deleted("16:11:00", "n4"),
]
# The first class: its 4 warm learners running at the start, two-5 a second after it arrived, two-6 bound 30 s after it
# arrived and running 120 s after (its node's image pulled then).
WARM_AND_FIVE = [
    _launched("08:41:00", "n1"),
    _launched("08:41:00", "n2"),
    *[e for n in range(1, 5) for e in _seated("09:00:00", f"two-{n}", "n1" if n < 4 else "n2")],
    *_seated("09:01:01", "two-5", "n2"),
]
SIX = _seated("09:02:30", "two-6", "n2", ready="09:04:00")
AFTER = [_deleted("10:10:30", "n1"), _deleted("10:10:30", "n2"), *SECOND_CLASS]
ALL_WARM = [*WARM_AND_FIVE, *SIX, *AFTER]
# The lab's least warm-up lead on the timing table (domain/capacity/boot_timings.py; no hub, so no learner image):
# Karpenter's batch and a node's boot to its slices, 10 + 135 s. Its classes warm up 20m and 30m ahead.
LEAST = SETTINGS.labs["two"].least_warmup_seconds("two")


def _section(observed: list[dict[str, Any]], least: float = LEAST) -> dict[str, Any]:
    return class_day.lab_section("two", SETTINGS.labs["two"], DAY["two"], observed, least)


def test_a_day_whose_learners_all_bind_on_warm_nodes() -> None:
    section = _section(ALL_WARM)
    first, second = section["classes"]
    assert LEAST == 145
    assert first == {
        "index": 0,
        "day": "2027-01-04",
        "warmSeats": 4,
        "warmAtStart": 4,
        "readyAtStart": 4,
        "warmupSeconds": 1200.0,
        "leastWarmupSeconds": 145,
        "learnersArrived": 6,
        "boundWithoutNewNode": 6,
        # to the binding: 0, 0, 0, 0, 1 and 30 s, nearest rank
        "waitSeconds": {"p50": 0.0, "p95": 30.0, "max": 30.0},
        # to the notebook running: two-6's 120 s, not its binding's 30
        "waitToReadySeconds": {"p50": 0.0, "p95": 120.0, "max": 120.0},
        "coldWaitToReadySeconds": {"p50": 1.0, "p95": 120.0, "max": 120.0},
        "neverSeated": [],
        "disruptedDuringClass": 0,
        "disruptedBySpot": 0,
        "spotMoveWaitSeconds": {"p50": None, "p95": None, "max": None},
        "nodesAfterEnd": 0,  # both gone by 10:15, consolidateAfter 10m + 5m after the end
    }
    assert second["readyAtStart"] == 6 and second["waitToReadySeconds"] == {"p50": 0.0, "p95": 0.0, "max": 0.0}
    assert second["coldWaitToReadySeconds"] == {"p50": None, "p95": None, "max": None}  # all 6 seats warm
    # n1, n2 for 1h29m30s and n3, n4 for 2h40m; 0.526 USD an hour each
    assert section["nodeHours"] == 8.3167
    assert section["cost"] == round(8.316667 * 0.526, 4)
    # two g4dn.xlarge (3 seats) from 09:00 to 10:00 and from 14:00 to 16:00, at the price the day's nodes were
    # billed at: the stand-in's, Karpenter's generated list (domain/cost/prices.py copies it)
    assert section["lowerBoundNodeHours"] == 6.0
    assert LIST.on_demand["g4dn.xlarge"] == 0.526
    assert section["lowerBoundCost"] == round(6.0 * 0.526, 4) < section["cost"]
    assert "trickle" not in section  # a lab with classes has its classes' figures
    assert [e["what"] for e in section["events"][:3]] == ["warmup", "nodeLaunched", "nodeLaunched"]
    assert report.problems({"two": section}) == []


def test_a_class_short_of_warm_seats_fails_naming_them() -> None:
    short = [
        _launched("08:41:00", "n1"),  # one node warmed, for 3 of the 4 warm seats
        *_seated("09:00:00", "two-1", "n1"),
        *_seated("09:00:00", "two-2", "n1", ready="09:00:40"),  # bound at the start, its image there 40 s later
        *_seated("09:01:30", "two-3", "n1"),  # on a warm node, but after the first late learner arrived
        _launched("09:00:15", "n2"),
        *_seated("09:00:20", "two-4", "n2"),
        *_seated("09:01:02", "two-5", "n2"),
        _launched("09:02:00", "n6"),  # at the instant two-6 arrives: launched for it, not before it
        *_seated("09:02:01", "two-6", "n6"),
        _deleted("10:10:30", "n1"),
        *SECOND_CLASS,
    ]
    section = _section(short)
    first = section["classes"][0]
    assert (first["warmAtStart"], first["readyAtStart"], first["boundWithoutNewNode"]) == (2, 1, 4)
    assert first["waitSeconds"] == {"p50": 1.0, "p95": 90.0, "max": 90.0}
    assert first["waitToReadySeconds"] == {"p50": 2.0, "p95": 90.0, "max": 90.0}
    assert first["nodesAfterEnd"] == 2  # n2 and n6 never deleted
    (line,) = report.problems({"two": section})
    assert line.startswith("rehearsal: gpulab:labs.two.classes[0].warmSeats: lab two's class classes[0] starting ")
    assert "2027-01-04T09:00:00Z found 1 of its 4 warm seats ready at its start (notebooks running)" in line
    assert "wait to ready p95 90 s, max 90 s" in line


def test_a_warmup_shorter_than_the_table_fails_naming_warmup() -> None:
    """The same log, the lab's least warm-up put above the class's 20m: the line names warmup, with both figures."""
    (line, *_) = report.problems({"two": _section(ALL_WARM, least=1500)})
    assert line == (
        "rehearsal: gpulab:labs.two.classes[0].warmup: lab two's class classes[0] starting 2027-01-04T09:00:00Z warms "
        "up 1200 s ahead, less than the 1500 s its warm seats need on its lab's timings (Karpenter's batch, a node's "
        "boot to its GPU slices and its learner image's pre-pull; docs/rehearsal.md, What the clock models): 4 of its "
        "4 warm seats ready at its start (notebooks running) (wait to ready p95 120 s, max 120 s)"
    )


def test_a_learner_moved_mid_class_fails_unbound_ones_wait() -> None:
    moved = [
        *WARM_AND_FIVE,  # two-6 is never bound
        _disrupted("09:40:00", "two-4", "n2"),
        _disrupted("09:40:00", "two-5", "n2"),  # two-5 had left at 09:30: Karpenter's word is counted as said
        _launched("09:40:10", "n5"),
        _bound("09:40:30", "two-4", "n5"),
        _disrupted("10:05:00", "two-2", "n1"),  # after the end: not during the class
        *AFTER,
    ]
    section = _section(moved)
    first = section["classes"][0]
    assert first["disruptedDuringClass"] == 2
    assert first["waitSeconds"]["max"] == 3480.0  # two-6: from 09:02 to its leaving at 10:00
    assert first["neverSeated"] == ["two-6"]
    assert first["nodesAfterEnd"] == 1  # n5
    never, line = report.problems({"two": section})
    assert never == (
        "rehearsal: gpulab:labs.two.maxGpus: lab two's class classes[0] starting 2027-01-04T09:00:00Z never seated 1 "
        "of its 6 learners: two-6 never bound before they left, though the lab held no more learners than its "
        "learner seats (maxGpus x slicesPerGpu) when they arrived (wait p95 3480 s, max 3480 s)"
    )
    assert line.startswith("rehearsal: gpulab:labs.two.classes[0] (its disruption budget windows")
    assert "had 2 learner pod(s) moved before its end at 2027-01-04T10:00:00Z" in line
    assert "two-4 from n2 at 2027-01-04T09:40:00Z (Underutilized)" in line
    expired = [{**e, "reason": "Expired"} if e["what"] == "disrupted" else e for e in moved]
    _, line = report.problems({"two": _section(expired)})
    assert line.startswith("rehearsal: gpulab:labs.two.expireAfter (expiry ignores disruption budgets)")


def test_learners_moved_by_a_spot_interruption_are_counted_not_failed() -> None:
    """A spot warning for n2 at 09:20 has Karpenter drain two-4 and two-5 off it (reason spot_interrupted,
    rehearsal/spot.py): the class counts them in disruptedBySpot and its table, and no line fails it; an Underutilized
    move beside them still does, naming only that pod."""

    def by_spot(learner: str) -> dict[str, Any]:
        return _disrupted("09:20:00", learner, "n2", spot.SPOT_INTERRUPTED) | {"learner": learner}

    warning = {"at": "2027-01-04T09:20:00Z", "what": "spotWarning", "lab": "two", "node": "n2"}
    moved = [*WARM_AND_FIVE, warning | {"instanceType": "g4dn.xlarge"}, by_spot("two-4"), by_spot("two-5")]
    # two-4 runs again on n5 at 09:22:15; two-5 never does, and waits until it leaves.
    again = [
        _launched("09:20:00", "n5"),
        *_seated("09:22:00", "two-4", "n5", ready="09:22:15"),
        _deleted("10:10:30", "n5"),
    ]
    section = _section([*moved, *again, *AFTER])
    first = section["classes"][0]
    assert (first["disruptedBySpot"], first["disruptedDuringClass"]) == (2, 2)
    (five_left,) = [class_day.moment(s["at"]) for s in DAY["two"] if s["what"] == "leave" and s["learner"] == "two-5"]
    five = (five_left - class_day.moment("2027-01-04T09:20:00Z")).total_seconds()
    assert first["spotMoveWaitSeconds"] == {"p50": 135.0, "p95": five, "max": five}
    assert not [line for line in report.problems({"two": section}) if "moved" in line]
    row = next(line for line in report.table(_rehearsal({"two": section})) if line.startswith("| two | classes[0]"))
    assert [cell.strip() for cell in row.strip("|").split("|")][5:7] == ["2", "2"]  # disrupted, moved by spot
    budgeted = _section([*moved, _disrupted("09:45:00", "two-2", "n1"), *AFTER])
    (line,) = [line for line in report.problems({"two": budgeted}) if "moved" in line]
    assert "had 1 learner pod(s) moved" in line
    assert line.endswith(": two-2 from n1 at 2027-01-04T09:45:00Z (Underutilized)"), line


def test_a_pod_disrupted_twice_is_named_once_as_counted() -> None:
    twice = [*WARM_AND_FIVE, _disrupted("09:40:00", "two-4", "n2"), _disrupted("09:41:00", "two-4", "n2"), *AFTER]
    section = _section(twice)
    assert section["classes"][0]["disruptedDuringClass"] == 1
    line = report.problems({"two": section})[-1]
    assert "had 1 learner pod(s) moved" in line
    assert line.endswith(": two-4 from n2 at 2027-01-04T09:40:00Z (Underutilized)"), line


# "overlap": 2 seats (g4dn.xlarge, 2 slices, 1 GPU) and two classes of an hour, at 09:00 and at 09:30 (1 warm seat
# each: the two overlap, and more would be refused):
# at 09:30 overlap-1 leaves (the middle of the first) and overlap-3 arrives to the seat it freed; overlap-4 arrives at
# 09:31 to none, as the lab holds 2.
OVERLAP = _settings(
    stack_values(
        **{
            "gpulab:labs": {
                "overlap": lab(
                    ["g4dn.xlarge"],
                    2,
                    max_gpus=1,
                    classes=[
                        {"schedule": "0 9 * * mon", "duration": "1h", "warmSeats": 1, "term": TERM},
                        {"schedule": "30 9 * * mon", "duration": "1h", "warmSeats": 1, "term": TERM},
                    ],
                )
            }
        }
    )
)


def _overlap(*bound: str) -> dict[str, Any]:
    observed = [
        _launched("08:40:01", "n1", lab="overlap"),
        *[
            e
            for n in map(int, bound)
            for e in _seated("09:30:00" if n > 2 else "09:00:00", f"overlap-{n}", "n1", lab="overlap")
        ],
    ]
    steps = class_day.timeline(OVERLAP, term.days(OVERLAP, TODAY)[0])["overlap"]
    return class_day.lab_section("overlap", OVERLAP.labs["overlap"], steps, observed, LEAST)


def test_an_unbound_owed_learner_fails_an_extra_one_may_wait() -> None:
    first, second = _overlap("1", "2", "3")["classes"]
    assert first["neverSeated"] == second["neverSeated"] == []  # overlap-4 arrived as the third learner there
    assert report.problems({"overlap": _overlap("1", "2", "3")}) == []
    first, second = _overlap("1", "2")["classes"]
    assert (first["neverSeated"], second["neverSeated"]) == ([], ["overlap-3"])
    warm, line = report.problems({"overlap": _overlap("1", "2")})
    assert "classes[1] starting 2027-01-04T09:30:00Z found 0 of its 1 warm seats" in warm
    assert line.startswith(
        "rehearsal: gpulab:labs.overlap.maxGpus: lab overlap's class classes[1] starting 2027-01-04T09:30:00Z never "
        "seated 1 of its 2 learners: overlap-3 never bound before they left"
    ), line


def test_a_log_that_contradicts_itself_is_a_clear_error() -> None:
    with pytest.raises(class_day.BadLog, match="node n9 of lab two deleted at 2027-01-04T10:00:00Z without being up"):
        _section([_deleted("10:00:00", "n9")])
    with pytest.raises(class_day.BadLog, match="learner bound to node n9, which the log never launched"):
        _section([_bound("09:00:02", "two-1", "n9")])
    with pytest.raises(class_day.BadLog, match="lab two: a bound event without node: "):
        _section([{"at": "2027-01-04T09:00:02Z", "what": "bound", "lab": "two", "learner": "two-1"}])
    with pytest.raises(class_day.BadLog, match="lab two: an event of unknown kind 'evicted'"):
        _section([{"at": "2027-01-04T09:00:02Z", "what": "evicted", "lab": "two"}])


def _rehearsal(labs: dict[str, Any]) -> dict[str, Any]:
    """rehearsal.json of a term of one day, TODAY."""
    days = [{"date": TODAY.isoformat(), "why": [], "labs": labs}]
    return {"kubernetes": "v1.34.12", "karpenter": "v1.14.1", "labs": labs, "days": days}


def test_tables_show_seats_disruptions_waits_cost_and_bound() -> None:
    none = class_day.lab_section("none", SETTINGS.labs["none"], DAY["none"], [], LEAST)
    lines = report.table(_rehearsal({"two": _section(ALL_WARM), "none": none}))
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if line.startswith("| two")]
    assert rows[0] == ["two", "classes[0]", "2027-01-04T09:00:00Z", "4 of 4", "6", "0", "0", "120", "0"]
    assert rows[1] == ["two", "classes[1]", "2027-01-04T14:00:00Z", "6 of 6", "6", "0", "0", "0", "0"]
    assert rows[2] == ["two", "8.3167", "6", "4.3746", "3.1560"]
    # "none": one g6.xlarge (2 seats) for the 5 minutes any learner is there; no node launched in this log
    (none_row,) = [tables.cells(line) for line in lines if tables.cells(line)[:2] == ["none", "0"]]
    assert none_row == ["none", "0", "0.0833", "0.0000", usd(5 / 60 * LIST.on_demand["g6.xlarge"])]
    assert report.table(None) == [report.NOT_RUN]
    assert report.table({"kubernetes": "v1.34.12"}) == [report.NOT_PLAYED]


def test_report_prints_tables_or_a_line_for_an_unreadable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rehearsal = _rehearsal({"two": _section(ALL_WARM)})
    (tmp_path / "rehearsal.json").write_text(json.dumps(rehearsal))
    assert report.main([str(tmp_path / "rehearsal.json")]) == 0
    assert capsys.readouterr().out.splitlines() == report.table(rehearsal)
    assert report.main([]) == 0
    assert capsys.readouterr().out.splitlines() == [report.NOT_RUN]
    (tmp_path / "cut.json").write_text('{"labs": ')
    for bad in ("cut.json", "absent.json"):
        assert report.main([str(tmp_path / bad)]) == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"gpulab: cannot read the rehearsal {tmp_path / bad}: ")


def test_the_rehearsals_own_lines_carry_every_days_classes() -> None:
    """A class short on a later day of the term (its day after the clocks change, say) fails the rehearsal, though
    `labs`, each class's first day, is fine."""
    short = {"two": _section([_launched("08:41:00", "n1"), *SECOND_CLASS])}
    fine = {"two": _section(ALL_WARM)}
    days = [{"date": "2027-01-04", "why": [], "labs": fine}, {"date": "2027-01-11", "why": [], "labs": short}]
    done = {**_rehearsal(fine), "days": days, "refused": [], "rbacDenied": [], "jobsFailed": []}
    assert report.problems(fine) == []
    assert rehearse.problems(done) == report.problems(short) != []
    assert rehearse.problems({**done, "days": days[:1]}) == []


# --- a lab without classes: learnerSeats learners seated, the one more kept waiting -----------------------------------
# "none": g6.xlarge (1 GPU), 2 slices, maxGpus 1: 2 seats on one node. none-1 and none-2 arrive at 00:00 and 00:01, the
# extra none-3 at 00:02; they leave at 00:03, 00:04 and 00:05.


def _none(at: str, what: str, *args: str) -> dict[str, Any]:
    if what == "launched":
        return _launched(at, *args, price=0.8048, lab="none", instance_type="g6.xlarge")
    return {"deleted": _deleted, "bound": _bound, "ready": _ready, "disrupted": _disrupted}[what](at, *args, lab="none")


def _trickle(*observed: dict[str, Any]) -> dict[str, Any]:
    return class_day.lab_section("none", SETTINGS.labs["none"], DAY["none"], observed, LEAST)


KEPT_WAITING = [
    _none("00:00:01", "launched", "n1"),
    _none("00:00:02", "bound", "none-1", "n1"),
    _none("00:01:01", "bound", "none-2", "n1"),
    _none("00:03:00", "bound", "none-3", "n1"),  # as none-1 leaves: the seat it freed
    _none("00:15:30", "deleted", "n1"),
    # Notebooks running: none-1's at its binding, none-2's a minute after it (its image), none-3's at its binding.
    _none("00:00:02", "ready", "none-1", "n1"),
    _none("00:02:01", "ready", "none-2", "n1"),
    _none("00:03:00", "ready", "none-3", "n1"),
]


def test_a_classless_labs_extra_learner_waits_for_a_freed_seat() -> None:
    section = _trickle(*KEPT_WAITING)
    assert section["classes"] == []
    assert section["trickle"] == {
        "learnerSeats": 2,
        "maxGpus": 1,
        "learnersArrived": 3,
        "mostSeatedAtOnce": 2,
        "unseated": [],
        "extraLearner": "none-3",
        "extraArrived": "2027-01-04T00:02:00Z",
        "extraBound": "2027-01-04T00:03:00Z",
        "extraWaitSeconds": 60.0,
        "othersSeatedThen": 1,  # none-1 had left at that instant
        "mostGpusAtOnce": 1,
        "waitToReadySeconds": {"p50": 60.0, "p95": 61.0, "max": 61.0},  # 2, 61 and 60 s
    }
    assert report.problems({"none": section}) == []
    lines = report.table(_rehearsal({"none": section}))
    assert tables.table(lines, "the class day on the twin")[0] == {
        "lab (no classes)": "none",
        "seated at once": "2 of 2",
        "extra learner": "none-3",
        "extra bound (UTC)": "2027-01-04T00:03:00Z",
        "extra wait s": "60",
        "others seated then": "1",
        "p95 wait to ready s": "61",
        "most GPUs": "1 of 1",
    }


def test_an_extra_learner_beyond_seats_fails_naming_max_gpus() -> None:
    beyond = [
        *KEPT_WAITING[:3],
        _none("00:02:01", "launched", "n2"),  # a second GPU for the extra learner: past maxGpus 1
        _none("00:02:02", "bound", "none-3", "n2"),
        _none("00:15:30", "deleted", "n1"),
        _none("00:15:30", "deleted", "n2"),
    ]
    section = _trickle(*beyond)
    t = section["trickle"]
    assert (t["mostSeatedAtOnce"], t["extraBound"], t["othersSeatedThen"], t["mostGpusAtOnce"]) == (
        3,
        "2027-01-04T00:02:02Z",
        2,
        2,
    )
    seated, gpus = report.problems({"none": section})
    assert seated.startswith("rehearsal: gpulab:labs.none.maxGpus: lab none (no classes) seated its extra learner ")
    assert "none-3 at 2027-01-04T00:02:02Z (arrived 2027-01-04T00:02:00Z) beside 2 others" in seated
    assert "beyond its 2 learner seats (maxGpus x slicesPerGpu)" in seated
    assert (
        gpus == "rehearsal: gpulab:labs.none.maxGpus: lab none (no classes) ran 2 GPUs at once, more than its maxGpus 1"
    )
    assert rehearse.problems({**_rehearsal({"none": section}), "refused": [], "rbacDenied": [], "jobsFailed": []}) == [
        seated,
        gpus,
    ]


def test_classless_lab_seating_too_few_fails_naming_who_waited() -> None:
    # One seat at a time: none-2 waits for the one none-1 frees, none-3 for none-2's.
    one_seat = [
        *KEPT_WAITING[:2],
        _none("00:03:00", "bound", "none-2", "n1"),
        _none("00:04:00", "bound", "none-3", "n1"),
    ]
    t = _trickle(*one_seat)["trickle"]
    assert (t["mostSeatedAtOnce"], t["unseated"], t["othersSeatedThen"]) == (1, ["none-2"], 0)
    (line,) = report.problems({"none": _trickle(*one_seat)})
    assert line == (
        "rehearsal: gpulab:labs.none.maxGpus: lab none (no classes) seated at most 1 at once of its 2 learner seats "
        "(maxGpus x slicesPerGpu) as 3 learners trickled in: none-2 not bound before the first learner left"
    )


def test_an_extra_learner_in_the_last_seat_is_not_beyond_seats() -> None:
    # none-2 is not bound before none-1 leaves; the extra none-3 takes the seat left: two seated at once.
    section = _trickle(*KEPT_WAITING[:2], _none("00:02:01", "bound", "none-3", "n1"))
    t = section["trickle"]
    assert (t["mostSeatedAtOnce"], t["unseated"], t["othersSeatedThen"]) == (2, ["none-2"], 1)
    assert report.problems({"none": section}) == []


def test_disruption_freed_seats_spare_extras_unbound_ones_wait():
    moved = _trickle(
        *KEPT_WAITING[:3],
        _none("00:01:30", "disrupted", "default/none-1", "n1"),
        _none("00:02:01", "bound", "none-3", "n1"),
    )
    assert moved["trickle"]["othersSeatedThen"] == 1
    assert report.problems({"none": moved}) == []
    never = _trickle(*KEPT_WAITING[:3])["trickle"]
    assert (never["extraBound"], never["othersSeatedThen"], never["extraWaitSeconds"]) == (None, None, 180.0)
    row = tables.table(report.table(_rehearsal({"none": _trickle(*KEPT_WAITING[:3])})), "the class day")[0]
    assert (row["extra bound (UTC)"], row["others seated then"]) == ("never", "n/a")


def test_an_unpriced_cheapest_type_leaves_no_lower_bound() -> None:
    unpriced = _settings(stack_values(**{"gpulab:labs": {"new": lab(["p5e.48xlarge"], 2, max_gpus=8)}}))
    steps = class_day.timeline(unpriced, term.days(unpriced, TODAY)[0])["new"]
    section = class_day.lab_section("new", unpriced.labs["new"], steps, [], LEAST)
    assert section["lowerBoundNodeHours"] > 0 and section["lowerBoundCost"] is None
    *_, lab_row = [line for line in report.table(_rehearsal({"new": section})) if line.startswith("| new ")]
    assert tables.cells(lab_row)[-1] == "n/a"


def test_every_observed_event_kind_is_named_in_the_docs_of_rehearsal_json() -> None:
    """What a reader of rehearsal.json looks up: each kind of event a lab's log may hold (class_day.OBSERVED, which the
    driver checks the stepper's journal against) is in docs/rehearsal.md's `events` field, and each the stepper's
    journal writes under that name (all but `bound` and `ready`, its podBound and podReady) in the event table of
    docs/developers/rehearsal.md."""
    user = (ROOT / "docs/rehearsal.md").read_text()
    (events,) = [p for p in user.split("\n- ") if p.startswith("`events`:")]
    table = (ROOT / "docs/developers/rehearsal.md").read_text()
    assert [kind for kind in class_day.OBSERVED if f"`{kind}`" not in events] == []
    journal = [kind for kind in class_day.OBSERVED if kind not in ("bound", "ready")]
    assert [kind for kind in journal if f"| `{kind}` |" not in table] == []
