"""Pure builders of a lab's class seats: warm GPU seats before each class, released as it starts, and the budgets
that keep its learners in place while it runs.

What Karpenter does with a CapacityBuffer (kubernetes-sigs/karpenter at 6e7eab7a0f48, the version
aws/karpenter-provider-aws v1.14.1 pins in go.mod), and why the objects below look as they do:
- The buffer controller (pkg/controllers/capacitybuffer/controller.go) resolves `podTemplateRef` to a PodTemplate in
  the buffer's namespace (pkg/utils/apps/resolve.go), copies `spec.replicas` into `status.replicas`, and requeues every
  30 s; it also reconciles at once when the buffer or its PodTemplate changes. It runs only with the feature gate
  CapacityBuffer (pkg/controllers/controllers.go), which the chart sets from `settings.featureGates.capacityBuffer`.
- The provisioner adds `status.replicas` in-memory copies of the template's pod spec to the pending pods
  (pkg/controllers/provisioning/provisioner.go GetPendingPods; pkg/state/virtualpods/utilities.go BuildVirtualPods)
  and schedules them like real ones: existing capacity first, then new NodeClaims within the NodePool's limits, with
  NodeOverlay capacity applied (same scheduler, same instance types), so N one-slice copies need ceil(N / seats per
  node) nodes. They keep N seats free ON TOP of the running pods: learners who take warm seats make Karpenter start
  more nodes while the buffer is up.
- A node holding buffer copies is not "empty" for consolidation (pkg/controllers/disruption/emptiness.go,
  HasBufferPods), but the copies nominate no node, so drift and expiry still replace it
  (pkg/controllers/provisioning/scheduling/scheduler.go, Results.Record).
So the buffer is released as the class starts, and a budget that stops Karpenter removing empty nodes for the first
minutes of the class keeps the warm nodes until the learners are on them.
"""

import copy
import datetime
import hashlib
from dataclasses import dataclass
from typing import Any

from components.labels import LAB_LABEL, SYSTEM_NODE_SELECTOR
from components.learner_pod import PLACEHOLDER_IMAGE, learner_pod_spec
from domain.stack.model import Lab, LabClass
from domain.stack.namespaces import class_namespace
from domain.time import durations
from domain.time.budget_windows import Window
from domain.time.class_calendar import day_start

BUFFER_GROUP = "autoscaling.x-k8s.io"
BUFFER_API = f"{BUFFER_GROUP}/v1beta1"
BUFFER_RESOURCE = "capacitybuffers"
# kubectl from the Kubernetes release (registry.k8s.io, listed under "Container Images" for v1.34.1 in
# kubernetes/kubernetes CHANGELOG/CHANGELOG-1.34.md); its entrypoint is /bin/kubectl.
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.34.1"
# The kubectl image is kubectl on the go-runner base image, distroless (kubernetes build/server-image/kubectl/
# Dockerfile, KUBECTL_BASE_IMAGE in build/common.sh, at v1.34.4): no shell, and no USER, so its default user is
# root, which runAsNonRoot refuses: the pods name a UID and GID. Any non-zero ID passes the restricted profile;
# 65532 is the one distroless images call nonroot. kubectl never reads /etc/passwd: it needs only $HOME, which the
# job sets.
RUN_AS_ID = 65532
# A class with a term checks the day before it patches, which takes a shell the kubectl image lacks: BusyBox's static
# build (the musl variant: CONFIG_STATIC=y in docker-library/busybox latest-1/musl/Dockerfile.builder; tag 1.37.0-musl
# in docker-library/official-images library/busybox), copied by an init container into a volume the kubectl container
# runs it from. The check needs only the shell's built-ins.
SHELL_IMAGE = "docker.io/library/busybox:1.37.0-musl"
SHELL = "/gpulab/sh"
# The CronJob controller names each Job <CronJob>-<its scheduled time, in minutes since 1970 UTC>
# (k8s.io/kubernetes v1.34.4 pkg/controller/cronjob: getJobName, getTimeHashInMinutes), and the Job's pods carry that
# name in this label (pkg/registry/batch/job/strategy.go, generateSelector): the scheduled minute, exact to the
# minute and the same for every retry of the Job.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_NAME = "JOB_NAME"  # the environment variable the check reads it from
# What the restricted Pod Security profile asks of a pod and of each container (k8s.io/pod-security-admission policy,
# kubernetes-1.34.1), which the class namespace enforces.
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": RUN_AS_ID,
    "runAsGroup": RUN_AS_ID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
SCHEDULER = "class-scheduler"
SEAT_TEMPLATE = "learner-seat"
# A CronJob's name may have at most 52 characters: the controller appends an 11-character suffix to its Jobs' names.
CRONJOB_NAME_LIMIT = 52


