"""The class rehearsal on the twin (tools/rehearse.py, tools/apply.py, tools/twin.py): each render applied to a real
API server of the stack's Kubernetes version, where every object the server refuses fails the rehearsal with the
server's own words. Without the twin's binaries (`make twin`) these tests skip in one line, as the planner's do
without Go; the check of what the twin is built from runs anyway.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.karpenter import class_seats_manifests as seats
from config.versions import KUBE_SCHEDULER_VERSIONS
from tests.conftest import STACK_FILES
from tests.rendered import BASE_STACK, rendered
from tools import apply, rehearse, render, twin

CLASSES = "synthetic-classes"
TODAY = datetime.date(2027, 1, 4)


@pytest.fixture(scope="module")
def built() -> None:
    try:
        twin.require_built()
    except twin.NotBuilt as missing:
        pytest.skip(str(missing))


def _go_mod() -> str:
    return (twin.MODULE / "go.mod").read_text()


def test_the_twin_runs_the_kubernetes_release_of_every_stack_file() -> None:
    """The control plane is the release gpulab's own user-scheduler runs on the stack's minor version, its staging
    modules at the same release: a stack on another minor version needs the twin moved with it."""
    pinned = re.search(r"^\tk8s\.io/kubernetes (v\S+)( // indirect)?$", _go_mod(), re.M)
    assert pinned, "rehearsal/controlplane/go.mod requires no k8s.io/kubernetes"
    for path in STACK_FILES:
        minor = render.read_stack_file(path)["gpulab:cluster"]
        version = yaml.safe_load(minor)["kubernetesVersion"]
        assert KUBE_SCHEDULER_VERSIONS[version] == pinned[1], path.name
    staging = re.findall(r"^\t(k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$", _go_mod(), re.M)
    assert len(staging) == 31, "each of k8s.io/kubernetes's 31 staging modules is replaced"
    assert all(a == b and v == "v0" + pinned[1][2:] for a, b, v in staging), staging


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_object_of_each_stack_file_is_accepted_by_the_api_server(built: None, path: Path) -> None:
    r = rendered(path.name.split(".")[1])
    r.require_charts()
    done = rehearse.rehearse(r.out, r.run.stack.settings, TODAY)
    assert done["refused"] == [], "\n".join(rehearse.problems(done))
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


def test_an_object_the_api_server_refuses_fails_the_rehearsal_with_its_message(built: None, tmp_path: Path) -> None:
    """A CEL/schema refusal on a lab object and a Pod Security refusal on a chart's pods, each in the server's words."""
    out = _planted(
        tmp_path,
        {
            "charts/nvidia-device-plugin.yaml": (
                "DaemonSet",
                lambda d: d["spec"]["template"]["spec"].update(hostNetwork=True),
            )
        },
    )
    # Pulumi's own objects are applied from resources.json, which holds their inputs.
    resources = json.loads((out / "resources.json").read_text())
    for r in resources:
        if r["type"] == "kubernetes:karpenter.sh/v1:NodePool":
            r["inputs"]["spec"]["disruption"]["consolidateAfter"] = "ten minutes"
        if r["type"] == "kubernetes:core/v1:Namespace" and r["inputs"]["metadata"]["name"] == "nvidia-device-plugin":
            r["inputs"]["metadata"].setdefault("labels", {})["pod-security.kubernetes.io/enforce"] = "baseline"
    (out / "resources.json").write_text(json.dumps(resources))
    done = rehearse.rehearse(out, rendered(BASE_STACK).run.stack.settings, TODAY)
    lines = rehearse.problems(done)
    assert any(
        line.startswith("rehearsal: refused NodePool intro (manifests/nodepool-intro.yaml): ")
        and "spec.disruption.consolidateAfter" in line
        for line in lines
    ), lines
    assert any("DaemonSet nvidia-device-plugin/" in line and "violates PodSecurity" in line for line in lines), lines
    assert len(lines) == 2, lines


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


def test_each_class_cron_job_runs_as_its_service_account_and_sets_the_buffer(built: None) -> None:
    r = rendered(CLASSES)
    r.require_charts()
    labs = r.run.stack.settings.labs
    done = rehearse.rehearse(r.out, r.run.stack.settings, TODAY)
    assert rehearse.problems(done) == []
    classes = sum(len(lab.classes) for lab in labs.values())
    assert len(done["jobs"]) == 2 * classes
    for job in done["jobs"]:
        assert job["serviceAccount"].endswith(f"/{seats.SCHEDULER}")
        assert job["exitCode"] == 0, job
        assert job["bufferReplicas"] == job["wantReplicas"], job


def test_a_class_role_without_patch_fails_the_rehearsal_as_an_rbac_denial(built: None, tmp_path: Path) -> None:
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
    done = rehearse.rehearse(out, r.run.stack.settings, TODAY)
    lines = rehearse.problems(done)
    assert lines and all(line.startswith("rehearsal: RBAC denied Job ") for line in lines), lines
    assert all("cannot patch resource" in line for line in lines), lines
