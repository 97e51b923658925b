"""gpulab:aws:Prices, the instances' prices of the stack's region, read from AWS at `pulumi preview` and `pulumi up`.

On-demand prices come from the AWS Price List API (`aws.pricing.get_product`, service AmazonEC2), whose endpoint is
in us-east-1 whatever the stack's region: the look-ups go through a provider of their own pinned there, and filter on
the stack's region (`regionCode`). Spot prices are EC2's current ones (`aws.ec2.get_spot_price`) for each spot lab's
types in each zone of the stack's private subnets. A type the Price List API has no price for in the region, or
whose look-up fails (permissions, throttling), is named with the provider's words and never priced; the figures then
say so (domain/cost/lab_cost.py), and a lab with a cap is refused (program.py). The EBS, load balancer and EKS
prices of the region are asked through the same provider (components/regional_prices.py).

The render and the tests run offline and price from domain/cost/prices.py's us-east-1 list instead
(domain/cost/price_book.py LIST); tests/test_live_prices.py answers these look-ups with mocks.
"""

import json
from collections.abc import Sequence
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pulumi
import pulumi_aws as aws

from components.regional_prices import regional_prices
from domain.cost.price_book import MeterPrices, PriceBook, SpotPrice
from domain.time import utc

# The Price List API's endpoint (AWS Price List API, "Endpoints": us-east-1, eu-central-1 and ap-south-1; the
# pulumi-aws docs of aws.pricing.get_product: "only available in a us-east-1 or ap-south-1 provider").
PRICING_REGION = "us-east-1"
# The product of a Linux instance on shared tenancy, billed on demand, without pre-installed software or licences:
# what Karpenter and the labs' nodes run. Attribute names as the AmazonEC2 offer files write them; one product
# matches (get_product fails on none and on several).
_LINUX_ON_DEMAND = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
    "marketoption": "OnDemand",
    "operation": "RunInstances",
}
# The spot price of Linux instances (EC2 DescribeSpotPriceHistory's product description). pulumi-aws 7.51.1
# aws.ec2.get_spot_price (pulumi_aws/ec2/get_spot_price.py, CONFIRMED in the pinned package): "Information about most
# recent Spot Price for a given EC2 instance", answering spotPrice and spotPriceTimestamp ("The timestamp at which the
# Spot Price value was published"); domain/cost/price_book.py spot_line names both.
SPOT_PRODUCT = "Linux/UNIX"
GET_PRODUCT = "aws:pricing/getProduct:getProduct"
# Amazon Managed Service for Prometheus (offer AmazonPrometheus): its Price List usage types carry a prefix of the
# region's. REPORTED, not read at AWS here: USE1-AMP:MetricSampleCount and USE1-AMP:MetricStorageByteHrs in us-east-1
# (AWS's AmazonPrometheus offer file 20260911124459, as a third party extracted it:
# patibandlavenkatamanideep/pharma-analytics-copilot infra/aws-staging/cost/prices-us-east-1.json, tiers in
# "Metric Datapoints" and "GB-Mo"), EU-AMP:... in eu-west-1 (a 2021 design note in the search index, research for
# issue 47 section 5.4). A region without a known prefix is not priced, and says so.
AMP_SERVICE = "AmazonPrometheus"
AMP_USAGE_PREFIX = {"us-east-1": "USE1", "eu-west-1": "EU"}
AMP_SAMPLES, AMP_STORAGE = "AMP:MetricSampleCount", "AMP:MetricStorageByteHrs"
GET_SPOT_PRICE = "aws:ec2/getSpotPrice:getSpotPrice"


def product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """The Price List API filters of one instance type's on-demand Linux price in `region`."""
    wanted = {"instanceType": instance_type, "regionCode": region, **_LINUX_ON_DEMAND}
    return [{"field": field, "value": value} for field, value in wanted.items()]


def hourly_usd(product: str) -> float:
    """The USD per hour of a Price List product (get_product's `result`, one product's JSON): its one on-demand
    term's one hourly price dimension."""
    terms = json.loads(product)["terms"]["OnDemand"]
    (dimension,) = [d for term in terms.values() for d in term["priceDimensions"].values() if d["unit"] == "Hrs"]
    return float(Decimal(dimension["pricePerUnit"]["USD"]))


def amp_filters(usage: str, region: str) -> list[dict[str, str]] | None:
    """The Price List API filters of one AmazonPrometheus usage in `region`; None where its prefix is not known."""
    prefix = AMP_USAGE_PREFIX.get(region)
    if prefix is None:
        return None
    return [{"field": "regionCode", "value": region}, {"field": "usagetype", "value": f"{prefix}-{usage}"}]


