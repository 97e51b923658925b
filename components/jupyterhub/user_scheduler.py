"""Pure builders of the jupyterhub chart's user-scheduler: its values, at the cluster's Kubernetes version, and the
permissions a kube-scheduler of that version needs beyond the chart's own ClusterRole."""

from typing import Any

from components.labels import GPU_RESOURCE, SYSTEM_NODE_SELECTOR
from domain.upstream.versions import KUBE_SCHEDULER_VERSIONS

# The chart's names for the user-scheduler's objects with the release named jupyterhub (templates/_helpers-names.tpl:
# a release name containing "jupyterhub" adds no prefix).
SERVICE_ACCOUNT = "user-scheduler"
LEADER_LEASE = "user-scheduler-lock"
EXTRA_PERMISSIONS = "gpulab-user-scheduler"

# What the system:kube-scheduler ClusterRole of Kubernetes 1.34 grants beyond the chart 4.4.0's ClusterRole, which
# is the 1.30 one (templates/scheduling/user-scheduler/rbac.yaml). From zero-to-jupyterhub-k8s commit 80bb6e47
# (2026-03-03, "update kube-scheduler binary from 1.30.14 to 1.35.2"), which copies the 1.35.0 role and notes its
# changes: leases and leasecandidates in 1.31, volumeattachments in 1.32, none in 1.33, deviceclasses, resourceclaims,
# resourceclaims/status, pods/finalizers and resourceslices in 1.34, none in 1.35. A kube-scheduler waits for every
# informer it starts to list its resource before it schedules a pod; without these, 1.34's never does. They grant
# nothing on older clusters that their scheduler uses (a rule may name a resource the API server does not serve).
# With them, the user-scheduler may do all that system:kube-scheduler and system:volume-scheduler of kubernetes
# v1.34.12 may (bootstrappolicy/testdata/cluster-roles.yaml; tests/test_jupyterhub_user_scheduler.py holds that role).
_READ = ["get", "list", "watch"]
EXTRA_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": [LEADER_LEASE],
        "verbs": ["list", "watch"],
    },
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leasecandidates"],
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
    },
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": _READ},
    {"apiGroups": ["resource.k8s.io"], "resources": ["deviceclasses", "resourceslices"], "verbs": _READ},
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaims", "resourceclaims/status"],
        "verbs": [*_READ, "patch", "update"],
    },
    {"apiGroups": [""], "resources": ["pods/finalizers"], "verbs": ["update"]},
]
# What system:kube-scheduler of Kubernetes 1.36 grants beyond 1.34's and 1.35's (which are the same): kubernetes
# v1.36.5 against v1.35.8 and v1.34.12, bootstrappolicy/testdata/cluster-roles.yaml. Given from 1.36 on only.
RULES_FROM_1_36: list[dict[str, Any]] = [
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["create", "delete"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"], "verbs": ["patch", "update"]},
]


def user_scheduler(kubernetes_version: str) -> dict[str, Any]:
    """The chart's user-scheduler, on the system nodes, at the cluster's version, packing learners by GPU slices too.

    Its default scoring (MostAllocated over cpu and memory, values.yaml scheduling.userScheduler.pluginConfig) leaves
    the GPU out; a learner pod's CPU and memory are the seat's share, so a GPU weight is what makes the scheduler
    fill a node's slices before it starts on another node, so that nodes empty and Karpenter's WhenEmpty
    consolidation removes them. A pluginConfig list replaces the chart's, so it is written whole.
    """
    return {
        "enabled": True,
        "image": {"tag": KUBE_SCHEDULER_VERSIONS[kubernetes_version]},
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "MostAllocated",
                        "resources": [
                            {"name": "cpu", "weight": 1},
                            {"name": "memory", "weight": 1},
                            {"name": GPU_RESOURCE, "weight": 1},
                        ],
                    }
                },
            }
        ],
    }


def extra_permissions(namespace: str, kubernetes_version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ClusterRole of EXTRA_RULES (and RULES_FROM_1_36 on 1.36 and later) and its binding to the user-scheduler's
    service account."""
    newer = RULES_FROM_1_36 if int(kubernetes_version.split(".")[1]) >= 36 else []
    role = {"metadata": {"name": EXTRA_PERMISSIONS}, "rules": [*EXTRA_RULES, *newer]}
    binding = {
        "metadata": {"name": EXTRA_PERMISSIONS},
        "role_ref": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": EXTRA_PERMISSIONS},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}],
    }
    return role, binding
