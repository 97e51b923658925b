"""Class seats: warm seats before each class (PodTemplate, CapacityBuffer, CronJobs, RBAC) and the class budgets."""

import datetime
import json
from fractions import Fraction

import pytest

import render.run
from components.karpenter.class_seats_manifests import (
    KUBECTL_IMAGE,
    SHELL,
    SHELL_IMAGE,
    class_key,
)
from components.karpenter.manifests import node_pool
from components.labels import GPU_RESOURCE, SYSTEM_NODE_LABEL, SYSTEM_NODE_VALUE
from domain.capacity.node_capacity import seats_per_node
from domain.capacity.quantity import quantity
from domain.stack.namespaces import class_namespace
from domain.time import cron, durations
from domain.time import zones as time_zones
from domain.time.budget_windows import ARRIVAL_MINUTES
from reports import class_table
from reports.summary import LEARNER_LEAD_IN, summary
from tests.conftest import BASE, run_values, stack_values
from tests.support import tables
from tests.support.class_jobs import patches, requires_sh
from tests.support.crd_schema import crd_problems, requires_upstream
from tests.support.dependencies import waits_for
from tests.support.nodes import lab_nodes, system_nodes
from tests.support.pod_specs import karpenter_requests, pod_specs, restricted_problems
from tests.support.scheduling import unschedulable_because
from tests.support.synthetic import SYNTHETIC, TIME_ZONE_STACK
from tests.support.synthetic import lab as lab_values

BUFFER = "kubernetes:autoscaling.x-k8s.io/v1beta1:CapacityBuffer"
CRON_JOB = "kubernetes:batch/v1:CronJob"
POD_TEMPLATE = "kubernetes:core/v1:PodTemplate"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def run():
    return run_values(SYNTHETIC["classes"])


def in_namespace(run, type_token: str, lab_name: str) -> list:
    return [r for r in run.of_type(type_token) if r.inputs["metadata"]["namespace"] == class_namespace(lab_name)]


def labs_with_classes(run) -> dict:
    return {name: lab for name, lab in run.stack.settings.labs.items() if lab.classes}


def test_class_labs_get_a_buffer_and_two_jobs_per_class_only(run):
    for name, lab in run.stack.settings.labs.items():
        assert len(in_namespace(run, BUFFER, name)) == len(lab.classes)
        assert len(in_namespace(run, CRON_JOB, name)) == 2 * len(lab.classes)
        assert len(in_namespace(run, POD_TEMPLATE, name)) == (1 if lab.classes else 0)


@requires_upstream
def test_capacity_buffers_pass_the_upstream_crd(run):
    buffers = run.of_type(BUFFER)
    assert buffers
    for r in buffers:
        assert crd_problems(r.inputs) == [], r.name


@requires_upstream
def test_node_pools_with_class_budgets_pass_the_upstream_crd(run):
    for r in run.of_type(NODE_POOL):
        assert crd_problems(r.inputs) == [], r.name


def test_buffers_start_at_zero_pulumi_leaves_replicas_to_jobs(run):
    for r in run.of_type(BUFFER):
        assert r.inputs["spec"] == {"podTemplateRef": {"name": "learner-seat"}, "replicas": 0}
        assert r.ignore_changes == ("spec.replicas",)
        # Karpenter looks the template up by name in the buffer's own namespace.
        same_namespace = [
            t
            for t in run.of_type(POD_TEMPLATE)
            if t.inputs["metadata"]["namespace"] == r.inputs["metadata"]["namespace"]
        ]
        assert [t.inputs["metadata"]["name"] for t in same_namespace] == ["learner-seat"]


def test_a_seat_would_schedule_on_the_labs_nodes_and_only_there(run):
    pools = lab_nodes([r.inputs for r in run.of_type(NODE_POOL)])
    for name in labs_with_classes(run):
        spec = in_namespace(run, POD_TEMPLATE, name)[0].inputs["template"]["spec"]
        assert all(unschedulable_because(spec, node) is None for node in pools[name]), name
        elsewhere = [node for other, nodes in pools.items() if other != name for node in nodes] + system_nodes(run)
        assert all(unschedulable_because(spec, node) is not None for node in elsewhere), name


def test_a_warm_copy_reserves_a_learners_slice_cpu_and_memory(run):
    for name, lab in labs_with_classes(run).items():
        spec = in_namespace(run, POD_TEMPLATE, name)[0].inputs["template"]["spec"]
        # The stored template's requests, which nothing fills from limits; limits do not count.
        assert karpenter_requests(spec) == {
            GPU_RESOURCE: 1,
            "cpu": quantity(lab.learner_requests["cpu"]),
            "memory": quantity(lab.learner_requests["memory"]),
        }, name


