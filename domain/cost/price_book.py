"""The prices a run of the program figures with, and the region they are from.

Offline (the render, the tests) that is LIST: the us-east-1 list prices of domain/cost/prices.py, whatever the stack's
region. At `pulumi preview` and `pulumi up` the instance prices come from the AWS Price List API for the stack's
region and EC2's current spot prices for its zones (components/live_prices.py), and each figure says which: a price is
never taken from another region without saying so, and a type without a price in the region is named, never priced.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from domain.cost import prices


@dataclass(frozen=True)
class Gp3:
    """EBS gp3, USD: storage per GB-month, IOPS above the included per IOPS-month, MiB/s above the included per
    MiB/s-month (as strings, for Decimal arithmetic)."""

    per_gb_month: str
    per_iops_month: str
    per_mibps_month: str


@dataclass(frozen=True)
class MeterPrices:
    """Amazon Managed Service for Prometheus in one region, USD as strings: per metric sample ingested and per GB-month
    stored, each None where no price was found, `missing` then saying why. No AWS-published rate was found for
    them offline (docs/cost.md, "The meter"), so only a preview's Price List look-ups fill them
    (components/live_prices.py)."""

    per_sample: str | None
    per_gb_month: str | None
    missing: str = ""


# Offline: the rates found for Amazon Managed Service for Prometheus are third parties' (research for issue 47, 5.4).
UNPRICED_OFFLINE = "unpriced offline: no AWS source here"


@dataclass(frozen=True)
class PriceBook:
    """Prices of one region on one day. Each group of prices names its own region: a live preview reads the
    instances' prices in the stack's region but the other prices from domain/cost/prices.py, which has us-east-1's
    only."""

    region: str  # the region of the instances' on-demand prices
    live: bool  # read from AWS at preview or up, rather than domain/cost/prices.py's list
    source: str  # how the instances' prices are named in tables and messages
    on_demand: Mapping[str, float]  # USD per hour by instance type, GPU and system node types alike
    # Instance types looked up without an answer, and why (the Price List API has no such product in the region).
    missing: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # USD per hour by instance type and availability zone: EC2's current spot price; empty offline.
    spot: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({}))
    # The EBS, ELB and EKS prices and their region: domain/cost/prices.py's, us-east-1 (no other region is in that
    # file).
    others_region: str = prices.REGION
    gp3: Gp3 = Gp3(prices.GP3_USD_PER_GB_MONTH, prices.GP3_USD_PER_IOPS_MONTH, prices.GP3_USD_PER_MIBPS_MONTH)
    clb_per_hour: str = prices.CLB_USD_PER_HOUR
    eks_per_hour: Mapping[str, str] = field(default_factory=lambda: prices.EKS_USD_PER_CLUSTER_HOUR)
    # The metrics workspace's prices, in `region` where read live.
    meter: MeterPrices = MeterPrices(None, None, UNPRICED_OFFLINE)

    @property
    def prices_from(self) -> str:
        """The regions of the prices, as the `cost` stack output's pricesFrom says it."""
        instances = self.region if self.live else f"{self.region} list"
        if self.live and self.others_region != self.region:
            return f"{instances} (instances); {self.others_region} list (EBS, load balancer, EKS)"
        return instances

    def label(self, stack_region: str) -> str:
        """Where the prices are from, beside the stack's region, as every table and output that shows a figure
        says it."""
        instances = f"instances: {self.source}"
        if self.region != stack_region:
            instances += f" (stack in {stack_region}; `pulumi preview` prices {stack_region})"
        others = f"EBS, load balancer, EKS: {self.others_region} list"
        if self.others_region != stack_region:
            others += f" (stack in {stack_region}, not priced there)"
        return f"prices: {instances}; {others}"


LIST = PriceBook(
    region=prices.REGION,
    live=False,
    source=prices.PRICE_SOURCE,
    on_demand=MappingProxyType({**prices.ON_DEMAND_USD_PER_HOUR, **prices.SYSTEM_NODE_USD_PER_HOUR}),
)
