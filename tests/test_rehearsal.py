"""The class rehearsal on the twin (rehearsal/run.py, rehearsal/apply.py, rehearsal/twin.py): each render applied to a
real API server of the stack's Kubernetes version, where every object the server refuses fails the rehearsal with the
server's own words. Without the twin's binaries (`make twin`) these tests skip in one line, as the planner's do without
Go; what each twin is built from is checked by tests/test_twins.py.
"""

from __future__ import annotations

import datetime
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import rehearsal.run
from components.karpenter import class_seats_manifests as seats
from domain.upstream.versions import KUBE_SCHEDULER_VERSIONS
from rehearsal import apply, twin
from tests.conftest import BASE, STACK_FILES, as_cli_config, run_config, stack_values
from tests.support import twin_tests
from tests.support.rendered import BASE_STACK, rendered
from tests.support.synthetic import lab

CLASSES = "synthetic-classes"
TODAY = datetime.date(2027, 1, 4)


@pytest.fixture(scope="module")
def built() -> None:
    twin_tests.require_twin()


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_the_api_server_accepts_every_object_of_each_stack(path: Path) -> None:
    """On the twin of the stack's minor version, which says so."""
    r = rendered(path.name.split(".")[1])
    twin_tests.require_twin(r.kubernetes_version)
    r.require_charts()
    done = rehearsal.run.rehearse(r.out, r.run.stack.settings, TODAY, r.run.stack.region, day=False)
    assert done["refused"] == [], "\n".join(rehearsal.run.problems(done))
    assert done["kubernetes"] == KUBE_SCHEDULER_VERSIONS[r.kubernetes_version]


def _planted(
    tmp_path: Path, edit: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]], stack: str = BASE_STACK
) -> Path:
    """A copy of a stack's render with documents of some files changed by `edit` (file -> (kind, change))."""
    r = rendered(stack)
    r.require_charts()
    out = tmp_path / "render"
    shutil.copytree(r.out, out)
    for name, (kind, change) in edit.items():
        docs = list(yaml.safe_load_all((out / name).read_text()))
        for doc in docs:
            if doc and doc["kind"] == kind:
                change(doc)
        (out / name).write_text(yaml.safe_dump_all(docs))
    return out


def _with_resources(out: Path, change: Callable[[dict[str, Any]], Any]) -> Path:
    """The render at `out` with `change` applied to each of Pulumi's own resources (resources.json holds their inputs,
    which the rehearsal applies)."""
    resources = json.loads((out / "resources.json").read_text())
    for r in resources:
        change(r)
    (out / "resources.json").write_text(json.dumps(resources))
    return out


def _consolidate_after_in_words(disruption: dict[str, Any]) -> None:
    disruption["consolidateAfter"] = "ten minutes"


def _a_budget_window_without_its_duration(disruption: dict[str, Any]) -> None:
    disruption["budgets"] = [*(disruption.get("budgets") or []), {"nodes": "0", "schedule": "0 9 * * mon-fri"}]


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        # The CRD's OpenAPI pattern, in the API server's words.
        (_consolidate_after_in_words, 'spec.disruption.consolidateAfter: Invalid value: "ten minutes"'),
        # One of its CEL rules (x-kubernetes-validations), with the CRD's own message.
        (_a_budget_window_without_its_duration, "'schedule' must be set with 'duration'"),
    ],
    ids=["pattern", "cel"],
)
def test_a_crd_refused_object_fails_with_the_servers_message(
    built: None, tmp_path: Path, plant: Callable[[dict[str, Any]], None], message: str
) -> None:
    def planted(r: dict[str, Any]) -> None:
        if r["type"] == "kubernetes:karpenter.sh/v1:NodePool":
            plant(r["inputs"]["spec"]["disruption"])

    out = _with_resources(_planted(tmp_path, {}), planted)
    nodepools = [i.key for i in apply.items(out) if i.key.startswith("NodePool ")]
    lines = rehearsal.run.problems(
        rehearsal.run.rehearse(out, rendered(BASE_STACK).run.stack.settings, TODAY, BASE["aws:region"], day=False)
    )
    assert len(lines) == len(nodepools), lines
    for key, line in zip(nodepools, lines, strict=True):
        name = key.split(" ")[1]
        assert line.startswith(f"rehearsal: refused {key} (manifests/nodepool-{name}.yaml): "), line
        assert message in line, line


