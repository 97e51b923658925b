"""The EBS gp3, Classic Load Balancer and EKS control plane prices of the stack's region, read from the AWS Price List
API at `pulumi preview` and `pulumi up` (components/live_prices.py asks, through its us-east-1 pricing provider).

Each price is one product, filtered on `regionCode` and attributes rather than on a usage type (usage types carry a
region prefix, e.g. EU-, APN2-, none in us-east-1). A group of prices is read whole or not at all: a look-up that
finds no product or several (the provider refuses both), or a product without one price in the expected unit, leaves
the whole group at domain/cost/prices.py's us-east-1 list, its source naming the price and why: a missing price never
fails the preview, and a group never mixes two regions.

The filters are third parties' readings of AWS's offer files (REPORTED, not read at AWS here):
- gp3: AmazonEC2, `volumeApiName` "gp3" in three product families, one price each: "Storage" in GB-Mo (usage type
  EBS:VolumeUsage.gp3), "System Operation" in IOPS-Mo (EBS:VolumeP-IOPS.gp3, the IOPS above what every gp3 volume
  includes) and "Provisioned Throughput" in GiBps-mo (EBS:VolumeP-Throughput.gp3, the throughput above it). The
  families and usage types: infracost/infracost, commit da0a586, internal/resources/aws/ebs_volume.go
  (storageCostComponent, provisionedIOPSCostComponent, provisionedThroughputCostComponent, whose price filter is unit
  "GiBps-mo"). The three rows with their units (GB-Mo 0.080, IOPS-Mo 0.005, GiBps-mo 40.960 in us-east-1): a third
  party's fixture of AmazonEC2's index.csv (search index id 60800489960); another's Price List sync rule says of the
  throughput "Listed as $40.96 per GiBps-month (= $0.04 per MiBps-month) ... Verified against the live us-east-1
  Price List (2026-08)" (search index id 66574410590). gpulab provisions throughput in MiB/s: the GiBps-mo rate / 1024.
- Classic Load Balancer: AWSELB, productFamily "Load Balancer", told apart by `groupDescription`: "LoadBalancer hourly
  usage by Classic Load Balancer" (Hrs) and "Data processed by Classic Load Balancer" (GB). A third party's index of
  the AWSELB offer file keys the Classic Load Balancer's two prices by exactly these (family "Load Balancer",
  operation "LoadBalancing"; search index id 54141180143); turbot/steampipe-mod-aws-thrifty asked the hourly one by
  that groupDescription (tags v0.26+beta.1 controls/ec2.sp and v1.2.0-rc.2 controls/ec2.pp, control
  ec2_classic_lb_unused; removed later with all its price look-ups), several others the data processed by its own
  (e.g. search index id 65850803577); infracost (same commit, internal/resources/aws/elb.go) names their usage types
  LoadBalancerUsage and DataProcessing-Bytes in family "Load Balancer"; AWS's "Understand codes for Elastic Load
  Balancing in billing and usage reports" (stored copy, search index id 59057544828) lists for Classic Load Balancers
  `{{region}}-DataProcessing-Bytes`, "The data processed", GB. The `group` attribute is not used: the sources disagree
  on it (steampipe's "ELB:Balancing" on the hourly product, a third party's test "ELB:Balancer" on the ALB, NLB and
  GWLB hourly ones, search index id 57912214174).
- EKS cluster-hour: AmazonEKS, productFamily "Compute" (infracost, same commit, internal/resources/aws/eks_cluster.go),
  `operation` "CreateOperation" for the cluster-hour (usage type AmazonEKS-Hours:perCluster) and "ExtendedSupport" for
  extended support (AmazonEKS-Hours:extendedSupport), as a third party's design note lists them (search index id
  36892200377). Extended support's product is what is added to the cluster-hour: 0.50 USD beside the 0.10 in several
  third parties' readings of the offer, AWS's blog saying "a total of $0.60" (domain/cost/prices.py); so the extended
  price here is the two added up.
"""

import json
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from types import MappingProxyType
from typing import Any, NamedTuple

from domain.cost.price_book import CLB_LIST, EKS_LIST, GP3_LIST, Gp3, Origin

LookUp = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | str]]


class Product(NamedTuple):
    """One Price List product: its offer, the attributes that single it out in a region, the unit of its price, and
    its name in messages."""

    service: str
    attributes: dict[str, str]
    unit: str
    name: str


