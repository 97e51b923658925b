"""A picture of the rehearsed class day (issue 48): per lab, over the day's timeline, its nodes launching and ready,
its seats held warm and taken, and its learners waiting, from rehearsal.json's `labs` and `timings` alone.

Written as an SVG beside rehearsal.json (rehearsal/run.py) and as Mermaid charts for the pull-request workflow's job
summary (.ci/rehearse), which GitHub draws:

    python -m rehearsal.report --charts <dir>/rehearsal.json

What each series counts, at a moment of the lab's log (docs/rehearsal.md, A picture of the day):
- nodes launching: launched (nodeLaunched) and not yet Ready, launchToReadySeconds of its instance type later
  (rehearsal.json `timings`), nor deleted;
- nodes ready: Ready and not deleted;
- seats warm: the warmSeats of each class between its warm-up and its release at the start (the CronJobs' steps);
- seats taken: learners bound (their first binding) who have not left;
- learners waiting: learners arrived whose notebook does not run yet (their first `ready`) and who have not left.
"""

import datetime
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SVG_NAME = "rehearsal.svg"
SERIES = ("nodes launching", "nodes ready", "seats warm", "seats taken", "learners waiting")
# One colour per series, in SERIES' order (the Okabe-Ito palette, told apart with the common colour blindnesses).
COLOURS = ("#E69F00", "#0072B2", "#009E73", "#CC79A7", "#D55E00")
# The Mermaid charts' x axis: a category per column, so the day is cut into this many equal spans, each showing the
# most its series reached in it (a wait of a minute in a day of hours still shows).
COLUMNS = 24
# The SVG's panel per lab, in pixels.
WIDTH, HEIGHT, MARGIN, LEGEND = 720, 220, 40, 16

Changes = list[tuple[datetime.datetime, int]]


def _at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).astimezone(datetime.UTC)


def _changes(lab_name: str, lab: Mapping[str, Any], timings: Mapping[str, Any]) -> dict[str, Changes]:
    """Each series' +1/-1 steps (seats warm: +/- warmSeats) over the lab's log."""
    changes: dict[str, Changes] = {name: [] for name in SERIES}
    warm = {c["index"]: c["warmSeats"] for c in lab["classes"]}
    ready_at: dict[str, datetime.datetime] = {}  # each node's Ready, by name, until it is deleted
    bound: set[str] = set()
    ready: set[str] = set()
    waiting: set[str] = set()
    for e in lab["events"]:
        at, what = _at(e["at"]), e["what"]
        if what == "nodeLaunched":
            timed = timings[e["instanceType"]]
            # One entry for the labs that time the type alike, else each lab's (rehearsal/timings.py for_report).
            figures = timed["byLab"][lab_name] if "byLab" in timed else timed
            up = at + datetime.timedelta(seconds=figures["launchToReadySeconds"])
            ready_at[e["node"]] = up
            changes["nodes launching"] += [(at, 1), (up, -1)]
            changes["nodes ready"].append((up, 1))
        elif what == "nodeDeleted" and e["node"] in ready_at:
            up = ready_at.pop(e["node"])
            if at < up:  # deleted before it was Ready: it stops launching then and is never ready
                changes["nodes launching"].remove((up, -1))
                changes["nodes launching"].append((at, -1))
                changes["nodes ready"].remove((up, 1))
            else:
                changes["nodes ready"].append((at, -1))
        elif what == "warmup":
            changes["seats warm"].append((at, warm.get(e["class"], 0)))
        elif what == "release":
            changes["seats warm"].append((at, -warm.get(e["class"], 0)))
        elif what == "arrive":
            waiting.add(e["learner"])
            changes["learners waiting"].append((at, 1))
        elif what == "bound" and e["learner"] not in bound:
            bound.add(e["learner"])
            changes["seats taken"].append((at, 1))
        elif what == "ready" and e["learner"] in waiting and e["learner"] not in ready:
            ready.add(e["learner"])
            waiting.discard(e["learner"])
            changes["learners waiting"].append((at, -1))
        elif what == "leave":
            if e["learner"] in waiting:
                waiting.discard(e["learner"])
                changes["learners waiting"].append((at, -1))
            if e["learner"] in bound:
                bound.discard(e["learner"])
                changes["seats taken"].append((at, -1))
    return changes


def series(
    lab_name: str, lab: Mapping[str, Any], timings: Mapping[str, Any]
) -> tuple[list[datetime.datetime], dict[str, list[int]]]:
    """The lab's moments of change, in order, and each series' value from each of them on."""
    changes = _changes(lab_name, lab, timings)
    moments = sorted({at for steps in changes.values() for at, _ in steps})
    values: dict[str, list[int]] = {}
    for name, steps in changes.items():
        total, at_moment = 0, {}
        for at, delta in sorted(steps):
            total += delta
            at_moment[at] = total
        last, row = 0, []
        for at in moments:
            last = at_moment.get(at, last)
            row.append(last)
        values[name] = row
    return moments, values


def columns(
    moments: Sequence[datetime.datetime], values: Mapping[str, Sequence[int]], count: int = COLUMNS
) -> tuple[list[datetime.datetime], dict[str, list[int]]]:
    """The day from its first moment to its last cut into `count` equal spans: each span's start, and per series the
    most it reached in the span (its value at the span's start, or any it took before the next span's)."""
    first, last = moments[0], moments[-1]
    span = (last - first) / count
    starts = [first + k * span for k in range(count)]
    out: dict[str, list[int]] = {}
    for name, row in values.items():
        most = []
        for k, start in enumerate(starts):
            end = last if k == count - 1 else starts[k + 1]
            entering = next((v for at, v in zip(reversed(moments), reversed(row), strict=True) if at <= start), 0)
            within = [v for at, v in zip(moments, row, strict=True) if start < at < end or at == end == last]
            most.append(max([entering, *within]))
        out[name] = most
    return starts, out


