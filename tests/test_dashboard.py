"""The stack's Grafana dashboard: every panel's query parsed by Prometheus's own PromQL parser (promtool), each reading
a series the rules record, per lab; the render's dashboard holds them with the stack's idle threshold; docs/metrics.md
lists each panel with its query."""

import json
import re
from pathlib import Path

import pytest

import render.run
from components.metrics import recording_rules
from components.metrics.dashboard import PANELS, SAMPLE_LAB, uid
from domain.cost.price_book import LIST
from domain.stack.metrics import Metrics
from tests.support.promtool import promtool
from tests.support.rendered import rendered

DOC = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"


def parse(query: str):
    """promtool's PromQL formatter, which parses the query with Prometheus's parser first."""
    return promtool("--experimental", "promql", "format", query.replace("$lab", SAMPLE_LAB))


@pytest.mark.parametrize("panel", PANELS, ids=[p.title for p in PANELS])
def test_every_panels_query_parses_with_prometheuss_own_parser(panel):
    done = parse(panel.query)
    assert done.returncode == 0, done.stderr


def test_a_query_prometheus_cannot_parse_fails_that_check():
    done = parse(PANELS[0].query.replace("}", ""))
    assert done.returncode != 0 and "parse error" in done.stderr, done.stderr


def test_every_panel_reads_a_recorded_series_of_the_chosen_labs():
    recorded = {
        r["record"] for r in recording_rules.rule_groups({}, Metrics(), LIST)["groups"][0]["rules"] if "record" in r
    }
    for panel in PANELS:
        name = panel.query.split("{", 1)[0]
        assert name in recorded, panel.title
        assert panel.query.endswith('{lab=~"$lab"}'), panel.title


def test_dashboard_shows_each_panels_query_and_idle_threshold():
    r = rendered("synthetic-metrics")
    model = json.loads((r.out / render.run.DASHBOARD).read_text())
    assert [(p["title"], p["targets"][0]["expr"]) for p in model["panels"]] == [(p.title, p.query) for p in PANELS]
    assert {v["name"] for v in model["templating"]["list"]} == {"datasource", "lab"}
    (utilisation,) = [p for p in model["panels"] if p["title"] == "GPU utilisation per seat"]
    steps = utilisation["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1]["value"] == r.run.stack.settings.metrics.idle_utilisation_percent == 10
    assert model["uid"] == uid(r.run.stack.settings.cluster.name)


def test_a_long_cluster_name_still_makes_a_uid_grafana_takes():
    assert len(uid("c" * 100)) == 40 and uid("c" * 100) != uid("c" * 99)


def test_docs_list_every_panel_with_its_query():
    rows = dict(re.findall(r"^\| ([^|`]+?) \| `([^`]+)` \|$", DOC.read_text(), re.MULTILINE))
    assert {p.title: p.query for p in PANELS}.items() <= rows.items()
