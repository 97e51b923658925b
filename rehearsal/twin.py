"""The twin's control plane: etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from the pinned Go
modules of the stack's Kubernetes minor version (rehearsal/controlplane/<minor>, rehearsal/twins.py), started on
loopback ports in a scratch folder, with KWOK's controller (rehearsal/kwok) in the kubelets' place, and a client that
talks to its API server as the admin, or as a service account with a token the API server issued (TokenRequest).

Nothing here models AWS: no node exists until the rehearsal makes one, and KWOK plays the kubelet of each node
annotated FAKE_NODE (status, heartbeats, its pods' status; no container runs). docs/developers/rehearsal.md says what
the twin is, and docs/rehearsal.md what it leaves out.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools import go_build
from rehearsal import twins

KWOK_MODULE = go_build.ROOT / go_build.HELPERS["kwok"].module
# The nodes KWOK manages carry this annotation, as sigs.k8s.io/karpenter's kwok cloud provider sets it (v1.14.1
# kwok/apis/v1alpha1/labels.go KwokLabelKey, KwokLabelValue).
FAKE_NODE = ("kwok.x-k8s.io/node", "fake")
# What KWOK plays, its own stages (sigs.k8s.io/kwok kustomize/stage): a node's first status and its heartbeats with a
# lease, a bound pod made Running, a deleted one removed. Not pod-complete: the rehearsal runs a Job's command itself,
# and a Job's pod must not succeed before its command has.
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
# KWOK's permissions, as its own deployment grants them (kustomize/rbac/role.yaml, ClusterRole kwok-controller).
KWOK_ROLE = "kustomize/rbac/role.yaml"
# The API server answers /readyz within seconds once etcd is up; under a load of 30 on two cores it took up to 40 s.
READY_SECONDS = 180
# The cluster's service CIDR: the API server needs one to allocate the kubernetes Service's address.
SERVICE_CIDR = "10.100.0.0/16"
# The user KWOK acts as.
KWOK_USER = "kwok-controller"
# The twin's kube-scheduler runs with its default configuration's one profile, this scheduler.
DEFAULT_SCHEDULER = "default-scheduler"
# A service-account token the rehearsal asks for outlives the rehearsal (a class day plays in minutes).
TOKEN_SECONDS = 6 * 3600
# A node's lease duration (k8s.io/kubelet config v1beta1 KubeletConfiguration nodeLeaseDurationSeconds, default 40).
NODE_LEASE_SECONDS = 40


class Failed(Exception):
    """A control-plane process did not start or stopped; the message names it and ends with its log."""


def _kwok_source() -> Path:
    """The folder of the sigs.k8s.io/kwok module that rehearsal/kwok pins, in Go's module cache (the build put it
    there): its stages and its role are read from it, never copied."""
    found = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=KWOK_MODULE,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode or not found.stdout.strip():
        raise Failed(f"sigs.k8s.io/kwok not found in Go's module cache: {found.stderr.strip()}")
    return Path(found.stdout.strip())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiError(Exception):
    """The API server refused a request: its HTTP status and its own message (metav1.Status.message)."""

    def __init__(self, status: int, message: str, reason: str = ""):
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason


@dataclass
class Client:
    """Requests to the API server as one identity (a bearer token). The server's certificate is its own self-signed
    one, made at start on loopback (kube-apiserver --cert-dir): the client trusts it by reading it from there."""

    server: str
    token: str
    ca_file: Path
    _context: ssl.SSLContext = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._context = ssl.create_default_context(cafile=str(self.ca_file))

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json", **query: str
    ) -> Any:
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self._context, timeout=60) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                status = json.loads(raw)
                raise ApiError(error.code, status.get("message", ""), status.get("reason", "")) from None
            except ValueError:
                raise ApiError(error.code, raw.decode(errors="replace").strip()) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:  # /readyz and /healthz answer in plain text ("ok")
            return raw.decode(errors="replace")

    def get(self, path: str, **query: str) -> Any:
        return self.request("GET", path, **query)

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig for this identity, as kubectl reads it (what a pod's in-cluster config amounts to)."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "twin", "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)}}
            ],
            "users": [{"name": "twin", "user": {"token": self.token}}],
            "contexts": [{"name": "twin", "context": {"cluster": "twin", "user": "twin"}}],
            "current-context": "twin",
        }


@dataclass
class ControlPlane:
    folder: Path
    admin: Client
    version: str
    binaries: Mapping[str, Path]
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def check_running(self) -> None:
        _check(self.folder, self.processes)

    def service_account(self, namespace: str, name: str, seconds: int = 3600) -> Client:
        """A client that acts as the service account, with a token the API server issues for it (TokenRequest),
        as the kubelet mounts one into a pod."""
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        answer = self.admin.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", request)
        return Client(self.admin.server, answer["status"]["token"], self.admin.ca_file)


def _check(folder: Path, processes: Mapping[str, subprocess.Popen]) -> None:
    for name, process in processes.items():
        if process.poll() is not None:
            tail = "\n".join((folder / f"{name}.log").read_text(errors="replace").splitlines()[-15:])
            raise Failed(f"{name} stopped (exit {process.returncode}):\n{tail}")


def start_process(folder: Path, name: str, binary: Path, args: list[str]) -> subprocess.Popen[bytes]:
    """`binary` started in the twin's folder, its output in <folder>/<name>.log."""
    with (folder / f"{name}.log").open("wb") as log:
        return subprocess.Popen([str(binary), *args], stdout=log, stderr=subprocess.STDOUT, cwd=folder)


