"""The dashboard's picture in docs/metrics.md (reports/dashboard_picture.py): its lines are the answers of the
dashboard's own panel queries, evaluated by Prometheus's engine after gpulab's rules ran over the synthetic day; a
changed query changes the picture, and the committed picture is the current one."""

import dataclasses
import xml.etree.ElementTree as ET

import pytest

from components.metrics import dashboard, recording_rules
from reports import dashboard_picture

NS = "{http://www.w3.org/2000/svg}"


def drawn_series(drawn: str) -> dict[str, list[tuple[str, str, str]]]:
    """Each panel's lines (series name, points, hover title: its span and the most it reaches), by panel title."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for line in ET.fromstring(drawn).iter(f"{NS}polyline"):
        found.setdefault(line.get("data-panel", ""), []).append(
            (line.get("data-series", ""), line.get("points", ""), line.findtext(f"{NS}title", ""))
        )
    return found


def built() -> None:
    if not dashboard_picture.BINARY.is_file():
        pytest.skip(f"no dayeval at {dashboard_picture.BINARY}: `make promtool` builds it (Go 1.26)")


def test_each_value_is_drawn_at_its_time_and_height_and_a_gap_cuts_the_line():
    panel = dashboard.PANELS[0]
    hour = 3600
    answer = [
        {
            "metric": {"lab": "intro"},
            "values": [[9 * hour, 0], [9 * hour + 300, 3], [9 * hour + 600, 6], [10 * hour, 2]],
        }
    ]
    lines = drawn_series(dashboard_picture.svg([(panel, answer)]))[panel.title]
    # 09:00 is 2/12 of 07:00-19:00 across the plot (56 to 736 px); 6, the highest, at its top (68 px), 0 at its
    # bottom (146 px); 10:00 is an hour after the last point, so a line of its own.
    assert [points for _, points, _ in lines] == ["169.3,146.0 174.1,107.0 178.8,68.0", "226.0,120.0"]


def test_the_pictured_panels_are_the_dashboards_own():
    titles = {p.title for p in dashboard.PANELS}
    assert set(dashboard_picture.PICTURED) <= titles
    assert [p.query for p in dashboard_picture.panels()] == [
        p.query for p in dashboard.PANELS if p.title in dashboard_picture.PICTURED
    ]


def most(drawn: str) -> dict[tuple[str, str], float]:
    """The most each line of each panel reaches, as its hover title says it, by (panel, series)."""
    found = {}
    for line in ET.fromstring(drawn).iter(f"{NS}polyline"):
        title = line.findtext(f"{NS}title", "")
        key = (line.get("data-panel", ""), line.get("data-series", ""))
        found[key] = max(found.get(key, 0.0), float(title.rsplit("at most ", 1)[1]))
    return found


def test_the_picture_shows_the_days_seats_as_the_queries_answer():
    built()
    found = most(dashboard_picture.picture())
    # The synthetic day (reports/dashboard_picture.py DAY): intro's six learners, hedy idle then culled, linus
    # unmeasured; vision's four, niklaus idle and never culled (its lab has no gpuIdleTimeout).
    assert {k: v for k, v in found.items() if not k[0].startswith("GPU memory")} == {
        ("Seats in use", "intro"): 6,
        ("Seats in use", "vision"): 4,
        ("Idle seats", "intro"): 1,
        ("Idle seats", "vision"): 1,
        ("Unmeasured seats", "intro"): 1,
        ("Unmeasured seats", "vision"): 0,
        ("Culled seats, last hour", "intro"): 1,
        ("Culled seats, last hour", "vision"): 0,
    }
    # Each measured seat's memory; linus's series has no pod UID, so no line.
    assert {k[1]: v for k, v in found.items() if k[0] == "GPU memory per seat"} == {
        f"{learner.lab} jupyter-{learner.name}": learner.memory for learner in dashboard_picture.DAY if learner.uid
    }


def test_a_changed_panel_query_changes_the_picture(monkeypatch):
    built()
    before = drawn_series(dashboard_picture.picture())
    swapped = [
        dataclasses.replace(p, query=p.query.replace(recording_rules.SEATS_IDLE, recording_rules.SEATS_IN_USE))
        if p.title == "Idle seats"
        else p
        for p in dashboard.PANELS
    ]
    monkeypatch.setattr(dashboard, "PANELS", tuple(swapped))
    after = drawn_series(dashboard_picture.picture())
    assert after["Idle seats"] != before["Idle seats"]
    # The idle panel now draws what the seats-in-use query answers: the same series, spans and values.
    assert [(name, title) for name, _, title in after["Idle seats"]] == [
        (name, title) for name, _, title in before["Seats in use"]
    ]
    assert {t: after[t] for t in after if t != "Idle seats"} == {t: before[t] for t in before if t != "Idle seats"}


def test_the_picture_in_the_docs_is_the_current_one():
    built()
    assert dashboard_picture.SVG.read_text() == dashboard_picture.picture(), (
        "docs/metrics-day.svg is not what the dashboard's queries draw now: python -m reports.dashboard_picture"
    )
    assert dashboard_picture.SVG.name in (dashboard_picture.ROOT / "docs" / "metrics.md").read_text()
