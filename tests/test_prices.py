"""The reference prices: known instance types only, from the pinned Karpenter release, as upstream writes them."""

import math
import re
from pathlib import Path

import pytest

from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.cost import prices
from domain.cost.prices import ON_DEMAND_USD_PER_HOUR, SYSTEM_NODE_USD_PER_HOUR
from domain.upstream.versions import KARPENTER_CHART_VERSION
from tests.support.upstream_data import KARPENTER, absent

# In the upstream reference data (tests/support/upstream_data.py); the pull-request workflow fetches it in CI (`make
# upstream`).
UPSTREAM_PRICES = KARPENTER / "zz_generated.pricing_aws.go"


def test_every_priced_type_is_a_known_gpu_instance_type():
    assert set(ON_DEMAND_USD_PER_HOUR) <= set(GPU_INSTANCE_TYPES)


def test_every_price_is_a_positive_finite_hourly_amount():
    assert all(isinstance(p, float) and math.isfinite(p) and p > 0 for p in ON_DEMAND_USD_PER_HOUR.values())


def test_g4dn_xlarge_is_0_526_an_hour_on_demand_in_us_east_1():
    assert ON_DEMAND_USD_PER_HOUR["g4dn.xlarge"] == 0.526


def test_prices_come_from_the_deployed_karpenter_release():
    # Bumping Karpenter without refreshing the prices would label old prices with the new release.
    assert f"v{KARPENTER_CHART_VERSION}" == prices.SOURCE_TAG
    assert prices.PRICE_SOURCE == "us-east-1 on-demand list prices of 2026-07-06, Karpenter 1.14.1"


def test_prices_table_is_read_only():
    with pytest.raises(TypeError, match="does not support item assignment"):
        ON_DEMAND_USD_PER_HOUR["g7.2xlarge"] = 1.0  # type: ignore[index]


@pytest.fixture(scope="module")
def upstream_prices() -> tuple[str, dict[str, str]]:
    """The generation line and the us-east-1 prices (as written) of Karpenter's generated pricing file."""
    if not UPSTREAM_PRICES.is_file():
        pytest.skip(absent(UPSTREAM_PRICES))
    text = UPSTREAM_PRICES.read_text()
    generated = re.search(r"^// generated at (\S+) for (\S+)$", text, re.MULTILINE)
    assert generated, "the file has no generation line"
    region = re.search(r'^\t"us-east-1": \{\n(.*?)^\t\},', text, re.MULTILINE | re.DOTALL)
    assert region, "the file has no us-east-1 map"
    return f"{generated[1]} {generated[2]}", dict(re.findall(r'"([a-z0-9.-]+)": ([0-9.]+)', region[1]))


def test_generation_time_and_region_are_the_upstream_files(upstream_prices):
    generated, _ = upstream_prices
    assert generated == f"{prices.GENERATED_AT} {prices.REGION}"


def test_every_price_is_upstreams_and_none_is_left_out(upstream_prices):
    _, upstream = upstream_prices
    assert {t: float(upstream[t]) for t in GPU_INSTANCE_TYPES if t in upstream} == dict(ON_DEMAND_USD_PER_HOUR)


def test_prices_are_written_as_upstream_writes_them(upstream_prices):
    _, upstream = upstream_prices
    written = dict(re.findall(r'"([a-z0-9.-]+)": ([0-9.]+)', Path(prices.__file__).read_text()))
    assert written == {t: upstream[t] for t in [*ON_DEMAND_USD_PER_HOUR, *SYSTEM_NODE_USD_PER_HOUR]}


def test_every_system_node_price_is_upstreams_number(upstream_prices):
    _, upstream = upstream_prices
    assert {t: float(upstream[t]) for t in SYSTEM_NODE_USD_PER_HOUR} == dict(SYSTEM_NODE_USD_PER_HOUR)