def test_pod_security_refusals_fail_with_the_servers_message(built: None, tmp_path: Path) -> None:
    """The device plugin's namespace planted to enforce the baseline profile: each of its DaemonSets' pods (host paths,
    privileged or SYS_ADMIN containers) is refused by Pod Security admission, on the pods and not on the DaemonSet."""
    namespace = "nvidia-device-plugin"

    def plant(r: dict[str, Any]) -> None:
        if r["type"] == "kubernetes:core/v1:Namespace" and r["inputs"]["metadata"]["name"] == namespace:
            r["inputs"]["metadata"].setdefault("labels", {})["pod-security.kubernetes.io/enforce"] = "baseline"

    out = _with_resources(_planted(tmp_path, {}), plant)
    daemonsets = [i.key for i in apply.items(out) if i.key.startswith(f"DaemonSet {namespace}/")]
    assert daemonsets, f"the base stack installs no DaemonSet in {namespace}"
    lines = rehearsal.run.problems(
        rehearsal.run.rehearse(out, rendered(BASE_STACK).run.stack.settings, TODAY, BASE["aws:region"], day=False)
    )
    assert len(lines) == len(daemonsets), lines
    for key, line in zip(daemonsets, lines, strict=True):
        assert line.startswith(f"rehearsal: refused {key} (charts/nvidia-device-plugin.yaml): its pods: "), line
        assert 'violates PodSecurity "baseline:latest"' in line, line


def test_a_render_is_applied_after_what_it_depends_on() -> None:
    r = rendered(BASE_STACK)
    r.require_charts()
    keys = [i.key for i in apply.items(r.out)]
    first_crd = next(i for i, k in enumerate(keys) if k.startswith("CustomResourceDefinition "))
    assert all(keys.index(k) > first_crd for k in keys if k.startswith(("NodePool ", "EC2NodeClass ")))
    namespaces = {k.split(" ", 1)[1]: i for i, k in enumerate(keys) if k.startswith("Namespace ")}
    for i, k in enumerate(keys):
        scope = k.split(" ", 1)[1].split("/")
        if len(scope) == 2 and scope[0] in namespaces:
            assert namespaces[scope[0]] < i, k


def test_class_jobs_run_as_their_account_and_set_the_buffer(built: None) -> None:
    r = rendered(CLASSES)
    r.require_charts()
    labs = r.run.stack.settings.labs
    done = rehearsal.run.rehearse(r.out, r.run.stack.settings, TODAY, r.run.stack.region, day=False)
    assert rehearsal.run.problems(done) == []
    classes = sum(len(lab.classes) for lab in labs.values())
    assert len(done["jobs"]) == 2 * classes
    for job in done["jobs"]:
        assert job["serviceAccount"].endswith(f"/{seats.SCHEDULER}")
        assert job["exitCode"] == 0, job
        assert job["bufferReplicas"] == job["wantReplicas"], job