def mermaid(rehearsal: Mapping[str, Any]) -> list[str]:
    """Per lab and series, a Mermaid xychart (GitHub draws them in a job summary): the series' most in each of the
    day's COLUMNS spans, labelled with the span's start (UTC). Nothing when the rehearsal played no lab.

    One chart per series, its title naming it: a `line [...]` takes values only, no name, so a chart of several would
    not say which is which (CONFIRMED: mermaid-js/mermaid packages/mermaid/src/docs/syntax/xyChart.md at 04e42ec, its
    Syntax section). That page now spells the keyword `xychart`; `xychart-beta`, its name before, is the one the
    third-party references found render it (REPORTED; not confirmed against the Mermaid version GitHub runs)."""
    lines: list[str] = []
    for name, lab in sorted(rehearsal.get("labs", {}).items()):
        moments, values = series(name, lab, rehearsal["timings"])
        if not moments:
            continue
        starts, most = columns(moments, values)
        axis = ", ".join(f'"{s:%H:%M}"' for s in starts)
        for what in SERIES:
            lines += [
                "```mermaid",
                "xychart-beta",
                f'    title "lab {name}: {what} ({starts[0]:%Y-%m-%d}, UTC)"',
                f"    x-axis [{axis}]",
                f'    y-axis "{what}" 0 --> {max(1, *most[what])}',
                f"    line [{', '.join(map(str, most[what]))}]",
                "```",
                "",
            ]
    return lines


def _panel(group: ET.Element, name: str, moments: Sequence[datetime.datetime], values: Mapping[str, list[int]]) -> None:
    """One lab's panel: its series as step lines, its axes with the day's first and last moments, the legend."""
    first, last = moments[0], moments[-1]
    seconds = max((last - first).total_seconds(), 1.0)
    top = max(1, *(v for row in values.values() for v in row))
    left, bottom, plot_w, plot_h = MARGIN, HEIGHT, WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

    def x(at: datetime.datetime) -> float:
        return round(left + (at - first).total_seconds() / seconds * plot_w, 1)

    def y(v: int) -> float:
        return round(bottom - v / top * plot_h, 1)

    ET.SubElement(
        group, "text", x=str(left), y="20"
    ).text = f"lab {name}: {first:%Y-%m-%d %H:%M} to {last:%H:%M} UTC (most {top})"
    ET.SubElement(group, "line", x1=str(left), y1=str(bottom), x2=str(left + plot_w), y2=str(bottom), stroke="#444")
    ET.SubElement(group, "line", x1=str(left), y1=str(bottom), x2=str(left), y2=str(bottom - plot_h), stroke="#444")
    ET.SubElement(group, "text", x=str(left - 20), y=str(bottom - plot_h + 4)).text = str(top)
    ET.SubElement(group, "text", x=str(left), y=str(bottom + 14)).text = f"{first:%H:%M}"
    ET.SubElement(group, "text", x=str(left + plot_w - 30), y=str(bottom + 14)).text = f"{last:%H:%M}"
    for s, (what, colour) in enumerate(zip(SERIES, COLOURS, strict=True)):
        row = values[what]
        # A step line: each change drawn as a rise or fall at its moment, the count held until the next.
        points = [f"{x(moments[0])},{y(row[0])}"]
        for i in range(1, len(moments)):
            points += [f"{x(moments[i])},{y(row[i - 1])}", f"{x(moments[i])},{y(row[i])}"]
        line = ET.SubElement(
            group,
            "polyline",
            {
                "data-series": what,
                "data-values": " ".join(f"{at:%H:%M:%S}={v}" for at, v in zip(moments, row, strict=True)),
                "points": " ".join(points),
                "fill": "none",
                "stroke": colour,
                "stroke-width": "2",
            },
        )
        ET.SubElement(line, "title").text = what
        legend_x = left + s * plot_w // len(SERIES)
        ET.SubElement(group, "text", x=str(legend_x), y=str(bottom + 30), fill=colour).text = what


def svg(rehearsal: Mapping[str, Any]) -> ET.Element:
    """One panel per lab: each series as a step line over the day (x: time, y: count), a legend naming the series,
    the day's first and last moments (UTC) under it; each line carries its series' name (data-series) and values
    (data-values) for a reader of the file."""
    labs = sorted(rehearsal.get("labs", {}).items())
    panel = HEIGHT + MARGIN + LEGEND
    height = str(panel * max(len(labs), 1))
    root = ET.Element("svg", xmlns="http://www.w3.org/2000/svg", width=str(WIDTH), height=height)
    root.set("viewBox", f"0 0 {WIDTH} {height}")
    ET.SubElement(root, "title").text = "the rehearsed class day (rehearsal.json; docs/rehearsal.md)"
    for k, (name, lab) in enumerate(labs):
        group = ET.SubElement(root, "g", {"data-lab": name, "transform": f"translate(0,{k * panel})"})
        moments, values = series(name, lab, rehearsal["timings"])
        if moments:
            _panel(group, name, moments, values)
        else:
            ET.SubElement(group, "text", x=str(MARGIN), y=str(MARGIN)).text = f"lab {name}: nothing happened"
    return root


def write_svg(rehearsal: Mapping[str, Any], directory: Path) -> Path:
    """The picture as <directory>/rehearsal.svg, beside its rehearsal.json."""
    path = directory / SVG_NAME
    ET.ElementTree(svg(rehearsal)).write(path, encoding="unicode", xml_declaration=True)
    return path
