"""The workspace's rules, run by Prometheus's own promtool (`check rules`, `test rules`) on synthetic series of two
labs: a seat idle all along, a busy one, one idle for less than its lab's timeout, one busy in a single sample, a pod
too young to be idle, and the seats that must be unmeasured, never idle: no per-pod series, a series that went stale,
one that stopped without a staleness marker, one without the pod's UID, and a restarted exporter's gap; a pending
learner, Karpenter's nodes and cost; and the planted defects those tests catch. The scraper's configuration passes
`promtool check config`."""

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.jupyterhub import gpu_culler, spend_gate
from components.metrics import recording_rules
from components.metrics.scrape import scrape_configuration
from domain.cost.price_book import LIST
from domain.stack.load import parse
from tests.conftest import stack_values
from tests.support.promtool import promtool
from tests.support.scraped import as_scraped
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab

HUB_NAMESPACE = "jupyterhub"
TYPES = {"alpha": "g4dn.xlarge", "beta": "g5.xlarge"}
# alpha stops idle servers after 20 minutes; beta keeps the stack's idleAfter, 30 minutes.
STACK = stack_values(
    **{
        "gpulab:labs": {
            "alpha": lab([TYPES["alpha"]], 3, notebookImage=NOTEBOOK_IMAGE, gpuIdleTimeout="20m"),
            "beta": lab([TYPES["beta"]], 4, notebookImage=NOTEBOOK_IMAGE),
        },
        "gpulab:jupyterhub": HUB,
        "gpulab:jupyterhubClientSecret": "s3cr3t",
        "gpulab:metrics": {"idleUtilisationPercent": 5},
    }
)


def settings():
    values = {key.removeprefix("gpulab:"): value for key, value in STACK.items() if key.startswith("gpulab:")}
    return parse(values, STACK["aws:region"]).settings


def rule_file() -> dict[str, Any]:
    s = settings()
    return recording_rules.rule_groups(s.labs, s.metrics, LIST)


def seat(
    pod: str,
    lab_name: str,
    utilisation: str | list[tuple[str, str]],
    started: int,
    phase: str = "Running",
    user: str = "",
    node: str = "a2",
    uid: bool = True,
) -> list:
    """The series of one learner's pod over an hour, one sample a minute (promtool's expanding notation).
    `utilisation`: dcgm-exporter's per-pod values, or (exporter instance, values) for each exporter that reported it;
    `uid`: whether its series carry the pod's UID (the exporter's token and role)."""
    where = f'namespace="{HUB_NAMESPACE}", pod="{pod}", uid="uid-{pod}"'
    series = [
        (f'kube_pod_nodeselectors{{{where}, nodeselector_gpulab_dev_lab="{lab_name}"}}', "1x60"),
        (f'kube_pod_status_phase{{{where}, phase="{phase}"}}', "1x60"),
        (f"kube_pod_start_time{{{where}}}", f"{started}x60"),
        (f'kube_pod_info{{{where}, node="{node}"}}', "1x60"),
    ]
    exporters = [("10.0.1.1:9400", utilisation)] if isinstance(utilisation, str) else utilisation
    for instance, values in exporters:
        if values:
            # dcgm-exporter's per-pod series: the learner's pod and namespace, its UID, the shared GPU's replica.
            gpu = f'namespace="{HUB_NAMESPACE}", pod="{pod}", container="notebook", gpu="0", vgpu="0"'
            gpu += f', instance="{instance}"' + (f', pod_uid="uid-{pod}"' if uid else "")
            series.append((f"DCGM_FI_DEV_GPU_UTIL{{{gpu}}}", values))
    if user:
        series.append((f'kube_pod_annotations{{{where}, annotation_hub_jupyter_org_username="{user}"}}', "1x60"))
    return [{"series": name, "values": values} for name, values in series]


