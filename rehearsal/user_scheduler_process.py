"""The hub's user-scheduler on the twin: the twin's kube-scheduler binary (rehearsal/controlplane/<minor>, at the
release the chart's image runs) started a second time, as the jupyterhub chart's user-scheduler Deployment starts it,
so that the learner pods KubeSpawner builds (their schedulerName the user-scheduler's profile) are bound by it, with
the hub's rendered scheduler configuration, as its own service account.

What the Deployment's container gets and how the twin gives it:
- its command's flags, as rendered; `--config` the file the Deployment mounts (its ConfigMap volume's key at that
  path), written into the twin's folder;
- its API connection: in the pod, the in-cluster configuration (the service-account token the kubelet mounts); here a
  kubeconfig with a token the API server issues for the same service account (TokenRequest), named in the file's
  `clientConnection.kubeconfig` (its --kubeconfig flag is ignored beside --config: kubernetes v1.34.12
  cmd/kube-scheduler/app/options/options.go ApplyTo) and as --authentication-kubeconfig and
  --authorization-kubeconfig, which in the pod fall back to the same in-cluster configuration;
- its serving port (10259 on every address, the kubelet's probes'): a free loopback port, probed as the Deployment's
  readinessProbe probes it (GET /healthz over HTTPS, the certificate not verified, as the kubelet does).
Each of these is a recorded substitution (rehearsal.json `substitutions`). Leader election runs as the file
configures it (the chart's lease, in the hub's namespace): one process, which must hold the lease before it
schedules, as the leader of the Deployment's replicas does.

An RBAC denial is read from the scheduler's log, in the API server's words (`... is forbidden: User
"system:serviceaccount:<namespace>:<name>" cannot <verb> resource ...`), as rehearsal.json's rbacDenied; a
configuration it refuses, or a start it does not finish, is its `problem`.
"""

from __future__ import annotations

import contextlib
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rehearsal import twin

# The jupyterhub chart's Deployment and its container (templates/scheduling/user-scheduler/deployment.yaml).
DEPLOYMENT = "user-scheduler"
CONTAINER = "kube-scheduler"
# Its start takes about a second on a quiet machine: its informers list what they watch, then it takes the lease
# (client-go's leader election tries at once, then every retryPeriod, 2 s by default). Past this, it has not started.
READY_SECONDS = 60
# An informer that may not list never syncs, so the scheduler never becomes ready: once its log shows a denial, this
# long without getting ready is taken as that, not waited out to READY_SECONDS.
DENIED_SECONDS = 5
# The API server's refusal for want of a permission (k8s.io/apiserver pkg/endpoints/handlers/responsewriters
# errors.go forbidden, the RBAC authorizer's reason): klog writes it inside a quoted err="...", quotes escaped.
_FORBIDDEN = re.compile(
    r'(?:[\w./-]+ (?:\\?"[^"\\]*\\?" )?is forbidden: )?User \\?"(system:serviceaccount:[^"\\]+)\\?" cannot '
    r'(\S+) resource \\?"([^"\\]+)\\?"(?: in API group \\?"([^"\\]*)\\?")?(?: in the namespace \\?"([^"\\]*)\\?"|'
    r" at the cluster scope)?"
)
# The error of a klog line, quoted (k8s.io/klog/v2 text format: err="...", quotes escaped).
_ERR = re.compile(r'err="((?:[^"\\]|\\.)*)"')
# Each binding it made (pkg/scheduler/schedule_one.go, logged at --v=2, which the Deployment's --v=4 includes).
_BOUND = re.compile(r'"Successfully bound pod to node" pod="([^"]+)" node="([^"]+)"')


class Unusable(Exception):
    """The render has no user-scheduler the twin can start as its Deployment does; the message says what is missing."""


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    if len(found) != 1:
        raise Unusable(f"{len(found)} {kind} named {name} in the hub's chart")
    return found[0]


@dataclass(frozen=True)
class Rendered:
    """What the rendered Deployment runs: its image, its flags, its service account and the mounted configuration."""

    image: str
    flags: list[str]
    service_account: str
    config_path: str  # where the container reads it (--config)
    config_source: str  # the ConfigMap and key it comes from
    config: str  # the file's text

    @property
    def parsed(self) -> dict[str, Any]:
        return dict(yaml.safe_load(self.config))

    @property
    def scheduler_names(self) -> list[str]:
        """The profiles' schedulerName, each a scheduler the process runs (kube-scheduler's default profile's name
        where the file names none)."""
        return [p.get("schedulerName") or twin.DEFAULT_SCHEDULER for p in self.parsed.get("profiles") or [{}]]

    @property
    def lease(self) -> tuple[str, str] | None:
        """The leader's lease, (namespace, name), where leader election is on (kube-scheduler's defaults where the
        file leaves them: k8s.io/kubernetes pkg/scheduler/apis/config/v1 defaults.go, kube-system/kube-scheduler)."""
        election = self.parsed.get("leaderElection") or {}
        if not election.get("leaderElect", True):
            return None
        return election.get("resourceNamespace") or "kube-system", election.get("resourceName") or "kube-scheduler"


