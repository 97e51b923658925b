"""The hub's user-scheduler on the twin (rehearsal/user_scheduler_process.py): the learner pods KubeSpawner builds are
bound by kube-scheduler run as the chart's user-scheduler Deployment runs it, with its rendered configuration and as its
own service account; what RBAC denies it, or a configuration it refuses, is a finding of the rehearsal. Without the
twin's binaries (`make twin`) the tests on it skip in one line.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

import rehearsal.run
from components.jupyterhub.hub import RELEASE
from rehearsal import apply, learner_pods, twin, user_scheduler_process
from tests.conftest import as_cli_config, run_config, stack_values
from tests.support import twin_tests
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE
from tests.test_jupyterhub_user_scheduler import SCHEDULER_ROLES

TODAY = rehearsal.run.datetime.date(2027, 1, 4)
LAB = "intro"
# The base test stack's one lab (g4dn.xlarge, each GPU shared 3 ways) on the hub's spawn page.
HUB_STACK = stack_values(
    **{
        "gpulab:jupyterhub": {**HUB, "notebookImage": NOTEBOOK_IMAGE},
        "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
    }
)


@pytest.fixture(scope="module")
def hub_render(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    run = run_config("user-scheduler", as_cli_config(HUB_STACK))
    out = tmp_path_factory.mktemp("user-scheduler") / "render"
    twin_tests.render_with_charts(run, out)
    return out, run


def _objects(out: Path) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all((out / "charts" / f"{RELEASE}.yaml").read_text()) if o]


def test_learner_pods_name_the_user_schedulers_configured_name(hub_render) -> None:
    """KubeSpawner's pods and the user-scheduler's rendered configuration agree on its name: were they to differ, no
    scheduler would bind a learner."""
    out, run = hub_render
    objects = _objects(out)
    pod = learner_pods.learner_pod(learner_pods.hub_config(objects, run.stack.settings.jupyterhub.namespace), LAB)
    assert pod["spec"]["schedulerName"] in user_scheduler_process.rendered(objects).scheduler_names


def test_home_volumes_left_out_are_listed_as_a_substitution(hub_render) -> None:
    """The twin has no CSI driver: a learner's pod is played without its home claim, and rehearsal.json says so."""
    out, run = hub_render
    learners = rehearsal.run.Learners(SimpleNamespace(admin=None), out, run.stack.settings, lambda: [])  # type: ignore[arg-type]
    assert not learners.left_out_claims
    played = learners._pod(LAB, "ada")
    assert not [v for v in played["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert learners.left_out_claims


def test_api_refusals_are_read_from_klogs_quoted_errors_once() -> None:
    account = "system:serviceaccount:jupyterhub:user-scheduler"
    message = (
        f'nodes is forbidden: User \\"{account}\\" cannot list resource \\"nodes\\" in API group \\"\\" at the '
        "cluster scope"
    )
    line = f'E1202 16:45:24.659232 20296 reflector.go:205] "Failed to watch" err="failed to list *v1.Node: {message}"'
    other = line.replace("jupyterhub:user-scheduler", "jupyterhub:hub")
    assert user_scheduler_process.denials("\n".join([line, line, other]), account) == [message.replace('\\"', '"')]


@pytest.fixture(scope="module")
def built() -> None:
    twin_tests.require_twin()


@pytest.fixture(scope="module")
def hub_twin(built: None, hub_render) -> Iterator[tuple[twin.ControlPlane, Path, Any, Any]]:
    out, run = hub_render
    hub = run.stack.settings.jupyterhub
    with twin.running(twin_tests.MINOR) as plane:
        _, refused = apply.apply_render(plane.admin, out)
        assert refused == []
        with rehearsal.run.start_user_scheduler(plane, out, hub) as scheduler:
            assert scheduler is not None
            assert scheduler.problem is None, scheduler.record()
            yield plane, out, run, scheduler


def _node_for(plane: twin.ControlPlane, name: str, pod: dict[str, Any], seats: int) -> None:
    """A node KWOK keeps Ready that the pod's nodeSelector and required affinity select, with room for `seats` of
    it (no taints: its tolerations need none)."""
    spec = pod["spec"]
    labels = {"kubernetes.io/hostname": name, **(spec.get("nodeSelector") or {})}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {"nodeSelectorTerms": []}
    for term in required["nodeSelectorTerms"][:1]:
        for expression in term.get("matchExpressions") or []:
            if expression["operator"] == "In":
                labels[expression["key"]] = expression["values"][0]
            elif expression["operator"] == "Exists":
                labels[expression["key"]] = "true"
    (container,) = spec["containers"]
    requests = container["resources"]["requests"]
    capacity = {
        "cpu": str(seats * float(requests["cpu"]) + 1),
        "memory": str(seats * int(requests["memory"]) + 2**30),
        "pods": "110",
        **{k: str(seats * int(v)) for k, v in requests.items() if k not in ("cpu", "memory")},
    }
    key, value = twin.FAKE_NODE
    meta = {"name": name, "labels": labels, "annotations": {key: value}}
    # Made with its capacity, as a kubelet registers its node: KWOK's first status keeps a node's allocatable where it
    # has one, and gives one of its own (1k CPUs) where it has none yet, which a later patch could race with.
    status = {"capacity": capacity, "allocatable": capacity}
    plane.admin.request(
        "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": status}
    )

    def ready() -> bool:
        node = plane.admin.get(f"/api/v1/nodes/{name}")["status"]
        conditions = node.get("conditions") or []
        return node.get("allocatable") == capacity and any(
            c["type"] == "Ready" and c["status"] == "True" for c in conditions
        )

    twin_tests.until(f"{name} Ready with its allocatable", ready)


def _scheduled_by(plane: twin.ControlPlane, namespace: str, pod: str) -> list[str]:
    """The reportingController of each Scheduled event of the pod (kube-scheduler records them as its profile's
    schedulerName)."""
    events = plane.admin.get(
        f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", fieldSelector=f"regarding.name={pod}"
    )["items"]
    return [e.get("reportingController") for e in events if e.get("reason") == "Scheduled"]


def test_the_user_scheduler_binds_learners_onto_the_fuller_node(
    hub_twin,
) -> None:
    """Two equal nodes with room for the lab's seats: the first learner goes to either, the second to the same node,
    as the user-scheduler's MostAllocated scoring packs them (the default scheduler's LeastAllocated would spread
    them); each pod's Scheduled event is the user-scheduler's, none the default scheduler's."""
    plane, out, run, scheduler = hub_twin
    namespace = run.stack.settings.jupyterhub.namespace
    learners = rehearsal.run.Learners(
        plane, out, run.stack.settings, lambda: [twin.DEFAULT_SCHEDULER, *scheduler.running()]
    )
    sample = learners._pod(LAB, "sample")
    (name,) = scheduler.spec.scheduler_names
    assert sample["spec"]["schedulerName"] == name
    for node in ("node-a", "node-b"):
        _node_for(plane, node, sample, seats=3)

    def bound(learner: str) -> str | None:
        return plane.admin.get(f"/api/v1/namespaces/{namespace}/pods/{learner}")["spec"].get("nodeName")

    nodes, pods = [], []
    for learner in (f"{LAB}-1", f"{LAB}-2"):
        assert learners.arrive(LAB, learner) is None
        pod = sample["metadata"]["name"].replace("sample", learner)
        nodes.append(twin_tests.until(f"{pod} bound", lambda pod=pod: bound(pod)))
        assert twin_tests.until(f"{pod}'s Scheduled event", lambda pod=pod: _scheduled_by(plane, namespace, pod)) == [
            name
        ]
        pods.append(f"{namespace}/{pod}")
    assert nodes[0] == nodes[1], nodes
    # Its own log says it made these bindings.
    assert {p: scheduler.bound().get(p) for p in pods} == dict.fromkeys(pods, nodes[0])
    assert scheduler.denied() == [], scheduler.denied()
    assert learners.not_scheduled() == []


def test_a_pod_of_an_absent_scheduler_is_unmade_and_a_finding(hub_twin) -> None:
    plane, out, run, scheduler = hub_twin
    learners = rehearsal.run.Learners(plane, out, run.stack.settings, lambda: [twin.DEFAULT_SCHEDULER])
    assert learners.arrive(LAB, f"{LAB}-9") is None
    (missing,) = learners.not_scheduled()
    assert missing == {"lab": LAB, "schedulerName": scheduler.spec.scheduler_names[0], "learners": [f"{LAB}-9"]}
    assert learners.pods == {} and learners.scheduler_of == {}
    (line,) = rehearsal.run.problems({"refused": [], "rbacDenied": [], "jobsFailed": [], "unscheduled": [missing]})
    assert line.startswith(f"rehearsal: 1 learner pod(s) of lab {LAB} name the scheduler {missing['schedulerName']}")


def _planted(hub_render, change: Callable[[dict[str, Any]], None], tmp_path: Path) -> Path:
    """A copy of the hub stack's render with `change` applied to each object of the hub's chart."""
    out = tmp_path / "render"
    shutil.copytree(hub_render[0], out)
    chart = out / "charts" / f"{RELEASE}.yaml"
    objects = _objects(out)
    for o in objects:
        change(o)
    chart.write_text(yaml.safe_dump_all(objects))
    return out


def test_no_list_on_nodes_is_an_rbac_denial_not_a_hang(built: None, hub_render, tmp_path: Path) -> None:
    """Without `list` and `watch` on nodes its node informer never syncs and it never schedules: the rehearsal says so
    in the API server's words, within seconds, instead of waiting on learners no scheduler binds. (Without `list`
    alone a kube-scheduler of 1.35 or later still syncs: its informers list through a watch, client-go's
    WatchListClient being on by default from 1.35, k8s.io/client-go v0.36.5 features/known_features.go lines
    141-144, and fall back to a list only when the watch is refused.)"""

    def without_list_on_nodes(o: dict[str, Any]) -> None:
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == f"{RELEASE}-user-scheduler":
            for rule in o["rules"]:
                if "nodes" in rule["resources"]:
                    rule["verbs"] = [v for v in rule["verbs"] if v not in ("list", "watch")]

    out = _planted(hub_render, without_list_on_nodes, tmp_path)
    run = hub_render[1]
    started = time.monotonic()
    done = rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region, day=False)
    assert time.monotonic() - started < 60 + user_scheduler_process.READY_SECONDS
    lines = rehearsal.run.problems(done)
    account = f"{run.stack.settings.jupyterhub.namespace}:{user_scheduler_process.DEPLOYMENT}"
    denied = [line for line in lines if line.startswith("rehearsal: RBAC denied the user-scheduler")]
    assert denied, lines
    # Each a refused list or watch of nodes (a 1.35 or later scheduler's watch is refused first, then its list).
    refused = re.compile(rf'User "system:serviceaccount:{account}" cannot (list|watch) resource "nodes"')
    said = [refused.search(line) for line in denied]
    assert all(said) and "list" in {found[1] for found in said if found}, denied
    assert any("did not run: not ready" in line for line in lines), lines
    assert [s for s in done["substitutions"] if "user-scheduler" in s["component"]] == [], done["substitutions"]