# The seats judged at minute 60 (and 45) that must be unmeasured, all on node a1 of alpha (window 20m), all JupyterHub
# learners: were one called idle, the culler would stop its server.
UNMEASURED = {
    # No per-pod series at all (no exporter on the node, no pod-resources answer).
    "jupyter-ken": "",
    # Scraped until minute 40, then a failed scrape's staleness marker.
    "jupyter-dennis": "0x40 stale",
    # Scraped until minute 40, then nothing, not even a staleness marker: read for the 5-minute lookback.
    "jupyter-john": "0x40 _x20",
    # Measured all hour, but without the pod's UID: the exporter without its token or role reads 0 for every pod.
    "jupyter-niklaus": "0x60",
}
INPUT = [
    # alpha, on node a2: idle the whole hour; busy; busy until minute 45, so idle only 15 of its 20 minutes at minute
    # 60; idle, but started at minute 50; idle but for one busy sample at minute 51 (4.5% on average over the window).
    *seat("jupyter-ada", "alpha", "0x60", 0, user="ada"),
    *seat("jupyter-grace", "alpha", "60x60", 0, user="grace"),
    *seat("jupyter-alan", "alpha", "80x45 0x15", 0, user="alan"),
    *seat("jupyter-edsger", "alpha", "0x60", 3000, user="edsger"),
    *seat("jupyter-hedy", "alpha", "0x50 90 0x9", 0, user="hedy"),
    # Idle, its exporter restarted: the old pod's series until minute 30 then stale, the new pod's from minute 33.
    *seat(
        "jupyter-linus",
        "alpha",
        [("10.0.1.1:9400", "0x30 stale"), ("10.0.1.2:9400", "_x33 0x27")],
        0,
        user="linus",
    ),
    *(
        series
        for name, values in UNMEASURED.items()
        for series in seat(
            name, "alpha", values, 0, user=name.removeprefix("jupyter-"), node="a1", uid=name != "jupyter-niklaus"
        )
    ),
    # beta: idle for its 30 minutes (not a hub pod), and a learner still waiting for a node.
    *seat("smoke", "beta", "2x60", 0, node="b1"),
    *seat("jupyter-barbara", "beta", "", 0, phase="Pending", user="barbara", node=""),
    # Karpenter: two alpha nodes (3 slices each), one beta node (4 slices), the NodePools' hourly cost; b1 from minute
    # 31 only (31 blanks, minutes 0 to 30, then 30 samples).
    *[
        {
            "series": f'karpenter_nodes_allocatable{{node_name="{n}", nodepool="{p}", resource_type="{r}", '
            f'instance_type="{TYPES[p]}"}}',
            "values": v if n != "b1" else f"_x31 {v.split('x')[0]}x29",
        }
        for n, p in (("a1", "alpha"), ("a2", "alpha"), ("b1", "beta"))
        for r, v in (("cpu", "4x60"), ("nvidia.com/gpu", "4x60" if p == "beta" else "3x60"))
    ],
    {"series": 'karpenter_nodepools_cost_total{nodepool="alpha"}', "values": "1.052x60"},
    {"series": 'karpenter_nodepools_cost_total{nodepool="beta"}', "values": "1.006x60"},
]


def sample(record: str, value: float, **labels: str) -> dict[str, Any]:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"labels": f"{record}{{{inner}}}", "value": value}


def pod(name: str, lab_name: str) -> dict[str, str]:
    return {"lab": lab_name, "namespace": HUB_NAMESPACE, "pod": name}


def seats(record: str, value: float, names: list[str], lab_name: str = "alpha") -> list[dict[str, Any]]:
    return [sample(record, value, **pod(name, lab_name)) for name in names]


