"""Pure builders of one lab's Karpenter objects (EC2NodeClass, NodePool, NodeOverlays) as plain dicts.

Karpenter 1.14.1 v1 APIs; tests validate every object against the upstream CRDs, CEL rules included.
"""

from collections.abc import Mapping
from typing import Any

from components.karpenter.class_seats_manifests import class_budgets
from components.karpenter.user_data import node_user_data, user_data_problem
from components.labels import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    DISCOVERY_TAG,
    GPU_LIMIT_COST_ANNOTATION,
    GPU_PRESENT_LABEL,
    GPU_RESOURCE,
    GPU_TAINT,
    LAB_LABEL,
    MAX_HOURLY_COST_ANNOTATION,
    MPS_CAPABLE_LABEL,
)
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.node_capacity import seats_per_node
from domain.cost.lab_cost import usd
from domain.stack.model import Lab

NODE_POOL_API = "karpenter.sh/v1"
NODE_OVERLAY_API = "karpenter.sh/v1alpha1"
NODE_CLASS_GROUP = "karpenter.k8s.aws"
NODE_CLASS_API = f"{NODE_CLASS_GROUP}/v1"
NODE_CLASS_KIND = "EC2NodeClass"
GPU_COUNT_LABEL = "karpenter.k8s.aws/instance-gpu-count"
ROOT_DEVICE = "/dev/xvda"  # the root device of AL2023 AMIs


def lab_user_data(lab: Lab) -> str:
    """The EC2NodeClass userData of the lab's nodes (components/karpenter/user_data.py)."""
    return node_user_data(
        pod_pids_limit=lab.pod_pids_limit, prepull_images=lab.node_images, fast_image_pull=lab.disk.fast_image_pull
    )


def user_data_problems(labs: Mapping[str, Lab]) -> list[str]:
    """One `gpulab:labs.<lab>.prepullImages` line for each lab whose nodes EC2 would refuse for their user data."""
    problems = {name: user_data_problem(lab_user_data(lab)) for name, lab in labs.items()}
    return [f"gpulab:labs.{name}.prepullImages: {problem}" for name, problem in problems.items() if problem]


def node_labels(lab_name: str, lab: Lab) -> dict[str, str]:
    """Labels every node of the lab carries: they select the device plugin and its profile, and name the lab."""
    labels = {GPU_PRESENT_LABEL: "true", DEVICE_PLUGIN_CONFIG_LABEL: lab_name, LAB_LABEL: lab_name}
    if lab.sharing == "mps":
        # Only GPU Feature Discovery (off here) would set it; without it the MPS control daemon never starts, the
        # plugin waits for it forever and never advertises nvidia.com/gpu (templates/daemonset-mps-control-daemon.yml,
        # internal/plugin/server.go Start at v0.20.0). Other labs' nodes stay without it, so no daemon runs there.
        labels[MPS_CAPABLE_LABEL] = "true"
    return labels


def ec2_node_class(lab_name: str, lab: Lab, cluster_name: str, node_role: Any) -> dict:
    """`node_role` is the node role's name: a string, or a Pulumi output of one."""
    discovery = [{"tags": {DISCOVERY_TAG: cluster_name}}]
    disk = lab.disk
    volume = disk.root
    spec: dict[str, Any] = {
        # For GPU instance types the alias resolves to the NVIDIA variant of the AMI (driver and toolkit included).
        "amiSelectorTerms": [{"alias": lab.ami}],
        "role": node_role,
        "subnetSelectorTerms": discovery,
        "securityGroupSelectorTerms": discovery,
        "blockDeviceMappings": [
            {
                "deviceName": ROOT_DEVICE,
                "rootVolume": True,
                "ebs": {
                    "volumeSize": f"{volume.size_gib}Gi",
                    "volumeType": "gp3",
                    "iops": volume.iops,
                    "throughput": volume.throughput_mibps,
                    "encrypted": volume.encrypted,
                    "deleteOnTermination": True,
                },
            }
        ],
        # A hop limit of 1 keeps pods (one hop further than the node) from reaching the node role's credentials.
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        },
        "userData": lab_user_data(lab),
        "tags": {LAB_LABEL: lab_name},
    }
    if disk.raid0:
        # Images and pods' data on a RAID0 of the NVMe instance store; a no-op on a type without one
        # (domain/capacity/disks.py).
        spec["instanceStorePolicy"] = "RAID0"
    if lab.max_pods is not None:
        spec["kubelet"] = {"maxPods": lab.max_pods}
    if lab.capacity_reservation_ids:
        spec["capacityReservationSelectorTerms"] = [{"id": rid} for rid in lab.capacity_reservation_ids]
    return {"apiVersion": NODE_CLASS_API, "kind": NODE_CLASS_KIND, "metadata": {"name": lab_name}, "spec": spec}