def test_a_class_role_without_patch_fails_as_an_rbac_denial(built: None, tmp_path: Path) -> None:
    r = rendered(CLASSES)
    out = _planted(tmp_path, {}, CLASSES)
    resources = json.loads((out / "resources.json").read_text())
    for res in resources:
        if (
            res["type"] == "kubernetes:rbac.authorization.k8s.io/v1:Role"
            and res["inputs"]["metadata"]["name"] == seats.SCHEDULER
        ):
            for rule in res["inputs"]["rules"]:
                rule["verbs"] = [v for v in rule["verbs"] if v != "patch"] or ["get"]
    (out / "resources.json").write_text(json.dumps(resources))
    done = rehearsal.run.rehearse(out, r.run.stack.settings, TODAY, r.run.stack.region, day=False)
    lines = rehearsal.run.problems(done)
    # Every run of every class, warm-up and release alike, in the API server's words through kubectl.
    assert len(lines) == len(done["jobs"]) == 2 * sum(len(lab.classes) for lab in r.run.stack.settings.labs.values())
    for job, line in zip(done["jobs"], lines, strict=True):
        assert line.startswith(f"rehearsal: RBAC denied Job {job['job']} ({job['serviceAccount']}): "), line
        assert f'User "system:serviceaccount:{job["serviceAccount"].replace("/", ":")}" cannot patch resource' in line
        assert job["bufferReplicas"] == 0, job


def test_twin_controllers_and_scheduler_make_and_bind_a_pod(built: None) -> None:
    """The controllers run under their own service accounts and the scheduler as system:kube-scheduler: a Deployment
    gets its ReplicaSet and pod from the controller manager, and the scheduler binds the pod to the one Ready node. A
    missing permission of either (the bootstrap roles of the release) leaves the pod unmade or unbound."""
    with twin.running(twin_tests.MINOR) as plane:
        admin = plane.admin
        admin.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        resources = {"cpu": "2", "memory": "4Gi", "pods": "10"}
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "the test's"}
        admin.request(
            "PATCH",
            "/api/v1/nodes/node-1/status",
            {"status": {"capacity": resources, "allocatable": resources, "conditions": [ready]}},
            content_type="application/merge-patch+json",
        )
        labels = {"app": "probe"}
        pod_spec = {"containers": [{"name": "probe", "image": "probe", "resources": {"requests": {"cpu": "100m"}}}]}
        admin.request(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "probe"},
                "spec": {
                    "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": pod_spec},
                },
            },
        )
        deadline = time.monotonic() + 120
        pods: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            pods = admin.get("/api/v1/namespaces/default/pods", labelSelector="app=probe")["items"]
            if pods and pods[0]["spec"].get("nodeName"):
                break
            time.sleep(0.5)
        plane.check_running()
        assert [p["spec"].get("nodeName") for p in pods] == ["node-1"], pods


# Ties for the scheduler test below: with 16 filter workers each goes to the first node listed most times, so many.
PODS = 100


def test_the_twins_scheduler_takes_the_same_of_equal_nodes_every_time(built: None) -> None:
    """Among nodes that score alike kube-scheduler takes the first its filter found feasible; the twin's runs one
    filter worker, which finds them in the order of its node list, so a pod has one answer where a cluster's 16
    workers give any (docs/rehearsal.md, One answer per stack). Pods that request nothing leave equal nodes equal:
    each of them is such a tie, and all land on one node."""
    names = [f"equal-{i}" for i in range(8)]
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "the test's"}
    nothing = {"requests": {"cpu": "0", "memory": "0"}}
    with twin.running(twin_tests.MINOR) as plane:
        admin = plane.admin
        for name in names:
            admin.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
            admin.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                {"status": {"capacity": resources, "allocatable": resources, "conditions": [ready]}},
                content_type="application/merge-patch+json",
            )
        # Equal once the node lifecycle controller has no taint left on either (it taints a node till it is Ready).
        twin_tests.until(
            "the nodes Ready without taints",
            lambda: all(not admin.get(f"/api/v1/nodes/{n}")["spec"].get("taints") for n in names),
        )
        twin_tests.until(
            "the default service account",
            lambda: _get_or_none(admin, "/api/v1/namespaces/default/serviceaccounts/default"),
        )
        for i in range(PODS):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"tie-{i}"},
                "spec": {"containers": [{"name": "probe", "image": "probe", "resources": nothing}]},
            }
            admin.request("POST", "/api/v1/namespaces/default/pods", pod)

        def placed() -> list[str] | None:
            nodes = [p["spec"].get("nodeName") for p in admin.get("/api/v1/namespaces/default/pods")["items"]]
            return nodes if len(nodes) == PODS and all(nodes) else None

        nodes = twin_tests.until(f"the {PODS} pods bound", placed)
        plane.check_running()
        assert len(set(nodes)) == 1, sorted(nodes)