def _start(folder: Path, binaries: Mapping[str, Path], name: str, args: list[str]) -> subprocess.Popen[bytes]:
    return start_process(folder, name, binaries[name], args)


def stop(process: subprocess.Popen[bytes]) -> None:
    """The process terminated, and killed if it has not stopped within 20 s."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def close_stdin(process: subprocess.Popen[str], seconds: int) -> None:
    """A process that the rehearsal drives through its stdin (the stepper, the CronJob controller) told to stop, by
    closing it, and waited for; killed if it has not stopped within `seconds`."""
    if process.stdin:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def write_kubeconfig(folder: Path, client: Client, name: str) -> Path:
    path = folder / f"{name}.kubeconfig"
    path.write_text(json.dumps(client.kubeconfig()))
    return path


@contextlib.contextmanager
def running(minor: str) -> Iterator[ControlPlane]:
    """A fresh control plane of Kubernetes `minor` (the twin built: rehearsal/twins.py), stopped and removed on exit."""
    twins.require_built(minor)
    binaries = twins.binaries(minor)
    folder = Path(tempfile.mkdtemp(prefix="gpulab-twin-"))
    processes: dict[str, subprocess.Popen] = {}
    try:
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd = f"http://127.0.0.1:{etcd_port}"
        processes["etcd"] = _start(
            folder,
            binaries,
            "etcd",
            [
                f"--data-dir={folder / 'etcd'}",
                f"--listen-client-urls={etcd}",
                f"--advertise-client-urls={etcd}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                # The twin lives for one rehearsal: no fsync per write.
                "--unsafe-no-fsync",
            ],
        )
        # The service-account signing key (TokenRequest): kube-apiserver refuses to start without one.
        key = folder / "sa.key"
        subprocess.run(
            ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key)],
            check=True,
            capture_output=True,
        )
        tokens = {user: secrets.token_hex(16) for user in ("admin", "controller-manager", "scheduler", "kwok")}
        # Static tokens for the admin and for the two components, under the user names the API server's bootstrap RBAC
        # binds (system:kube-controller-manager, system:kube-scheduler): they run with their own permissions only;
        # and for KWOK, which gets its own role below.
        (folder / "tokens.csv").write_text(
            f"{tokens['admin']},admin,admin,system:masters\n"
            f"{tokens['controller-manager']},system:kube-controller-manager,kcm\n"
            f"{tokens['scheduler']},system:kube-scheduler,scheduler\n"
            f"{tokens['kwok']},{KWOK_USER},kwok\n"
        )
        certs = folder / "certs"
        processes["kube-apiserver"] = _start(
            folder,
            binaries,
            "kube-apiserver",
            [
                f"--etcd-servers={etcd}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                f"--cert-dir={certs}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--token-auth-file={folder / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-key-file={key}",
                f"--service-account-signing-key-file={key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                # EKS runs privileged containers (the device plugin's, the node agents'); Pod Security admission still
                # applies per namespace.
                "--allow-privileged=true",
            ],
        )
        server = f"https://127.0.0.1:{api_port}"
        ca = certs / "apiserver.crt"
        deadline = time.monotonic() + READY_SECONDS
        admin = None
        while True:
            _check(folder, processes)
            if ca.exists():
                admin = admin or Client(server, tokens["admin"], ca)
                with contextlib.suppress(OSError, ApiError, ssl.SSLError):
                    admin.request("GET", "/readyz")
                    break
            if time.monotonic() > deadline:
                raise Failed(f"kube-apiserver not ready after {READY_SECONDS} s")
            time.sleep(0.5)
        plane = ControlPlane(folder, admin, admin.get("/version")["gitVersion"], binaries, processes)
        controller_manager = write_kubeconfig(
            folder, Client(server, tokens["controller-manager"], ca), "controller-manager"
        )
        processes["kube-controller-manager"] = _start(
            folder,
            binaries,
            "kube-controller-manager",
            [
                f"--kubeconfig={controller_manager}",
                "--leader-elect=false",
                # Every controller but the CronJob controller, which runs on the rehearsal's simulated clock instead
                # (rehearsal/cronjob_controller_process.py; the name: cmd/kube-controller-manager/names).
                f"--controllers=*,-{twins.CRONJOB_CONTROLLER}",
                # Each controller under its own service account, as on EKS: a controller's missing permission shows.
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={key}",
                f"--root-ca-file={ca}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # No health endpoint: twins of parallel rehearsals would contend for its fixed port.
                "--secure-port=0",
            ],
        )
        scheduler = write_kubeconfig(folder, Client(server, tokens["scheduler"], ca), "scheduler")
        processes["kube-scheduler"] = _start(
            folder, binaries, "kube-scheduler", [f"--config={_scheduler_config(folder, scheduler)}", "--secure-port=0"]
        )
        processes["kwok"] = _start_kwok(folder, binaries, admin, Client(server, tokens["kwok"], ca))
        yield plane
    finally:
        for process in reversed(list(processes.values())):
            process.terminate()
        for process in processes.values():
            stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def _scheduler_config(folder: Path, kubeconfig: Path) -> Path:
    """kube-scheduler's configuration: its defaults (one profile, DEFAULT_SCHEDULER) but for one filter worker.

    Among nodes that score alike kube-scheduler takes the first in the order its filter found them feasible (k8s.io/
    kubernetes v1.36.5 pkg/scheduler/schedule_one.go: findNodesThatPassFilters appends each node as its worker ends,
    nodeScoreHeap breaks equal scores by a Randomizer set only under a scheduler extender). With the default 16
    workers (`parallelism`, pkg/scheduler/apis/config/v1/defaults.go) that order is the goroutines', and a class Job
    landed on either of two alike system nodes from run to run; with one it is the node list's from where the last
    check ended, and the node taken is one the 16 workers could have found first. Where that start moves with
    DaemonSet pods it can still differ: docs/rehearsal.md, "One answer per stack"."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "parallelism": 1,
    }
    path = folder / "kube-scheduler.yaml"
    path.write_text(json.dumps(config))
    return path


