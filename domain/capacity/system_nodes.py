"""The system node group's instances: their vCPUs, and how many of them EKS may run at once.

The EC2 quota "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" counts vCPUs, so what the group
takes of it is its most nodes times the vCPUs of its largest type (reports/preflight.py checks it).

Most nodes. components/cluster.py gives the managed node group `max_size` = size + 1 and `maxUnavailable` 1. When EKS
updates the group (a new AMI or Kubernetes version), it "increments the Auto Scaling Group's maximum size and desired
size by the larger of either: Up to twice the number of Availability Zones that the Auto Scaling group is deployed in.
The maximum unavailable of upgrade." (EKS User Guide, awsdocs/amazon-eks-user-guide at 4d52b4d0 (2024-12-18),
latest/ug/nodes/managed-node-update-behavior.adoc, "Scale up phase"; CONFIRMED there). The group's desired size is its
`size` (nothing scales it), so during an update it runs at most size + max(2 x zones, 1) nodes, more than its max size
of size + 1 whatever the zones.
"""

from collections.abc import Mapping
from types import MappingProxyType

MAX_UNAVAILABLE = 1


def max_size(size: int) -> int:
    """The node group's Auto Scaling maximum: one node over its size."""
    return size + 1


def most_nodes(size: int, zones: int) -> int:
    """The most nodes the group runs at once: its size plus what an EKS update launches (above)."""
    return max(max_size(size), size + max(2 * zones, MAX_UNAVAILABLE))


# vCPUs of each x86_64 type a system node group is commonly given (the types domain/cost/prices.py prices), as
# `karpenter.k8s.aws/instance-cpu` in Karpenter's generated instance-type reference (aws/karpenter-provider-aws at
# 1d927085dd81, website/content/en/v1.14/reference/instance-types.md, built from EC2 DescribeInstanceTypes; CONFIRMED
# there, the same file domain/capacity/instance_types.py reads). All are of families C, M and T, which the standard
# quota counts. A type not listed here has no known vCPUs.
# fmt: off
SYSTEM_INSTANCE_VCPUS: Mapping[str, int] = MappingProxyType({
    "c5.large": 2, "c5.xlarge": 4, "c6i.large": 2, "c6i.xlarge": 4, "c7i.large": 2, "c7i.xlarge": 4,
    "m5.large": 2, "m5.xlarge": 4, "m5.2xlarge": 8, "m5a.large": 2, "m5a.xlarge": 4, "m5a.2xlarge": 8,
    "m6a.large": 2, "m6a.xlarge": 4, "m6a.2xlarge": 8, "m6i.large": 2, "m6i.xlarge": 4, "m6i.2xlarge": 8,
    "m7a.large": 2, "m7a.xlarge": 4, "m7a.2xlarge": 8, "m7i.large": 2, "m7i.xlarge": 4, "m7i.2xlarge": 8,
    "t3.medium": 2, "t3.large": 2, "t3.xlarge": 4,
})
# fmt: on
