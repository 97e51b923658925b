"""The classes' CronJobs run for real on the twin: Kubernetes' own CronJob controller on the rehearsal's simulated clock
makes each Job when its schedule says (rehearsal/cronjob_controller_process.py), the Job controller makes its pod
(admission and all), kube-scheduler places the pod as its spec says (on the system nodes, rehearsal/system_nodes.py),
and the pod's command is run here, as the pod's service account with a token the API server issues for it, against the
API server.

KWOK and the twin run no container, so the rehearsal plays the kubelet's part for these pods: it runs the container's
command and arguments with the pod's environment, kubectl being the one built from the pinned Kubernetes modules
(the image's, registry.k8s.io/kubectl, is its release build) and the image's shell the machine's POSIX sh (the check
uses only POSIX sh: tests/support/class_jobs.py). An RBAC denial or a failed command fails the rehearsal; so do a
Job's pod placed on no node and a class's run the controller did not make at the class's time (a suspended CronJob, a
schedule or time zone off).

`firings` is what the classes need of their CronJobs, from gpulab's calendar: the rehearsal plays the day around them
and holds the controller's runs to them (`missed`); it never makes a Job itself.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.karpenter import class_seats_manifests as seats
from domain.stack.model import Lab, LabClass
from domain.stack.namespaces import class_namespace
from domain.time.utc import utc_text
from rehearsal import twin
from rehearsal.term import Played

# Without the class day (no stepper), the Job controller makes a Job's pod and kube-scheduler places it within a
# second or two; under heavy load, later.
POD_SECONDS = 90
# kubectl prints an RBAC refusal as the server's Forbidden status (k8s.io/kubectl pkg/cmd/util/helpers.go,
# StandardErrorMessage).
FORBIDDEN = "(Forbidden)"


@dataclass(frozen=True)
class Firing:
    """One run of a class CronJob the class needs: the lab, the class, the CronJob and the time it is for."""

    lab: str
    lab_class: LabClass
    cron_job: str
    at: datetime.datetime  # UTC
    replicas: int  # what the run sets the class's buffer to


def firings(labs: dict[str, Lab], played: Mapping[str, Played]) -> Iterator[Firing]:
    """Each played class's warm-up and release (`played`: per lab, its classes' occurrences; rehearsal/term.py)."""
    for name, classes in played.items():
        lab = labs[name]
        for index, occurrence in classes:
            lab_class = lab.classes[index]
            key = seats.class_key(lab_class)
            yield Firing(name, lab_class, f"{key}-warm", occurrence.warm, lab.warm_seats(lab_class))
            yield Firing(name, lab_class, f"{key}-release", occurrence.start, 0)


def _field(pod: dict[str, Any], path: str) -> str:
    """A downward-API fieldRef of the pod: metadata.name, metadata.namespace, metadata.labels['<key>'] and the
    annotations alike."""
    meta = pod["metadata"]
    if path in ("metadata.name", "metadata.namespace"):
        return meta[path.split(".")[1]]
    for kind in ("labels", "annotations"):
        prefix = f"metadata.{kind}['"
        if path.startswith(prefix) and path.endswith("']"):
            return (meta.get(kind) or {}).get(path[len(prefix) : -2], "")
    raise ValueError(f"fieldRef {path}: not one the rehearsal resolves")


def run_container(plane: twin.ControlPlane, pod: dict[str, Any], timeout: int) -> subprocess.CompletedProcess[str]:
    """The pod's (only) container run here as its pod would run it, as the pod's service account."""
    (container,) = pod["spec"]["containers"]
    namespace = pod["metadata"]["namespace"]
    identity = plane.service_account(namespace, pod["spec"].get("serviceAccountName") or "default")
    with tempfile.TemporaryDirectory(prefix="gpulab-job-") as folder:
        scratch = Path(folder)
        (scratch / "kubectl").symlink_to(plane.binaries["kubectl"])
        (scratch / "kubeconfig").write_text(json.dumps(identity.kubeconfig()))
        env = {
            "PATH": f"{scratch}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "KUBECONFIG": str(scratch / "kubeconfig"),
        }
        for variable in container.get("env") or []:
            if "value" in variable:
                env[variable["name"]] = variable["value"]
            else:
                env[variable["name"]] = _field(pod, variable["valueFrom"]["fieldRef"]["fieldPath"])
        # The container's writable mounts (HOME among them: kubectl's discovery cache) are emptyDirs: a fresh folder.
        for mount in container.get("volumeMounts") or []:
            if env.get("HOME") == mount["mountPath"]:
                env["HOME"] = str(scratch)
        # The image's entrypoint is kubectl (registry.k8s.io/kubectl); a command is the shell the init container
        # copies in (class_seats_manifests.SHELL), which POSIX sh stands in for.
        command = container.get("command") or ["kubectl"]
        if command[0] == seats.SHELL:
            command = [shutil.which("sh") or "/bin/sh", *command[1:]]
        return subprocess.run(
            [*command, *(container.get("args") or [])],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def fired_now(admin: twin.Client, reported: set[str], at: datetime.datetime) -> list[dict[str, Any]]:
    """Without the stepper: the Jobs of CronJobs not in `reported` (namespace/name, added to it), each once the Job
    controller has made its pod and kube-scheduler has placed it or found no place for it, as the stepper hands them
    over (rehearsal/stepper cronjobs.go firedJob)."""
    found = []
    for job in admin.get("/apis/batch/v1/jobs")["items"]:
        meta = job["metadata"]
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
        key = f"{meta['namespace']}/{meta['name']}"
        if owner is None or owner["kind"] != "CronJob" or key in reported:
            continue
        reported.add(key)
        pod = _placed_pod(admin, meta["namespace"], meta["name"])
        scheduled: dict[str, str] = next(
            (c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"), {}
        )
        found.append(
            {
                "namespace": meta["namespace"],
                "job": meta["name"],
                "cronJob": owner["name"],
                "at": utc_text(at, whole_seconds=True),
                "pod": pod["metadata"]["name"],
                "node": pod["spec"].get("nodeName"),
                **({} if pod["spec"].get("nodeName") else {"unschedulable": scheduled.get("message", "")}),
            }
        )
    return found


def _placed_pod(admin: twin.Client, namespace: str, job: str) -> dict[str, Any]:
    """The Job's pod, once kube-scheduler has placed it or found it unschedulable; raises twin.ApiError with the Job
    controller's reason if it made none."""
    deadline = time.monotonic() + POD_SECONDS
    selector = f"{seats.JOB_NAME_LABEL}={job}"
    while time.monotonic() < deadline:
        for pod in admin.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)["items"]:
            conditions = pod["status"].get("conditions") or []
            if pod["spec"].get("nodeName") or any(
                c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
            ):
                return dict(pod)
        time.sleep(0.2)
    events = admin.get(f"/api/v1/namespaces/{namespace}/events", fieldSelector=f"involvedObject.name={job}")
    why = "; ".join(e["message"] for e in events["items"] if e.get("reason") == "FailedCreate")
    raise twin.ApiError(
        0, f"no pod of Job {job} placed or found unschedulable in {POD_SECONDS} s{': ' + why if why else ''}"
    )


