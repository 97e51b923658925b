"""A render applied to the twin's API server as `pulumi up` would apply it: every Kubernetes object the program
creates, in an order its dependencies allow (resources.json dependsOn), server-side; a Helm release's place in that
order holds what the release installs (charts/<release>.yaml, in Helm's install order, CRDs first). Each CRD is
applied and then waited for until the API server serves it, as the objects of its kind wait for it in Pulumi.

Then the pods the workloads would make are created in dry-run (`dryRun=All`): admission runs on a pod, not on the
Deployment or DaemonSet that templates it, so Pod Security, the ServiceAccount admission and the pod's own validation
only speak there.

Every object the API server refuses is returned with the server's own message.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rehearsal import twin

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
# The field managers: pulumi-kubernetes applies its objects under its own name, Helm under "helm".
PULUMI = "pulumi-kubernetes"
HELM = "helm"
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
# A CRD is served within a second or two of its creation; under heavy load, later.
CRD_SECONDS = 60
# Where a workload keeps the pod template its controller creates pods from (a PodTemplate's pods are Karpenter's
# in-memory CapacityBuffer pods, never created).
POD_TEMPLATES: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


@dataclass(frozen=True)
class Item:
    source: str  # the render's file that holds it
    manager: str
    body: dict[str, Any]

    @property
    def key(self) -> str:
        meta = self.body.get("metadata") or {}
        scope = f"{meta['namespace']}/" if meta.get("namespace") else ""
        return f"{self.body.get('kind')} {scope}{meta.get('name')}"


def refusal(item: Item, message: str) -> dict[str, str]:
    return {"object": item.key, "source": item.source, "message": message}


def _ordered(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Kubernetes resources in an order Pulumi could create them: each after every resource it depends on (those
    outside Kubernetes, the cluster and IAM, count as done), ties in the order resources.json lists them."""
    kube = {f"{r['type']}::{r['name']}": r for r in resources if r["type"].startswith("kubernetes:")}
    done: set[str] = set()
    ordered: list[dict[str, Any]] = []
    while len(ordered) < len(kube):
        ready = [
            token
            for token, r in kube.items()
            if token not in done and all(d in done or d not in kube for d in r["dependsOn"])
        ]
        if not ready:
            raise ValueError(f"resources.json: a dependency cycle among {sorted(set(kube) - done)}")
        for token in ready:
            done.add(token)
            ordered.append(kube[token])
    return ordered


def items(render: Path) -> Iterator[Item]:
    """What `pulumi up` of the render creates in Kubernetes, in order."""
    for r in _ordered(json.loads((render / "resources.json").read_text())):
        if r["type"] == HELM_RELEASE:
            name, namespace = r["inputs"]["name"], r["inputs"]["namespace"]
            source = f"charts/{name}.yaml"
            for body in yaml.safe_load_all((render / source).read_text()):
                if body:
                    # Helm installs a namespaced object without a namespace into the release's.
                    yield Item(source, HELM, body | {"metadata": {"namespace": namespace, **body["metadata"]}})
        else:
            inputs = r["inputs"]
            meta = inputs["metadata"]
            scope = f"{meta['namespace']}-" if meta.get("namespace") else ""
            yield Item(f"manifests/{inputs['kind'].lower()}-{scope}{meta['name']}.yaml", PULUMI, inputs)


