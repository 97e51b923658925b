"""The pack's nodepool-max-hourly-cost rule: capped labs pass, a NodePool whose GPU limit costs more than its cap, or
without that cost, fires."""

import copy
import re
from typing import Any

import pytest

from components import labels
from components.karpenter.manifests import node_pool
from domain.stack.model import Lab
from render.harness import Run
from tests.conftest import run_values, stack_values
from tests.support.synthetic import lab
from tests.test_policy import load_pack_module, only, rules, run_policy, violations

POLICY = "nodepool-max-hourly-cost"
CAP = labels.MAX_HOURLY_COST_ANNOTATION
CEILING = labels.GPU_LIMIT_COST_ANNOTATION


@pytest.fixture(scope="module")
def capped_run() -> Run:
    # intro: g4dn.xlarge, maxGpus 4: 4 x (0.526 + a 20 GiB root volume's 1.60 / 730) = 2.11277, so 2.1128
    # USD per hour, under a cap of 3.
    return run_values(stack_values(**{"gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, 4, maxHourlyCost=3)}}))


def capped_pool(run: Run) -> dict[str, Any]:
    return copy.deepcopy(run.one(rules.NODE_POOL, "nodepool-intro").inputs)


def test_every_resource_of_a_capped_lab_stack_passes_every_rule(capped_run: Run) -> None:
    assert capped_pool(capped_run)["metadata"]["annotations"].items() >= {CEILING: "2.1128", CAP: "3.0000"}.items()
    failing = {f"{r.type}::{r.name}": found for r in capped_run.resources if (found := violations(r))}
    assert failing == {}


def test_nodepool_whose_gpu_limit_costs_more_than_its_cap_fires(capped_run: Run) -> None:
    props = capped_pool(capped_run)
    props["metadata"]["annotations"][CAP] = "2.0000"
    message = only(violations((rules.NODE_POOL, props)), POLICY)
    assert re.search(
        r"^the NodePool.s GPU limit may cost up to 2\.1128 USD per hour .*, more than its cap of 2\.0000", message
    )


def test_the_pack_refuses_an_over_cap_nodepool_as_config_does() -> None:
    # What a program change that skipped the configuration's check would register.
    over = Lab.model_construct(instance_types=["g5.12xlarge"], slices_per_gpu=2, max_gpus=8, ami="al2023@latest")
    over = over.model_copy(update={"max_hourly_cost": 10.0})
    assert over.cost.cap_problem is not None
    message = only(violations((rules.NODE_POOL, node_pool("vision", over))), POLICY)
    # 8 GPUs x (5.672 + 1.60 / 730 for the 20 GiB root volume) / 4 GPUs per node = 11.34838, rounded up
    assert re.search(r"may cost up to 11\.3484 USD per hour .*cap of 10\.0000", message)


def test_a_cap_at_the_gpu_limits_cost_passes_the_pack_as_config() -> None:
    # g4dn.xlarge, maxGpus 4, its 20 GiB root volume included: the GPU limit costs exactly 2.1128 USD per hour.
    run = run_values(stack_values(**{"gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, 4, maxHourlyCost=2.1128)}}))
    props = capped_pool(run)
    assert props["metadata"]["annotations"].items() >= {CEILING: "2.1128", CAP: "2.1128"}.items()
    assert violations((rules.NODE_POOL, props)) == {}


def test_nodepool_with_a_cap_and_no_gpu_limit_cost_fires(capped_run: Run) -> None:
    props = capped_pool(capped_run)
    del props["metadata"]["annotations"][CEILING]
    message = only(violations((rules.NODE_POOL, props)), POLICY)
    assert re.search(rf"^metadata\.annotations\[{re.escape(CEILING)}\] is None, .*cap of 3\.0000 .* cannot be", message)


@pytest.mark.parametrize("cap", ["", "abc", "0", "-1", "inf", "nan", 3])
def test_nodepool_with_an_unreadable_cap_fires(capped_run: Run, cap: Any) -> None:
    props = capped_pool(capped_run)
    props["metadata"]["annotations"][CAP] = cap
    message = only(violations((rules.NODE_POOL, props)), POLICY)
    assert re.search(rf"^metadata\.annotations\[{re.escape(CAP)}\] is {re.escape(repr(cap))}, not a positive", message)


def test_an_uncapped_nodepool_is_not_judged_by_its_gpu_limits_cost(capped_run: Run) -> None:
    props = capped_pool(capped_run)
    props["metadata"]["annotations"] = {CEILING: "1000000.0000"}
    assert violations((rules.NODE_POOL, props)) == {}


def test_the_rule_runs_behind_the_proxy_as_crossguard_calls_it(capped_run: Run) -> None:
    pack = load_pack_module()
    props = capped_pool(capped_run)
    assert run_policy(pack, POLICY, rules.NODE_POOL, copy.deepcopy(props)) == []
    props["metadata"]["annotations"][CAP] = "1.0000"
    (message,) = run_policy(pack, POLICY, rules.NODE_POOL, props)
    assert re.search(r"cap of 1\.0000", message)


def test_pack_cost_annotation_keys_equal_the_projects() -> None:
    assert (rules.GPU_LIMIT_COST_ANNOTATION, rules.MAX_HOURLY_COST_ANNOTATION) == (CEILING, CAP)
