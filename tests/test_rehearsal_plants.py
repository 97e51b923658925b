"""Defects only the class day shows (issue #32), planted one at a time in the render of one small synthetic stack and
played on the twin with Karpenter's controllers (rehearsal/run.py): each must fail the rehearsal with the line a user
would read, and the unplanted stack passes. Without the twin and its stepper (`make twin`) these tests skip in one
line, as tests/test_rehearsal.py's do.

The stack is one lab of 9 seats (3 g4dn.xlarge of one GPU, 3 slices each) with one 2-hour class on Monday 4 January
2027 at 10:00 in Etc/GMT-1 (09:00 UTC all year: a CronJob that loses its timeZone runs an hour late) whose 6 warm
seats fill 2 nodes, learners asking for far less CPU and memory than a node's share, and
consolidation of underutilized nodes allowed (WhenEmptyOrUnderutilized): the 6 warm learners take the 2 warm nodes,
the 3 late ones a node Karpenter launches for them, and at 10:00 the 1st, 5th and 9th leave (rehearsal/class_day.py),
which leaves 6 learners on 9 seats, so Karpenter's consolidation could move a learner to free a node, and only the
class's budget windows stop it.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import rehearsal.run
from components.labels import GPU_RESOURCE
from domain.time import durations
from domain.time.budget_windows import MOVES_LEARNERS
from rehearsal import system_nodes
from render import harness
from tests.conftest import as_cli_config, run_config, stack_values
from tests.support import twin_tests
from tests.support.synthetic import lab

LAB = "seats"
# A zone an hour east of UTC all year (the tz database's Etc/GMT-1; POSIX signs count hours west).
ZONE = "Etc/GMT-1"
TODAY = datetime.date(2027, 1, 4)
START = "2027-01-04T09:00:00Z"
END = "2027-01-04T11:00:00Z"
STACK = stack_values(
    **{
        "gpulab:labs": {
            LAB: lab(
                ["g4dn.xlarge"],
                3,
                max_gpus=3,
                learnerPod={"cpu": "250m", "memory": "1Gi"},
                # Any number of nodes at once outside the class's windows: the empty nodes go in one command after
                # the end rather than one each 20 s of Karpenter's clock, which takes the stepper's wall time.
                disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "100%"}]},
                classes=[{"schedule": "0 10 * * mon", "timeZone": ZONE, "duration": "2h", "warmSeats": 6}],
            )
        }
    }
)
WARM = f"rehearsal: gpulab:labs.{LAB}.classes[0].warmSeats: lab {LAB}'s class classes[0] starting {START}"
SEATS = f"rehearsal: gpulab:labs.{LAB}.maxGpus: lab {LAB}'s class classes[0] starting {START}"
NEVER = (
    "never bound before they left, though the lab held no more learners than its learner seats (maxGpus x "
    "slicesPerGpu) when they arrived"
)


@pytest.fixture(scope="module")
def unplanted(tmp_path_factory: pytest.TempPathFactory) -> tuple[harness.Run, Path]:
    """The stack's run and its render, charts included: made once, copied by each plant."""
    twin_tests.require_twin()
    twin_tests.require_stepper()
    run = run_config("plants", as_cli_config(STACK))
    out = tmp_path_factory.mktemp("plants") / "render"
    twin_tests.render_with_charts(run, out)
    return run, out


def _rehearsed(unplanted: tuple[harness.Run, Path], tmp_path: Path, plant: Callable[[Path], None] | None) -> Any:
    """The class day of a copy of the render with `plant` applied to it: rehearsal.json's content."""
    run, base = unplanted
    out = tmp_path / "render"
    shutil.copytree(base, out)
    if plant is not None:
        plant(out)
    return rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region)


def _resources(out: Path, type_token: str, change: Callable[[dict[str, Any]], None]) -> None:
    """`change` applied to the inputs of each of Pulumi's resources of that type (resources.json, which the rehearsal
    applies)."""
    path = out / "resources.json"
    resources = json.loads(path.read_text())
    for r in resources:
        if r["type"] == type_token:
            change(r["inputs"])
    path.write_text(json.dumps(resources))