def _start_kwok(folder: Path, binaries: Mapping[str, Path], admin: Client, kwok: Client) -> subprocess.Popen:
    """KWOK's controller for the nodes annotated FAKE_NODE, with its own ClusterRole bound to its user."""
    source = _kwok_source()
    (role,) = [d for d in yaml.safe_load_all((source / KWOK_ROLE).read_text()) if d]
    admin.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role["metadata"]["name"]},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KWOK_USER}],
    }
    admin.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    key, value = FAKE_NODE
    return _start(
        folder,
        binaries,
        "kwok",
        [
            f"--kubeconfig={write_kubeconfig(folder, kwok, 'kwok')}",
            *(f"--config={source / stage}" for stage in KWOK_STAGES),
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={key}={value}",
            # Heartbeats through a Lease, renewed as a kubelet renews its own (its nodeLeaseDurationSeconds default,
            # 40; kwokctl's too): KWOK's own default is none.
            f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        ],
    )


def discovery(client: Client) -> Mapping[tuple[str, str], tuple[str, str, bool]]:
    """(apiVersion, kind) -> (path of its group version, its resource, whether it is namespaced), from the server's
    discovery."""
    found: dict[tuple[str, str], tuple[str, str, bool]] = {}
    versions = [("/api/v1", "v1")]
    for group in client.get("/apis")["groups"]:
        versions += [(f"/apis/{v['groupVersion']}", v["groupVersion"]) for v in group["versions"]]
    for prefix, group_version in versions:
        for resource in client.get(prefix)["resources"]:
            if "/" not in resource["name"]:  # subresources (status, scale, token) are not kinds of their own
                found[(group_version, resource["kind"])] = (prefix, resource["name"], resource["namespaced"])
    return found