AT = "60m"
# Minute 45: hedy's burst (minute 51) not yet in her window, linus's restart gap (minutes 31-32) in his, john's last
# sample (minute 40) still within Prometheus's lookback.
EARLIER = "45m"
EXPECTED = {
    AT: [
        (
            recording_rules.SEAT_IDLE,
            [
                *seats(recording_rules.SEAT_IDLE, 0, ["jupyter-ada", "jupyter-linus"]),
                sample(recording_rules.SEAT_IDLE, 2, **pod("smoke", "beta")),
            ],
        ),
        # What the culler reads: the idle learners, none of the unmeasured ones, whose GPU use is not known.
        (
            recording_rules.LEARNER_IDLE,
            [
                sample(recording_rules.LEARNER_IDLE, 0, **pod(f"jupyter-{name}", "alpha"), username=name)
                for name in ("ada", "linus")
            ],
        ),
        (recording_rules.SEAT_UNMEASURED, seats(recording_rules.SEAT_UNMEASURED, 1, [*UNMEASURED])),
        (
            recording_rules.SEATS_UNMEASURED,
            [
                sample(recording_rules.SEATS_UNMEASURED, 4, lab="alpha"),
                sample(recording_rules.SEATS_UNMEASURED, 0, lab="beta"),
            ],
        ),
        (
            recording_rules.SEATS_IDLE,
            [sample(recording_rules.SEATS_IDLE, 2, lab="alpha"), sample(recording_rules.SEATS_IDLE, 1, lab="beta")],
        ),
        (
            recording_rules.SEATS_IN_USE,
            [
                sample(recording_rules.SEATS_IN_USE, 10, lab="alpha"),
                sample(recording_rules.SEATS_IN_USE, 1, lab="beta"),
            ],
        ),
        (
            recording_rules.PENDING,
            [sample(recording_rules.PENDING, 0, lab="alpha"), sample(recording_rules.PENDING, 1, lab="beta")],
        ),
        # Only fresh series with the pod's UID: none for ken, dennis, john, niklaus.
        (
            recording_rules.SEAT_UTILISATION,
            [
                sample(recording_rules.SEAT_UTILISATION, value, **pod(name, lab_name))
                for name, lab_name, value in (
                    ("jupyter-ada", "alpha", 0),
                    ("jupyter-grace", "alpha", 60),
                    ("jupyter-alan", "alpha", 0),
                    ("jupyter-edsger", "alpha", 0),
                    ("jupyter-hedy", "alpha", 0),
                    ("jupyter-linus", "alpha", 0),
                    ("smoke", "beta", 2),
                )
            ],
        ),
        (
            recording_rules.SEATS,
            [sample(recording_rules.SEATS, 6, lab="alpha"), sample(recording_rules.SEATS, 4, lab="beta")],
        ),
        (
            recording_rules.NODES,
            [sample(recording_rules.NODES, 2, lab="alpha"), sample(recording_rules.NODES, 1, lab="beta")],
        ),
        (
            recording_rules.COST,
            [sample(recording_rules.COST, 1.052, lab="alpha"), sample(recording_rules.COST, 1.006, lab="beta")],
        ),
        # Each lab's nodes at the list prices, by type: alpha's two, beta's one.
        (
            recording_rules.SPEND,
            [
                sample(recording_rules.SPEND, 2 * LIST.on_demand[TYPES["alpha"]], lab="alpha"),
                sample(recording_rules.SPEND, LIST.on_demand[TYPES["beta"]], lab="beta"),
            ],
        ),
        # What the spend gate reads: alpha's two nodes for the last hour; beta's one node for its 30 minutes, of the
        # last 45 (the hour's samples are minutes 1 to 60: one sample a minute, one minute's spend each).
        (spend_gate.spend_query("alpha", 3600), [{"labels": "{}", "value": 2 * LIST.on_demand[TYPES["alpha"]]}]),
        (spend_gate.spend_query("beta", 2700), [{"labels": "{}", "value": LIST.on_demand[TYPES["beta"]] / 2}]),
    ],
    EARLIER: [
        (
            recording_rules.SEAT_IDLE,
            [
                *seats(recording_rules.SEAT_IDLE, 0, ["jupyter-ada", "jupyter-hedy"]),
                sample(recording_rules.SEAT_IDLE, 2, **pod("smoke", "beta")),
            ],
        ),
        (
            recording_rules.LEARNER_IDLE,
            [
                sample(recording_rules.LEARNER_IDLE, 0, **pod(f"jupyter-{name}", "alpha"), username=name)
                for name in ("ada", "hedy")
            ],
        ),
        (
            recording_rules.SEAT_UNMEASURED,
            seats(recording_rules.SEAT_UNMEASURED, 1, [*UNMEASURED, "jupyter-linus"]),
        ),
    ],
}
# The seats of node a1 judged from minute 21 (older than alpha's 20 minutes) and never measured since (ken, niklaus):
# the alert waits alpha's 20 minutes. Node a2's seats are measured, but for linus's two minutes.
UNMEASURED_ALERT = [{"exp_labels": {"lab": "alpha", "node": "a1", "severity": "warning"}}]