def class_key(lab_class: LabClass) -> str:
    """A stable name for a class, from when it starts (LabClass.identity): reordering the classes renames nothing."""
    return f"class-{_digest(lab_class.identity)}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def class_budgets(lab: Lab) -> list[dict[str, Any]]:
    """The NodePool budgets of the lab's classes, in their order: each class's windows in UTC
    (domain/time/budget_windows.py), two per UTC offset it has."""
    return [budget(window) for lab_class in lab.classes for window in lab_class.budget_windows]


def budget(window: Window) -> dict[str, Any]:
    """A window as the NodePool's budget: no node at a time, for its reasons, from each firing for its minutes."""
    return {
        "nodes": "0",
        "reasons": list(window.reasons),
        "schedule": str(window.schedule),
        "duration": durations.format_duration(window.minutes),
    }


def _labels(lab_name: str) -> dict[str, str]:
    return {LAB_LABEL: lab_name, "app.kubernetes.io/managed-by": "gpulab"}


def _meta(lab_name: str, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": class_namespace(lab_name), "labels": _labels(lab_name)}


def namespace(lab_name: str) -> dict[str, Any]:
    # Nothing in it needs more than the restricted Pod Security profile, so the namespace enforces it.
    labels = _labels(lab_name) | {"pod-security.kubernetes.io/enforce": "restricted"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": class_namespace(lab_name), "labels": labels}}


def seat_template(lab_name: str, lab: Lab) -> dict[str, Any]:
    """A PodTemplate shaped like a learner's pod, as far as scheduling goes: one slice, the GPU toleration, the lab's
    nodes, the learner's CPU and memory. Karpenter only ever builds in-memory pods from it; nothing runs it."""
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": _meta(lab_name, SEAT_TEMPLATE),
        "template": {
            "metadata": {"labels": _labels(lab_name)},
            "spec": _seat_spec(lab_name, lab),
        },
    }


def _seat_spec(lab_name: str, lab: Lab) -> dict[str, Any]:
    spec = learner_pod_spec(lab_name, lab, PLACEHOLDER_IMAGE)  # never pulled: its pods exist only in Karpenter's memory
    # Nothing runs it, but its namespace enforces the restricted profile on every pod spec it stores.
    spec["securityContext"] = copy.deepcopy(POD_SECURITY)
    spec["containers"][0]["securityContext"] = copy.deepcopy(CONTAINER_SECURITY)
    return spec


def capacity_buffer(lab_name: str, lab_class: LabClass) -> dict[str, Any]:
    """Zero seats: the class's CronJobs set `spec.replicas`, and Pulumi is told to leave that field to them."""
    return {
        "apiVersion": BUFFER_API,
        "kind": "CapacityBuffer",
        "metadata": _meta(lab_name, class_key(lab_class)),
        "spec": {"podTemplateRef": {"name": SEAT_TEMPLATE}, "replicas": 0},
    }


def classes_output(lab_name: str, lab: Lab) -> list[dict[str, Any]]:
    """Per class, in the lab's order: its CapacityBuffer (name, namespace) and the seats the warm CronJob asks for."""
    return [
        {"buffer": class_key(c), "namespace": class_namespace(lab_name), "warmSeats": lab.warm_seats(c)}
        for c in lab.classes
    ]


def service_account(lab_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(lab_name, SCHEDULER)}


def role(lab_name: str, lab: Lab) -> dict[str, Any]:
    """May get and patch this lab's class buffers by name, and nothing else: `kubectl patch <resource> <name>` GETs the
    object before it sends its PATCH (k8s.io/cli-runtime v0.34.12 pkg/resource/builder.go: a builder requires objects
    unless told otherwise, and Do then retrieves each named one, visitor.go RetrieveLazy; kubectl's patch.go never
    says otherwise). Without `get` every run was Forbidden on the twin's API server. Besides, only the discovery
    requests every authenticated user may make."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(lab_name, SCHEDULER),
        "rules": [
            {
                "apiGroups": [BUFFER_GROUP],
                "resources": [BUFFER_RESOURCE],
                "resourceNames": [class_key(c) for c in lab.classes],
                "verbs": ["get", "patch"],
            }
        ],
    }


def role_binding(lab_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(lab_name, SCHEDULER),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SCHEDULER},
        "subjects": [{"kind": "ServiceAccount", "name": SCHEDULER, "namespace": class_namespace(lab_name)}],
    }


def cron_jobs(lab_name: str, lab: Lab, lab_class: LabClass) -> list[dict[str, Any]]:
    """`<class>-warm` sets the class's buffer to its warm seats at the start less the warmup; `<class>-release` sets it
    back to 0 at the start; both on the class's clock (spec.timeZone). Each gives up rather than run so late that it
    would undo the other. A class with a term runs its jobs only for its days (class_day_check)."""
    key = class_key(lab_class)
    warmup = durations.duration_minutes(lab_class.warmup)
    duration_s = 60 * durations.duration_minutes(lab_class.duration)
    warm, release = (
        _Job(f"{key}-warm", str(lab_class.warm_from), lab.warm_seats(lab_class), 60 * warmup // 2, warmup),
        _Job(f"{key}-release", str(lab_class.start), 0, max(duration_s // 2, 30), 0),
    )
    # A warm-up that starts past the class start would re-warm a released buffer: half the warmup to start, half
    # to finish. A late release still saves money any time during the class.
    return [_cron_job(lab_name, lab_class, key, job) for job in (warm, release)]


@dataclass(frozen=True)
class _Job:
    name: str
    schedule: str
    replicas: int
    deadline_s: int
    lead: int  # minutes from the job's scheduled time to the start of the class it is for


def class_day_check(lab_class: LabClass, lead: int) -> str:
    """The shell script a term's job runs before kubectl (its arguments follow it): it does nothing for a class
    outside the term or on a skipped day, judged by the class start that the job's scheduled minute is for, against
    the term's local days as minutes in UTC. The pod needs no tz data: gpulab computes those bounds from its own."""
    term = lab_class.term
    assert term is not None
    zone = lab_class.zone

    def minute(day: datetime.date) -> int:
        return int(day_start(day, zone).timestamp()) // 60

    day = datetime.timedelta(days=1)
    lines = [
        f"# {JOB_NAME} is <CronJob>-<the minute it was scheduled for, since 1970 UTC>; the class starts {lead}m later.",
        f"start=$((${{{JOB_NAME}##*-}} + {lead}))",
        f'if [ "$start" -lt {minute(term.start)} ] || [ "$start" -ge {minute(term.end + day)} ]; then',
        f'  echo "no class: this run is for a start outside the term, {term.start} to {term.end} in {zone}"',
        "  exit 0",
        "fi",
    ]
    if term.skip:
        skipped = " ".join(f"{minute(d)}:{minute(d + day)}:{d}" for d in sorted(term.skip))
        lines += [
            f"for day in {skipped}; do",
            "  from=${day%%:*} rest=${day#*:}",
            '  if [ "$start" -ge "$from" ] && [ "$start" -lt "${rest%%:*}" ]; then',
            '    echo "no class on ${rest#*:}: the term skips it"',
            "    exit 0",
            "  fi",
            "done",
        ]
    return "\n".join([*lines, 'exec kubectl "$@"', ""])


def _cron_job(lab_name: str, lab_class: LabClass, buffer: str, job: _Job) -> dict[str, Any]:
    assert len(job.name) <= CRONJOB_NAME_LIMIT, job.name
    patch = f'{{"spec":{{"replicas":{job.replicas}}}}}'
    home = "/home/scheduler"  # kubectl keeps its discovery cache under $HOME; the root filesystem is read-only
    container: dict[str, Any] = {
        "name": "kubectl",
        "image": KUBECTL_IMAGE,
        "args": [
            "patch",
            f"{BUFFER_RESOURCE}.{BUFFER_GROUP}",
            buffer,
            f"--namespace={class_namespace(lab_name)}",
            "--type=merge",
            f"--patch={patch}",
        ],
        "env": [{"name": "HOME", "value": home}],
        "volumeMounts": [{"name": "home", "mountPath": home}],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": copy.deepcopy(CONTAINER_SECURITY) | {"readOnlyRootFilesystem": True},
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": SCHEDULER,
        "restartPolicy": "OnFailure",
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "securityContext": copy.deepcopy(POD_SECURITY),
        "containers": [container],
        "volumes": [{"name": "home", "emptyDir": {}}],
    }
    if lab_class.term is not None:
        shell = {"name": "shell", "mountPath": SHELL.rsplit("/", 1)[0]}
        # `sh -c <script> kubectl <args>`: the script sees the kubectl arguments as "$@".
        container["command"] = [SHELL, "-c", class_day_check(lab_class, job.lead), "kubectl"]
        container["env"].append(
            {"name": JOB_NAME, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_NAME_LABEL}']"}}}
        )
        container["volumeMounts"].append(shell)
        pod_spec["initContainers"] = [
            {
                "name": "shell",
                "image": SHELL_IMAGE,
                "command": ["cp", "/bin/busybox", SHELL],
                "volumeMounts": [shell],
                "resources": container["resources"],
                "securityContext": container["securityContext"],
            }
        ]
        pod_spec["volumes"].append({"name": "shell", "emptyDir": {}})
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(lab_name, job.name),
        "spec": {
            "schedule": job.schedule,
            "timeZone": lab_class.zone,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": job.deadline_s,
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {
                    "activeDeadlineSeconds": job.deadline_s,
                    "backoffLimit": 4,
                    "template": {"metadata": {"labels": _labels(lab_name)}, "spec": pod_spec},
                }
            },
        },
    }