def node_pool_budgets(lab: Lab) -> list[dict[str, Any]]:
    """The disruption budgets of the lab's NodePool: the lab's own (disruption.budgets), then its classes'
    (components/karpenter/class_seats_manifests.py class_budgets). The render's summary reads them from here."""
    own = [budget.model_dump(by_alias=True, exclude_none=True) for budget in lab.disruption.budgets]
    return own + class_budgets(lab)


def node_pool(lab_name: str, lab: Lab) -> dict:
    requirements = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(lab.instance_types)},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(lab.capacity_types)},
        {"key": "kubernetes.io/arch", "operator": "In", "values": lab.architectures},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.k8s.aws/instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
    ]
    disruption = lab.disruption
    return {
        "apiVersion": NODE_POOL_API,
        "kind": "NodePool",
        "metadata": {"name": lab_name, **cost_annotations(lab)},
        "spec": {
            "template": {
                "metadata": {"labels": node_labels(lab_name, lab)},
                "spec": {
                    "nodeClassRef": {"group": NODE_CLASS_GROUP, "kind": NODE_CLASS_KIND, "name": lab_name},
                    "taints": [dict(GPU_TAINT)],
                    "requirements": requirements,
                    "expireAfter": lab.expire_after,
                    "terminationGracePeriod": lab.termination_grace_period,
                },
            },
            "disruption": {
                "consolidationPolicy": disruption.consolidation_policy,
                "consolidateAfter": disruption.consolidate_after,
                "budgets": node_pool_budgets(lab),
            },
            # Karpenter counts nvidia.com/gpu as the nodes advertise it: in slices once the NodeOverlays apply.
            "limits": {GPU_RESOURCE: str(lab.learner_seats), "cpu": str(lab.node_pool_cpu_limit)},
        },
    }


def cost_annotations(lab: Lab) -> dict[str, dict[str, str]]:
    """A capped lab's cap and what its GPU limit costs per hour (the arithmetic bound, the figure the cap is checked
    against), as annotations of the NodePool, for the policy pack's check (policy/rules.py); none without a cap. The
    program knows only this bound, not the planner's "at most" figure (the render's), so an uncapped NodePool states no
    cost: the lab's one "at most" figure is the stack output labs.<lab>.cost.atMostPerHour.

    They sit on the NodePool's own metadata, so that a new price or cap never drifts the lab's nodes: Karpenter's drift
    hash covers spec.template only (NodePool.Hash, kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/nodepool.go).
    """
    cost = lab.cost
    if cost.max_hourly_cost is None:
        return {}
    annotations = {
        key: usd(amount)
        for key, amount in [
            (GPU_LIMIT_COST_ANNOTATION, cost.gpu_limit_per_hour),
            (MAX_HOURLY_COST_ANNOTATION, cost.max_hourly_cost),
        ]
        if amount is not None
    }
    return {"annotations": annotations} if annotations else {}


def node_overlays(lab_name: str, lab: Lab) -> list[dict]:
    """One NodeOverlay per GPU count among the lab's instance types; none for a lab that does not share.

    Karpenter models nvidia.com/gpu from EC2 data (1 for g4dn.xlarge), so with time-slicing and no overlay it would
    launch one node per pending learner (kubernetes-sigs/karpenter#729). The overlay tells it how many slices a node
    of that GPU count will advertise once the device plugin applies the lab's profile. The CRD's description says
    capacity only adds resources, but Karpenter merges it over the instance type's own (lo.Assign in
    InstanceType.ApplyCapacityOverlay, kubernetes-sigs/karpenter v1.14.1 pkg/cloudprovider/types.go), so it replaces the
    EC2-derived nvidia.com/gpu.
    """
    if lab.slices_per_gpu == 1:
        return []
    # One overlay per GPU count: every type of that count seats the same slicesPerGpu x GPUs learners.
    seats = {GPU_INSTANCE_TYPES[t].gpus: seats_per_node(t, lab.slices_per_gpu) for t in lab.instance_types}
    return [
        {
            "apiVersion": NODE_OVERLAY_API,
            "kind": "NodeOverlay",
            "metadata": {"name": f"{lab_name}-{gpus}gpu"},
            "spec": {
                "requirements": [
                    {"key": LAB_LABEL, "operator": "In", "values": [lab_name]},
                    {"key": GPU_COUNT_LABEL, "operator": "In", "values": [str(gpus)]},
                ],
                "capacity": {GPU_RESOURCE: str(seats[gpus])},
            },
        }
        for gpus in sorted(seats)
    ]