def test_the_unplanted_stack_keeps_its_classs_promises(unplanted, tmp_path: Path) -> None:
    done = _rehearsed(unplanted, tmp_path, None)
    assert rehearsal.run.problems(done) == []
    (played,) = done["labs"][LAB]["classes"]
    assert (played["readyAtStart"], played["warmSeats"], played["learnersArrived"]) == (6, 6, 9), played
    # No learner image without gpulab:jupyterhub: the 3 late learners wait for the node Karpenter launches for the
    # first of them at 09:01, its slices 135 s later on the timing table (domain/capacity/boot_timings.py).
    assert played["coldWaitToReadySeconds"] == {"p50": 75.0, "p95": 135.0, "max": 135.0}, played
    assert played["disruptedDuringClass"] == 0 and played["nodesAfterEnd"] == 0, played
    events = done["labs"][LAB]["events"]
    assert {e["learner"] for e in events if e["what"] == "bound"} == {
        e["learner"] for e in events if e["what"] == "arrive"
    }, "every learner bound"


def _seat_template_limits_its_slice_without_requesting_it(out: Path) -> None:
    def plant(template: dict[str, Any]) -> None:
        (container,) = template["template"]["spec"]["containers"]
        del container["resources"]["requests"][GPU_RESOURCE]
        assert container["resources"]["limits"][GPU_RESOURCE] == 1

    _resources(out, "kubernetes:core/v1:PodTemplate", plant)


def _nodepool_taint_the_learners_do_not_tolerate(out: Path) -> None:
    def plant(pool: dict[str, Any]) -> None:
        pool["spec"]["template"]["spec"]["taints"].append(
            {"key": "example.com/reserved", "value": "staff", "effect": "NoSchedule"}
        )

    _resources(out, "kubernetes:karpenter.sh/v1:NodePool", plant)


def _device_plugin_replicas_below_the_node_overlay(out: Path) -> None:
    """The lab's time-slicing profile in the device plugin's ConfigMap gives 2 slices a GPU where its NodeOverlay tells
    Karpenter 3: Karpenter plans with the overlay, the node advertises what the plugin says
    (rehearsal/stepper/cloud.go)."""
    (overlay,) = [
        r["inputs"] for r in json.loads((out / "resources.json").read_text()) if r["type"].endswith(":NodeOverlay")
    ]
    assert overlay["spec"]["capacity"][GPU_RESOURCE] == "3"
    path = out / "charts" / "nvidia-device-plugin.yaml"
    docs = list(yaml.safe_load_all(path.read_text()))
    (config_map,) = [d for d in docs if d and d["kind"] == "ConfigMap" and LAB in d.get("data", {})]
    profile = yaml.safe_load(config_map["data"][LAB])
    (sliced,) = profile["sharing"]["timeSlicing"]["resources"]
    assert sliced == {"name": GPU_RESOURCE, "replicas": 3}
    sliced["replicas"] = 2
    config_map["data"][LAB] = yaml.safe_dump(profile)
    path.write_text(yaml.safe_dump_all(docs))


@pytest.mark.parametrize(
    ("plant", "lines"),
    [
        # Kubernetes defaults a Pod's requests from its limits, never a PodTemplate's: the buffer's copies then ask
        # for CPU and memory alone, all 6 fit the one node Karpenter warms, whose 3 slices seat 3 learners at 09:00.
        # The other 3 wait for nodes launched at 09:00 and 09:01 (their slices 135 s later): which of them gets the
        # first is kube-scheduler's queue's choice (its backoffs run on the wall clock), so their waits are not
        # asserted.
        (
            _seat_template_limits_its_slice_without_requesting_it,
            [
                f"{WARM} found 3 of its 6 warm seats ready at its start (notebooks running); the others waited for a "
                "node launched or an image pulled after the start, or were never bound (wait to ready p95 "
            ],
        ),
        # Neither the buffer's copies nor the learners tolerate it: Karpenter launches nothing for them, and each
        # learner waits until they leave (the 1st, 5th and 9th at 10:00, the rest at 11:00).
        (
            _nodepool_taint_the_learners_do_not_tolerate,
            [
                f"{WARM} found 0 of its 6 warm seats ready at its start (notebooks running); the others waited for a "
                "node launched or an image pulled after the start, or were never bound (wait to ready p95 7200 s, max "
                "7200 s)",
                f"{SEATS} never seated 9 of its 9 learners: {', '.join(f'{LAB}-{n}' for n in range(1, 10))} "
                f"{NEVER} (wait p95 7200 s, max 7200 s)",
            ],
        ),
        # Karpenter warms the buffer's 6 seats on 3 nodes of 2 slices (it plans 3 a node, then sees 2): the lab's
        # maxGpus of nodes, all its NodePool's cpu limit (12, 3 nodes of 4 vCPUs) lets it launch, though its
        # nvidia.com/gpu limit (9) counts only 6. The 3 late learners wait, the 7th and 8th for the seats the 10:00
        # leavers free, the 9th (who leaves then) for ever.
        (
            _device_plugin_replicas_below_the_node_overlay,
            [f"{SEATS} never seated 1 of its 9 learners: {LAB}-9 {NEVER} (wait p95 3540 s, max 3540 s)"],
        ),
    ],
    ids=["seat-template-without-request", "untolerated-taint", "plugin-replicas-below-overlay"],
)
def test_a_planted_defect_fails_the_class_day_with_its_finding(
    unplanted, tmp_path: Path, plant: Callable[[Path], None], lines: list[str]
) -> None:
    """Each line as written, or beginning so where the rest is kube-scheduler's choice (above)."""
    found = rehearsal.run.problems(_rehearsed(unplanted, tmp_path, plant))
    assert len(found) == len(lines) and all(f.startswith(line) for f, line in zip(found, lines, strict=True)), found


