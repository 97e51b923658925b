"""Karpenter 1.14.1's controllers on the twin, on a simulated clock (rehearsal/stepper, rehearsal/karpenter.py): a
learner's pod gets a node Karpenter launched, with what the lab's NodePool and device-plugin profile give it, and
kube-scheduler binds it there; once the learner has left and consolidateAfter has passed, Karpenter removes the
empty node, unless a disruption budget forbids it then. Without the twin and its stepper (`make twin`) these tests skip
in one line.
"""

from __future__ import annotations

import copy
import datetime
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from rehearsal import apply, twin
from rehearsal import karpenter as karpenter_twin
from tests.conftest import BASE
from tests.support import twin_tests
from tests.support.rendered import BASE_STACK, rendered

LAB = "intro"
NAMESPACE = "default"
# A Monday morning of the class rehearsal's kind; the budget window below is in UTC, as Karpenter reads it.
START = datetime.datetime(2027, 1, 4, 9, 0, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def binary() -> Path:
    twin_tests.require_twin()
    twin_tests.require_stepper()
    return karpenter_twin.build()  # brings a built stepper up to date with its sources (seconds, the caches warm)


def _render(tmp_path: Path, budgets: list[dict[str, str]] | None = None) -> Path:
    """A copy of the base stack's render (one lab), its NodePool's budgets replaced where given."""
    r = rendered(BASE_STACK)
    r.require_charts()
    out = tmp_path / "render"
    shutil.copytree(r.out, out)
    if budgets is not None:
        resources = json.loads((out / "resources.json").read_text())
        for resource in resources:
            if resource["type"] == "kubernetes:karpenter.sh/v1:NodePool":
                resource["inputs"]["spec"]["disruption"]["budgets"] = budgets
        (out / "resources.json").write_text(json.dumps(resources))
    return out


def _lab(out: Path) -> dict[str, Any]:
    return json.loads((out / "outputs.json").read_text())["labs"][LAB]


def _nodepool(out: Path) -> dict[str, Any]:
    resources = json.loads((out / "resources.json").read_text())
    (pool,) = [r["inputs"] for r in resources if r["type"] == "kubernetes:karpenter.sh/v1:NodePool"]
    return dict(pool)


def _slices_per_gpu(out: Path) -> int:
    """The replicas the lab's profile in the device plugin's rendered ConfigMap advertises each GPU as."""
    docs = [d for d in yaml.safe_load_all((out / "charts" / "nvidia-device-plugin.yaml").read_text()) if d]
    (configs,) = [d for d in docs if d["kind"] == "ConfigMap"]
    profile = yaml.safe_load(configs["data"][LAB])
    (shared,) = profile["sharing"]["timeSlicing"]["resources"]
    return int(shared["replicas"])


@pytest.fixture
def karpenter(request: pytest.FixtureRequest, binary: Path, tmp_path: Path) -> Iterator[tuple[Any, Path, Any]]:
    out = _render(tmp_path, getattr(request, "param", None))
    with twin.running(twin_tests.MINOR) as plane:
        _, refused = apply.apply_render(plane.admin, out)
        assert refused == [], refused
        with karpenter_twin.running(plane, out, BASE["aws:region"], START, binary) as k:
            yield plane, out, k


def _arrive(plane: twin.ControlPlane, out: Path, name: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": copy.deepcopy(_lab(out)["learnerPodSpec"]),
    }
    plane.admin.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)


def _leave(plane: twin.ControlPlane, name: str) -> None:
    plane.admin.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")


def _events(answer: dict[str, Any], what: str) -> list[dict[str, Any]]:
    return [e for e in answer["events"] if e["what"] == what]


