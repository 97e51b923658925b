"""Class seats: warm seats before each class (PodTemplate, CapacityBuffer, CronJobs, RBAC) and the class budgets."""

import datetime
import json
from fractions import Fraction

import pytest

from components.karpenter.class_seats_manifests import (
    ARRIVAL_MINUTES,
    KUBECTL_IMAGE,
    class_key,
    namespace_name,
)
from components.karpenter.manifests import node_pool
from components.labels import GPU_RESOURCE, SYSTEM_NODE_LABEL, SYSTEM_NODE_VALUE
from config import durations, schedule
from config.classes import BUDGETS_PER_CLASS
from config.node_capacity import seats_per_node
from config.quantity import quantity
from tests import tables
from tests.conftest import BASE, run_values, stack_values
from tests.crd_schema import crd_problems, requires_upstream
from tests.dependencies import waits_for
from tests.nodes import lab_nodes, system_nodes
from tests.pod_specs import karpenter_requests, pod_specs, restricted_problems
from tests.scheduling import unschedulable_because
from tests.synthetic import SYNTHETIC
from tools import render
from tools.summary import summary

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
    return [r for r in run.of_type(type_token) if r.inputs["metadata"]["namespace"] == namespace_name(lab_name)]


def labs_with_classes(run) -> dict:
    return {name: lab for name, lab in run.stack.settings.labs.items() if lab.classes}


def test_each_lab_with_classes_gets_one_buffer_and_two_cron_jobs_per_class_and_others_none(run):
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


def test_buffers_start_at_zero_seats_and_pulumi_leaves_replicas_to_the_cron_jobs(run):
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


def test_a_warm_copy_reserves_one_slice_and_the_learners_cpu_and_memory_as_karpenter_sizes_it(run):
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


def test_a_node_of_each_type_takes_exactly_its_slices_of_warm_copies_so_seats_warm_whole_gpus(run):
    # With the slice unrequested, a g4dn.xlarge of a 3-slice lab would take its CPU's worth of copies, not 3, and a
    # class would get a fraction of the warm GPUs it asked for.
    for name, lab in labs_with_classes(run).items():
        requests = karpenter_requests(in_namespace(run, POD_TEMPLATE, name)[0].inputs["template"]["spec"])
        for instance_type in lab.instance_types:
            slices = seats_per_node(instance_type, lab.slices_per_gpu)
            assert copies_per_node(requests, instance_type, lab) == slices, (name, instance_type)


def cron_jobs_of(run, name: str) -> dict[str, dict]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in in_namespace(run, CRON_JOB, name)}


def test_warm_jobs_fire_the_warmup_before_each_start_and_release_jobs_at_the_start(run):
    span = (datetime.datetime(2026, 1, 1), datetime.datetime(2028, 1, 1))  # a leap day, every weekday on every date
    for name, lab in labs_with_classes(run).items():
        jobs = cron_jobs_of(run, name)
        for lab_class in lab.classes:
            warm, release = jobs[f"{class_key(lab_class)}-warm"], jobs[f"{class_key(lab_class)}-release"]
            warmup = datetime.timedelta(minutes=durations.duration_minutes(lab_class.warmup))
            starts = list(schedule.parse(lab_class.schedule).fires(span[0] + warmup, span[1] + warmup))
            assert list(schedule.parse(warm["spec"]["schedule"]).fires(*span)) == [s - warmup for s in starts]
            assert schedule.parse(release["spec"]["schedule"]) == lab_class.start
            assert warm["spec"]["timeZone"] == release["spec"]["timeZone"] == "Etc/UTC"


def test_a_monday_0010_class_with_20m_warmup_is_warmed_on_sunday_at_2350(run):
    jobs = cron_jobs_of(run, "morning")
    assert "50 23 * * sun" in {j["spec"]["schedule"] for n, j in jobs.items() if n.endswith("-warm")}
    pool = run.one(NODE_POOL, "nodepool-morning").inputs
    assert {
        "nodes": "0",
        "reasons": ["Drifted", "Underutilized"],
        "schedule": "50 23 * * sun",
        "duration": "1h50m",
    } in (pool["spec"]["disruption"]["budgets"])