class Applier:
    """Applies items as one identity, with the server's discovery of kinds refreshed as CRDs arrive."""

    def __init__(self, client: twin.Client):
        self.client = client
        self.kinds = twin.discovery(client)

    def path(self, body: dict[str, Any]) -> str:
        """The object's URL path; raises ApiError when the server serves no such kind, as kubectl says it."""
        found = self.kinds.get((body["apiVersion"], body["kind"]))
        if found is None:
            raise twin.ApiError(404, f'no matches for kind "{body["kind"]}" in version "{body["apiVersion"]}"')
        prefix, plural, namespaced = found
        meta = body["metadata"]
        scope = f"/namespaces/{meta.get('namespace') or 'default'}" if namespaced else ""
        return f"{prefix}{scope}/{plural}/{meta['name']}"

    def apply(self, item: Item) -> None:
        body = dict(item.body)
        found = self.kinds.get((body["apiVersion"], body["kind"]))
        if found and not found[2]:  # the server ignores no stray namespace on a cluster-scoped object: drop it
            body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "namespace"}
        self.client.request(
            "PATCH",
            self.path(body),
            body,
            content_type="application/apply-patch+yaml",
            fieldManager=item.manager,
            fieldValidation="Strict",
            force="true",
        )
        if (body["apiVersion"], body["kind"]) == CRD:
            self._served(body)

    def _served(self, crd: dict[str, Any]) -> None:
        """Waits until the CRD is Established and its kinds are in discovery."""
        spec = crd["spec"]
        wanted = {(f"{spec['group']}/{v['name']}", spec["names"]["kind"]) for v in spec["versions"] if v.get("served")}
        deadline = time.monotonic() + CRD_SECONDS
        while True:
            status = self.client.get(self.path(crd)).get("status") or {}
            established = any(
                c["type"] == "Established" and c["status"] == "True" for c in status.get("conditions") or []
            )
            if established:
                self.kinds = twin.discovery(self.client)
                if wanted <= set(self.kinds):
                    return
            if time.monotonic() > deadline:
                raise twin.ApiError(
                    0, f"CustomResourceDefinition {crd['metadata']['name']} not served after {CRD_SECONDS} s"
                )
            time.sleep(0.2)

    def dry_run_pod(self, item: Item) -> None:
        """Creates, in dry-run, the pod the workload's controller would create from its template."""
        template: Any = item.body
        for step in POD_TEMPLATES[item.body["kind"]]:
            template = template[step]
        meta = template.get("metadata") or {}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{item.body['metadata']['name']}-",
                **{k: meta[k] for k in ("labels", "annotations") if k in meta},
            },
            "spec": template["spec"],
        }
        if item.body["kind"] == "StatefulSet":
            # The StatefulSet controller gives each pod a volume per claim template, named as the template is.
            name = item.body["metadata"]["name"]
            claims = [
                {
                    "name": c["metadata"]["name"],
                    "persistentVolumeClaim": {"claimName": f"{c['metadata']['name']}-{name}-0"},
                }
                for c in item.body["spec"].get("volumeClaimTemplates") or []
            ]
            pod["spec"] = {**pod["spec"], "volumes": [*(pod["spec"].get("volumes") or []), *claims]}
        namespace = item.body["metadata"].get("namespace") or "default"
        self.client.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod, dryRun="All", fieldValidation="Strict")


def apply_render(client: twin.Client, render: Path) -> tuple[list[Item], list[dict[str, str]]]:
    """Applies the render; returns what the server accepted and what it refused (object, source, the server's
    message), workloads' pods included."""
    applier = Applier(client)
    accepted, refused = [], []
    for item in items(render):
        try:
            applier.apply(item)
            accepted.append(item)
        except twin.ApiError as error:
            refused.append(refusal(item, error.message))
    workloads = [i for i in accepted if i.body["kind"] in POD_TEMPLATES]
    # The controller manager gives each new namespace its "default" service account within seconds; a workload's
    # controller retries its pods until then, so the dry runs wait for it too.
    for namespace in {i.body["metadata"].get("namespace") or "default" for i in workloads}:
        deadline = time.monotonic() + CRD_SECONDS
        while time.monotonic() < deadline:
            try:
                client.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
                break
            except twin.ApiError:
                time.sleep(0.5)
    for item in workloads:
        try:
            applier.dry_run_pod(item)
        except twin.ApiError as error:
            refused.append(refusal(item, f"its pods: {error.message}"))
    return accepted, refused
