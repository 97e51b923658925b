"""Pure builder of the workspace's recording and alerting rules: per lab, the seats in use, each seat's GPU use, the
idle seats, the pending learners, Karpenter's nodes and their cost per hour (a Prometheus rule file, which
aws.amp.RuleGroupNamespace takes as it is; tests/test_metrics_rules.py runs promtool's `test rules` on it).

Every aggregation keeps the lab (`by (lab)`): a lab's figures never mix with another's. A pod's lab is the lab its node
selector names (components/learner_pod.py), as kube-state-metrics reports it; a node's lab is its NodePool, which
carries the lab's name (components/karpenter/gpu_node_pool.py), as Karpenter reports it.
"""

from collections.abc import Mapping
from typing import Any

from components.metrics.kube_state_metrics import LAB_SELECTOR, SERVERNAME, USERNAME
from domain.stack.classes import DEFAULT_WARMUP
from domain.stack.metrics import Metrics, idle_window
from domain.stack.model import Lab
from domain.time import durations

GROUP = "gpulab"
# Rules run in order within a group, each on the results of those before it in the same evaluation.
EVALUATION_INTERVAL = "1m"

POD_LAB = "gpulab:pod_lab:info"
SEAT_UTILISATION = "gpulab:seat_gpu_utilisation:percent"
SEAT_IDLE = "gpulab:seat_gpu_idle:percent"
LEARNER_IDLE = "gpulab:learner_gpu_idle:percent"
SEATS_IN_USE = "gpulab:lab_seats_in_use:count"
SEATS = "gpulab:lab_seats:count"
SEATS_IDLE = "gpulab:lab_seats_idle:count"
PENDING = "gpulab:lab_learners_pending:count"
NODES = "gpulab:lab_nodes:count"
COST = "gpulab:lab_cost_usd_per_hour"


def _per_lab_count(selection: str) -> str:
    """How many of `selection` (series of pods with a lab label) each lab has, 0 for a lab with pods but none of it."""
    return f"count by (lab) ({selection}) or (0 * count by (lab) ({POD_LAB}))"


def _karpenter(expression: str) -> str:
    """Karpenter's per-NodePool series with the NodePool's name as `lab`."""
    return f'label_replace({expression}, "lab", "$1", "nodepool", "(.+)")'


def _allocatable(resource: str) -> str:
    """Karpenter's allocatable of each of its nodes (resource_type is the resource's name, lowercase)."""
    return f'karpenter_nodes_allocatable{{resource_type="{resource}"}}'


def _idle_seats(lab_name: str, lab: Lab, metrics: Metrics) -> str:
    window = idle_window(lab, metrics)
    # A seat whose pod is younger than the window has not been measured over all of it: it is not idle yet.
    return (
        f'(max_over_time({SEAT_UTILISATION}{{lab="{lab_name}"}}[{window}]) < {metrics.idle_utilisation_percent}\n'
        f" and on (namespace, pod) (time() - kube_pod_start_time > {durations.seconds(window)}))"
    )


def rule_groups(labs: Mapping[str, Lab], metrics: Metrics) -> dict[str, Any]:
    """The rule file: one group, recording rules first, then the alerts that read them."""
    learner = (
        f'label_replace(label_replace(kube_pod_annotations{{{USERNAME}!=""}}, "username", "$1", "{USERNAME}", "(.+)"), '
        f'"servername", "$1", "{SERVERNAME}", "(.*)")'
    )
    recording = [
        {
            "record": POD_LAB,
            "expr": f'max by (namespace, pod, lab) (label_replace(kube_pod_nodeselectors{{{LAB_SELECTOR}!=""}}, '
            f'"lab", "$1", "{LAB_SELECTOR}", "(.+)"))',
        },
        # dcgm-exporter's per-pod series carry the learner's pod and namespace; its whole-GPU series have no pod.
        {
            "record": SEAT_UTILISATION,
            "expr": f'max by (namespace, pod, lab) (DCGM_FI_DEV_GPU_UTIL{{pod!=""}} * on (namespace, pod) '
            f"group_left (lab) {POD_LAB})",
        },
        {
            "record": SEATS_IN_USE,
            "expr": _per_lab_count(
                f'{POD_LAB} and on (namespace, pod) (kube_pod_status_phase{{phase="Running"}} == 1)'
            ),
        },
        {
            "record": PENDING,
            "expr": _per_lab_count(
                f'{POD_LAB} and on (namespace, pod) (kube_pod_status_phase{{phase="Pending"}} == 1)'
            ),
        },
        # One rule, each lab's window its own: a record name that several rules write is one Prometheus warns of.
        *(
            [{"record": SEAT_IDLE, "expr": "\nor\n".join(_idle_seats(n, lab, metrics) for n, lab in labs.items())}]
            if labs
            else []
        ),
        {"record": SEATS_IDLE, "expr": _per_lab_count(SEAT_IDLE)},
        # The idle seats of JupyterHub's learners, by the learner's name and server, which the idle-GPU culler stops.
        {
            "record": LEARNER_IDLE,
            "expr": f"{SEAT_IDLE} * on (namespace, pod) group_left (username, servername) {learner}",
        },
        {"record": SEATS, "expr": f"sum by (lab) ({_karpenter(_allocatable('nvidia.com/gpu'))})"},
        {"record": NODES, "expr": f"count by (lab) ({_karpenter(_allocatable('cpu'))})"},
        # Karpenter's cost of a NodePool: the sum of its NodeClaims' offering prices (sigs.k8s.io/karpenter v1.14.1
        # pkg/state/cost), which karpenter-provider-aws takes from EC2's hourly prices in US dollars.
        {"record": COST, "expr": f"max by (lab) ({_karpenter('karpenter_nodepools_cost_total')})"},
    ]
    alerts = [
        {
            "alert": "GpuSeatsIdle",
            "expr": f"{SEATS_IDLE} > 0",
            "labels": {"severity": "info"},
            "annotations": {
                "summary": "Lab {{ $labels.lab }} has {{ $value }} seats whose GPU has stayed idle",
                "description": f"Under {metrics.idle_utilisation_percent}% GPU utilisation for the lab's "
                "gpuIdleTimeout, or gpulab:metrics.idleAfter; each holds a GPU slice another learner could use.",
            },
        },
        {
            "alert": "LearnersPending",
            "expr": f"{PENDING} > 0",
            # As long as a learner without a warm seat waits for a new node before the hub gives up (startTimeout,
            # components/jupyterhub/values.py).
            "for": DEFAULT_WARMUP,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Lab {{ $labels.lab }} has had {{ $value }} learners pending for " + DEFAULT_WARMUP,
                "description": "Their pods wait for a GPU slice: the lab may be at maxGpus, or Karpenter cannot "
                "launch its instance types.",
            },
        },
    ]
    return {"groups": [{"name": GROUP, "interval": EVALUATION_INTERVAL, "rules": recording + alerts}]}
