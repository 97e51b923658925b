"""The chart's user-scheduler runs the cluster's kube-scheduler version, with what that version needs to start."""

import pytest
import yaml

from components.jupyterhub.hub import RELEASE
from config.versions import KUBE_PROXY_ADDON_VERSIONS, KUBE_SCHEDULER_VERSIONS
from tests.chart_checks import one
from tests.rendered import HUB_STACKS, rendered

# What kube-scheduler 1.34 lists and watches beyond 1.30 (the chart's own ClusterRole's version): DRA's objects for
# the DynamicResources plugin, GA and on by default in 1.34, and the CSI volume attachments of 1.32's
# system:kube-scheduler (zero-to-jupyterhub-k8s 80bb6e47, which copies the 1.35 role and notes each change).
WATCHED_SINCE_1_30 = [
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceslices"),
    ("storage.k8s.io", "volumeattachments"),
]


def _scheduler(stack: str) -> dict:
    return one(rendered(stack).chart(RELEASE), "Deployment", "the user-scheduler", name="user-scheduler")


def _minor(tag: str) -> str:
    return ".".join(tag.removeprefix("v").split(".")[:2])


def test_every_kubernetes_version_gpulab_takes_has_a_kube_scheduler_of_its_own_minor_version():
    assert set(KUBE_SCHEDULER_VERSIONS) == set(KUBE_PROXY_ADDON_VERSIONS)
    assert all(_minor(tag) == minor for minor, tag in KUBE_SCHEDULER_VERSIONS.items())


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_user_scheduler_runs_kube_scheduler_at_the_clusters_minor_version(stack):
    # Kubernetes' version skew policy: kube-scheduler no newer than the API server, and at most one minor older.
    (container,) = _scheduler(stack)["spec"]["template"]["spec"]["containers"]
    image, _, tag = container["image"].rpartition(":")
    assert image == "registry.k8s.io/kube-scheduler"
    assert _minor(tag) == rendered(stack).kubernetes_version


def _granted(rules: list[dict], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r.get("apiGroups", [])
        and resource in r["resources"]
        and verb in r["verbs"]
        and not r.get("resourceNames")
        for r in rules
    )


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_user_schedulers_service_account_may_watch_what_its_kube_scheduler_watches(stack):
    r = rendered(stack)
    namespace = r.run.stack.settings.jupyterhub.namespace
    account = _scheduler(stack)["spec"]["template"]["spec"]["serviceAccountName"]
    objects = [o for file in r.files().values() for o in file]
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    rules = [
        rule
        for binding in (o for o in objects if o["kind"] == "ClusterRoleBinding")
        if {"kind": "ServiceAccount", "name": account, "namespace": namespace} in binding["subjects"]
        for rule in roles[binding["roleRef"]["name"]]["rules"]
    ]
    missing = [
        (group, resource, verb)
        for group, resource in WATCHED_SINCE_1_30
        for verb in ("list", "watch")
        if not _granted(rules, group, resource, verb)
    ]
    assert missing == []
    # Its leader election lease, by the name the scheduler's configuration gives it.
    config_map = one(r.chart(RELEASE), "ConfigMap", "the user-scheduler's configuration", name="user-scheduler")
    lease = yaml.safe_load(config_map["data"]["config.yaml"])["leaderElection"]["resourceName"]
    lease_verbs = {
        verb
        for rule in rules
        if "coordination.k8s.io" in rule["apiGroups"] and "leases" in rule["resources"]
        if lease in rule.get("resourceNames", [lease])
        for verb in rule["verbs"]
    }
    assert {"get", "list", "update", "watch"} <= lease_verbs
