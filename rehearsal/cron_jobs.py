"""The classes' CronJobs run for real on the twin: each Job made as the CronJob controller makes it at the class's
first occurrence, its pod made by the Job controller (admission and all), and the pod's command run here, as the
pod's service account with a token the API server issues for it, against the API server.

KWOK and the twin run no container, so the rehearsal plays the kubelet's part for these pods: it runs the container's
command and arguments with the pod's environment, kubectl being the one built from the pinned Kubernetes modules
(the image's, registry.k8s.io/kubectl, is its release build) and the image's shell the machine's POSIX sh (the check
uses only POSIX sh: tests/support/class_jobs.py). An RBAC denial or a failed command fails the rehearsal.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.karpenter import class_seats_manifests as seats
from domain.stack.model import Lab, LabClass
from domain.stack.namespaces import class_namespace
from domain.time.utc import utc_text
from rehearsal import twin

# The Job controller makes a Job's pod within a second or two; under heavy load, later.
POD_SECONDS = 90
# A class without a term repeats all year: its first occurrence is looked for this many days from the day of the run.
LOOK_AHEAD_DAYS = 8
# kubectl prints an RBAC refusal as the server's Forbidden status (k8s.io/kubectl pkg/cmd/util/helpers.go,
# StandardErrorMessage).
FORBIDDEN = "(Forbidden)"


@dataclass(frozen=True)
class Firing:
    """One run of a class CronJob: the lab, the class, the CronJob and the time the controller schedules it for."""

    lab: str
    lab_class: LabClass
    cron_job: str
    at: datetime.datetime  # UTC
    replicas: int  # what the run sets the class's buffer to


def firings(labs: dict[str, Lab], today: datetime.date) -> Iterator[Firing]:
    """Each class's warm-up and release at its first occurrence from `today` (its term's first day, for a term)."""
    for name, lab in labs.items():
        for lab_class in lab.classes:
            if lab_class.term is None:
                found = lab_class.occurrences(today, today + datetime.timedelta(days=LOOK_AHEAD_DAYS))
            else:
                found = lab_class.occurrences()
            first = next(iter(found), None)
            if first is None:
                continue
            key = seats.class_key(lab_class)
            yield Firing(name, lab_class, f"{key}-warm", first.warm, lab.warm_seats(lab_class))
            yield Firing(name, lab_class, f"{key}-release", first.start, 0)


def job_name(cron_job: str, at: datetime.datetime) -> str:
    """The Job's name as the CronJob controller gives it: <CronJob>-<the scheduled minute since 1970, UTC>
    (kubernetes pkg/controller/cronjob/utils.go, getJobName and getTimeHashInMinutes)."""
    return f"{cron_job}-{int(at.timestamp()) // 60}"


def _job(cron_job: dict[str, Any], name: str, at: datetime.datetime) -> dict[str, Any]:
    """The Job the CronJob controller creates from the CronJob's jobTemplate (pkg/controller/cronjob/utils.go,
    getJobFromTemplate2): its labels and annotations, the scheduled time, and the CronJob as its owner."""
    template = cron_job["spec"]["jobTemplate"]
    meta = template.get("metadata") or {}
    owner = cron_job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": owner["namespace"],
            "labels": meta.get("labels") or {},
            "annotations": {
                **(meta.get("annotations") or {}),
                "batch.kubernetes.io/cronjob-scheduled-timestamp": utc_text(at, whole_seconds=True),
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": owner["name"],
                    "uid": owner["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template["spec"],
    }


def _pod(client: twin.Client, namespace: str, job: str) -> dict[str, Any]:
    """The Job's pod, once the Job controller has made it; raises twin.ApiError with the controller's reason if not."""
    deadline = time.monotonic() + POD_SECONDS
    selector = f"{seats.JOB_NAME_LABEL}={job}"
    while time.monotonic() < deadline:
        pods = client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)["items"]
        if pods:
            return pods[0]
        time.sleep(0.5)
    events = client.get(f"/api/v1/namespaces/{namespace}/events", fieldSelector=f"involvedObject.name={job}")
    why = "; ".join(e["message"] for e in events["items"] if e.get("reason") == "FailedCreate")
    raise twin.ApiError(0, f"the Job controller made no pod in {POD_SECONDS} s{': ' + why if why else ''}")


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


def run_firing(plane: twin.ControlPlane, firing: Firing) -> dict[str, Any]:
    """One CronJob run: the Job, its pod, its command; what it did, for rehearsal.json."""
    namespace = class_namespace(firing.lab)
    admin = plane.admin
    cron_job = admin.get(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/{firing.cron_job}")
    name = job_name(firing.cron_job, firing.at)
    admin.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", _job(cron_job, name, firing.at))
    pod = _pod(admin, namespace, name)
    deadline = int(cron_job["spec"]["jobTemplate"]["spec"].get("activeDeadlineSeconds") or 60)
    done = run_container(plane, pod, deadline)
    buffer = admin.get(
        f"/apis/{seats.BUFFER_API}/namespaces/{namespace}/{seats.BUFFER_RESOURCE}/{seats.class_key(firing.lab_class)}"
    )
    return {
        "lab": firing.lab,
        "job": f"{namespace}/{name}",
        "at": utc_text(firing.at),
        "serviceAccount": f"{namespace}/{pod['spec'].get('serviceAccountName') or 'default'}",
        "exitCode": done.returncode,
        "output": (done.stdout + done.stderr).strip(),
        "bufferReplicas": (buffer.get("spec") or {}).get("replicas"),
        "wantReplicas": firing.replicas,
    }


def run(plane: twin.ControlPlane, firing: Firing) -> dict[str, Any]:
    """run_firing's record, or, where the API server answered with an error before the command ran, that error."""
    try:
        return run_firing(plane, firing)
    except twin.ApiError as error:
        job = f"{class_namespace(firing.lab)}/{job_name(firing.cron_job, firing.at)}"
        return {"lab": firing.lab, "job": job, "exitCode": None, "output": error.message}


def run_all(plane: twin.ControlPlane, labs: dict[str, Lab], today: datetime.date) -> list[dict[str, Any]]:
    """Every firing run, one after the other, on no clock (the rehearsal without its class day)."""
    return [run(plane, firing) for firing in firings(labs, today)]


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
    """The runs that failed otherwise, or left the class's buffer other than the class needs."""
    return [
        r for r in runs if not _denied(r) and (r["exitCode"] != 0 or r.get("bufferReplicas") != r.get("wantReplicas"))
    ]