def _class_budget_an_hour_short(out: Path) -> None:
    """The class's window against moving learners (Drifted, Underutilized: from the warm-up to the end) ends an hour
    before the class does, at 10:00."""

    def plant(pool: dict[str, Any]) -> None:
        (window,) = [b for b in pool["spec"]["disruption"]["budgets"] if b.get("reasons") == list(MOVES_LEARNERS)]
        window["duration"] = durations.format_duration(durations.duration_minutes(window["duration"]) - 60)

    _resources(out, "kubernetes:karpenter.sh/v1:NodePool", plant)


def test_a_window_an_hour_short_lets_karpenter_move_a_learner(unplanted, tmp_path: Path) -> None:
    """After the 10:00 leavers, once consolidateAfter (10m) has passed since, Karpenter's consolidation moves the
    learners of one node onto the others' free seats, which only the class's window forbade."""
    done = _rehearsed(unplanted, tmp_path, _class_budget_an_hour_short)
    (line,) = rehearsal.run.problems(done)
    (played,) = done["labs"][LAB]["classes"]
    moved = played["disruptedDuringClass"]
    prefix = (
        f"rehearsal: gpulab:labs.{LAB}.classes[0] (its disruption budget windows should hold every node from the "
        f"warm-up to the end): lab {LAB}'s class classes[0] starting {START} had {moved} learner pod(s) moved before "
        f"its end at {END}: "
    )
    assert moved >= 1 and line.startswith(prefix), line
    pods = line.removeprefix(prefix).split(", ")
    assert len(pods) == moved, line
    for pod in pods:
        found = re.fullmatch(rf"default/{LAB}-\d+ from {LAB}-\w+ at (\S+) \(Underutilized\)", pod)
        assert found, pod
        at = datetime.datetime.fromisoformat(found[1])
        # The last hour, after the leavers' pod events plus consolidateAfter: no sooner than Karpenter may.
        assert datetime.datetime(2027, 1, 4, 10, 10, tzinfo=datetime.UTC) <= at, pod


def _cron_job(out: Path, suffix: str, change: Callable[[dict[str, Any]], None]) -> None:
    """`change` applied to the class's CronJob whose name ends in `suffix` (-warm, -release)."""

    def plant(cron_job: dict[str, Any]) -> None:
        if cron_job["metadata"]["name"].endswith(suffix):
            change(cron_job)

    _resources(out, "kubernetes:batch/v1:CronJob", plant)


def _warm_up_suspended(out: Path) -> None:
    _cron_job(out, "-warm", lambda c: c["spec"].update(suspend=True))


def _warm_up_an_hour_late(out: Path) -> None:
    def plant(cron_job: dict[str, Any]) -> None:
        minute, hour, *rest = cron_job["spec"]["schedule"].split()
        cron_job["spec"]["schedule"] = " ".join([minute, str(int(hour) + 1), *rest])

    _cron_job(out, "-warm", plant)


def _no_time_zone(out: Path) -> None:
    _cron_job(out, "", lambda c: c["spec"].pop("timeZone"))


def _job_pod_on_no_node(out: Path) -> None:
    def plant(cron_job: dict[str, Any]) -> None:
        cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeSelector"]["example.com/pool"] = "none"

    _cron_job(out, "-warm", plant)


