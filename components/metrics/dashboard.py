"""The stack's Grafana dashboard, built with Grafana's own grafana-foundation-sdk (its Grafana 10.4 schema, which Amazon
Managed Grafana's 10.4 workspaces and every later Grafana import): per lab, the seats in use, the pending learners,
the idle, the unmeasured and the culled seats, each seat's GPU use and GPU memory, Karpenter's nodes and their hourly
cost. Every panel reads the
workspace's recording rules (components/metrics/recording_rules.py), per lab.

PANELS is the one list of panels: the dashboard, docs/metrics.md and the tests' PromQL parse all read it.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    Threshold,
    ThresholdsMode,
    VariableRefresh,
    VariableSort,
)

from components.metrics import recording_rules
from domain.stack.metrics import Metrics

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
LAB = 'lab=~"$lab"'
# Grafana keeps a dashboard's uid to 40 characters (its dashboard JSON model); a cluster's name may have 100.
MAX_UID = 40
# Grafana writes a multi-value variable into a regular expression as (a|b): the tests parse each query with this.
SAMPLE_LAB = "intro|vision"


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # timeseries, stat or table
    query: str
    legend: str
    unit: str
    description: str


PANELS = (
    Panel(
        "Seats in use",
        "timeseries",
        f"{recording_rules.SEATS_IN_USE}{{{LAB}}}",
        "{{lab}}",
        "short",
        "Learners' pods running on each lab's nodes, each holding one GPU slice.",
    ),
    Panel(
        "Seats on the lab's nodes",
        "timeseries",
        f"{recording_rules.SEATS}{{{LAB}}}",
        "{{lab}}",
        "short",
        "GPU slices the lab's running nodes offer (Karpenter's allocatable nvidia.com/gpu).",
    ),
    Panel(
        "Pending learners",
        "timeseries",
        f"{recording_rules.PENDING}{{{LAB}}}",
        "{{lab}}",
        "short",
        "Learners' pods waiting for a slice: for a node to start, or for the lab's maxGpus.",
    ),
    Panel(
        "Idle seats",
        "timeseries",
        f"{recording_rules.SEATS_IDLE}{{{LAB}}}",
        "{{lab}}",
        "short",
        "Seats whose GPU stayed under the idle threshold for the lab's gpuIdleTimeout or the stack's idleAfter.",
    ),
    Panel(
        "Unmeasured seats",
        "timeseries",
        f"{recording_rules.SEATS_UNMEASURED}{{{LAB}}}",
        "{{lab}}",
        "short",
        "Running seats older than the idle window that dcgm-exporter did not measure over all of it (no per-pod series "
        "with the pod's UID, or a gap in it): their GPU use is unknown, and they are never stopped for it.",
    ),
    Panel(
        "Culled seats, last hour",
        "timeseries",
        f"{recording_rules.SEATS_CULLED}{{{LAB}}}",
        "{{lab}}",
        "short",
        "Seats of labs with gpuIdleTimeout whose server stopped in the last hour while the idle-GPU culler had them as "
        "idle: its stops, and any other stop of a seat idle at the time.",
    ),
    Panel(
        "GPU utilisation per seat",
        "timeseries",
        f"{recording_rules.SEAT_UTILISATION}{{{LAB}}}",
        "{{lab}} {{namespace}}/{{pod}}",
        "percent",
        "dcgm-exporter's per-pod GPU utilisation under time-slicing (NVML's per-process SM samples); the line is the "
        "idle threshold.",
    ),
    Panel(
        "GPU memory per seat",
        "timeseries",
        f"{recording_rules.SEAT_MEMORY}{{{LAB}}}",
        "{{lab}} {{namespace}}/{{pod}}",
        "mbytes",
        "dcgm-exporter's per-pod GPU memory used under time-slicing (NVML's per-process used memory), in MiB.",
    ),
    Panel(
        "Idle learners",
        "table",
        f"{recording_rules.LEARNER_IDLE}{{{LAB}}}",
        "{{username}}",
        "percent",
        "JupyterHub learners whose seat is idle, with their highest GPU utilisation over the idle window.",
    ),
    Panel(
        "GPU nodes",
        "timeseries",
        f"{recording_rules.NODES}{{{LAB}}}",
        "{{lab}}",
        "short",
        "Nodes Karpenter runs for each lab's NodePool.",
    ),
    Panel(
        "Cost per hour",
        "stat",
        f"{recording_rules.COST}{{{LAB}}}",
        "{{lab}}",
        "currencyUSD",
        "Karpenter's cost of each lab's nodes per hour (its offering prices; not a bill).",
    ),
)


def _query(panel: Panel) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(panel.query).legend_format(panel.legend).ref_id("A")
    return query.instant() if panel.kind == "table" else query.range()


def _panel(panel: Panel, metrics: Metrics) -> Any:
    builders: dict[str, type[timeseries.Panel] | type[stat.Panel] | type[table.Panel]] = {
        "timeseries": timeseries.Panel,
        "stat": stat.Panel,
        "table": table.Panel,
    }
    built = (
        builders[panel.kind]()
        .title(panel.title)
        .description(panel.description)
        .datasource(DATASOURCE)
        .with_target(_query(panel))
        .unit(panel.unit)
        .span(12)
        .height(8)
    )
    if panel.unit == "percent":
        idle = Threshold(value=float(metrics.idle_utilisation_percent), color="red")
        steps = [Threshold(value=None, color="green"), idle]
        built = (
            built.min(0).max(100).thresholds(dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps))
        )
    return built


def uid(cluster: str) -> str:
    readable = f"gpulab-{cluster}"
    return readable if len(readable) <= MAX_UID else f"gpulab-{hashlib.sha256(cluster.encode()).hexdigest()[:33]}"


def dashboard_model(cluster: str, metrics: Metrics) -> dict[str, Any]:
    """The stack's dashboard as Grafana's JSON model, named after its cluster (one per environment)."""
    labs = (
        dashboard.QueryVariable("lab")
        .label("lab")
        .datasource(DATASOURCE)
        .query(f"label_values({recording_rules.SEATS_IN_USE}, lab)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
    )
    built = (
        dashboard.Dashboard(f"gpulab {cluster}: GPU seats")
        .uid(uid(cluster))
        .tags(["gpulab"])
        .time("now-6h", "now")
        .refresh("1m")
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .with_variable(dashboard.DatasourceVariable("datasource").label("workspace").type("prometheus"))
        .with_variable(labs)
    )
    for panel in PANELS:
        built = built.with_panel(_panel(panel, metrics))
    return json.loads(json.dumps(built.build(), cls=JSONEncoder))