def learner(pod: str, lab_name: str, ksm: str, utilisation: str, memory: str, uid: bool = True) -> list:
    """A hub learner's pod over 95 minutes: kube-state-metrics' series (`ksm`), dcgm-exporter's utilisation and GPU
    memory (MiB), with the pod's UID or without."""
    where = f'namespace="{HUB_NAMESPACE}", pod="{pod}", uid="uid-{pod}"'
    gpu = f'namespace="{HUB_NAMESPACE}", pod="{pod}", container="notebook", gpu="0", vgpu="0"'
    gpu += ', instance="10.0.1.1:9400"' + (f', pod_uid="uid-{pod}"' if uid else "")
    user = pod.removeprefix("jupyter-")
    series = [
        (f'kube_pod_nodeselectors{{{where}, nodeselector_gpulab_dev_lab="{lab_name}"}}', ksm),
        (f'kube_pod_status_phase{{{where}, phase="Running"}}', ksm),
        (f"kube_pod_start_time{{{where}}}", ksm.replace("1x", "0x")),
        (f'kube_pod_info{{{where}, node="a2"}}', ksm),
        (f'kube_pod_annotations{{{where}, annotation_hub_jupyter_org_username="{user}"}}', ksm),
        (f"DCGM_FI_DEV_GPU_UTIL{{{gpu}}}", utilisation),
        (f"DCGM_FI_DEV_FB_USED{{{gpu}}}", memory),
    ]
    return [{"series": name, "values": values} for name, values in series]


# kube-state-metrics fails its scrapes from minute 40 to 45: every pod's series stale, then back from minute 45.
KSM_GAP = "1x39 stale _x4 1x50"
CULLED_INPUT = [
    {"series": 'up{job="kube-state-metrics"}', "values": "1x39 0x5 1x50"},
    # alpha (gpuIdleTimeout 20m): ada idle from the start, her pod gone at minute 26 (the culler stopped it); grace
    # busy, gone at minute 26 too (she stopped it); alan idle, running through kube-state-metrics' failed scrapes;
    # edsger's memory without the pod's UID.
    *learner("jupyter-ada", "alpha", "1x25 stale", "0x25 stale", "1024x25 stale"),
    *learner("jupyter-grace", "alpha", "1x25 stale", "70x25 stale", "3000x25 stale"),
    *learner("jupyter-alan", "alpha", KSM_GAP, "0x95", "512x95"),
    *learner("jupyter-edsger", "alpha", KSM_GAP, "40x95", "2048x95", uid=False),
    # beta (no gpuIdleTimeout, its idleAfter 30m): barbara idle, gone at minute 35; hedy keeps running.
    *learner("jupyter-barbara", "beta", "1x34 stale", "0x34 stale", "100x34 stale"),
    *learner("jupyter-hedy", "beta", KSM_GAP, "50x95", "700x95"),
]
ADA = {"lab": "alpha", "namespace": HUB_NAMESPACE, "pod": "jupyter-ada", "username": "ada"}
CULLED_EXPECTED = {
    # ada's pod gone after the culler had her idle: culled, once, for the hour after; grace's (busy) and barbara's (a
    # lab without gpuIdleTimeout) are not.
    "28m": [
        (recording_rules.SEAT_CULLED, [sample(recording_rules.SEAT_CULLED, 1, **ADA)]),
        (
            recording_rules.SEATS_CULLED,
            [
                sample(recording_rules.SEATS_CULLED, 1, lab="alpha"),
                sample(recording_rules.SEATS_CULLED, 0, lab="beta"),
            ],
        ),
        # Each measured seat's GPU memory in MiB; edsger's series has no pod UID, so it is no measurement.
        (
            recording_rules.SEAT_MEMORY,
            [
                sample(recording_rules.SEAT_MEMORY, 512, **pod("jupyter-alan", "alpha")),
                sample(recording_rules.SEAT_MEMORY, 100, **pod("jupyter-barbara", "beta")),
                sample(recording_rules.SEAT_MEMORY, 700, **pod("jupyter-hedy", "beta")),
            ],
        ),
    ],
    # kube-state-metrics not answering: alan's pod series are stale, which is no pod gone; ada's cull still counts (no
    # lab has a pod to count 0 for).
    "42m": [
        (recording_rules.SEAT_CULLED, []),
        (recording_rules.SEATS_CULLED, [sample(recording_rules.SEATS_CULLED, 1, lab="alpha")]),
    ],
    "50m": [
        (recording_rules.SEAT_CULLED, []),
        (
            recording_rules.SEATS_CULLED,
            [
                sample(recording_rules.SEATS_CULLED, 1, lab="alpha"),
                sample(recording_rules.SEATS_CULLED, 0, lab="beta"),
            ],
        ),
    ],
    # More than an hour after ada's last culled sample (minute 30).
    "95m": [
        (
            recording_rules.SEATS_CULLED,
            [
                sample(recording_rules.SEATS_CULLED, 0, lab="alpha"),
                sample(recording_rules.SEATS_CULLED, 0, lab="beta"),
            ],
        )
    ],
}