def test_cron_jobs_patch_only_their_own_buffer_to_the_warm_seats_then_to_zero(run):
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
                assert f"--namespace={namespace_name(name)}" in args
                patch = json.loads(next(a for a in args if a.startswith("--patch=")).removeprefix("--patch="))
                assert patch == {"spec": {"replicas": seats}}
                assert container["image"] == KUBECTL_IMAGE


def test_a_warm_job_gives_up_before_the_class_starts_so_it_never_undoes_the_release(run):
    for name, lab in labs_with_classes(run).items():
        jobs = cron_jobs_of(run, name)
        for lab_class in lab.classes:
            warm = next(j for j in jobs.values() if j["spec"]["schedule"] == str(lab_class.warm_from))
            late = (
                warm["spec"]["startingDeadlineSeconds"] + warm["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
            )
            assert late <= 60 * durations.duration_minutes(lab_class.warmup)


def test_the_scheduler_may_only_patch_its_labs_buffers_by_name_which_is_all_its_jobs_do(run):
    for name in labs_with_classes(run):
        (role,) = in_namespace(run, ROLE, name)
        buffers = sorted(r.inputs["metadata"]["name"] for r in in_namespace(run, BUFFER, name))
        (rule,) = role.inputs["rules"]
        # `kubectl patch <type> <name>` (kubectl 1.34.1) sends one PATCH and never a GET of the object.
        assert {**rule, "resourceNames": sorted(rule["resourceNames"])} == {
            "apiGroups": ["autoscaling.x-k8s.io"],
            "resources": ["capacitybuffers"],
            "resourceNames": buffers,
            "verbs": ["patch"],
        }
        for job in cron_jobs_of(run, name).values():
            (container,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
            assert container["args"][0] == "patch"
        (binding,) = in_namespace(run, ROLE_BINDING, name)
        account = binding.inputs["subjects"][0]
        assert binding.inputs["roleRef"]["name"] == role.inputs["metadata"]["name"]
        assert account["namespace"] == namespace_name(name)
        for job in cron_jobs_of(run, name).values():
            assert job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == account["name"]


def test_scheduler_pods_run_on_the_system_nodes(run):
    for name in labs_with_classes(run):
        for job in cron_jobs_of(run, name).values():
            pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            assert pod["nodeSelector"][SYSTEM_NODE_LABEL] == SYSTEM_NODE_VALUE


def test_every_pod_spec_in_a_class_namespace_passes_the_restricted_profile_it_enforces(run):
    for name in labs_with_classes(run):
        namespace = next(
            r
            for r in run.of_type("kubernetes:core/v1:Namespace")
            if r.inputs["metadata"]["name"] == namespace_name(name)
        )
        assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        inside = [
            r.inputs for r in run.resources if r.inputs.get("metadata", {}).get("namespace") == namespace_name(name)
        ]
        specs = dict(pod_specs(inside))
        # The seat template and each class's two CronJobs.
        assert len(specs) == 1 + 2 * len(run.stack.settings.labs[name].classes)
        assert {where: restricted_problems(spec) for where, spec in specs.items()} == {key: [] for key in specs}


def test_class_budgets_block_moving_learners_from_warmup_to_end_and_empty_removal_while_they_arrive(run):
    for name, lab in labs_with_classes(run).items():
        budgets = run.one(NODE_POOL, f"nodepool-{name}").inputs["spec"]["disruption"]["budgets"]
        user = [b.model_dump(by_alias=True, exclude_none=True) for b in lab.disruption.budgets]
        assert budgets[: len(user)] == user
        added = budgets[len(user) :]
        assert len(added) == BUDGETS_PER_CLASS * len(lab.classes)
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
                "schedule": str(lab_class.start),
                "duration": durations.format_duration(min(ARRIVAL_MINUTES, duration)),
            }


@pytest.mark.parametrize(
    ("labs", "gate"),
    [({"a": [], "b": []}, False), ({"a": [], "b": [{"schedule": "0 9 * * *", "duration": "1h"}]}, True), ({}, False)],
    ids=["no-classes", "one-lab-with-classes", "no-labs"],
)
def test_capacity_buffer_gate_is_on_exactly_when_some_lab_has_classes(labs, gate):
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
            "schedule, warmSeats, warmup",
        ),
        (
            with_classes(learnerPod={"cpu": "2"}),
            "gpulab:labs.intro.learnerPod.cpu: must be at most 1236m so that every slice",
        ),
        (
            with_classes(*[{"schedule": f"0 9 {day} * *", "duration": "1h"} for day in range(1, 26)]),
            "gpulab:labs.intro.classes: each class adds 2 disruption budgets, and a NodePool takes at most 50",
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


def test_the_summary_shows_each_class_start_length_warm_seats_from_when_and_what_a_seat_requests(run):
    rows = tables.table(summary(run), "classes:")
    assert rows == [
        {
            "lab": name,
            "starts (UTC)": lab_class.schedule,
            "lasts": lab_class.duration,
            "warm seats": str(lab.warm_seats(lab_class)),
            "warm from (UTC)": str(lab_class.warm_from),
            "ahead": lab_class.warmup,
            "each seat requests": f"cpu {lab.learner_requests['cpu']}, memory {lab.learner_requests['memory']}",
        }
        for name, lab in labs_with_classes(run).items()
        for lab_class in lab.classes
    ]
    # Monday 00:10 warmed 20 minutes ahead is Sunday 23:50; its seats default to the lab's 8 GPUs x 3 slices.
    assert rows[0] | {"warm seats": "24", "warm from (UTC)": "50 23 * * sun", "ahead": "20m"} == rows[0]


def test_a_stack_without_classes_has_no_class_table(base_run):
    assert not any(line.startswith("classes:") for line in summary(base_run))


def test_every_rendered_manifest_gets_a_file_of_its_own(run, tmp_path):
    render.write(run, tmp_path)
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


def test_a_class_warms_all_twelve_seats_by_default_and_exactly_the_warm_seats_it_names(one_lab):
    jobs = jobs_by_schedule(one_lab)
    # Warmed 20m ahead by default, 1h ahead for the Friday class; 12 seats is also the most a class may name.
    assert {when: warm_replicas(jobs[when]) for when in ("40 8 * * mon", "40 13 * * wed", "0 15 * * fri")} == {
        "40 8 * * mon": 12,
        "40 13 * * wed": 12,
        "0 15 * * fri": 5,
    }


def test_warm_seats_equal_to_the_labs_twelve_seats_are_accepted_and_one_more_is_not():
    from tests.test_config import parsed, problems

    lab = parsed(with_classes({"schedule": "0 9 * * *", "duration": "1h", "warmSeats": 12})).settings.labs["intro"]
    assert lab.warm_seats(lab.classes[0]) == 12
    assert problems(with_classes({"schedule": "0 9 * * *", "duration": "1h", "warmSeats": 13})) == [
        "gpulab:labs.intro.classes[0].warmSeats: must be at most the lab's 12 learner seats"
    ]


def test_release_jobs_may_start_and_run_until_half_the_class_is_over_and_warm_jobs_half_the_warmup(one_lab):
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


def test_the_empty_budget_lasts_the_arrival_time_or_the_whole_of_a_shorter_class(one_lab):
    budgets = one_lab.one(NODE_POOL, "nodepool-intro").inputs["spec"]["disruption"]["budgets"]
    empty = {b["schedule"]: b["duration"] for b in budgets if b.get("reasons") == ["Empty"]}
    assert empty == {"0 9 * * mon": "15m", "0 14 * * wed": "10m", "0 16 * * fri": "15m"}


def test_capacity_buffers_wait_for_the_karpenter_controller_and_its_crds(run):
    # Created after the CRD and the controller, deleted before them: an unknown kind fails the first `pulumi up`,
    # and buffers outliving the CRD would be stuck.
    buffers = run.of_type(BUFFER)
    assert buffers
    for buffer in buffers:
        assert {f"{RELEASE}::karpenter-crd", f"{RELEASE}::karpenter"} <= waits_for(run, buffer), buffer.name