def test_a_config_the_scheduler_refuses_fails_with_its_message(built: None, hub_render, tmp_path: Path) -> None:
    def packed(o: dict[str, Any]) -> None:
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == user_scheduler_process.DEPLOYMENT:
            o["data"]["config.yaml"] = o["data"]["config.yaml"].replace("type: MostAllocated", "type: Packed")

    out = _planted(hub_render, packed, tmp_path)
    run = hub_render[1]
    done = rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region, day=False)
    (line,) = [line for line in rehearsal.run.problems(done) if "user-scheduler" in line]
    assert "did not run: kube-scheduler exited (1)" in line, line
    assert 'Unsupported value: "Packed"' in line, line


def test_refused_bindings_withdraw_learners_not_wait_on_them(built: None, hub_render, tmp_path: Path) -> None:
    """Without `create` on pods/binding it starts and chooses a node, but the API server refuses the binding: its log
    says so, and the learners' pods are withdrawn (the pending one deleted, the next not made) instead of left for
    the class day to wait on."""

    def without_bindings(o: dict[str, Any]) -> None:
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == f"{RELEASE}-user-scheduler":
            o["rules"] = [r for r in o["rules"] if "pods/binding" not in r["resources"]]

    out = _planted(hub_render, without_bindings, tmp_path)
    run = hub_render[1]
    namespace = run.stack.settings.jupyterhub.namespace
    with twin.running(twin_tests.MINOR) as plane:
        assert apply.apply_render(plane.admin, out)[1] == []
        with rehearsal.run.start_user_scheduler(plane, out, run.stack.settings.jupyterhub) as scheduler:
            assert scheduler is not None
            assert scheduler.problem is None, scheduler.record()
            learners = rehearsal.run.Learners(
                plane, out, run.stack.settings, lambda: [twin.DEFAULT_SCHEDULER, *scheduler.running()]
            )
            sample = learners._pod(LAB, "sample")
            _node_for(plane, "node-a", sample, seats=3)
            assert learners.arrive(LAB, f"{LAB}-1") is None
            (denial,) = twin_tests.until("the refused binding in its log", scheduler.denied)
            assert learners.arrive(LAB, f"{LAB}-2") is None
            (name,) = scheduler.spec.scheduler_names
            assert learners.not_scheduled() == [
                {"lab": LAB, "schedulerName": name, "learners": [f"{LAB}-1", f"{LAB}-2"]}
            ]
            pods = plane.admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
            assert [p["metadata"]["name"] for p in pods if p["spec"].get("schedulerName") == name] == []
    account = f"system:serviceaccount:{namespace}:{user_scheduler_process.DEPLOYMENT}"
    assert f'User "{account}" cannot create resource "pods/binding"' in denial["message"], denial


def _granted(roles: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) of every rule of these ClusterRoles that names no object."""
    return {
        (group, resource, verb)
        for role in roles
        for rule in role["rules"]
        if not rule.get("resourceNames")
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }


def test_scheduler_roles_are_what_the_twins_api_server_grants(built: None) -> None:
    """tests/test_jupyterhub_user_scheduler.py's SCHEDULER_ROLES of the twin's minor version, transcribed from its
    release's bootstrap policy, is what that release's API server itself grants system:kube-scheduler and
    system:volume-scheduler (but the leader's lease, which upstream names, and API groups the server does not serve:
    upstream still grants replicasets in extensions, which no server has served since 1.16)."""
    with twin.running(twin_tests.MINOR) as plane:
        live = [
            plane.admin.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}")
            for name in ("system:kube-scheduler", "system:volume-scheduler")
        ]
        served = {group_version.rpartition("/")[0] for group_version, _ in twin.discovery(plane.admin)}
    table = {(g, r, v) for g, r, verbs in SCHEDULER_ROLES[twin_tests.MINOR] for v in verbs}
    assert {(g, r, v) for g, r, v in _granted(live) if g in served} == table
