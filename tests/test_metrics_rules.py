"""The workspace's rules, run by Prometheus's own promtool (`check rules`, `test rules`) on synthetic series of two
labs: an idle seat, a busy seat, a seat idle for less than its lab's timeout, a pod too young to be idle, a pending
learner, Karpenter's nodes and cost; and the planted defects those tests catch. The scraper's configuration passes
`promtool check config`."""

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.metrics import recording_rules
from components.metrics.scrape import scrape_configuration
from domain.stack.load import parse
from tests.conftest import stack_values
from tests.support.promtool import promtool
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab

HUB_NAMESPACE = "jupyterhub"
# alpha stops idle servers after 20 minutes; beta keeps the stack's idleAfter, 30 minutes.
STACK = stack_values(
    **{
        "gpulab:labs": {
            "alpha": lab(["g4dn.xlarge"], 3, notebookImage=NOTEBOOK_IMAGE, gpuIdleTimeout="20m"),
            "beta": lab(["g5.xlarge"], 4, notebookImage=NOTEBOOK_IMAGE),
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
    return recording_rules.rule_groups(s.labs, s.metrics)


def seat(pod: str, lab_name: str, utilisation: str, started: int, phase: str = "Running", user: str = "") -> list:
    """The series of one learner's pod over an hour, one sample a minute (promtool's expanding notation)."""
    where = f'namespace="{HUB_NAMESPACE}", pod="{pod}", uid="uid-{pod}"'
    series = [
        (f'kube_pod_nodeselectors{{{where}, nodeselector_gpulab_dev_lab="{lab_name}"}}', "1x60"),
        (f'kube_pod_status_phase{{{where}, phase="{phase}"}}', "1x60"),
        (f"kube_pod_start_time{{{where}}}", f"{started}x60"),
    ]
    if utilisation:
        # dcgm-exporter's per-pod series: the learner's pod and namespace, the shared GPU's replica.
        gpu = f'namespace="{HUB_NAMESPACE}", pod="{pod}", container="notebook", gpu="0", vgpu="0"'
        series.append((f"DCGM_FI_DEV_GPU_UTIL{{{gpu}}}", utilisation))
    if user:
        series.append((f'kube_pod_annotations{{{where}, annotation_hub_jupyter_org_username="{user}"}}', "1x60"))
    return [{"series": name, "values": values} for name, values in series]


INPUT = [
    # alpha: idle the whole hour; busy; busy until minute 45, so idle only 15 of its 20 minutes at minute 60; idle, but
    # started at minute 50.
    *seat("jupyter-ada", "alpha", "0x60", 0, user="ada"),
    *seat("jupyter-grace", "alpha", "60x60", 0, user="grace"),
    *seat("jupyter-alan", "alpha", "80x45 0x15", 0, user="alan"),
    *seat("jupyter-edsger", "alpha", "0x60", 3000, user="edsger"),
    # beta: idle for its 30 minutes (not a hub pod), and a learner still waiting for a node.
    *seat("smoke", "beta", "2x60", 0),
    *seat("jupyter-barbara", "beta", "", 0, phase="Pending", user="barbara"),
    # Karpenter: two alpha nodes (3 slices each), one beta node (4 slices), the NodePools' hourly cost.
    *[
        {"series": f'karpenter_nodes_allocatable{{node_name="{n}", nodepool="{p}", resource_type="{r}"}}', "values": v}
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


AT = "60m"
EXPECTED = [
    (
        recording_rules.SEAT_IDLE,
        [
            sample(recording_rules.SEAT_IDLE, 0, **pod("jupyter-ada", "alpha")),
            sample(recording_rules.SEAT_IDLE, 2, **pod("smoke", "beta")),
        ],
    ),
    (
        recording_rules.LEARNER_IDLE,
        [sample(recording_rules.LEARNER_IDLE, 0, **pod("jupyter-ada", "alpha"), username="ada")],
    ),
    (
        recording_rules.SEATS_IDLE,
        [sample(recording_rules.SEATS_IDLE, 1, lab="alpha"), sample(recording_rules.SEATS_IDLE, 1, lab="beta")],
    ),
    (
        recording_rules.SEATS_IN_USE,
        [sample(recording_rules.SEATS_IN_USE, 4, lab="alpha"), sample(recording_rules.SEATS_IN_USE, 1, lab="beta")],
    ),
    (
        recording_rules.PENDING,
        [sample(recording_rules.PENDING, 0, lab="alpha"), sample(recording_rules.PENDING, 1, lab="beta")],
    ),
    (
        recording_rules.SEAT_UTILISATION,
        [
            sample(recording_rules.SEAT_UTILISATION, value, **pod(name, lab_name))
            for name, lab_name, value in (
                ("jupyter-ada", "alpha", 0),
                ("jupyter-grace", "alpha", 60),
                ("jupyter-alan", "alpha", 0),
                ("jupyter-edsger", "alpha", 0),
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
]


def unit_tests() -> dict[str, Any]:
    return {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": recording_rules.EVALUATION_INTERVAL,
        "tests": [
            {
                "interval": "1m",
                "input_series": INPUT,
                "promql_expr_test": [{"expr": expr, "eval_time": AT, "exp_samples": exp} for expr, exp in EXPECTED],
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
                ],
            }
        ],
    }


def without_annotations(file: dict[str, Any]) -> dict[str, Any]:
    # The alert tests compare annotations too when they are given; these tests hold to labels and values.
    for rule in file["groups"][0]["rules"]:
        rule.pop("annotations", None)
    return file


def run_unit_tests(folder: Path, file: dict[str, Any]) -> tuple[int, str]:
    """promtool test rules of the unit tests against `file`: its exit status and its output."""
    (folder / "rules.yaml").write_text(yaml.safe_dump(without_annotations(copy.deepcopy(file)), sort_keys=False))
    (folder / "tests.yaml").write_text(yaml.safe_dump(unit_tests(), sort_keys=False))
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


def planted(file: dict[str, Any], record: str, old: str, new: str) -> dict[str, Any]:
    changed = copy.deepcopy(file)
    found = [r for r in changed["groups"][0]["rules"] if r.get("record") == record and old in r["expr"]]
    assert found, f"{record} has no {old!r} to plant a defect in"
    for rule in found:
        rule["expr"] = rule["expr"].replace(old, new)
    return changed


@pytest.mark.parametrize(
    ("record", "old", "new", "caught"),
    [
        # The idle threshold compared the wrong way: busy seats would be stopped, idle ones kept.
        (recording_rules.SEAT_IDLE, " < 5", " > 5", recording_rules.SEAT_IDLE),
        # Seats summed across labs: one figure for the stack instead of one per lab.
        (
            recording_rules.SEATS_IN_USE,
            "count by (lab) (gpulab:pod_lab:info and",
            "count (gpulab:pod_lab:info and",
            recording_rules.SEATS_IN_USE,
        ),
        # A seat counted idle as soon as its utilisation dips, whatever the pod's age.
        (
            recording_rules.SEAT_IDLE,
            "and on (namespace, pod) (time() - kube_pod_start_time",
            "or on (namespace, pod) (time() - kube_pod_start_time",
            recording_rules.SEAT_IDLE,
        ),
    ],
    ids=["idle-threshold-reversed", "seats-summed-across-labs", "young-pods-idle"],
)
def test_a_planted_rule_defect_fails_promtools_unit_tests(tmp_path, record, old, new, caught):
    status, output = run_unit_tests(tmp_path, planted(rule_file(), record, old, new))
    assert status == 1 and f"expr: {caught!r}" in output.replace('"', "'"), output


def test_the_scraper_config_passes_promtool_check_config(tmp_path):
    s = settings()
    (tmp_path / "scrape.yaml").write_text(
        yaml.safe_dump(scrape_configuration(s.metrics.namespace, s.karpenter.namespace), sort_keys=False)
    )
    done = promtool("check", "config", "--syntax-only", "scrape.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