def unit_tests() -> dict[str, Any]:
    return {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": recording_rules.EVALUATION_INTERVAL,
        "tests": [
            {
                "interval": "1m",
                "input_series": INPUT,
                "promql_expr_test": [
                    {"expr": expr, "eval_time": at, "exp_samples": exp}
                    for at, expected in EXPECTED.items()
                    for expr, exp in expected
                ],
                "alert_rule_test": [
                    {
                        "eval_time": AT,
                        "alertname": "GpuSeatsIdle",
                        "exp_alerts": [{"exp_labels": {"lab": name, "severity": "info"}} for name in ("alpha", "beta")],
                    },
                    # Pending since minute 0: past the 20 minutes the alert waits.
                    {
                        "eval_time": AT,
                        "alertname": "LearnersPending",
                        "exp_alerts": [{"exp_labels": {"lab": "beta", "severity": "warning"}}],
                    },
                    {"eval_time": "10m", "alertname": "LearnersPending", "exp_alerts": []},
                    {"eval_time": "40m", "alertname": "GpuSeatsUnmeasured", "exp_alerts": []},
                    {"eval_time": "42m", "alertname": "GpuSeatsUnmeasured", "exp_alerts": UNMEASURED_ALERT},
                    {"eval_time": AT, "alertname": "GpuSeatsUnmeasured", "exp_alerts": UNMEASURED_ALERT},
                ],
            },
            {
                "name": "culled seats and GPU memory",
                "interval": "1m",
                "input_series": CULLED_INPUT,
                "promql_expr_test": [
                    {"expr": expr, "eval_time": at, "exp_samples": exp}
                    for at, expected in CULLED_EXPECTED.items()
                    for expr, exp in expected
                ],
            },
        ],
    }


def without_annotations(file: dict[str, Any]) -> dict[str, Any]:
    # The alert tests compare annotations too when they are given; these tests hold to labels and values.
    for rule in file["groups"][0]["rules"]:
        rule.pop("annotations", None)
    return file


def scrape() -> dict[str, Any]:
    s = settings()
    return scrape_configuration(s.metrics, s.karpenter, rule_file())