GP3_STORAGE = Product("AmazonEC2", {"productFamily": "Storage", "volumeApiName": "gp3"}, "GB-Mo", "gp3 GB-month")
GP3_IOPS = Product(
    "AmazonEC2", {"productFamily": "System Operation", "volumeApiName": "gp3"}, "IOPS-Mo", "gp3 IOPS-month"
)
GP3_THROUGHPUT = Product(
    "AmazonEC2", {"productFamily": "Provisioned Throughput", "volumeApiName": "gp3"}, "GiBps-mo", "gp3 GiB/s-month"
)
CLB_HOUR = Product(
    "AWSELB",
    {"productFamily": "Load Balancer", "groupDescription": "LoadBalancer hourly usage by Classic Load Balancer"},
    "Hrs",
    "Classic Load Balancer-hour",
)
CLB_DATA = Product(
    "AWSELB",
    {"productFamily": "Load Balancer", "groupDescription": "Data processed by Classic Load Balancer"},
    "GB",
    "Classic Load Balancer GB processed",
)
EKS_CLUSTER_HOUR = Product(
    "AmazonEKS", {"productFamily": "Compute", "operation": "CreateOperation"}, "Hrs", "EKS cluster-hour"
)
EKS_EXTENDED_ADDED = Product(
    "AmazonEKS", {"productFamily": "Compute", "operation": "ExtendedSupport"}, "Hrs", "EKS extended support-hour"
)
MIBPS_PER_GIBPS = 1024


def filters(wanted: dict[str, str], region: str) -> list[dict[str, str]]:
    """The Price List API filters of one product in `region`."""
    return [{"field": field, "value": value} for field, value in {"regionCode": region, **wanted}.items()]


def one_rate(product: str, unit: str) -> str | None:
    """The USD rate of a Price List product's one on-demand price dimension in `unit`; None where it has none or
    several (tiers), which this program does not pick among."""
    terms = json.loads(product)["terms"]["OnDemand"]
    rates = [
        d["pricePerUnit"]["USD"] for t in terms.values() for d in t["priceDimensions"].values() if d["unit"] == unit
    ]
    return f"{Decimal(rates[0]).normalize():f}" if len(rates) == 1 else None


async def rate(look_up: LookUp, wanted: Product, region: str) -> tuple[str | None, str]:
    """The rate of one product in `region`, or None and why there is none."""
    args = {"serviceCode": wanted.service, "filters": filters(wanted.attributes, region)}
    answer = await look_up("aws:pricing/getProduct:getProduct", args)
    if isinstance(answer, str):
        return None, answer
    found = one_rate(answer["result"], wanted.unit)
    return found, "" if found is not None else f"the product has no one {wanted.unit} price"


async def rates(look_up: LookUp, group: Sequence[Product], region: str) -> tuple[list[str] | None, str]:
    """The rates of every product of a group in `region`, or None and why one of them has none."""
    found: list[str] = []
    for wanted in group:
        each, why = await rate(look_up, wanted, region)
        if each is None:
            return None, f"{wanted.name}: {why}"
        found.append(each)
    return found, ""


def _fallback(listed: Origin, region: str, why: str) -> Origin:
    return Origin(listed.region, False, f"{listed.source}; no {region} price from the AWS Price List API ({why})")


async def regional_prices(look_up: LookUp, region: str, today: str) -> dict[str, Any]:
    """The PriceBook fields of the EBS, load balancer and EKS prices in `region` (gp3, gp3_from, clb_per_hour,
    clb_per_gb, clb_from, eks_per_hour, eks_from): each group read from the Price List API, else the us-east-1
    list's, saying why."""
    book: dict[str, Any] = {}
    live = f"of {today}, AWS Price List API"
    gp3, why = await rates(look_up, (GP3_STORAGE, GP3_IOPS, GP3_THROUGHPUT), region)
    if gp3 is None:
        book["gp3_from"] = _fallback(GP3_LIST, region, why)
    else:
        storage, iops, per_gibps = gp3
        per_mibps = f"{(Decimal(per_gibps) / MIBPS_PER_GIBPS).normalize():f}"
        book["gp3"] = Gp3(storage, iops, per_mibps)
        book["gp3_from"] = Origin(
            region, True, f"{region} gp3 GB-month, IOPS-month and MiB/s-month (GiB/s-month / 1024) {live}"
        )
    clb, why = await rates(look_up, (CLB_HOUR, CLB_DATA), region)
    if clb is None:
        book["clb_from"] = _fallback(CLB_LIST, region, why)
    else:
        book["clb_per_hour"], book["clb_per_gb"] = clb
        book["clb_from"] = Origin(region, True, f"{region} Classic Load Balancer-hour and GB processed {live}")
    eks, why = await rates(look_up, (EKS_CLUSTER_HOUR, EKS_EXTENDED_ADDED), region)
    if eks is None:
        book["eks_from"] = _fallback(EKS_LIST, region, why)
    else:
        standard, added = eks
        extended = f"{(Decimal(standard) + Decimal(added)).normalize():f}"
        book["eks_per_hour"] = MappingProxyType({"standard": standard, "extended": extended})
        book["eks_from"] = Origin(
            region, True, f"{region} EKS cluster-hour, extended support's added to it for the extended price, {live}"
        )
    return book
