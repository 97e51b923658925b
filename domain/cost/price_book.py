"""The prices a run of the program figures with, and the region they are from.

Offline (the render, the tests) that is LIST: the us-east-1 list prices of domain/cost/prices.py, whatever the stack's
region. At `pulumi preview` and `pulumi up` the instance prices come from the AWS Price List API for the stack's
region and EC2's current spot prices for its zones (components/live_prices.py), and so do the EBS gp3 storage, the
Classic Load Balancer-hour and the EKS control plane where the API has one product for them (components/
regional_prices.py), else the us-east-1 list's, saying why. Each figure says which: a price is never taken from
another region without saying so, and a type without a price in the region is named, never priced.
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

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


@dataclass(frozen=True)
class Origin:
    """Where one group of prices is from: its region, whether AWS was asked at this run (else the us-east-1 list of
    domain/cost/prices.py), and its source as tables and outputs name it (with why, where the list stands in for the
    stack's region)."""

    region: str
    live: bool
    source: str

    @property
    def where(self) -> str:
        return self.region if self.live else f"{self.region} list"


# The EBS, load balancer and EKS prices offline: domain/cost/prices.py's, us-east-1 (no other region is in that file).
GP3_LIST = Origin(prices.REGION, False, prices.DISK_PRICE_SOURCE)
CLB_LIST = Origin(prices.REGION, False, prices.CLB_PRICE_SOURCE)
EKS_LIST = Origin(prices.REGION, False, prices.EKS_PRICE_SOURCE)


@dataclass(frozen=True)
class SpotPrice:
    """EC2's current spot price of one instance type in one availability zone (DescribeSpotPriceHistory's latest
    Linux/UNIX entry, as pulumi-aws's aws.ec2.get_spot_price answers it): USD per hour, and when EC2 published it."""

    usd: float
    published: str  # EC2's timestamp of the price (get_spot_price's spotPriceTimestamp)


# How a spot node is priced without a spot price: at on-demand, as Karpenter's AWS provider prices spot until its
# first spot price update (github.com/aws/karpenter-provider-aws v1.14.1 pkg/providers/pricing/pricing.go, Reset).
SPOT_AT_ON_DEMAND = (
    "priced at on-demand, as Karpenter prices spot until its first spot price update (aws/karpenter-provider-aws "
    "v1.14.1 pkg/providers/pricing/pricing.go Reset)"
)


# Offline: the rates found for Amazon Managed Service for Prometheus are third parties' (research for issue 47, 5.4).
UNPRICED_OFFLINE = "unpriced offline: no AWS source here"


@dataclass(frozen=True)
class Where:
    """Where a priced line's prices are from, as each such line of the outputs names them: the regions and the
    sources, saying so when they are not the stack's region's."""

    region: str
    source: str


@dataclass(frozen=True)
class PriceBook:
    """Prices of one region on one day. Each group of prices names its own region (Origin): a live preview reads
    each group in the stack's region where the Price List API answers, else that group is domain/cost/prices.py's,
    which has us-east-1's only."""

    region: str  # the region of the instances' on-demand prices
    live: bool  # read from AWS at preview or up, rather than domain/cost/prices.py's list
    source: str  # how the instances' prices are named in tables and messages
    on_demand: Mapping[str, float]  # USD per hour by instance type, GPU and system node types alike
    # Instance types looked up without an answer, and why (the Price List API has no such product in the region).
    missing: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # EC2's current spot price by instance type and availability zone; empty offline.
    spot: Mapping[str, Mapping[str, SpotPrice]] = field(default_factory=lambda: MappingProxyType({}))
    # The EBS, ELB and EKS prices, each group with where it is from.
    gp3: Gp3 = Gp3(prices.GP3_USD_PER_GB_MONTH, prices.GP3_USD_PER_IOPS_MONTH, prices.GP3_USD_PER_MIBPS_MONTH)
    gp3_from: Origin = GP3_LIST
    clb_per_hour: str = prices.CLB_USD_PER_HOUR
    clb_per_gb: str = prices.CLB_USD_PER_GB  # USD per GB the load balancer processes
    clb_from: Origin = CLB_LIST
    eks_per_hour: Mapping[str, str] = field(default_factory=lambda: prices.EKS_USD_PER_CLUSTER_HOUR)
    eks_from: Origin = EKS_LIST
    # The metrics workspace's prices, in `region` where read live.
    meter: MeterPrices = MeterPrices(None, None, UNPRICED_OFFLINE)

    def origins(self, always_on: bool = True) -> dict[str, Origin]:
        """Where each group of prices is from, by the name tables give it: the instances' and the disks', and with
        `always_on` also the load balancer's and the control plane's."""
        groups = {"instances": Origin(self.region, self.live, self.source), "EBS": self.gp3_from}
        if always_on:
            groups |= {"load balancer": self.clb_from, "EKS": self.eks_from}
        return groups

    def where(self, stack_region: str, groups: Collection[str]) -> Where:
        """The regions and sources of a line priced from `groups` (names of origins()): one region, or each with its
        groups; a region other than the stack's is said, with why."""
        origins = {name: origin for name, origin in self.origins().items() if name in groups}
        by_region: dict[str, list[str]] = {}
        for name, origin in origins.items():
            by_region.setdefault(origin.region, []).append(name)
        region = (
            next(iter(by_region))
            if len(by_region) == 1
            else "; ".join(f"{where} ({', '.join(names)})" for where, names in by_region.items())
        )
        sources = [origin.source for origin in origins.values()]
        elsewhere = [r for r in by_region if r != stack_region]
        if elsewhere and not self.live:
            sources.append(
                f"priced from {' and '.join(elsewhere)}, not {stack_region}: gpulab has no {stack_region} prices "
                f"offline (`pulumi preview` prices them in {stack_region})"
            )
        elif elsewhere:
            borrowed = [n for n, o in origins.items() if o.region != stack_region]
            sources.append(f"{', '.join(borrowed)} priced from the {' and '.join(elsewhere)} list, not {stack_region}")
        return Where(region, "; ".join(sources))

    def meter_where(self) -> dict[str, str | None]:
        """The region and source of the metrics workspace's prices: the stack's region's Price List rates at a
        preview (never another region's), none offline; and why a rate is missing."""
        priced = f"{self.region}, AWS Price List API" if self.live else ""
        return {
            "region": self.region if self.live else None,
            "source": "; ".join(s for s in (priced, self.meter.missing) if s),
        }

    def spot_line(self, instance_type: str, stack_region: str) -> dict[str, Any]:
        """What a spot node of `instance_type` costs an hour, as `labs.<lab>.cost.spot` says it: `usdPerHour`,
        `pricedAs` (`spot` or `on-demand`), `region`, `source`, and `zones` (EC2's price in each zone it has one).

        Of several zones, the highest price: Karpenter launches spot with EC2 Fleet's price-capacity-optimized
        strategy (aws/karpenter-provider-aws v1.14.1 pkg/providers/instance/types.go Build, 232-235; capacity-
        optimized-prioritized where a price NodeOverlay applies, instance.go 375-377), which weighs capacity as well as
        price, so a node may land in any of the zones. Without a spot price (offline, or EC2 has none for the type in
        the stack's zones) the node is priced at on-demand, labelled so, with the on-demand price's region and source
        (the us-east-1 list's offline, said so where the stack is elsewhere)."""
        zones = self.spot.get(instance_type, {})
        if not zones:
            why = "no spot price offline" if not self.live else f"no spot price from EC2 in {self.region}'s zones"
            on_demand = self.where(stack_region, ("instances",))
            return {
                "usdPerHour": self.on_demand.get(instance_type),
                "pricedAs": "on-demand",
                "region": on_demand.region,
                "source": f"{why}: {SPOT_AT_ON_DEMAND}; {on_demand.source}",
                "zones": {},
            }
        zone, dearest = max(zones.items(), key=lambda item: (item[1].usd, item[0]))
        return {
            "usdPerHour": dearest.usd,
            "pricedAs": "spot",
            # EC2 answers for the zones of the stack's subnets: the stack's region, which a live book's is.
            "region": self.region,
            "source": f"EC2 DescribeSpotPriceHistory, {zone}, {dearest.published} (the highest of its zones)",
            "zones": {z: price.usd for z, price in sorted(zones.items())},
        }

    @property
    def prices_from(self) -> str:
        """The regions of the prices, as the `cost` stack output's pricesFrom says it: one region, or each region
        with the groups priced from it."""
        by_where: dict[str, list[str]] = {}
        for name, origin in self.origins().items():
            by_where.setdefault(origin.where, []).append(name)
        if len(by_where) == 1:
            return next(iter(by_where))
        return "; ".join(f"{where} ({', '.join(names)})" for where, names in by_where.items())

    def label(self, stack_region: str) -> str:
        """Where the prices are from, beside the stack's region, as every table and output that shows a figure
        says it."""
        instances = f"instances: {self.source}"
        if self.region != stack_region:
            instances += f" (stack in {stack_region}; `pulumi preview` prices {stack_region})"
        others = [(n, o) for n, o in self.origins().items() if n != "instances"]
        by_where: dict[str, list[str]] = {}
        for name, origin in others:
            by_where.setdefault(origin.where, []).append(name)
        said = [
            f"{', '.join(names)}: {where}"
            + (f" (stack in {stack_region}, not priced there)" if where.split()[0] != stack_region else "")
            for where, names in by_where.items()
        ]
        return f"prices: {instances}; {'; '.join(said)}"


LIST = PriceBook(
    region=prices.REGION,
    live=False,
    source=prices.PRICE_SOURCE,
    on_demand=MappingProxyType({**prices.ON_DEMAND_USD_PER_HOUR, **prices.SYSTEM_NODE_USD_PER_HOUR}),
)
