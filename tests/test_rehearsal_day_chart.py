"""The picture of a rehearsed class day (rehearsal/day_chart.py): from a synthetic rehearsal.json, the SVG written
beside it draws each series of the lab over the day, and the Mermaid charts for the job summary carry each series'
name and its values per span of the day, after the tables (python -m rehearsal.report --charts, the job summary's).

The day of lab `morning` (one class of 2 warm seats, g4dn.xlarge Ready 75 s after its launch), 08:48 to 09:36 UTC:
the warm-up at 08:48 launches n1 at 08:50 (Ready 08:51:15); at 09:00 the class starts, ada and bo arrive and bind,
ada's notebook runs at once and bo's at 09:03; cy arrives at 09:10, n2 launches at 09:11 (Ready 09:12:15), cy binds at
09:12 and runs at 09:15; n3 launches at 09:20 and is deleted at 09:20:30, never Ready; all leave at 09:30; n2 is
deleted at 09:34, n1 at 09:36.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from rehearsal import day_chart, report

SVG = "{http://www.w3.org/2000/svg}"
LAB = "morning"


def _e(at: str, what: str, **keys: Any) -> dict[str, Any]:
    return {"at": f"2027-01-04T{at}Z", "what": what, "lab": LAB, **keys}


def _node(at: str, node: str) -> dict[str, Any]:
    return _e(at, "nodeLaunched", node=node, instanceType="g4dn.xlarge", capacityType="on-demand", pricePerHour=0.526)


REHEARSAL: dict[str, Any] = {
    "kubernetes": "v1.35.0",
    "timings": {
        "g4dn.xlarge": {"launchToReadySeconds": 75, "devicePluginReadySeconds": 60, "source": "test", "labs": [LAB]},
        "images": {},
    },
    "labs": {
        LAB: {
            # The class's figures as rehearsal/class_day.py writes them, for the tables printed before the charts.
            "classes": [
                {
                    "index": 0,
                    "warmSeats": 2,
                    "readyAtStart": 1,
                    "learnersArrived": 3,
                    "disruptedDuringClass": 0,
                    "disruptedBySpot": 0,
                    "waitToReadySeconds": {"p50": 180, "p95": 300, "max": 300},
                    "nodesAfterEnd": 0,
                }
            ],
            "nodeHours": 1.2,
            "lowerBoundNodeHours": 0.7,
            "cost": 0.6312,
            "lowerBoundCost": 0.3682,
            "events": [
                _e("08:48:00", "warmup", **{"class": 0, "learner": None}),
                _node("08:50:00", "n1"),
                _e("09:00:00", "classStart", **{"class": 0, "learner": None}),
                _e("09:00:00", "release", **{"class": 0, "learner": None}),
                _e("09:00:00", "arrive", **{"class": 0, "learner": "ada"}),
                _e("09:00:00", "arrive", **{"class": 0, "learner": "bo"}),
                _e("09:00:00", "bound", learner="ada", node="n1"),
                _e("09:00:00", "bound", learner="bo", node="n1"),
                _e("09:00:00", "ready", learner="ada", node="n1"),
                _e("09:03:00", "ready", learner="bo", node="n1"),
                _e("09:10:00", "arrive", **{"class": 0, "learner": "cy"}),
                _node("09:11:00", "n2"),
                _e("09:12:00", "bound", learner="cy", node="n2"),
                _e("09:15:00", "ready", learner="cy", node="n2"),
                # n3 is deleted 30 s after its launch, before it would have been Ready: it is never counted ready.
                _node("09:20:00", "n3"),
                _e("09:20:30", "nodeDeleted", node="n3", reason="empty"),
                _e("09:30:00", "leave", **{"class": 0, "learner": "ada"}),
                _e("09:30:00", "leave", **{"class": 0, "learner": "bo"}),
                _e("09:30:00", "leave", **{"class": 0, "learner": "cy"}),
                _e("09:30:00", "classEnd", **{"class": 0, "learner": None}),
                _e("09:34:00", "nodeDeleted", node="n2", reason="empty"),
                _e("09:36:00", "nodeDeleted", node="n1", reason="empty"),
            ],
        }
    },
}


def test_the_svg_beside_rehearsal_json_draws_each_series_of_the_lab(tmp_path: Path) -> None:
    (tmp_path / "rehearsal.json").write_text(json.dumps(REHEARSAL))
    path = day_chart.write_svg(REHEARSAL, tmp_path)
    assert path == tmp_path / "rehearsal.svg"
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    (lab,) = root.iter(f"{SVG}g")
    assert lab.get("data-lab") == LAB
    lines = {p.get("data-series"): p for p in lab.iter(f"{SVG}polyline")}
    assert list(lines) == list(day_chart.SERIES)
    values = {name: dict(v.split("=") for v in p.get("data-values", "").split()) for name, p in lines.items()}
    assert values["nodes launching"]["08:50:00"] == "1"
    assert values["nodes launching"]["08:51:15"] == "0"
    assert values["nodes ready"]["08:51:15"] == "1"
    assert values["nodes ready"]["09:12:15"] == "2"
    assert values["nodes launching"]["09:20:00"] == "1"
    assert values["nodes launching"]["09:20:30"] == "0"
    assert values["nodes ready"]["09:20:30"] == "2"
    assert max(map(int, values["nodes ready"].values())) == 2
    assert values["nodes ready"]["09:34:00"] == "1"
    assert values["nodes ready"]["09:36:00"] == "0"
    assert values["seats warm"]["08:48:00"] == "2"
    assert values["seats warm"]["09:00:00"] == "0"
    assert values["seats taken"]["09:00:00"] == "2"
    assert values["seats taken"]["09:12:00"] == "3"
    assert values["seats taken"]["09:30:00"] == "0"
    assert values["learners waiting"]["09:00:00"] == "1"
    assert values["learners waiting"]["09:03:00"] == "0"
    assert values["learners waiting"]["09:10:00"] == "1"
    assert values["learners waiting"]["09:15:00"] == "0"
    # Each line is drawn (a point per moment and step) and the legend names every series.
    assert all(len(p.get("points", "").split()) > 1 for p in lines.values())
    legend = [t.text for t in lab.iter(f"{SVG}text")]
    assert all(name in legend for name in day_chart.SERIES)


def test_the_mermaid_charts_name_each_series_with_its_values_per_span(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "rehearsal.json"
    path.write_text(json.dumps(REHEARSAL))
    assert report.main(["--charts", str(path)]) == 0
    out = capsys.readouterr().out
    tables, charts_text = out.split("```mermaid", 1)
    assert "| morning | classes[0] | 2027-01-04T09:00:00Z |" in tables
    blocks = re.findall(r"```mermaid\n(.*?)```", out, re.S)
    assert charts_text
    charts = {}
    for block in blocks:
        assert block.startswith("xychart-beta\n")
        title = re.search(r'title "lab morning: (.+?) \(2027-01-04, UTC\)"', block)
        line = re.search(r"line \[(.*)\]", block)
        axis = re.search(r"x-axis \[(.*)\]", block)
        assert title and line and axis
        charts[title.group(1)] = [int(v) for v in line.group(1).split(", ")]
        # 24 spans of 2 minutes from 08:48.
        assert axis.group(1).split(", ")[:3] == ['"08:48"', '"08:50"', '"08:52"']
    assert list(charts) == list(day_chart.SERIES)
    # The most in each 2-minute span: bo waits 09:00-09:03 (spans 09:00, 09:02), cy 09:10-09:15 (09:10 to 09:14).
    assert charts["learners waiting"] == [0] * 6 + [1, 1] + [0] * 3 + [1, 1, 1] + [0] * 10
    assert charts["seats warm"] == [2] * 6 + [0] * 18
    assert charts["nodes launching"] == [0, 1] + [0] * 9 + [1, 1] + [0] * 3 + [1] + [0] * 7
    assert charts["nodes ready"] == [0, 1] + [1] * 9 + [1, 2] + [2] * 10 + [1]
    assert charts["seats taken"] == [0] * 6 + [2] * 6 + [3] * 9 + [0] * 3


def test_a_labs_own_boot_times_its_nodes_ready_where_labs_differ() -> None:
    """Where labs time one instance type differently (rehearsal.json timings' `byLab`), a node is Ready at its own
    lab's figure: 45 s later here, at 08:52:00 rather than 08:51:15."""
    figures = REHEARSAL["timings"]["g4dn.xlarge"]
    slower = {**figures, "launchToReadySeconds": 120}
    timings = {"g4dn.xlarge": {"byLab": {"other": figures, LAB: slower}}, "images": {}}
    for given, at in ((REHEARSAL["timings"], "08:51:15"), (timings, "08:52:00")):
        moments, values = day_chart.series(LAB, REHEARSAL["labs"][LAB], given)
        ready = dict(zip((m.strftime("%H:%M:%S") for m in moments), values["nodes ready"], strict=True))
        assert ready[at] == 1 and min(t for t, n in ready.items() if n) == at
