"""The chart's user-scheduler runs the cluster's kube-scheduler version, with what that version needs to start."""

import pytest
import yaml

from components.jupyterhub.hub import RELEASE
from domain.upstream.versions import KUBE_PROXY_ADDON_VERSIONS, KUBE_SCHEDULER_VERSIONS
from tests.support.chart_checks import one
from tests.support.rendered import HUB_STACKS, rendered

# Everything the system:kube-scheduler and system:volume-scheduler ClusterRoles of each Kubernetes version grant
# (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/cluster-roles.yaml of kubernetes v1.34.12, v1.35.8 and
# v1.36.5, read from the k8s.io/kubernetes modules of those tags: 1.35's is 1.34's), as (API group, resource, verbs);
# the leader's lease is the one rule upstream limits to a name, its own lock (kube-scheduler), which the
# user-scheduler's configuration names instead. A kube-scheduler whose
# informers cannot list what they watch never schedules a pod; one that cannot write what its plugins write fails
# their pods. A hub on a cluster version without its role here fails the test below: bumping the cluster's minor version
# bumps the user-scheduler's, whose role must then be compared again.
_ROLE_1_34 = [
    ("", "events", ("create", "patch", "update")),
    ("events.k8s.io", "events", ("create", "patch", "update")),
    ("coordination.k8s.io", "leases", ("create",)),
    (
        "coordination.k8s.io",
        "leasecandidates",
        (
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ),
    ),
    ("", "nodes", ("get", "list", "watch")),
    ("", "pods", ("delete", "get", "list", "watch")),
    ("", "bindings", ("create",)),
    ("", "pods/binding", ("create",)),
    ("", "pods/status", ("patch", "update")),
    ("", "replicationcontrollers", ("get", "list", "watch")),
    ("", "services", ("get", "list", "watch")),
    ("apps", "replicasets", ("get", "list", "watch")),
    ("apps", "statefulsets", ("get", "list", "watch")),
    ("policy", "poddisruptionbudgets", ("get", "list", "watch")),
    ("", "persistentvolumeclaims", ("get", "list", "patch", "update", "watch")),
    ("", "persistentvolumes", ("get", "list", "patch", "update", "watch")),
    ("authentication.k8s.io", "tokenreviews", ("create",)),
    ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
    ("storage.k8s.io", "csinodes", ("get", "list", "watch")),
    ("storage.k8s.io", "volumeattachments", ("get", "list", "watch")),
    ("", "namespaces", ("get", "list", "watch")),
    ("storage.k8s.io", "csidrivers", ("get", "list", "watch")),
    ("storage.k8s.io", "csistoragecapacities", ("get", "list", "watch")),
    ("storage.k8s.io", "storageclasses", ("get", "list", "watch")),
    ("resource.k8s.io", "deviceclasses", ("get", "list", "watch")),
    ("resource.k8s.io", "resourceclaims", ("get", "list", "patch", "update", "watch")),
    ("resource.k8s.io", "resourceclaims/status", ("get", "list", "patch", "update", "watch")),
    ("", "pods/finalizers", ("update",)),
    ("resource.k8s.io", "resourceslices", ("get", "list", "watch")),
]
SCHEDULER_ROLES: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "1.34": _ROLE_1_34,
    "1.35": _ROLE_1_34,
    "1.36": [
        *_ROLE_1_34,
        ("resource.k8s.io", "resourceclaims", ("create", "delete")),
        ("resource.k8s.io", "resourceclaims/binding", ("patch", "update")),
    ],
}
LEADER_LEASE_VERBS = ("get", "list", "update", "watch")


def _scheduler(stack: str) -> dict:
    return one(rendered(stack).chart(RELEASE), "Deployment", "the user-scheduler", name="user-scheduler")


def _minor(tag: str) -> str:
    return ".".join(tag.removeprefix("v").split(".")[:2])


def test_each_kubernetes_minor_has_a_kube_scheduler_of_its_own():
    assert set(KUBE_SCHEDULER_VERSIONS) == set(KUBE_PROXY_ADDON_VERSIONS)
    assert all(_minor(tag) == minor for minor, tag in KUBE_SCHEDULER_VERSIONS.items())


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_user_scheduler_runs_the_clusters_minor_kube_scheduler(stack):
    # Kubernetes' version skew policy: kube-scheduler no newer than the API server, and at most one minor older.
    (container,) = _scheduler(stack)["spec"]["template"]["spec"]["containers"]
    image, _, tag = container["image"].rpartition(":")
    assert image == "registry.k8s.io/kube-scheduler"
    assert _minor(tag) == rendered(stack).kubernetes_version


def _granted(rules: list[dict], group: str, resource: str, verb: str, name: str | None = None) -> bool:
    return any(
        group in r.get("apiGroups", [])
        and resource in r["resources"]
        and verb in r["verbs"]
        and (not r.get("resourceNames") or name in r["resourceNames"])
        for r in rules
    )


def _user_scheduler_rules(stack: str) -> list[dict]:
    """Every rule of every ClusterRole bound to the user-scheduler's service account, the chart's and gpulab's."""
    r = rendered(stack)
    namespace = r.run.stack.settings.jupyterhub.namespace
    account = _scheduler(stack)["spec"]["template"]["spec"]["serviceAccountName"]
    objects = [o for file in r.files().values() for o in file]
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    return [
        rule
        for binding in (o for o in objects if o["kind"] == "ClusterRoleBinding")
        if {"kind": "ServiceAccount", "name": account, "namespace": namespace} in binding["subjects"]
        for rule in roles[binding["roleRef"]["name"]]["rules"]
    ]


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_user_scheduler_may_do_what_its_kube_scheduler_does(stack):
    minor = rendered(stack).kubernetes_version
    assert minor in SCHEDULER_ROLES, f"compare kube-scheduler {minor}'s system:kube-scheduler role with SCHEDULER_ROLES"
    rules = _user_scheduler_rules(stack)
    missing = [
        (group, resource, verb)
        for group, resource, verbs in SCHEDULER_ROLES[minor]
        for verb in verbs
        if not _granted(rules, group, resource, verb)
    ]
    assert missing == []
    # Its leader election lease, by the name the scheduler's configuration gives it.
    config_map = one(
        rendered(stack).chart(RELEASE), "ConfigMap", "the user-scheduler's configuration", name="user-scheduler"
    )
    lease = yaml.safe_load(config_map["data"]["config.yaml"])["leaderElection"]["resourceName"]
    assert [v for v in LEADER_LEASE_VERBS if not _granted(rules, "coordination.k8s.io", "leases", v, lease)] == []