def copies_per_node(requests: dict, instance_type: str, lab) -> int:
    """How many warm copies Karpenter packs onto a new node of the type: the NodeOverlay's slices, the allocatable
    CPU and memory less the requests of the DaemonSets on the node (tests/test_daemonsets.py checks those against the
    chart and the add-ons' sources), each divided by what one copy requests (a resource it does not request never
    limits it)."""
    (node,) = [share for share in lab.node_shares if share.instance_type == instance_type]
    room = {
        GPU_RESOURCE: Fraction(seats_per_node(instance_type, lab.slices_per_gpu)),
        "cpu": Fraction(node.allocatable.cpu_millis, 1000) - sum(d.cpu for d in node.daemonsets),
        "memory": node.allocatable.memory_mib * 2**20 - sum(d.memory for d in node.daemonsets),
    }
    return min(int(room[key] // requests[key]) for key in room if requests.get(key))


def test_each_node_type_fits_exactly_its_slices_of_warm_copies(run):
    # With the slice unrequested, a g4dn.xlarge of a 3-slice lab would take its CPU's worth of copies, not 3, and a
    # class would get a fraction of the warm GPUs it asked for.
    for name, lab in labs_with_classes(run).items():
        requests = karpenter_requests(in_namespace(run, POD_TEMPLATE, name)[0].inputs["template"]["spec"])
        for instance_type in lab.instance_types:
            slices = seats_per_node(instance_type, lab.slices_per_gpu)
            assert copies_per_node(requests, instance_type, lab) == slices, (name, instance_type)


def cron_jobs_of(run, name: str) -> dict[str, dict]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in in_namespace(run, CRON_JOB, name)}


def test_warm_jobs_fire_a_warmup_early_release_jobs_at_start(run):
    span = (datetime.datetime(2026, 1, 1), datetime.datetime(2028, 1, 1))  # a leap day, every weekday on every date
    for name, lab in labs_with_classes(run).items():
        jobs = cron_jobs_of(run, name)
        for lab_class in lab.classes:
            warm, release = jobs[f"{class_key(lab_class)}-warm"], jobs[f"{class_key(lab_class)}-release"]
            warmup = datetime.timedelta(minutes=durations.duration_minutes(lab_class.warmup))
            starts = list(cron.parse(lab_class.schedule).fires(span[0] + warmup, span[1] + warmup))
            assert list(cron.parse(warm["spec"]["schedule"]).fires(*span)) == [s - warmup for s in starts]
            assert cron.parse(release["spec"]["schedule"]) == lab_class.start
            assert warm["spec"]["timeZone"] == release["spec"]["timeZone"] == lab_class.zone


def test_a_20m_warmup_warms_a_monday_0010_class_on_sunday_2350(run):
    jobs = cron_jobs_of(run, "morning")
    assert "50 23 * * sun" in {j["spec"]["schedule"] for n, j in jobs.items() if n.endswith("-warm")}
    pool = run.one(NODE_POOL, "nodepool-morning").inputs
    assert {
        "nodes": "0",
        "reasons": ["Drifted", "Underutilized"],
        "schedule": "50 23 * * sun",
        "duration": "1h50m",
    } in (pool["spec"]["disruption"]["budgets"])


def test_jobs_patch_only_their_buffer_to_warm_seats_then_zero(run):
    for name, lab in labs_with_classes(run).items():
        jobs = cron_jobs_of(run, name)
        buffers = {r.inputs["metadata"]["name"] for r in in_namespace(run, BUFFER, name)}
        for lab_class in lab.classes:
            key = class_key(lab_class)
            assert key in buffers
            for suffix, seats in (("warm", lab.warm_seats(lab_class)), ("release", 0)):
                container = jobs[f"{key}-{suffix}"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
                args = container["args"]
                assert args[:3] == ["patch", "capacitybuffers.autoscaling.x-k8s.io", key]
                assert f"--namespace={class_namespace(name)}" in args
                patch = json.loads(next(a for a in args if a.startswith("--patch=")).removeprefix("--patch="))
                assert patch == {"spec": {"replicas": seats}}
                assert container["image"] == KUBECTL_IMAGE


def test_a_warm_job_quits_before_start_never_undoing_release(run):
    for name, lab in labs_with_classes(run).items():
        jobs = cron_jobs_of(run, name)
        for lab_class in lab.classes:
            warm = next(j for j in jobs.values() if j["spec"]["schedule"] == str(lab_class.warm_from))
            late = (
                warm["spec"]["startingDeadlineSeconds"] + warm["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
            )
            assert late <= 60 * durations.duration_minutes(lab_class.warmup)


def test_the_scheduler_may_only_get_and_patch_its_labs_buffers(run):
    for name in labs_with_classes(run):
        (role,) = in_namespace(run, ROLE, name)
        buffers = sorted(r.inputs["metadata"]["name"] for r in in_namespace(run, BUFFER, name))
        (rule,) = role.inputs["rules"]
        # `kubectl patch <type> <name>` GETs the object, then PATCHes it (tests/test_rehearsal.py runs it on the twin).
        assert {**rule, "resourceNames": sorted(rule["resourceNames"])} == {
            "apiGroups": ["autoscaling.x-k8s.io"],
            "resources": ["capacitybuffers"],
            "resourceNames": buffers,
            "verbs": ["get", "patch"],
        }
        for job in cron_jobs_of(run, name).values():
            (container,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
            assert container["args"][0] == "patch"
        (binding,) = in_namespace(run, ROLE_BINDING, name)
        account = binding.inputs["subjects"][0]
        assert binding.inputs["roleRef"]["name"] == role.inputs["metadata"]["name"]
        assert account["namespace"] == class_namespace(name)
        for job in cron_jobs_of(run, name).values():
            assert job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == account["name"]


def test_scheduler_pods_run_on_the_system_nodes(run):
    for name in labs_with_classes(run):
        for job in cron_jobs_of(run, name).values():
            pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            assert pod["nodeSelector"][SYSTEM_NODE_LABEL] == SYSTEM_NODE_VALUE


def test_class_namespace_pods_pass_its_restricted_profile(run):
    for name in labs_with_classes(run):
        namespace = next(
            r
            for r in run.of_type("kubernetes:core/v1:Namespace")
            if r.inputs["metadata"]["name"] == class_namespace(name)
        )
        assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        inside = [
            r.inputs for r in run.resources if r.inputs.get("metadata", {}).get("namespace") == class_namespace(name)
        ]
        specs = dict(pod_specs(inside))
        # The seat template and each class's two CronJobs.
        assert len(specs) == 1 + 2 * len(run.stack.settings.labs[name].classes)
        assert {where: restricted_problems(spec) for where, spec in specs.items()} == {key: [] for key in specs}


def test_budgets_block_moves_till_end_and_emptying_at_arrival(run):
    for name, lab in labs_with_classes(run).items():
        budgets = run.one(NODE_POOL, f"nodepool-{name}").inputs["spec"]["disruption"]["budgets"]
        user = [b.model_dump(by_alias=True, exclude_none=True) for b in lab.disruption.budgets]
        assert budgets[: len(user)] == user
        added = budgets[len(user) :]
        # A class in UTC all year has one pair; tests/test_class_year.py holds the others to every minute of a year.
        assert all(c.zone == time_zones.UTC and c.term is None for c in lab.classes)
        assert len(added) == 2 * len(lab.classes)
        for lab_class, (moves, empty) in zip(lab.classes, zip(added[::2], added[1::2], strict=True), strict=True):
            warmup = durations.duration_minutes(lab_class.warmup)
            duration = durations.duration_minutes(lab_class.duration)
            assert moves == {
                "nodes": "0",
                "reasons": ["Drifted", "Underutilized"],
                "schedule": str(lab_class.warm_from),
                "duration": durations.format_duration(warmup + duration),
            }
            assert empty == {
                "nodes": "0",
                "reasons": ["Empty"],
                "schedule": str(lab_class.warm_from),
                "duration": durations.format_duration(warmup + min(ARRIVAL_MINUTES, duration)),
            }


@pytest.mark.parametrize(
    ("labs", "gate"),
    [({"a": [], "b": []}, False), ({"a": [], "b": [{"schedule": "0 9 * * *", "duration": "1h"}]}, True), ({}, False)],
    ids=["no-classes", "one-lab-with-classes", "no-labs"],
)
def test_the_buffer_gate_is_on_exactly_when_a_lab_has_classes(labs, gate):
    values = {
        name: {"instanceTypes": ["g4dn.xlarge"], "ami": "al2023@latest", "classes": classes}
        for name, classes in labs.items()
    }
    run = run_values(stack_values(**{"gpulab:labs": values}))
    helm = run.one(RELEASE, "karpenter").inputs["values"]
    assert helm["settings"]["featureGates"]["capacityBuffer"] is gate


def test_warm_seats_never_exceed_the_node_pools_gpu_limit(run):
    # Karpenter schedules the buffer's copies like pods, within the NodePool's limits: more would stay unscheduled.
    for name, lab in labs_with_classes(run).items():
        limit = int(run.one(NODE_POOL, f"nodepool-{name}").inputs["spec"]["limits"][GPU_RESOURCE])
        assert all(lab.warm_seats(c) <= limit for c in lab.classes)


TERM = {"start": "2027-01-11", "end": "2027-04-30"}


def with_classes(*classes: dict, **lab: object) -> dict:
    intro = {**BASE["gpulab:labs"]["intro"], **lab, "classes": list(classes)}
    return stack_values(**{"gpulab:labs": {"intro": intro}})


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            with_classes({"schedule": "0 9 * * monday", "duration": "1h"}),
            "gpulab:labs.intro.classes[0].schedule: '0 9 * * monday' is not a Go cron schedule: day-of-week field",
        ),
        (
            with_classes({"schedule": "0 9 * * mon", "duration": "1h"}, {"schedule": "0 0 1 * *", "duration": "1h"}),
            "gpulab:labs.intro.classes[1].schedule: cannot be warmed up 20m ahead exactly: it starts on the 1st of a "
            "month",
        ),
        (
            with_classes({"schedule": "10,50 9 * * *", "duration": "1h"}),
            "gpulab:labs.intro.classes[0].schedule: cannot be warmed up 20m ahead exactly: its starts at 09:10, 09:50",
        ),
        (
            with_classes({"schedule": "0 9,10 * * *", "duration": "1h", "warmup": "1h"}),
            "gpulab:labs.intro.classes[0].schedule: starts only 1h apart at times, not more than its warmup of 1h",
        ),
        (
            with_classes({"schedule": "0 9 * * *", "duration": "1 hour"}),
            "gpulab:labs.intro.classes[0].duration: must be hours and minutes such as 45m, 2h or 1h30m",
        ),
        (
            with_classes({"schedule": "0 9 * * *", "duration": "1h", "warmup": "7h"}),
            "gpulab:labs.intro.classes[0].warmup: must be between 1m and 6h",
        ),
        (
            with_classes({"schedule": "0 9 * * *", "duration": "1h", "warmSeats": 13}),
            "gpulab:labs.intro.classes[0].warmSeats: must be at most the lab's 12 learner seats",
        ),
        (
            with_classes({"schedule": "0 9 * * *", "duration": "1h"}, {"schedule": "0 9 ? * *", "duration": "2h"}),
            "gpulab:labs.intro.classes[1].schedule: starts when classes[0] does",
        ),
        (
            with_classes({"schedule": "0 9 * * *", "duration": "1h", "seats": 3}),
            "gpulab:labs.intro.classes[0].seats: unknown key; did you mean warmSeats? allowed keys: duration, "
            "schedule, term, timeZone, warmSeats, warmup",
        ),
        (
            with_classes({"schedule": "0 9 * * tue", "duration": "1h", "timeZone": "Europe/Berln"}),
            "gpulab:labs.intro.classes[0].timeZone: 'Europe/Berln' is not a time zone of the IANA tz database (2026f); "
            "did you mean Europe/Berlin?",
        ),
        (
            # An abbreviation names the zones whose clocks show it, not a name it resembles (CEST once suggested EST).
            with_classes({"schedule": "0 9 * * tue", "duration": "1h", "timeZone": "CEST"}),
            "gpulab:labs.intro.classes[0].timeZone: 'CEST' is not a time zone of the IANA tz database (2026f); CEST "
            "is the abbreviation of an offset, not a zone, and a zone also knows when its clocks change; did you mean "
            "Europe/Berlin, Europe/Paris or Africa/Ceuta, whose clocks show CEST? names look like Europe/Berlin, "
            "America/New_York or Etc/UTC",
        ),
        (
            # An offset names the zones of that offset and the Etc/GMT zone, its sign explained (UTC+1 once suggested
            # UTC).
            {**with_classes({"schedule": "0 9 * * tue", "duration": "1h"}), "gpulab:timeZone": "UTC+1"},
            "gpulab:timeZone: 'UTC+1' is not a time zone of the IANA tz database (2026f); UTC+01:00 is an offset, not "
            "a zone: write the zone of the class's place, such as Europe/Berlin or Europe/Paris, which follows the "
            "place's clocks, summer time included, or Etc/GMT-1 for UTC+01:00 all year (the sign is reversed: Etc/GMT "
            "zones count hours west of Greenwich, as POSIX does); names look like Europe/Berlin, America/New_York or "
            "Etc/UTC",
        ),
        (
            with_classes({"schedule": "0 9 * * tue", "duration": "1h", "timeZone": "+05:30"}),
            "gpulab:labs.intro.classes[0].timeZone: '+05:30' is not a time zone of the IANA tz database (2026f); "
            "UTC+05:30 is an offset, not a zone: write the zone of the class's place, such as Asia/Kolkata or "
            "Asia/Colombo, which follows the place's clocks, summer time included; names look like",
        ),
        (
            with_classes({"schedule": "0 9 * * tue", "duration": 120}),
            "gpulab:labs.intro.classes[0].duration: a duration needs a unit, e.g. 120m or 2h; got the number 120",
        ),
        (
            with_classes({"schedule": "0 9 * * tue", "duration": "1h", "warmup": 90}),
            "gpulab:labs.intro.classes[0].warmup: a duration needs a unit, e.g. 90m or 1h30m; got the number 90",
        ),
        (
            with_classes(expireAfter=720),
            "gpulab:labs.intro.expireAfter: a duration needs a unit, e.g. 720m or 12h; got the number 720",
        ),
        (
            {**with_classes({"schedule": "0 9 * * tue", "duration": "1h"}), "gpulab:timeZone": "Mars/Olympus_Mons"},
            "gpulab:timeZone: 'Mars/Olympus_Mons' is not a time zone of the IANA tz database",
        ),
        (
            with_classes(
                {"schedule": "0 9 * * tue", "duration": "1h", "term": {"start": "2027-05-01", "end": "2027-04-30"}}
            ),
            "gpulab:labs.intro.classes[0].term.end: must not be before the term's start, 2027-05-01; got 2027-04-30",
        ),
        (
            with_classes(
                {"schedule": "0 9 * * tue", "duration": "1h", "term": {**TERM, "skip": ["2027-04-06", "2027-05-04"]}}
            ),
            "gpulab:labs.intro.classes[0].term.skip[1]: 2027-05-04 is outside the term (2027-01-11 to 2027-04-30)",
        ),
        (
            with_classes({"schedule": "0 9 * * tue", "duration": "1h", "term": {**TERM, "skip": ["2027-04-07"]}}),
            "gpulab:labs.intro.classes[0].term.skip[0]: 2027-04-07 is a Wednesday, on which the class does not start",
        ),
        (
            with_classes(
                {"schedule": "0 9 * * tue", "duration": "1h", "term": {"start": "2027-01-13", "end": "2027-01-18"}}
            ),
            "gpulab:labs.intro.classes[0].term: has no day on which the class starts (0 9 * * tue)",
        ),
        (
            with_classes(
                {"schedule": "0 9 * * tue", "duration": "1h", "term": {"start": "11/01/2027", "end": "2027-04-30"}}
            ),
            "gpulab:labs.intro.classes[0].term.start: must be a day written YYYY-MM-DD, such as 2027-01-11, got "
            "'11/01/2027'",
        ),
        (
            with_classes({"schedule": "30 2 * * sun", "duration": "1h", "timeZone": "Europe/Berlin", "term": TERM}),
            "gpulab:labs.intro.classes[0].schedule: its start, 02:30 on Sun 2027-03-28 does not exist in "
            "Europe/Berlin: its clocks go forward 1h then (UTC+01:00 to UTC+02:00)",
        ),
        (
            with_classes(
                {
                    "schedule": "30 2 * * sun",
                    "duration": "1h",
                    "timeZone": "Europe/Berlin",
                    "term": {"start": "2027-09-01", "end": "2027-12-20"},
                }
            ),
            "gpulab:labs.intro.classes[0].schedule: its start, 02:30 on Sun 2027-10-31 happens twice in Europe/Berlin",
        ),
        (
            # Without a term, every class day of a whole calendar cycle counts: the next spring change is the first.
            with_classes({"schedule": "30 2 * * sun", "duration": "1h", "timeZone": "Europe/Berlin"}),
            "gpulab:labs.intro.classes[0].schedule: its start, 02:30 on Sun 2026-03-29 does not exist in Europe/Berlin",
        ),
        (
            # Cairo's clocks skip midnight on Fri 2026-04-24 (tzdata 2026f): the CronJob controller's robfig/cron
            # v3.0.1 misses every job of a weekly class on that day, not only those in the gap.
            with_classes(
                {
                    "schedule": "0 9 * * fri",
                    "duration": "1h",
                    "timeZone": "Africa/Cairo",
                    "term": {"start": "2026-02-06", "end": "2026-06-26"},
                }
            ),
            "gpulab:labs.intro.classes[0].schedule: the CronJob controller would not run its warm-up at 08:40 nor its "
            "release at 09:00 on Fri 2026-04-24: Africa/Cairo skips midnight on that day (its clocks go forward at "
            "00:00), and the controller's cron library (robfig/cron v3.0.1) then misses the whole day unless the "
            "schedule fires the day before too; skip that day (term.skip), or choose another zone",
        ),
        (
            # Without a term, every year of the horizon: Beirut's last Sunday of March.
            with_classes({"schedule": "0 9 * * sun", "duration": "1h", "warmup": "1h", "timeZone": "Asia/Beirut"}),
            "gpulab:labs.intro.classes[0].schedule: the CronJob controller would not run its warm-up at 08:00 nor its "
            "release at 09:00 on Sun 2026-03-29, Sun 2027-03-28, Sun 2028-03-26 and 25 more: Asia/Beirut skips "
            "midnight on those days (its clocks go forward at 00:00), and the controller's cron library (robfig/cron "
            "v3.0.1) then misses the whole day unless the schedule fires the day before too; give the class a term "
            "that skips those days, or choose another zone",
        ),
        (
            # A start inside the gap at midnight is refused as before, at the start.
            with_classes(
                {
                    "schedule": "0 0 * * fri",
                    "duration": "1h",
                    "timeZone": "Africa/Cairo",
                    "term": {"start": "2026-02-06", "end": "2026-06-26"},
                }
            ),
            "gpulab:labs.intro.classes[0].schedule: its start, 00:00 on Fri 2026-04-24 does not exist in Africa/Cairo: "
            "its clocks go forward 1h then (UTC+02:00 to UTC+03:00); choose a start the clock shows once",
        ),
        (
            with_classes({"schedule": "10 3 * * sun", "duration": "1h", "timeZone": "Europe/Berlin", "term": TERM}),
            "gpulab:labs.intro.classes[0].warmup: its warm-up would begin at 02:50 on Sun 2027-03-28 does not exist",
        ),
        (
            with_classes({"schedule": "0 9 1 * *", "duration": "1h", "timeZone": "Australia/Sydney"}),
            "gpulab:labs.intro.classes[0].schedule: its budget windows at UTC+11:00 cannot be one cron schedule in "
            "UTC: it starts on the 1st of a month",
        ),
        (
            with_classes(learnerPod={"cpu": "2"}),
            "gpulab:labs.intro.learnerPod.cpu: must be at most 1236m so that every slice",
        ),
        (
            with_classes(*[{"schedule": f"0 9 {day} * *", "duration": "1h"} for day in range(1, 26)]),
            "gpulab:labs.intro.classes: its classes add 50 disruption budgets (2 for each class and UTC offset it "
            "has), and a NodePool takes at most 50; this lab would have 51",
        ),
    ],
)
def test_a_bad_class_is_reported_on_one_line_naming_its_key(values, expected):
    from tests.test_config import problems

    assert any(line.startswith(expected) for line in problems(values)), problems(values)


def test_a_lab_without_classes_changes_nothing_in_its_node_pool(base_run):
    lab = base_run.stack.settings.labs["intro"]
    budgets = node_pool("intro", lab)["spec"]["disruption"]["budgets"]
    assert budgets == [b.model_dump(by_alias=True, exclude_none=True) for b in lab.disruption.budgets]


DAY = datetime.date(2027, 3, 25)  # the summaries' reference day: the next classes count from it


def test_summary_shows_a_class_clock_term_warm_seats_requests(run):
    rows = tables.table(summary(run, DAY), "classes:")
    assert rows == [
        {
            "lab": name,
            "class": f"classes[{lab.classes.index(lab_class)}]",
            "starts": f"{lab_class.schedule} Etc/UTC",
            "lasts": lab_class.duration,
            "warm seats": str(lab.warm_seats(lab_class)),
            "ahead": lab_class.warmup,
        }
        for name, lab in labs_with_classes(run).items()
        for lab_class in lab.classes
    ]
    assert {r["term"] for r in tables.table(summary(run, DAY), class_table.TERMS_LEAD_IN)} == {"all year"}
    # A seat requests what each of the lab's learners does, as the learners' table says.
    learners = {row["lab"]: row for row in tables.table(summary(run, DAY), LEARNER_LEAD_IN)}
    assert {name: (learners[name]["CPU"], learners[name]["memory"]) for name in labs_with_classes(run)} == {
        name: (lab.learner_requests["cpu"], lab.learner_requests["memory"])
        for name, lab in labs_with_classes(run).items()
    }
    # Its seats default to the lab's 8 GPUs x 3 slices.
    assert rows[0] | {"warm seats": "24", "ahead": "20m"} == rows[0]


def test_summary_shows_classes_in_utc_per_offset_as_budgets_do(zones):
    rows = tables.table(summary(zones, DAY), "the classes in UTC")
    # The classes by their key: berlin's classes[0] starts 0 9 * * tue,thu Europe/Berlin (tests/support/synthetic.py).
    berlin = [r for r in rows if (r["lab"], r["class"]) == ("berlin", "classes[0]")]
    assert berlin == [
        {
            "lab": "berlin",
            "class": "classes[0]",
            "at": "UTC+01:00",
            "no learner moved, in UTC": "40 7 * 3,11 tue,thu for 2h20m",
            "no empty node removed, in UTC": "40 7 * 3,11 tue,thu for 35m",
        },
        {
            "lab": "berlin",
            "class": "classes[0]",
            "at": "UTC+02:00",
            "no learner moved, in UTC": "40 6 * 4-10 tue,thu for 2h20m",
            "no empty node removed, in UTC": "40 6 * 4-10 tue,thu for 35m",
        },
    ]
    # One row per offset: Kolkata's two classes have one each, every other zone's two.
    assert {lab: sum(r["lab"] == lab for r in rows) for lab in zones.stack.settings.labs} == {
        "berlin": 4,
        "new-york": 4,
        "sydney": 4,
        "kolkata": 2,
        "lord-howe": 4,
    }
    terms = tables.table(summary(zones, DAY), class_table.TERMS_LEAD_IN)
    term = {r["lab"]: r["term"] for r in terms if r["term"] != "all year"}
    assert term["berlin"] == "2027-03-01 to 2027-11-15, not 2027-03-30, 2027-11-02"


def test_summary_shows_next_three_classes_local_and_in_utc(zones):
    rows = tables.table(summary(zones, DAY), "the next 3 classes")
    berlin = [(r["starts"], r["in UTC"]) for r in rows if (r["lab"], r["class"]) == ("berlin", "classes[0]")]
    # Thursday 25 March on winter time; 30 March, the first Tuesday on summer time, is skipped.
    assert berlin == [
        ("Thu 2027-03-25 09:00 CET", "Thu 2027-03-25 08:00"),
        ("Thu 2027-04-01 09:00 CEST", "Thu 2027-04-01 07:00"),
        ("Tue 2027-04-06 09:00 CEST", "Tue 2027-04-06 07:00"),
    ]
    sydney = [(r["starts"], r["in UTC"]) for r in rows if (r["lab"], r["class"]) == ("sydney", "classes[0]")]
    assert sydney == [
        ("Mon 2027-03-29 09:00 AEDT", "Sun 2027-03-28 22:00"),
        ("Mon 2027-04-12 09:00 AEST", "Sun 2027-04-11 23:00"),  # 5 April is skipped
        ("Mon 2027-04-19 09:00 AEST", "Sun 2027-04-18 23:00"),
    ]
    # Kolkata's term ends on 29 June: from a day after it, its term class has no next class, its other one three.
    later = tables.table(summary(zones, datetime.date(2027, 7, 1)), "the next 3 classes")
    assert [r["class"] for r in later if r["lab"] == "kolkata"] == ["classes[1]"] * 3


def test_a_stack_without_classes_has_no_class_table(base_run):
    assert not any(line.startswith("classes:") for line in summary(base_run))


def test_every_rendered_manifest_gets_a_file_of_its_own(run, tmp_path):
    render.run.write(run, tmp_path)
    written = len(list((tmp_path / "manifests").iterdir()))
    assert written == len([r for r in run.resources if r.type.startswith("kubernetes:") and r.type != RELEASE])


# --- figures a user would notice, as literals -----------------------------------------------------------------------

ONE_LAB_CLASSES = [
    {"schedule": "0 9 * * mon", "duration": "1h"},
    {"schedule": "0 14 * * wed", "duration": "10m", "warmSeats": 12},
    {"schedule": "0 16 * * fri", "duration": "2h", "warmup": "1h", "warmSeats": 5},
]


@pytest.fixture(scope="module")
def one_lab():
    """intro: 4 GPUs x 3 slices = 12 learner seats, and three classes."""
    return run_values(with_classes(*ONE_LAB_CLASSES))


def jobs_by_schedule(run) -> dict[str, dict]:
    return {r.inputs["spec"]["schedule"]: r.inputs["spec"] for r in in_namespace(run, CRON_JOB, "intro")}


def warm_replicas(job: dict) -> int:
    (container,) = job["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return json.loads(container["args"][-1].removeprefix("--patch="))["spec"]["replicas"]


def test_a_class_warms_all_12_seats_or_exactly_those_named(one_lab):
    jobs = jobs_by_schedule(one_lab)
    # Warmed 20m ahead by default, 1h ahead for the Friday class; 12 seats is also the most a class may name.
    assert {when: warm_replicas(jobs[when]) for when in ("40 8 * * mon", "40 13 * * wed", "0 15 * * fri")} == {
        "40 8 * * mon": 12,
        "40 13 * * wed": 12,
        "0 15 * * fri": 5,
    }


def test_warm_seats_may_equal_the_labs_12_seats_but_not_exceed():
    from tests.test_config import parsed, problems

    lab = parsed(with_classes({"schedule": "0 9 * * *", "duration": "1h", "warmSeats": 12})).settings.labs["intro"]
    assert lab.warm_seats(lab.classes[0]) == 12
    assert problems(with_classes({"schedule": "0 9 * * *", "duration": "1h", "warmSeats": 13})) == [
        "gpulab:labs.intro.classes[0].warmSeats: must be at most the lab's 12 learner seats"
    ]


def test_release_jobs_get_half_the_class_warm_jobs_half_warmup(one_lab):
    jobs = jobs_by_schedule(one_lab)
    deadlines = {
        when: (jobs[when]["startingDeadlineSeconds"], jobs[when]["jobTemplate"]["spec"]["activeDeadlineSeconds"])
        for when in ("0 9 * * mon", "0 16 * * fri", "40 8 * * mon", "0 15 * * fri")
    }
    assert deadlines == {
        "0 9 * * mon": (1800, 1800),  # a 1h class
        "0 16 * * fri": (3600, 3600),  # a 2h class
        "40 8 * * mon": (600, 600),  # a 20m warmup
        "0 15 * * fri": (1800, 1800),  # a 1h warmup
    }


def test_empty_budget_spans_warmup_to_arrival_or_shorter_end(one_lab):
    budgets = one_lab.one(NODE_POOL, "nodepool-intro").inputs["spec"]["disruption"]["budgets"]
    empty = {b["schedule"]: b["duration"] for b in budgets if b.get("reasons") == ["Empty"]}
    # 20m warmup + 15m; 20m + the whole 10m class; 1h warmup + 15m.
    assert empty == {"40 8 * * mon": "35m", "40 13 * * wed": "30m", "0 15 * * fri": "1h15m"}


def test_buffers_wait_for_the_karpenter_controller_and_its_crds(run):
    # Created after the CRD and the controller, deleted before them: an unknown kind fails the first `pulumi up`,
    # and buffers outliving the CRD would be stuck.
    buffers = run.of_type(BUFFER)
    assert buffers
    for buffer in buffers:
        assert {f"{RELEASE}::karpenter-crd", f"{RELEASE}::karpenter"} <= waits_for(run, buffer), buffer.name


# --- classes in their own time zones, over a term ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def zones():
    """tests/support/synthetic.py TIME_ZONE_STACK: a term class and an all-year class in each of five zones."""
    return run_values(TIME_ZONE_STACK)


def berlin_term_jobs(zones) -> dict[str, dict]:
    term_class = zones.stack.settings.labs["berlin"].classes[0]
    jobs = cron_jobs_of(zones, "berlin")
    return {suffix: jobs[f"{class_key(term_class)}-{suffix}"] for suffix in ("warm", "release")}


def test_class_jobs_run_on_the_class_clock_else_the_stacks(zones):
    for name, lab in zones.stack.settings.labs.items():
        jobs = cron_jobs_of(zones, name)
        for lab_class in lab.classes:
            for suffix in ("warm", "release"):
                assert jobs[f"{class_key(lab_class)}-{suffix}"]["spec"]["timeZone"] == lab_class.zone
    berlin = zones.stack.settings.labs["berlin"].classes
    assert [c.time_zone for c in berlin] == [None, None]  # gpulab:timeZone: Europe/Berlin
    assert {j["spec"]["timeZone"] for j in cron_jobs_of(zones, "berlin").values()} == {"Europe/Berlin"}


def test_warm_and_release_times_are_the_teachers_local_ones(zones):
    jobs = berlin_term_jobs(zones)
    assert (jobs["warm"]["spec"]["schedule"], jobs["release"]["spec"]["schedule"]) == (
        "40 8 * * tue,thu",
        "0 9 * * tue,thu",
    )


def minute_of(text: str) -> int:
    return int(datetime.datetime.fromisoformat(text).timestamp()) // 60


@requires_sh
def test_a_term_classs_jobs_patch_only_on_its_class_days(zones):
    jobs = berlin_term_jobs(zones)
    warm = jobs["warm"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    name = jobs["warm"]["metadata"]["name"]
    runs = {
        "2027-03-02T07:40:00+00:00": True,  # Tuesday 2 March, 08:40 in Berlin: the term's first class
        "2027-02-23T07:40:00+00:00": False,  # a week before the term
        "2027-03-30T06:40:00+00:00": False,  # the Tuesday after the spring change, which the term skips
        "2027-04-01T06:40:00+00:00": True,  # that Thursday, on summer time
        "2027-11-11T07:40:00+00:00": True,  # Thursday 11 November, the term's last class
        "2027-11-16T07:40:00+00:00": False,  # the Tuesday after the term
    }
    ran = patches(warm, [f"{name}-{minute_of(t)}" for t in runs])
    assert {t: f"{name}-{minute_of(t)}" in ran for t in runs} == runs
    # What a run for a class day calls is what the job without a term calls: the patch of its own buffer.
    assert set(map(tuple, ran.values())) == {tuple(warm["args"])}


@requires_sh
def test_a_release_job_checks_the_day_of_its_own_start(zones):
    jobs = berlin_term_jobs(zones)
    release = jobs["release"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    name = jobs["release"]["metadata"]["name"]
    starts = ["2027-03-02T08:00:00+00:00", "2027-03-30T07:00:00+00:00", "2027-11-16T08:00:00+00:00"]
    assert set(patches(release, [f"{name}-{minute_of(t)}" for t in starts])) == {f"{name}-{minute_of(starts[0])}"}


def test_term_class_pods_copy_busybox_check_in_kubectl_image(zones):
    spec = berlin_term_jobs(zones)["warm"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (shell,) = spec["initContainers"]
    (kubectl,) = spec["containers"]
    assert (shell["image"], shell["command"]) == (SHELL_IMAGE, ["cp", "/bin/busybox", SHELL])
    assert kubectl["image"] == KUBECTL_IMAGE and kubectl["command"][0] == SHELL
    assert {
        "name": "JOB_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}},
    } in kubectl["env"]
    # Kubernetes expands $(VAR) and $$ in a container's command (third_party/forked/golang/expansion): the script
    # must read as written.
    script = kubectl["command"][2]
    assert "$$" not in script and not any(f"$({e['name']})" in script for e in kubectl["env"])


def test_time_zone_class_pods_pass_the_restricted_profile(zones):
    for name in zones.stack.settings.labs:
        inside = [
            r.inputs for r in zones.resources if r.inputs.get("metadata", {}).get("namespace") == class_namespace(name)
        ]
        specs = dict(pod_specs(inside))
        assert {where: restricted_problems(spec) for where, spec in specs.items()} == {key: [] for key in specs}


@requires_upstream
def test_pools_with_per_offset_budgets_pass_the_upstream_crd(zones):
    for r in zones.of_type(NODE_POOL):
        assert crd_problems(r.inputs) == [], r.name


def test_a_berlin_term_keeps_winter_and_summer_in_their_months(zones):
    budgets = zones.one(NODE_POOL, "nodepool-berlin").inputs["spec"]["disruption"]["budgets"]
    term = [(b["reasons"], b["schedule"], b["duration"]) for b in budgets[1:5]]
    assert term == [
        (["Drifted", "Underutilized"], "40 7 * 3,11 tue,thu", "2h20m"),  # UTC+01:00: March to the 28th, November
        (["Empty"], "40 7 * 3,11 tue,thu", "35m"),
        (["Drifted", "Underutilized"], "40 6 * 4-10 tue,thu", "2h20m"),  # UTC+02:00 (30 March is skipped)
        (["Empty"], "40 6 * 4-10 tue,thu", "35m"),
    ]


def test_an_unquoted_term_date_reaches_the_program_as_written(tmp_path):
    # As the Pulumi CLI passes it (gopkg.in/yaml.v2 keeps a date-like scalar's text), not as PyYAML's date object.
    path = tmp_path / "Pulumi.dates.yaml"
    path.write_text("config:\n  gpulab:labs:\n    intro:\n      classes:\n        - term: {start: 2027-01-11}\n")
    labs = json.loads(render.run.read_stack_file(path)["gpulab:labs"])
    assert labs["intro"]["classes"][0]["term"] == {"start": "2027-01-11"}


# --- a term from Monday 1 March 2027 whose classes warm up on the evening before ------------------------------------

# 00:10 in UTC and 00:30 in Berlin (UTC+1 until Sunday 28 March, then UTC+2), each warmed 20m ahead: their first
# warm-up is on Sunday 28 February in UTC. Monday 15 March is skipped; the term ends on Monday 29 March. Two warm seats
# each, as the two overlap on the lab's four seats.
MIDNIGHT_TERM = {"start": "2027-03-01", "end": "2027-03-29", "skip": ["2027-03-15"]}


@pytest.fixture(scope="module")
def midnight():
    classes = [
        {"schedule": "10 0 * * mon", "duration": "1h", "timeZone": "Etc/UTC", "term": MIDNIGHT_TERM, "warmSeats": 2},
        {
            "schedule": "30 0 * * mon",
            "duration": "1h",
            "timeZone": "Europe/Berlin",
            "term": MIDNIGHT_TERM,
            "warmSeats": 2,
        },
    ]
    return run_values(stack_values(**{"gpulab:labs": {"night": lab_values(["g4dn.xlarge"], 2, classes=classes)}}))


def test_a_1_march_term_warmed_before_midnight_keeps_february(midnight):
    budgets = midnight.one(NODE_POOL, "nodepool-night").inputs["spec"]["disruption"]["budgets"]
    windows = [(b["reasons"], b["schedule"], b["duration"]) for b in budgets[1:]]
    assert windows == [
        # UTC: warmed from 23:50 on the Sundays of February (the 28th) and March.
        (["Drifted", "Underutilized"], "50 23 * 2-3 sun", "1h20m"),
        (["Empty"], "50 23 * 2-3 sun", "35m"),
        # Berlin at UTC+1: 00:10 on Mondays is 23:10 UTC on the Sundays from 28 February to 21 March.
        (["Drifted", "Underutilized"], "10 23 * 2-3 sun", "1h20m"),
        (["Empty"], "10 23 * 2-3 sun", "35m"),
        # Berlin at UTC+2 (29 March): 22:10 UTC on Sunday 28 March.
        (["Drifted", "Underutilized"], "10 22 * 3 sun", "1h20m"),
        (["Empty"], "10 22 * 3 sun", "35m"),
    ]


@requires_sh
def test_a_warmup_on_the_day_before_warms_class_days_only(midnight):
    (utc_class, berlin_class) = midnight.stack.settings.labs["night"].classes
    jobs = cron_jobs_of(midnight, "night")
    runs = [
        (
            utc_class,
            {
                "2027-02-28T23:50:00+00:00": True,  # the evening before the term's first class
                "2027-03-07T23:50:00+00:00": True,
                "2027-03-14T23:50:00+00:00": False,  # before Monday 15 March, skipped
                "2027-03-28T23:50:00+00:00": True,  # before the last class
                "2027-04-04T23:50:00+00:00": False,  # after the term
                "2027-02-21T23:50:00+00:00": False,  # a week before the term
            },
        ),
        (
            berlin_class,
            {
                "2027-02-28T23:10:00+00:00": True,  # Sunday 00:10 in Berlin on Monday 1 March
                "2027-03-14T23:10:00+00:00": False,
                "2027-03-28T22:10:00+00:00": True,  # on summer time, before Monday 29 March
                "2027-04-04T22:10:00+00:00": False,
            },
        ),
    ]
    for lab_class, expected in runs:
        warm = jobs[f"{class_key(lab_class)}-warm"]
        container = warm["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        name = warm["metadata"]["name"]
        ran = patches(container, [f"{name}-{minute_of(t)}" for t in expected])
        assert {t: f"{name}-{minute_of(t)}" in ran for t in expected} == expected, lab_class.zone