def _rendered_cron_jobs(unplanted: tuple[harness.Run, Path]) -> dict[str, dict[str, Any]]:
    """The unplanted render's class CronJobs by the end of their name (warm, release)."""
    _, out = unplanted
    cron_jobs = [
        r["inputs"] for r in json.loads((out / "resources.json").read_text()) if r["type"].endswith(":CronJob")
    ]
    return {c["metadata"]["name"].rsplit("-", 1)[1]: c for c in cron_jobs}


def _missed(cron_job: dict[str, Any], fired: str, want: str, why: str) -> str:
    meta = cron_job["metadata"]
    return (
        f"rehearsal: CronJob {meta['namespace']}/{meta['name']} made its Jobs at {fired} where its class needs them "
        f"at {want} (by Kubernetes' CronJob controller on the rehearsal's clock): {why}"
    )


def test_the_class_cronjobs_fire_by_their_controller_on_time(unplanted, tmp_path: Path) -> None:
    """Unplanted, Kubernetes' CronJob controller makes each Job at its class's time, on the simulated clock; the
    Job's pod is placed on a system node and its command run as the class scheduler."""
    done = _rehearsed(unplanted, tmp_path, None)
    assert [(c["name"].rsplit("-", 1)[1], c["firedAt"], c["by"]) for c in done["cronJobs"]] == [
        ("warm", "2027-01-04T08:40:00Z", "cronjob-controller"),
        ("release", START, "cronjob-controller"),
    ]
    assert [(j["exitCode"], j["bufferReplicas"]) for j in done["jobs"]] == [(0, 6), (0, 0)]
    system = {n["metadata"]["name"] for n in system_nodes.nodes(unplanted[1])}
    assert {j["node"] for j in done["jobs"]} <= system, (done["jobs"], system)


def test_a_suspended_warm_up_fails_the_rehearsal(unplanted, tmp_path: Path) -> None:
    warm = _rendered_cron_jobs(unplanted)["warm"]
    lines = rehearsal.run.problems(_rehearsed(unplanted, tmp_path, _warm_up_suspended))
    why = f"schedule {warm['spec']['schedule']!r} on timeZone {ZONE}; suspend: true"
    assert _missed(warm, "no time", "2027-01-04T08:40:00Z", why) in lines, lines


def test_a_warm_up_an_hour_late_fails_the_rehearsal(unplanted, tmp_path: Path) -> None:
    warm = _rendered_cron_jobs(unplanted)["warm"]
    done = _rehearsed(unplanted, tmp_path, _warm_up_an_hour_late)
    minute, hour, *rest = warm["spec"]["schedule"].split()
    late = " ".join([minute, str(int(hour) + 1), *rest])
    why = f"schedule {late!r} on timeZone {ZONE}"
    assert _missed(warm, "2027-01-04T09:40:00Z", "2027-01-04T08:40:00Z", why) in rehearsal.run.problems(done)


def test_cronjobs_without_their_time_zone_fail_the_rehearsal(unplanted, tmp_path: Path) -> None:
    """Without spec.timeZone the controller reads a schedule on its own clock, UTC: both runs an hour late."""
    rendered = _rendered_cron_jobs(unplanted)
    lines = rehearsal.run.problems(_rehearsed(unplanted, tmp_path, _no_time_zone))
    for name, fired, want in [
        ("release", "2027-01-04T10:00:00Z", START),
        ("warm", "2027-01-04T09:40:00Z", "2027-01-04T08:40:00Z"),
    ]:
        why = f"schedule {rendered[name]['spec']['schedule']!r} on no timeZone (the controller's, UTC)"
        assert _missed(rendered[name], fired, want, why) in lines, lines


def test_a_job_pod_no_node_takes_fails_the_rehearsal(unplanted, tmp_path: Path) -> None:
    warm = _rendered_cron_jobs(unplanted)["warm"]
    done = _rehearsed(unplanted, tmp_path, _job_pod_on_no_node)
    (job,) = [j for j in done["jobsFailed"] if j["job"].startswith(f"{warm['metadata']['namespace']}/")]
    prefix = f"rehearsal: Job {job['job']}: kube-scheduler placed its pod on no node: 0/"
    assert [line for line in rehearsal.run.problems(done) if line.startswith(prefix)], rehearsal.run.problems(done)
    assert "node(s) didn't match Pod's node affinity/selector" in job["output"], job