def deployed(objects: list[dict[str, Any]]) -> bool:
    """Whether the hub's chart objects hold the user-scheduler's Deployment (scheduling.userScheduler.enabled)."""
    return any(o["kind"] == "Deployment" and o["metadata"]["name"] == DEPLOYMENT for o in objects)


def rendered(objects: list[dict[str, Any]]) -> Rendered:
    """The user-scheduler of the hub's chart objects: the Deployment's container and the file its --config names,
    from the volume mounted there."""
    deployment = _one(objects, "Deployment", DEPLOYMENT)
    pod = deployment["spec"]["template"]["spec"]
    containers = [c for c in pod["containers"] if c["name"] == CONTAINER]
    if len(containers) != 1:
        raise Unusable(f"Deployment {DEPLOYMENT} has no container {CONTAINER}")
    (container,) = containers
    command = [*(container.get("command") or []), *(container.get("args") or [])]
    flags = command[1:]
    configs = [f.split("=", 1)[1] for f in flags if f.startswith("--config=")]
    if len(configs) != 1:
        raise Unusable(f"Deployment {DEPLOYMENT}'s {CONTAINER} passes no --config=<file>")
    (path,) = configs
    folder, _, file = path.rpartition("/")
    mounts = [m for m in container.get("volumeMounts") or [] if m["mountPath"].rstrip("/") == folder]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    if len(mounts) != 1 or "configMap" not in volumes.get(mounts[0]["name"], {}):
        raise Unusable(f"Deployment {DEPLOYMENT} mounts no ConfigMap at {folder}, where its --config is")
    volume = volumes[mounts[0]["name"]]["configMap"]
    # A ConfigMap volume holds each key as a file of its name, unless its items map keys to other paths.
    key = next((i["key"] for i in volume.get("items") or [] if i["path"] == file), file)
    config_map = _one(objects, "ConfigMap", volume["name"])
    if key not in (config_map.get("data") or {}):
        raise Unusable(f"ConfigMap {volume['name']} has no {key}, which the user-scheduler reads as {path}")
    return Rendered(
        image=container["image"],
        flags=flags,
        service_account=pod.get("serviceAccountName") or "default",
        config_path=path,
        config_source=f"ConfigMap {volume['name']} {key}",
        config=config_map["data"][key],
    )


def denials(log: str, account: str) -> list[str]:
    """The API server's refusals of `account` (system:serviceaccount:<namespace>:<name>) in a log, once each."""
    found: dict[tuple[str | None, ...], str] = {}
    for match in _FORBIDDEN.finditer(log):
        if match[1] == account:
            found.setdefault(match.groups(), match[0].replace('\\"', '"'))
    return list(found.values())