def test_kwok_keeps_a_fake_node_ready_and_runs_its_bound_pods(built: None) -> None:
    """A node annotated as Karpenter's kwok provider annotates its nodes gets a Ready status and a lease that KWOK
    renews (the heartbeat the node lifecycle controller reads), and a pod the scheduler binds to it is Running; a node
    without the annotation is left alone, as a real node without a kubelet would be."""
    key, value = twin.FAKE_NODE
    resources = {"cpu": "2", "memory": "4Gi", "pods": "10"}
    with twin.running(twin_tests.MINOR) as plane:
        admin = plane.admin
        for name, annotations in (("fake-1", {key: value}), ("other-1", {})):
            meta = {"name": name, "annotations": annotations, "labels": {"kubernetes.io/hostname": name}}
            node = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
            admin.request("POST", "/api/v1/nodes", node)
            admin.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                {"status": {"capacity": resources, "allocatable": resources}},
                content_type="application/merge-patch+json",
            )

        def ready(name: str) -> bool:
            conditions = admin.get(f"/api/v1/nodes/{name}").get("status", {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        twin_tests.until("KWOK's Ready status on fake-1", lambda: ready("fake-1"))
        lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/fake-1"
        first = twin_tests.until("fake-1's lease", lambda: _get_or_none(admin, lease))["spec"]["renewTime"]
        twin_tests.until("fake-1's lease renewed", lambda: admin.get(lease)["spec"]["renewTime"] != first)
        twin_tests.until(
            "the default service account",
            lambda: _get_or_none(admin, "/api/v1/namespaces/default/serviceaccounts/default"),
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe"},
            # Not on other-1: no Ready status keeps the scheduler off it until the node controller taints it.
            "spec": {
                "containers": [{"name": "probe", "image": "probe"}],
                "nodeSelector": {"kubernetes.io/hostname": "fake-1"},
            },
        }
        admin.request("POST", "/api/v1/namespaces/default/pods", pod)
        twin_tests.until(
            "the pod Running",
            lambda: (p := admin.get("/api/v1/namespaces/default/pods/probe"))["status"].get("phase") == "Running" and p,
        )
        plane.check_running()
        assert not ready("other-1")
        assert _get_or_none(admin, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/other-1") is None


def _get_or_none(client: twin.Client, path: str) -> Any:
    try:
        return client.get(path)
    except twin.ApiError as error:
        if error.status == 404:
            return None
        raise


# One lab of 4 seats (2 GPUs shared 2 ways) with one class on Monday 4 January 2027 whose 2 warm seats fill one node.
ONE_CLASS = stack_values(
    **{
        "gpulab:labs": {
            "morning": lab(
                ["g4dn.xlarge"],
                2,
                classes=[{"schedule": "0 9 * * mon", "duration": "30m", "warmup": "20m", "warmSeats": 2}],
            )
        }
    }
)


def test_a_karpenter_class_day_finds_warm_seats_leaves_no_node(built: None, tmp_path: Path) -> None:
    """The class's warm-up CronJob warms the buffer, Karpenter launches for it before the start, the warm learners
    bind there at the start; once all have left, Karpenter removes every node of the lab."""
    twin_tests.require_stepper()
    run = run_config("one-class", as_cli_config(ONE_CLASS))
    out = tmp_path / "render"
    twin_tests.render_with_charts(run, out)
    done = rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region)
    assert rehearsal.run.problems(done) == []
    (played,) = done["labs"]["morning"]["classes"]
    assert played["warmSeats"] == 2
    assert played["warmAtStart"] == played["warmSeats"], played
    assert played["learnersArrived"] == run.stack.settings.labs["morning"].learner_seats
    assert played["nodesAfterEnd"] == 0, done["labs"]["morning"]["events"]