def dearest_rate(product: str) -> str:
    """The highest USD rate among a tiered Price List product's on-demand price dimensions: its first paid tier (the
    tiers beyond it cost less per unit, the free tier nothing), so that every unit at it is an upper bound."""
    terms = json.loads(product)["terms"]["OnDemand"]
    rates = [Decimal(d["pricePerUnit"]["USD"]) for term in terms.values() for d in term["priceDimensions"].values()]
    return str(max(rates).normalize())


class Prices(pulumi.ComponentResource):
    """The price book of the stack's region: `book` resolves once every look-up has answered or failed."""

    def __init__(
        self,
        name: str,
        region: str,
        instance_types: Sequence[str],
        spot_types: Sequence[str],
        subnet_ids: Sequence[str],
        meter: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("gpulab:aws:Prices", name, None, opts)
        pricing = aws.Provider(f"{name}-pricing", region=PRICING_REGION, opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.InvokeOptions(parent=self)
        zones = [aws.ec2.get_subnet_output(id=subnet, opts=child).availability_zone for subnet in subnet_ids]
        today = utc.today()

        # invoke_async rather than get_product_output: a failed invoke Output fails the whole program when it ends
        # (the SDK awaits every Output), and a type without a price must be said, not fail the preview.
        async def look_up(token: str, args: dict[str, Any], opts: pulumi.InvokeOptions) -> dict[str, Any] | str:
            """The invoke's answer, or the provider's words when it refused."""
            try:
                answer: dict[str, Any] = await pulumi.runtime.invoke_async(token, args, opts)
            except Exception as error:  # the provider's refusal: no such product, or no permission
                return str(error)
            return answer

        async def amp() -> MeterPrices:
            """The metrics workspace's rates per sample ingested and per GB-month stored, in the stack's region."""
            rates: dict[str, str] = {}
            missing: list[str] = []
            on_pricing = pulumi.InvokeOptions(provider=pricing, parent=self)
            for usage in (AMP_SAMPLES, AMP_STORAGE):
                filters = amp_filters(usage, region)
                if filters is None:
                    return MeterPrices(None, None, f"no Price List usage type known here for {region}")
                answer = await look_up(GET_PRODUCT, {"serviceCode": AMP_SERVICE, "filters": filters}, on_pricing)
                if isinstance(answer, str):
                    missing.append(f"{usage}: no price in {region} from the AWS Price List API ({answer})")
                else:
                    rates[usage] = dearest_rate(answer["result"])
            return MeterPrices(rates.get(AMP_SAMPLES), rates.get(AMP_STORAGE), "; ".join(missing))

        async def book() -> PriceBook:
            on_demand: dict[str, float] = {}
            missing: dict[str, str] = {}
            on_pricing = pulumi.InvokeOptions(provider=pricing, parent=self)
            for t in sorted(set(instance_types)):
                args = {"serviceCode": "AmazonEC2", "filters": product_filters(t, region)}
                answer = await look_up(GET_PRODUCT, args, on_pricing)
                if isinstance(answer, str):
                    missing[t] = f"no on-demand price in {region} from the AWS Price List API ({answer})"
                else:
                    on_demand[t] = hourly_usd(answer["result"])
            spot: dict[str, dict[str, SpotPrice]] = {}
            found_zones = {zone for zone in [await z.future() for z in zones] if zone}
            for zone in sorted(found_zones):
                for t in sorted(set(spot_types)):
                    spot_args = {
                        "instanceType": t,
                        "availabilityZone": zone,
                        "filters": [{"name": "product-description", "values": [SPOT_PRODUCT]}],
                    }
                    found = await look_up(GET_SPOT_PRICE, spot_args, child)
                    # A type EC2 does not offer in a zone has no spot price there.
                    if not isinstance(found, str):
                        price = SpotPrice(float(Decimal(found["spotPrice"])), found["spotPriceTimestamp"])
                        spot.setdefault(t, {})[zone] = price
            return PriceBook(
                region=region,
                live=True,
                source=f"{region} on-demand prices of {today}, AWS Price List API",
                on_demand=MappingProxyType(on_demand),
                missing=MappingProxyType(missing),
                spot=MappingProxyType({t: MappingProxyType(z) for t, z in spot.items()}),
                meter=await amp() if meter else MeterPrices(None, None, "no gpulab:metrics"),
                **await regional_prices(lambda token, args: look_up(token, args, on_pricing), region, str(today)),
            )

        self.book: pulumi.Output[PriceBook] = pulumi.Output.from_input(book())  # type: ignore[arg-type]
        self.register_outputs({})