def run_unit_tests(folder: Path, file: dict[str, Any], scraped: dict[str, Any] | None = None) -> tuple[int, str]:
    """promtool test rules of the unit tests against `file`, their input series as the scraper configuration `scraped`
    (the stack's by default) keeps them: its exit status and its output."""
    (folder / "rules.yaml").write_text(yaml.safe_dump(without_annotations(copy.deepcopy(file)), sort_keys=False))
    tests = as_scraped(unit_tests(), scraped or scrape())
    (folder / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    done = promtool("test", "rules", "tests.yaml", cwd=folder)
    return done.returncode, done.stdout + done.stderr


def test_every_rule_passes_promtool_check_rules(tmp_path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_file(), sort_keys=False))
    done = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"SUCCESS: {len(rule_file()['groups'][0]['rules'])} rules found", done.stdout), done.stdout


def test_the_rules_find_only_the_idle_seat_counting_labs_apart(tmp_path):
    status, output = run_unit_tests(tmp_path, rule_file())
    assert status == 0 and "SUCCESS" in output, output


def test_the_culler_reads_idle_learners_made_of_idle_seats_only():
    """The culler stops what gpulab:learner_gpu_idle:percent holds and nothing else; that record reads the idle seats
    alone, so an unmeasured seat never reaches it (the unit tests above: ken, dennis, john, niklaus and linus's gap)."""
    assert gpu_culler.IDLE_SERIES == recording_rules.LEARNER_IDLE
    rules = {r.get("record"): r["expr"] for r in rule_file()["groups"][0]["rules"]}
    assert set(re.findall(r"gpulab:\w+:\w+", rules[recording_rules.LEARNER_IDLE])) == {recording_rules.SEAT_IDLE}


def planted(file: dict[str, Any], record: str, old: str, new: str) -> dict[str, Any]:
    """`file` with `old` replaced by `new` in the expression of each rule that records (or alerts as) `record`."""
    changed = copy.deepcopy(file)
    found = [
        r for r in changed["groups"][0]["rules"] if record in (r.get("record"), r.get("alert")) and old in r["expr"]
    ]
    assert found, f"{record} has no {old!r} to plant a defect in"
    for rule in found:
        rule["expr"] = rule["expr"].replace(old, new)
    return changed