def test_a_learner_gets_a_node_with_its_labs_taints_and_slices(karpenter) -> None:
    plane, out, k = karpenter
    answer = k.at(START, lambda: _arrive(plane, out, "learner-1"))
    assert "unsettled" not in answer, answer
    launches = _events(answer, "nodeLaunched")
    assert len(launches) == 1, answer
    (launched,) = launches
    pool = _nodepool(out)
    allowed = next(r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"].endswith("instance-type"))
    assert launched["lab"] == LAB and launched["instanceType"] in allowed["values"]
    assert launched["at"] == "2027-01-04T09:00:00Z" and launched["pricePerHour"] > 0
    node = plane.admin.get(f"/api/v1/nodes/{launched['node']}")
    for key, value in pool["spec"]["template"]["metadata"]["labels"].items():
        assert node["metadata"]["labels"][key] == value, key
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == launched["instanceType"]
    taints = [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in node["spec"].get("taints", [])]
    assert taints == pool["spec"]["template"]["spec"]["taints"], "the NodePool's taints, Karpenter's own removed"
    (claim,) = plane.admin.get("/apis/karpenter.sh/v1/nodeclaims")["items"]
    assert node["spec"]["providerID"] == claim["status"]["providerID"]
    gpus = GPU_INSTANCE_TYPES[launched["instanceType"]].gpus
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == str(gpus * _slices_per_gpu(out))
    assert [c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
    pod = plane.admin.get(f"/api/v1/namespaces/{NAMESPACE}/pods/learner-1")
    assert pod["spec"]["nodeName"] == launched["node"], "kube-scheduler bound the learner to the launched node"
    # The rehearsal's kubelet stand-in (rehearsal/stepper/kubelet.go): the learner's pod runs, the node has its lease.
    assert pod["status"]["phase"] == "Running", pod["status"]
    assert _lease_holder(plane, launched["node"]) == launched["node"]
    assert _events(answer, "podBound") == [
        {
            "at": launched["at"],
            "what": "podBound",
            "lab": LAB,
            "pod": f"{NAMESPACE}/learner-1",
            "node": launched["node"],
        }
    ]


def _lease_holder(plane: twin.ControlPlane, node: str, seconds: float = 30) -> str | None:
    """The holder of the node's lease in kube-node-lease, once it is made (the stand-in renews leases every 10 s)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            lease = plane.admin.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}")
            return str(lease["spec"]["holderIdentity"])
        except twin.ApiError as error:
            if error.status != 404 or time.monotonic() > deadline:
                return None
        time.sleep(0.5)


def _one_node(answer: dict[str, Any]) -> str:
    launches = _events(answer, "nodeLaunched")
    assert len(launches) == 1, answer
    return str(launches[0]["node"])


def _consolidate_after(out: Path) -> datetime.timedelta:
    text = _nodepool(out)["spec"]["disruption"]["consolidateAfter"]
    units = {"s": "seconds", "m": "minutes", "h": "hours"}
    return datetime.timedelta(**{units[text[-1]]: int(text[:-1])})


def test_an_empty_node_goes_once_consolidate_after_has_passed(karpenter) -> None:
    plane, out, k = karpenter
    node = _one_node(k.at(START, lambda: _arrive(plane, out, "learner-1")))
    left = START + datetime.timedelta(minutes=5)
    k.at(left, lambda: _leave(plane, "learner-1"))
    with pytest.raises(twin.ApiError) as gone:
        plane.admin.get(f"/api/v1/namespaces/{NAMESPACE}/pods/learner-1")
    assert gone.value.status == 404, "the step that deletes the pod settles once its node's kubelet stand-in removed it"
    wait = _consolidate_after(out)
    before = k.advance(left + wait - datetime.timedelta(minutes=1))
    assert [n["name"] for n in before["nodes"]] == [node], "not empty for consolidateAfter yet"
    after = k.advance(left + wait + datetime.timedelta(minutes=1))
    (deleted,) = _events(after, "nodeDeleted")
    assert deleted | {"at": None} == {"at": None, "what": "nodeDeleted", "lab": LAB, "node": node, "reason": "Empty"}
    # Within the minute: Karpenter validates an empty node for 15 s of its clock (disruption/validation.go) and drains
    # it for at least 5 s (node/termination), and the stepper stops its clock when consolidateAfter runs out.
    at = datetime.datetime.fromisoformat(deleted["at"])
    assert left + wait < at < left + wait + datetime.timedelta(minutes=1), deleted
    assert after["nodes"] == []


# A window with no disruption from 09:00 for three hours (UTC), as a class's budget holds its nodes.
CLASS_HOURS = [{"nodes": "0", "schedule": "0 9 * * *", "duration": "3h"}, {"nodes": "1"}]


@pytest.mark.parametrize("karpenter", [CLASS_HOURS], indirect=True, ids=["class-hours-budget"])
def test_a_budget_window_keeps_the_empty_node_until_it_ends(karpenter) -> None:
    plane, out, k = karpenter
    node = _one_node(k.at(START, lambda: _arrive(plane, out, "learner-1")))
    left = START + datetime.timedelta(minutes=5)
    k.at(left, lambda: _leave(plane, "learner-1"))
    held = k.advance(left + _consolidate_after(out) + datetime.timedelta(minutes=30))
    assert [n["name"] for n in held["nodes"]] == [node] and _events(held, "nodeDeleted") == []
    end = START + datetime.timedelta(hours=3)
    after = k.advance(end + datetime.timedelta(minutes=1))
    (deleted,) = _events(after, "nodeDeleted")
    assert deleted["node"] == node and deleted["reason"] == "Empty" and deleted["at"] >= "2027-01-04T12:00:00Z"
