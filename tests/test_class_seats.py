"""Class seats: warm seats before each class (PodTemplate, CapacityBuffer, CronJobs, RBAC) and the class budgets."""

import datetime
import json

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
from config.instance_types import GPU_INSTANCE_TYPES
from config.node_capacity import DAEMONSET_CPU_MILLIS, DAEMONSET_MEMORY_MIB, allocatable, quantity
from tests import tables
from tests.conftest import BASE, run_values, stack_values
from tests.crd_schema import crd_problems, requires_upstream
from tests.nodes import lab_nodes, system_nodes
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
        # As Karpenter sizes the buffer's copies: by the stored template's requests, which nothing fills from limits.
        assert spec["containers"][0]["resources"]["requests"][GPU_RESOURCE] == 1
        assert spec["containers"][0]["resources"]["limits"] == {GPU_RESOURCE: 1}


def test_slices_per_gpu_seats_fit_every_instance_type_of_the_lab(run):
    for name, lab in labs_with_classes(run).items():
        requests = in_namespace(run, POD_TEMPLATE, name)[0].inputs["template"]["spec"]["containers"][0]["resources"]
        cpu_millis = quantity(requests["requests"]["cpu"]) * 1000
        memory_mib = quantity(requests["requests"]["memory"]) / 2**20
        for instance_type in lab.instance_types:
            node = allocatable(instance_type, lab.max_pods)
            seats = lab.slices_per_gpu * GPU_INSTANCE_TYPES[instance_type].gpus
            assert seats * cpu_millis + DAEMONSET_CPU_MILLIS <= node.cpu_millis, (name, instance_type)
            assert seats * memory_mib + DAEMONSET_MEMORY_MIB <= node.memory_mib, (name, instance_type)


@pytest.mark.parametrize(
    ("instance_type", "pods", "cpu", "memory"),
    # aws/karpenter-provider-aws@1d927085dd81 website/content/en/v1.14/reference/instance-types.md, "Resources".
    [
        ("g4dn.xlarge", 29, 3920, 14481),
        ("g5g.xlarge", 58, 3920, 6525),
        ("g6e.xlarge", 58, 3920, 29317),
        ("p5.48xlarge", 100, 191450, 1938410),
    ],
)
def test_allocatable_matches_karpenters_instance_type_reference(instance_type, pods, cpu, memory):
    node = allocatable(instance_type, pods)
    assert (node.cpu_millis, node.memory_mib) == (cpu, memory)


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


def test_the_scheduler_may_only_get_and_patch_its_labs_buffers_by_name(run):
    for name in labs_with_classes(run):
        (role,) = in_namespace(run, ROLE, name)
        buffers = sorted(r.inputs["metadata"]["name"] for r in in_namespace(run, BUFFER, name))
        (rule,) = role.inputs["rules"]
        assert {**rule, "resourceNames": sorted(rule["resourceNames"])} == {
            "apiGroups": ["autoscaling.x-k8s.io"],
            "resources": ["capacitybuffers"],
            "resourceNames": buffers,
            "verbs": ["get", "patch"],
        }
        (binding,) = in_namespace(run, ROLE_BINDING, name)
        account = binding.inputs["subjects"][0]
        assert binding.inputs["roleRef"]["name"] == role.inputs["metadata"]["name"]
        assert account["namespace"] == namespace_name(name)
        for job in cron_jobs_of(run, name).values():
            assert job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == account["name"]


def test_scheduler_pods_run_restricted_on_the_system_nodes(run):
    for name in labs_with_classes(run):
        for job in cron_jobs_of(run, name).values():
            pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            assert pod["nodeSelector"][SYSTEM_NODE_LABEL] == SYSTEM_NODE_VALUE
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert pod["securityContext"]["runAsUser"] != 0
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            (container,) = pod["containers"]
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        namespace = next(
            r
            for r in run.of_type("kubernetes:core/v1:Namespace")
            if r.inputs["metadata"]["name"] == namespace_name(name)
        )
        assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


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
            "gpulab:labs.intro.classes[0].seats: unknown key; allowed keys: duration, schedule, warmSeats, warmup",
        ),
        (
            with_classes(learnerPod={"cpu": "2"}),
            "gpulab:labs.intro.learnerPod.cpu: must be at most 1223m so that every slice",
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
