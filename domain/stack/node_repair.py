"""Karpenter's node repair on a lab's nodes: only instance types whose GPU health the node monitoring agent can read.

gpulab turns node repair on (components/karpenter/controller.py). It acts on the EKS node monitoring agent's node
condition AcceleratedHardwareReady, which on an amd64 NVIDIA node the agent sets from the DCGM host engine its
dcgm-server DaemonSet runs (domain/capacity/daemonsets.py). Where no host engine runs, the agent cannot reach one
(monitors/nvidia/dcgm/dcgm_client.go Reconcile, after a one-minute grace period) and reports DCGMError, whose severity
is Fatal (pkg/reasons/reasons.go), which it writes as the condition with status False (pkg/manager/node_exporter.go
Fatal): aws/eks-node-monitoring-agent v1.6.1. Karpenter then deletes the node's NodeClaim once the condition has been
False for 10 minutes (aws/karpenter-provider-aws v1.14.1 pkg/cloudprovider/cloudprovider.go RepairPolicies) and gives
its pods no grace: it sets the NodeClaim's termination timestamp to the moment of deletion (sigs.k8s.io/karpenter
v1.14.1 pkg/controllers/node/health/controller.go annotateTerminationGracePeriod). It holds back every repair in a
NodePool while more of its nodes than 20% of them, rounded up, have a condition it repairs (isNodePoolHealthy, same
file): a lab's one such node is replaced again and again, and a lab with more of them repairs none of its nodes, a
broken GPU included. All CONFIRMED in the sources at those tags.
"""

from domain.capacity.daemonsets import DCGM_CHECKED_ARCHITECTURES, no_host_engine
from domain.capacity.instance_types import GPU_INSTANCE_TYPES


def host_engine_for_node_repair(instance_types: list[str]) -> list[str]:
    """A lab's instanceTypes, refused when the node monitoring agent would report a node of one of them unhealthy for
    want of a DCGM host engine."""
    checked = [t for t in instance_types if GPU_INSTANCE_TYPES[t].architecture in DCGM_CHECKED_ARCHITECTURES]
    if missing := no_host_engine(checked):
        raise ValueError(
            f"{missing}. On them the agent reports DCGMError, their AcceleratedHardwareReady condition turns False, "
            "and Karpenter's node repair deletes such a node with its learners' pods 10 minutes later, or, while more "
            "than 20% of the lab's nodes are so, repairs none of them; choose other instance types"
        )
    return instance_types