R = recording_rules
MEASURED = f" and on (namespace, pod) {R.SEAT_MEASURED}"
PLANTED = {
    # The idle threshold compared the wrong way: busy seats would be stopped, idle ones kept.
    "idle-threshold-reversed": (R.SEAT_IDLE, " < 5", " > 5", R.SEAT_IDLE),
    # Seats summed across labs: one figure for the stack instead of one per lab.
    "seats-summed-across-labs": (
        R.SEATS_IN_USE,
        "count by (lab) (gpulab:pod_lab:info and",
        "count (gpulab:pod_lab:info and",
        R.SEATS_IN_USE,
    ),
    # A seat judged whatever its pod's age (edsger, started at minute 50, called idle).
    "young-pods-idle": (
        R.SEAT_JUDGED,
        "and on (namespace, pod) (time() - kube_pod_start_time",
        "or on (namespace, pod) (time() - kube_pod_start_time",
        R.SEAT_IDLE,
    ),
    "young-pods-judged": (R.SEAT_JUDGED, "> 1200", "> 0", R.SEAT_IDLE),
    # The average of the window: hedy's one busy sample among 20 averages 4.5%, under 5%.
    "bursts-averaged": (R.SEAT_IDLE, "max_over_time", "avg_over_time", R.SEAT_IDLE),
    # The exporter's zeros without a pod UID taken as measurements (niklaus called idle).
    "series-without-pod-uid": (R.SEAT_UTILISATION, ', pod_uid!=""', "", R.SEAT_IDLE),
    # Idle without being measured over the window (dennis, john, linus called idle at minute 45).
    "coverage-dropped": (R.SEAT_IDLE, MEASURED, "", R.SEAT_IDLE),
    "coverage-of-one-sample": (R.SEAT_MEASURED, ">= 19", ">= 1", R.SEAT_IDLE),
    # A series read for the whole lookback after its last sample (john called idle at minute 45).
    "freshness-dropped": (R.SEAT_UTILISATION, f"<= {R.FRESH_SECONDS})", "<= 100000)", R.SEAT_IDLE),
    # Unmeasured seats given to the culler.
    "culler-reads-unmeasured": (
        R.LEARNER_IDLE,
        f"{R.SEAT_IDLE} *",
        f"({R.SEAT_IDLE} or {R.SEAT_UNMEASURED}) *",
        R.LEARNER_IDLE,
    ),
    # Unmeasured seats counted as measured ones.
    "unmeasured-reversed": (R.SEAT_UNMEASURED, " unless ", " and ", R.SEAT_UNMEASURED),
    # A seat counted culled when kube-state-metrics does not answer (alan at minute 42).
    "culled-while-pods-unknown": (
        R.SEAT_CULLED,
        '\n and on () (max(up{job="kube-state-metrics"}) == 1)',
        "",
        R.SEAT_CULLED,
    ),
    # Every idle learner counted culled, gone or not (alan from minute 21).
    "culled-pods-still-running": (R.SEAT_CULLED, "\n  unless on (namespace, pod) kube_pod_info", "", R.SEAT_CULLED),
    # A lab without gpuIdleTimeout counted (barbara).
    "culled-in-untimed-labs": (R.SEAT_CULLED, '{lab=~"alpha"}', "", R.SEATS_CULLED),
    # The culled seats of the last minute only, not of the hour (ada forgotten by minute 50).
    "culled-not-over-the-hour": (R.SEATS_CULLED, "[1h]", "[1m]", R.SEATS_CULLED),
    # GPU memory read from series without the pod's UID (edsger's).
    "memory-without-pod-uid": (R.SEAT_MEMORY, ', pod_uid!=""', "", R.SEAT_MEMORY),
    # Every node priced as one, whatever its type: a lab's spend its node count in dollars.
    "spend-unpriced": (R.SPEND, f"* on (instance_type) group_left () {R.PRICE}", "", R.SPEND),
    # Spend counted by type only: labs of one type would spend each other's budgets.
    "spend-mixed-across-labs": (R.SPEND, "count by (lab, instance_type)", "count by (instance_type)", R.SPEND),
    # The unmeasured alert by lab only: which node's exporter to look at is lost.
    "unmeasured-alert-without-node": (
        "GpuSeatsUnmeasured",
        "count by (lab, node)",
        "count by (lab)",
        "alertname: GpuSeatsUnmeasured",
    ),
}


@pytest.mark.parametrize("case", PLANTED)
def test_a_planted_rule_defect_fails_promtools_unit_tests(tmp_path, case):
    record, old, new, caught = PLANTED[case]
    status, output = run_unit_tests(tmp_path, planted(rule_file(), record, old, new))
    where = caught if caught.startswith("alertname:") else f"expr: {caught!r}"
    assert status == 1 and where in output.replace('"', "'"), output


def test_a_metric_the_scraper_drops_fails_the_rules_tests(tmp_path):
    """The unit tests above run on their series as the scraper keeps them: a keep-list without kube_pod_info (which
    the unmeasured-seat alert joins for the node) fails them, as a rule reading a dropped metric would."""
    planted_scrape = scrape()
    (ksm,) = [job for job in planted_scrape["scrape_configs"] if job["job_name"] == "kube-state-metrics"]
    (rule,) = ksm["metric_relabel_configs"]
    assert "kube_pod_info" in rule["regex"].split("|")
    rule["regex"] = "|".join(n for n in rule["regex"].split("|") if n != "kube_pod_info")
    status, output = run_unit_tests(tmp_path, rule_file(), planted_scrape)
    assert status == 1 and "alertname: GpuSeatsUnmeasured" in output, output


def test_the_scraper_config_passes_promtool_check_config(tmp_path):
    (tmp_path / "scrape.yaml").write_text(yaml.safe_dump(scrape(), sort_keys=False))
    done = promtool("check", "config", "--syntax-only", "scrape.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
