"""A lab is refused the instance types whose nodes Karpenter's node repair would replace for want of a DCGM host engine
(domain/stack/node_repair.py), with one line naming the key, the node monitoring agent's build and why; every other
type is accepted."""

import pytest

from domain.capacity.daemonsets import DCGM_SERVER
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from tests.conftest import stack_values
from tests.support.synthetic import lab
from tests.test_jupyterhub_config import load, problems


def one_type_lab(instance_type: str) -> dict:
    return stack_values(**{"gpulab:labs": {"big": lab([instance_type], 2, GPU_INSTANCE_TYPES[instance_type].gpus)}})


def test_a_lab_of_g7_and_g7e_is_refused_naming_the_key_the_agent_and_node_repair():
    values = stack_values(**{"gpulab:labs": {"big": lab(["g4dn.xlarge", "g7.2xlarge", "g7e.4xlarge"], 2, 4)}})
    assert problems(values) == [
        "gpulab:labs.big.instanceTypes: g7.2xlarge, g7e.4xlarge nodes run no DCGM host engine: the EKS node "
        "monitoring agent v1.6.1-eksbuild.1 runs its dcgm-server only on amd64 nodes of the instance types its node "
        "affinity lists. On them the agent reports DCGMError, their AcceleratedHardwareReady condition turns False, "
        "and Karpenter's node repair deletes such a node with its learners' pods 10 minutes later, or, while more than "
        "20% of the lab's nodes are so, repairs none of them; choose other instance types"
    ]


# Refused exactly where the dcgm-server (checked against the agent's chart in tests/test_addon_sources.py) does not
# land on an amd64 node; arm64 nodes (g5g) have no host engine either, but the agent checks no DCGM there.
@pytest.mark.parametrize("instance_type", GPU_INSTANCE_TYPES)
def test_a_type_is_refused_only_where_the_agent_checks_a_host_engine_that_is_not_there(instance_type):
    refused = GPU_INSTANCE_TYPES[instance_type].architecture == "amd64" and not DCGM_SERVER.lands_on(instance_type)
    if refused:
        (line,) = problems(one_type_lab(instance_type))
        assert line.startswith(f"gpulab:labs.big.instanceTypes: {instance_type} nodes run no DCGM host engine")
    else:
        assert load(one_type_lab(instance_type)).settings.labs["big"].instance_types == [instance_type]


def test_the_arm64_lab_is_accepted_though_it_has_no_host_engine():
    assert not DCGM_SERVER.lands_on("g5g.xlarge")
    assert load(one_type_lab("g5g.xlarge")).settings.labs["big"].instance_types == ["g5g.xlarge"]
