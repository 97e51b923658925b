"""Every object a stack installs, in manifests/ and charts/, is one the cluster's API server would accept."""

import copy

import pytest

from components.karpenter.controller import RELEASE as KARPENTER
from tests.support.crd_schema import requires_upstream
from tests.support.k8s_schema import object_problems
from tests.support.rendered import BASE_STACK, STACKS, rendered

# The suite's slowest part, on its own: `make test-charts` (pytest -m charts).
pytestmark = pytest.mark.charts


@requires_upstream
@pytest.mark.parametrize("stack", STACKS)
def test_every_object_passes_the_clusters_kubernetes_schemas(stack):
    r = rendered(stack)
    checked = 0
    for file, objects in r.files().items():
        for manifest in objects:
            where = f"{file}: {manifest['kind']} {manifest['metadata']['name']}"
            assert object_problems(manifest, r.kubernetes_version) == [], where
            checked += 1
    assert checked > len(r.files())


def _deployment():
    (deployment,) = [o for o in rendered(BASE_STACK).chart(KARPENTER) if o["kind"] == "Deployment"]
    return copy.deepcopy(deployment)


@requires_upstream
def test_an_unknown_field_deep_in_a_built_in_object_is_rejected():
    deployment = _deployment()
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    (problem,) = object_problems(deployment, "1.34")
    assert problem.startswith("spec.template.spec.containers.0: Additional properties are not allowed")


@requires_upstream
def test_a_wrong_type_in_a_built_in_object_is_rejected():
    deployment = _deployment()
    deployment["spec"]["replicas"] = "two"
    assert object_problems(deployment, "1.34") == ["spec.replicas: 'two' is not of type 'integer', 'null'"]


@requires_upstream
def test_an_api_version_the_cluster_dropped_is_rejected():
    (budget,) = [o for o in rendered(BASE_STACK).chart(KARPENTER) if o["kind"] == "PodDisruptionBudget"]
    old = {**budget, "apiVersion": "policy/v1beta1"}  # removed in Kubernetes 1.25
    assert object_problems(old, "1.34") == [
        "Kubernetes 1.34 has no policy/v1beta1 PodDisruptionBudget, and no upstream CRD defines it"
    ]


@requires_upstream
def test_custom_resources_are_checked_against_the_upstream_crds():
    (pool,) = [m for m in rendered(BASE_STACK).manifests() if m["kind"] == "NodePool"]
    broken = copy.deepcopy(pool)
    broken["spec"]["disruption"]["consolidationPolicy"] = "WhenUnderutilized"
    assert object_problems(pool, "1.34") == []
    assert any("consolidationPolicy" in p for p in object_problems(broken, "1.34"))
