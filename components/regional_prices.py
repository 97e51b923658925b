"""The EBS gp3, Classic Load Balancer and EKS control plane prices of the stack's region, read from the AWS Price List
API at `pulumi preview` and `pulumi up` (components/live_prices.py asks, through its us-east-1 pricing provider).

Each group is one product per price, filtered on `regionCode` and attributes rather than on a usage type (usage types
carry a region prefix, e.g. EU-, APN2-, none in us-east-1). A look-up that finds no product or several (the provider
refuses both), or a product without one price in the expected unit, leaves that group at domain/cost/prices.py's
us-east-1 list, its source saying so and why: a missing price never fails the preview.

The filters are third parties' readings of AWS's offer files (REPORTED, not read at AWS here):
- gp3 storage: AmazonEC2, productFamily "Storage", volumeApiName "gp3" (infracost/infracost, commit da0a586,
  internal/resources/aws/ebs_volume.go storageCostComponent; the same filter in several other stored codebases);
  unit GB-Mo. Only the storage is read: the IOPS and throughput above what every gp3 volume includes
  (domain/capacity/disks.py) stay at the us-east-1 list, said in the source.
- Classic Load Balancer-hour: AWSELB, productFamily "Load Balancer" (infracost, same commit, internal/resources/aws/
  elb.go lbCostComponent: family "Load Balancer", usage type LoadBalancerUsage, beside DataProcessing-Bytes in the
  same family), told apart from the data processed by `group` "ELB:Balancer", the group of ELB's hourly products (a
  third party's test of the AWSELB offer, search index id 57912214174, shows it on the ALB, NLB and GWLB hourly
  products; on the Classic one it is not confirmed). Unit Hrs.
- EKS cluster-hour: AmazonEKS, productFamily "Compute" (infracost, same commit, internal/resources/aws/eks_cluster.go),
  `operation` "CreateOperation" for the cluster-hour (usage type AmazonEKS-Hours:perCluster) and "ExtendedSupport" for
  extended support (AmazonEKS-Hours:extendedSupport), as a third party's design note lists them (search index id
  36892200377). Extended support's product is what is added to the cluster-hour: 0.50 USD beside the 0.10 in several
  third parties' readings of the offer, AWS's blog saying "a total of $0.60" (domain/cost/prices.py); so the extended
  price here is the two added up.
"""

import json
from collections.abc import Awaitable, Callable
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from domain.cost import prices
from domain.cost.price_book import CLB_LIST, EKS_LIST, GP3_LIST, Gp3, Origin

LookUp = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | str]]

GP3_STORAGE = ("AmazonEC2", {"productFamily": "Storage", "volumeApiName": "gp3"}, "GB-Mo")
CLB_HOUR = ("AWSELB", {"productFamily": "Load Balancer", "group": "ELB:Balancer"}, "Hrs")
EKS_CLUSTER_HOUR = ("AmazonEKS", {"productFamily": "Compute", "operation": "CreateOperation"}, "Hrs")
EKS_EXTENDED_ADDED = ("AmazonEKS", {"productFamily": "Compute", "operation": "ExtendedSupport"}, "Hrs")


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


async def rate(look_up: LookUp, wanted: tuple[str, dict[str, str], str], region: str) -> tuple[str | None, str]:
    """The rate of one product in `region`, or None and why there is none."""
    service, attributes, unit = wanted
    args = {"serviceCode": service, "filters": filters(attributes, region)}
    answer = await look_up("aws:pricing/getProduct:getProduct", args)
    if isinstance(answer, str):
        return None, answer
    found = one_rate(answer["result"], unit)
    return found, "" if found is not None else f"the product has no one {unit} price"


def _fallback(listed: Origin, region: str, why: str) -> Origin:
    return Origin(listed.region, False, f"{listed.source}; no {region} price from the AWS Price List API ({why})")


async def regional_prices(look_up: LookUp, region: str, today: str) -> dict[str, Any]:
    """The PriceBook fields of the EBS, load balancer and EKS prices in `region` (gp3, gp3_from, clb_per_hour,
    clb_from, eks_per_hour, eks_from): each read from the Price List API, else the us-east-1 list's, saying why."""
    book: dict[str, Any] = {}
    live = f"of {today}, AWS Price List API"
    storage, why = await rate(look_up, GP3_STORAGE, region)
    if storage is None:
        book["gp3_from"] = _fallback(GP3_LIST, region, why)
    else:
        book["gp3"] = Gp3(storage, prices.GP3_USD_PER_IOPS_MONTH, prices.GP3_USD_PER_MIBPS_MONTH)
        book["gp3_from"] = Origin(
            region, True, f"{region} gp3 GB-month {live} (IOPS and MiB/s above the included: {prices.REGION} list)"
        )
    hour, why = await rate(look_up, CLB_HOUR, region)
    if hour is None:
        book["clb_from"] = _fallback(CLB_LIST, region, why)
    else:
        book["clb_per_hour"] = hour
        book["clb_from"] = Origin(region, True, f"{region} Classic Load Balancer-hour {live}")
    (standard, why_standard), (added, why_added) = [
        await rate(look_up, wanted, region) for wanted in (EKS_CLUSTER_HOUR, EKS_EXTENDED_ADDED)
    ]
    if standard is None or added is None:
        book["eks_from"] = _fallback(EKS_LIST, region, why_standard or why_added)
    else:
        extended = f"{(Decimal(standard) + Decimal(added)).normalize():f}"
        book["eks_per_hour"] = MappingProxyType({"standard": standard, "extended": extended})
        book["eks_from"] = Origin(
            region, True, f"{region} EKS cluster-hour, extended support's added to it for the extended price, {live}"
        )
    return book