@dataclass
class UserScheduler:
    """The running (or refused) user-scheduler: what rehearsal.json's userScheduler says of it."""

    plane: twin.ControlPlane
    namespace: str
    spec: Rendered
    source: str
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    args: list[str] = field(default_factory=list)
    ready_seconds: float | None = None
    holder: str | None = None
    problem: str | None = None
    version: str | None = None  # what the binary's --version reports

    @property
    def account(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.spec.service_account}"

    def running(self) -> list[str]:
        """The scheduler names it serves: none once it has stopped, failed to start, or been denied anything by RBAC
        (a scheduler refused its bindings would leave its pods pending, which the class day would wait on)."""
        if self.problem or self.process is None or self.process.poll() is not None or self.denied():
            return []
        return self.spec.scheduler_names

    def _log(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def denied(self) -> list[dict[str, str]]:
        """rehearsal.json's rbacDenied entries: each refusal its log shows."""
        return [
            {
                "what": f"the user-scheduler (Deployment {self.namespace}/{DEPLOYMENT}, {self.source})",
                "serviceAccount": f"{self.namespace}/{self.spec.service_account}",
                "message": message,
            }
            for message in denials(self._log(), self.account)
        ]

    def bound(self) -> dict[str, str]:
        """The pods it bound, namespace/name -> node, as its log says."""
        return {m[1]: m[2] for m in _BOUND.finditer(self._log())}

    def stopped(self) -> str | None:
        """Why it is not running, where it stopped after a start: its exit and its last error."""
        if self.problem or self.process is None or self.process.poll() is None:
            return self.problem
        return f"kube-scheduler exited ({self.process.returncode}): {_last_error(self._log())}"

    def record(self) -> dict[str, Any]:
        image_tag = self.spec.image.rpartition(":")[2]
        return {
            "deployment": f"{self.namespace}/{DEPLOYMENT}",
            "source": self.source,
            "image": self.spec.image,
            "version": self.version,
            "imageTag": image_tag,
            "schedulerNames": self.spec.scheduler_names,
            "serviceAccount": f"{self.namespace}/{self.spec.service_account}",
            "config": f"{self.spec.config_source} (mounted at {self.spec.config_path})",
            "args": self.args,
            "leaderLease": "/".join(self.spec.lease) if self.spec.lease else None,
            "leader": self.holder,
            "readySeconds": self.ready_seconds,
            "bound": len(self.bound()),
            "problem": self.stopped(),
        }

    def substitutions(self) -> list[dict[str, str]]:
        """What the twin gives the process in place of what its pod would have (the module's docstring)."""
        account = f"{self.namespace}/{self.spec.service_account}"
        found = [
            {
                "component": "the user-scheduler's API credentials (in its pod, the in-cluster configuration: the "
                "service-account token the kubelet mounts)",
                "inTheRehearsal": f"a kubeconfig with a token the twin's API server issued for {account} "
                "(TokenRequest), as clientConnection.kubeconfig of its config.yaml (the rest of the file as rendered) "
                "and --authentication-kubeconfig, --authorization-kubeconfig",
            },
            {
                "component": "the user-scheduler's serving address (0.0.0.0:10259, its probes' port), and its "
                "Deployment's replicas",
                "inTheRehearsal": "a free port on 127.0.0.1, probed at /healthz as its readinessProbe is; one process, "
                "which takes the lease as one replica leads",
            },
        ]
        version, tag = self.version, self.spec.image.rpartition(":")[2]
        if version and version != tag:
            found.append(
                {
                    "component": f"the user-scheduler's image {self.spec.image}",
                    "inTheRehearsal": f"the twin's kube-scheduler {version}",
                }
            )
        return found


def _last_error(log: str) -> str:
    """kube-scheduler's own words for why it stopped: its last error line (klog's E line, its err="..." unquoted, or
    cobra's `Error: ...`)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error: ") or line[:1] == "E"]
    last = (errors or lines or ["no output"])[-1]
    quoted = _ERR.search(last)
    return quoted[1].replace('\\"', '"') if quoted else last


def _probe(port: int) -> bool:
    """The readinessProbe's GET /healthz over HTTPS, the serving certificate (self-signed, in memory) not verified,
    as the kubelet's HTTPS probes do not verify it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=5) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False


def _holder(plane: twin.ControlPlane, lease: tuple[str, str]) -> str | None:
    namespace, name = lease
    try:
        found = plane.admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    except twin.ApiError:
        return None
    return (found.get("spec") or {}).get("holderIdentity") or None


@contextlib.contextmanager
def running(
    plane: twin.ControlPlane, objects: list[dict[str, Any]], namespace: str, source: str
) -> Iterator[UserScheduler]:
    """The hub's user-scheduler started on the twin from the chart's rendered `objects` (applied there already: its
    ServiceAccount, RBAC and ConfigMap), waited for until it is ready and leads, or until it stopped or was denied
    (its `problem`); stopped on exit."""
    scheduler = UserScheduler(plane, namespace, rendered(objects), source)
    spec = scheduler.spec
    folder = plane.folder / "user-scheduler"
    folder.mkdir()
    identity = plane.service_account(namespace, spec.service_account, seconds=twin.TOKEN_SECONDS)
    kubeconfig = twin.write_kubeconfig(folder, identity, "user-scheduler")
    config = spec.parsed
    config["clientConnection"] = {**(config.get("clientConnection") or {}), "kubeconfig": str(kubeconfig)}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    port = twin.free_port()
    scheduler.args = [
        *(f"--config={folder / 'config.yaml'}" if f.startswith("--config=") else f for f in spec.flags),
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
    ]
    binary = plane.binaries["kube-scheduler"]
    # "Kubernetes v1.34.12" (component-base's version flag).
    reported = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False).stdout.split()
    scheduler.version = reported[-1] if reported else None
    scheduler.log = plane.folder / "user-scheduler.log"
    scheduler.process = twin.start_process(plane.folder, "user-scheduler", binary, scheduler.args)
    try:
        _wait(scheduler, port)
        yield scheduler
    finally:
        twin.stop(scheduler.process)


def _wait(scheduler: UserScheduler, port: int) -> None:
    started = time.monotonic()
    denied_at: float | None = None
    assert scheduler.process is not None
    while True:
        waited = time.monotonic() - started
        if scheduler.process.poll() is not None:
            scheduler.problem = scheduler.stopped()
            return
        lease = scheduler.spec.lease
        holder = _holder(scheduler.plane, lease) if lease else None
        if (holder or lease is None) and _probe(port):
            scheduler.holder, scheduler.ready_seconds = holder, round(waited, 1)
            return
        if denied_at is None and scheduler.denied():
            denied_at = waited
        if waited > READY_SECONDS or (denied_at is not None and waited - denied_at > DENIED_SECONDS):
            why = "RBAC denied it what it asked for (rbacDenied)" if denied_at else _last_error(scheduler._log())
            scheduler.problem = (
                f"not ready after {waited:.0f} s (ready: /healthz answers and it holds its lease"
                f"{' ' + '/'.join(lease) if lease else ''}): {why}"
            )
            twin.stop(scheduler.process)
            return
        time.sleep(0.25)
