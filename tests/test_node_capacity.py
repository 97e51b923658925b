"""domain/capacity/node_capacity.py: a node's allocatable CPU and memory as Karpenter computes it before launch."""

import pytest

from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.node_capacity import allocatable


@pytest.mark.parametrize(
    ("instance_type", "pods", "cpu", "memory"),
    # aws/karpenter-provider-aws@1d927085dd81 website/content/en/v1.14/reference/instance-types.md, "Resources".
    [
        ("g4dn.xlarge", 29, 3920, 14481),
        ("g5g.xlarge", 58, 3920, 6525),
        ("g6e.xlarge", 58, 3920, 29317),
        ("p5.48xlarge", 100, 191450, 1938410),
    ],
)
def test_allocatable_matches_karpenters_instance_type_reference(instance_type, pods, cpu, memory):
    """The reference lists each type with its ENI-limited pods, which kube-reserved counts whatever maxPods says."""
    node = allocatable(instance_type)
    assert (node.cpu_millis, node.memory_mib, GPU_INSTANCE_TYPES[instance_type].max_pods) == (cpu, memory, pods)