def _owner(fired: dict[str, Any], labs: dict[str, Lab], played: Mapping[str, Played]) -> Firing | None:
    """The class run a Job of this CronJob stands for (its lab, class and the buffer it sets), if a class's CronJob
    made it."""
    for firing in firings(labs, played):
        if firing.cron_job == fired["cronJob"] and class_namespace(firing.lab) == fired["namespace"]:
            return firing
    return None


def run_fired(
    plane: twin.ControlPlane, fired: dict[str, Any], labs: dict[str, Lab], played: Mapping[str, Played]
) -> dict[str, Any]:
    """One Job the CronJob controller made (the stepper's `jobs` entry: namespace, job, cronJob, at, pod, and the node
    kube-scheduler placed the pod on or why it found none): its pod's command run; what it did, for rehearsal.json's
    jobs."""
    namespace, admin = fired["namespace"], plane.admin
    firing = _owner(fired, labs, played)
    record: dict[str, Any] = {
        "lab": firing.lab if firing else None,
        "job": f"{namespace}/{fired['job']}",
        "at": fired["at"],
    }
    if "unschedulable" in fired:
        return record | {
            "exitCode": None,
            "output": f"kube-scheduler placed its pod on no node: {fired['unschedulable']}",
        }
    pod = admin.get(f"/api/v1/namespaces/{namespace}/pods/{fired['pod']}")
    cron_job = admin.get(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/{fired['cronJob']}")
    deadline = int(cron_job["spec"]["jobTemplate"]["spec"].get("activeDeadlineSeconds") or 60)
    done = run_container(plane, pod, deadline)
    record |= {
        "serviceAccount": f"{namespace}/{pod['spec'].get('serviceAccountName') or 'default'}",
        "node": fired["node"],
        "exitCode": done.returncode,
        "output": (done.stdout + done.stderr).strip(),
    }
    if firing is None:
        return record
    buffer = admin.get(
        f"/apis/{seats.BUFFER_API}/namespaces/{namespace}/{seats.BUFFER_RESOURCE}/{seats.class_key(firing.lab_class)}"
    )
    return record | {"bufferReplicas": (buffer.get("spec") or {}).get("replicas"), "wantReplicas": firing.replicas}


def run(
    plane: twin.ControlPlane, fired: dict[str, Any], labs: dict[str, Lab], played: Mapping[str, Played]
) -> dict[str, Any]:
    """run_fired's record, or, where the API server answered with an error before the command ran, that error."""
    try:
        return run_fired(plane, fired, labs, played)
    except twin.ApiError as error:
        return {"lab": None, "job": f"{fired['namespace']}/{fired['job']}", "exitCode": None, "output": error.message}


def cron_job_entry(fired: dict[str, Any]) -> dict[str, str]:
    """rehearsal.json's cronJobs entry for a Job the controller made."""
    return {
        "name": fired["cronJob"],
        "namespace": fired["namespace"],
        "job": fired["job"],
        "firedAt": fired["at"],
        "by": "cronjob-controller",
    }


def missed(
    admin: twin.Client,
    labs: dict[str, Lab],
    played: Mapping[str, Played],
    fired: list[dict[str, str]],
    until: datetime.datetime,
) -> list[dict[str, Any]]:
    """Each class CronJob whose runs by the controller up to `until` are not the class's (its `firings` by then):
    rehearsal.json's cronJobsMissed, with what the CronJob says of why (its schedule, time zone and suspend, and the
    controller's warnings on it)."""
    want: dict[tuple[str, str], list[str]] = {}
    for firing in firings(labs, played):
        if firing.at <= until:
            want.setdefault((class_namespace(firing.lab), firing.cron_job), []).append(
                utc_text(firing.at, whole_seconds=True)
            )
    made: dict[tuple[str, str], list[str]] = {}
    for f in fired:
        made.setdefault((f["namespace"], f["name"]), []).append(f["firedAt"])
    return [
        {
            "name": name,
            "namespace": namespace,
            "want": sorted(times),
            "firedAt": sorted(made.get((namespace, name), [])),
            "why": _why(admin, namespace, name),
        }
        for (namespace, name), times in sorted(want.items())
        if sorted(made.get((namespace, name), [])) != sorted(times)
    ]


def _why(admin: twin.Client, namespace: str, name: str) -> str:
    """What the CronJob says of its runs: its schedule and time zone, suspend, and the controller's warnings."""
    try:
        spec = admin.get(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}")["spec"]
    except twin.ApiError as error:
        return error.message
    zone = f"timeZone {spec['timeZone']}" if spec.get("timeZone") else "no timeZone (the controller's, UTC)"
    said = [f"schedule {spec['schedule']!r} on {zone}", *(["suspend: true"] if spec.get("suspend") else [])]
    events = admin.get(f"/api/v1/namespaces/{namespace}/events", fieldSelector=f"involvedObject.name={name}")
    said += sorted({f"{e['reason']}: {e['message']}" for e in events["items"] if e.get("type") == "Warning"})
    return "; ".join(said)


def _denied(run: dict[str, Any]) -> bool:
    return bool(run["exitCode"]) and FORBIDDEN in run["output"]


def denied(runs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The runs the API server refused for want of a permission (RBAC), as rehearsal.json's rbacDenied lists them."""
    return [
        {"what": f"Job {r['job']}", "serviceAccount": r["serviceAccount"], "message": r["output"]}
        for r in runs
        if _denied(r)
    ]


def failed(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs that failed otherwise (a pod placed on no node among them), or left the class's buffer other than the
    class needs."""
    return [
        r for r in runs if not _denied(r) and (r["exitCode"] != 0 or r.get("bufferReplicas") != r.get("wantReplicas"))
    ]
