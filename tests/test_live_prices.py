"""Prices of the stack's region at `pulumi preview`: the Price List and spot look-ups (components/live_prices.py,
components/regional_prices.py) answered by mocks for a eu-west-1 stack, and a type without a price there named, never
priced from another region; an EBS, load balancer or EKS price missing there is the us-east-1 list's, said so.
The mocked Price List API holds several products per type and honours the service code and every filter, as AWS
does: a filter the program loses (capacitystatus, say) matches two products, and the type goes unpriced."""

import json
import re

import grpc
import pulumi
import pytest

from components import regional_prices
from domain.cost.price_book import LIST
from domain.cost.stack_cost import PARTS
from render import harness
from tests.conftest import BASE, as_cli_config, stack_values
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab

GET_PRODUCT = "aws:pricing/getProduct:getProduct"
GET_SPOT_PRICE = "aws:ec2/getSpotPrice:getSpotPrice"
# What the mocked Price List API holds for eu-west-1 (made-up amounts, unlike any us-east-1 list price).
EU_WEST_1 = {"g4dn.xlarge": "0.5870000000", "m7i.large": "0.1120000000", "g5.xlarge": "1.1230000000"}
# EC2's current spot prices of g5.xlarge per eu-west-1 zone (made-up amounts, each zone its own) and when published.
SPOT = {"g5.xlarge": {"eu-west-1a": "0.4000", "eu-west-1b": "0.4700", "eu-west-1c": "0.4350"}}
SPOT_PUBLISHED = {
    "eu-west-1a": "2026-12-01T00:00:00Z",
    "eu-west-1b": "2026-12-01T00:05:00Z",
    "eu-west-1c": "2026-12-01T00:10:00Z",
}


# The attributes of the one product components/live_prices.py asks for: a Linux instance on shared tenancy, on demand,
# no pre-installed software or licence, capacity in use. Written out here, not imported from the program: a catalogue
# built from the program's filters would lose a filter together with it.
WANTED = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
    "marketoption": "OnDemand",
    "operation": "RunInstances",
}
# Products the Price List API also has for the same type and region, each differing from the wanted one in one
# attribute (the values the AmazonEC2 offer files use), so that a query missing any one filter matches two products.
# Made-up amounts, none the wanted product's.
SIBLINGS = {
    "operatingSystem": ("Windows", "1.0000000000"),
    "tenancy": ("Dedicated", "2.0000000000"),
    "preInstalledSw": ("SQL Web", "3.0000000000"),
    "capacitystatus": ("UnusedCapacityReservation", "4.0000000000"),
    "licenseModel": ("Bring your own license", "5.0000000000"),
    "marketoption": ("Spot", "6.0000000000"),
    "operation": ("RunInstances:0002", "7.0000000000"),
}
# The EBS gp3, Classic Load Balancer and EKS control plane products of eu-west-1 the program asks for
# (components/regional_prices.py, whose sources name these attributes), as (service, attributes, made-up USD, unit).
# Written out here, not imported, for the same reason as WANTED.
REGIONAL = {
    "gp3": ("AmazonEC2", {"productFamily": "Storage", "volumeApiName": "gp3"}, "0.0970000000", "GB-Mo"),
    "gp3_iops": ("AmazonEC2", {"productFamily": "System Operation", "volumeApiName": "gp3"}, "0.0061000000", "IOPS-Mo"),
    # 46.08 USD per GiB/s-month is 0.045 per MiB/s-month.
    "gp3_throughput": (
        "AmazonEC2",
        {"productFamily": "Provisioned Throughput", "volumeApiName": "gp3"},
        "46.0800000000",
        "GiBps-mo",
    ),
    "clb": (
        "AWSELB",
        {"productFamily": "Load Balancer", "groupDescription": "LoadBalancer hourly usage by Classic Load Balancer"},
        "0.0310000000",
        "Hrs",
    ),
    "clb_data": (
        "AWSELB",
        {"productFamily": "Load Balancer", "groupDescription": "Data processed by Classic Load Balancer"},
        "0.0093000000",
        "GB",
    ),
    "eks": ("AmazonEKS", {"productFamily": "Compute", "operation": "CreateOperation"}, "0.1100000000", "Hrs"),
    "extended": ("AmazonEKS", {"productFamily": "Compute", "operation": "ExtendedSupport"}, "0.5200000000", "Hrs"),
}
# Their neighbours in the same offers, each differing in one attribute, so that losing any filter matches two or more
# (the three gp3 products differ in productFamily, the two Classic Load Balancer ones in groupDescription, the two EKS
# ones in operation already): gp2's storage and io1's IOPS; made-up ones where no real neighbour is known here (a
# Provisioned Throughput product of another volume type, the Classic Load Balancer's descriptions in another family,
# another EKS family).
REGIONAL_SIBLINGS = [
    ("AmazonEC2", {"productFamily": "Storage", "volumeApiName": "gp2"}, "8.1000000000", "GB-Mo"),
    ("AmazonEC2", {"productFamily": "System Operation", "volumeApiName": "io1"}, "8.0000000000", "IOPS-Mo"),
    ("AmazonEC2", {"productFamily": "Provisioned Throughput", "volumeApiName": "io2"}, "8.6000000000", "GiBps-mo"),
    ("AWSELB", {**REGIONAL["clb"][1], "productFamily": "Load Balancer-Application"}, "8.2000000000", "Hrs"),
    ("AWSELB", {**REGIONAL["clb_data"][1], "productFamily": "Load Balancer-Application"}, "8.3000000000", "GB"),
    ("AmazonEKS", {"productFamily": "Other", "operation": "CreateOperation"}, "8.4000000000", "Hrs"),
    ("AmazonEKS", {"productFamily": "Other", "operation": "ExtendedSupport"}, "8.5000000000", "Hrs"),
]
# What terraform-provider-aws's aws_pricing_product, which pulumi-aws's getProduct bridges, says when GetProducts
# answers with no product or with several (hashicorp/terraform-provider-aws, commit 8966abc,
# internal/service/pricing/product_data_source.go, dataSourceProductRead): it fails on both, as the mock does.
NOT_FOUND = "Pricing product query did not return any elements"
NOT_PRECISE = "Pricing product query not precise enough. Returned {} elements"


def product(attributes: dict[str, str], usd: str, unit: str = "Hrs") -> str:
    """One product as the Price List API returns it (GetProducts' PriceList entry)."""
    sku, term = "SKU1", "JRTCKXETXF"
    return json.dumps(
        {
            "product": {"sku": sku, "attributes": attributes},
            "terms": {
                "OnDemand": {
                    f"{sku}.{term}": {
                        "priceDimensions": {
                            f"{sku}.{term}.6YS6EN2CT7": {"unit": unit, "pricePerUnit": {"USD": usd}},
                        }
                    }
                }
            },
        }
    )


def catalogue(left_out: frozenset[str] = frozenset()) -> list[tuple[str, dict[str, str], str, str]]:
    """The mocked Price List API's products as (service, attributes, USD, unit): per eu-west-1 type, the wanted one
    and its SIBLINGS; the REGIONAL products but those `left_out`, with their siblings, and each also in us-east-1."""
    found = []
    for instance_type, usd in EU_WEST_1.items():
        wanted = {"instanceType": instance_type, "regionCode": "eu-west-1", **WANTED}
        found.append(("AmazonEC2", wanted, usd, "Hrs"))
        found += [("AmazonEC2", {**wanted, field: value}, amount, "Hrs") for field, (value, amount) in SIBLINGS.items()]
    regional = [p for name, p in REGIONAL.items() if name not in left_out] + REGIONAL_SIBLINGS
    for region in ("eu-west-1", "us-east-1"):
        found += [(service, {"regionCode": region, **a}, usd, unit) for service, a, usd, unit in regional]
    return found


def get_products(service: str, filters: list[dict[str, str]], left_out: frozenset[str] = frozenset()) -> str:
    """The one product of `service` whose attributes match every filter (TERM_MATCH, as the provider asks); refused
    on none and on several, as the provider refuses them."""
    matching = [
        (a, usd, unit)
        for s, a, usd, unit in catalogue(left_out)
        if s == service and all(a.get(f["field"]) == f["value"] for f in filters)
    ]
    if not matching:
        raise _Refused(NOT_FOUND)
    if len(matching) > 1:
        raise _Refused(NOT_PRECISE.format(len(matching)))
    ((attributes, usd, unit),) = matching
    return product(attributes, usd, unit)


class _Refused(grpc.RpcError):
    """How a failed invoke reaches the program: a gRPC error whose details carry the provider's message."""

    def __init__(self, message: str):
        self.message = message

    def code(self):
        return grpc.StatusCode.UNKNOWN

    def details(self):
        return self.message


# The REGIONAL products a test takes out of the mocked Price List API.
LEFT_OUT: set[str] = set()


@pytest.fixture
def market(monkeypatch):
    """Answers the look-ups for eu-west-1 and records which provider each Price List look-up used."""
    answer = harness._Mocks.call
    providers: list[str] = []
    LEFT_OUT.clear()

    def call(self, args):
        if args.token == GET_PRODUCT:
            self.invokes.append(harness.Invoke(args.token, harness.normalise(args.args)))
            providers.append(args.provider)
            found = get_products(args.args["serviceCode"], args.args["filters"], frozenset(LEFT_OUT))
            return {"result": found}, []
        if args.token == GET_SPOT_PRICE:
            self.invokes.append(harness.Invoke(args.token, harness.normalise(args.args)))
            zone = args.args["availabilityZone"]
            if zone in SPOT.get(args.args["instanceType"], {}):
                price = SPOT[args.args["instanceType"]][zone]
                return {"spotPrice": price, "spotPriceTimestamp": SPOT_PUBLISHED[zone]}, []
            raise _Refused("no spot price")
        return answer(self, args)

    monkeypatch.setattr(harness._Mocks, "call", call)
    return providers


def live(values: dict) -> harness.Run:
    return harness.run("test", as_cli_config(values), live_prices=True)


def test_eu_west_1_is_priced_as_itself_via_us_east_1_pricing(market):
    run = live(BASE)
    (provider,) = [r for r in run.resources if r.type == "pulumi:providers:aws"]
    assert provider.inputs["region"] == "us-east-1"
    assert market and all(
        p.startswith(f"urn:pulumi:test::gpulab::gpulab:aws:Prices$pulumi:providers:aws::{provider.name}")
        for p in market
    )
    asked = [i.args for i in run.invokes if i.token == GET_PRODUCT]
    types = {f["value"] for a in asked for f in a["filters"] if f["field"] == "instanceType"}
    assert types == {"g4dn.xlarge", "m7i.large"}
    assert all({"field": "regionCode", "value": "eu-west-1"} in a["filters"] for a in asked)
    cost = dict(run.outputs["cost"])
    assert {part: line["region"] for part, line in cost.pop("sources").items()} == dict.fromkeys(PARTS, "eu-west-1")
    assert cost == {
        "region": "eu-west-1",
        "pricesFrom": "eu-west-1",
        # eu-west-1's gp3 20 GiB root volume: 20 x 0.097 / 730 = 0.00265753 per hour. system nodes: 2 x (0.112 +
        # 0.00265753) = 0.22931506 -> 0.2294; intro: 4 x (0.587 + 0.00265753) = 2.35863014 -> 2.3587; control plane
        # eu-west-1's 0.11; total 0.11 + 0.2294 + 2.3587
        "perHour": {"controlPlane": 0.11, "systemNodes": 0.2294, "hub": 0, "labsCeiling": 2.3587, "total": 2.6981},
        "perMonth": {
            "controlPlane": 80.3,
            "systemNodes": 167.462,
            "hub": 0,
            "labsCeiling": 1721.851,
            "total": 1969.613,
        },
    }
    intro = run.outputs["labs"]["intro"]["cost"]
    assert intro["atMostPerHour"]["usd"] == 2.3587
    source = intro["seatHour"]["source"]
    assert source.startswith("eu-west-1 on-demand prices of ") and "AWS Price List API" in source
    assert (intro["region"], intro["unpriced"]) == ("eu-west-1", [])


SPOT_LAB = {"vision": lab(["g5.xlarge", "g4dn.xlarge"], 2, capacityTypes=["spot", "on-demand"])}


def test_a_spot_node_is_priced_at_ec2s_spot_price_of_its_dearest_subnet_zone(market):
    # Two subnets the mock places in two zones (render/harness.py getSubnet), so that the zones' prices differ.
    cluster = {**BASE["gpulab:cluster"], "privateSubnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60003"]}
    run = live(stack_values(**{"gpulab:cluster": cluster, "gpulab:labs": SPOT_LAB}))
    asked = [i.args for i in run.invokes if i.token == GET_SPOT_PRICE]
    assert all(a["filters"] == [{"name": "product-description", "values": ["Linux/UNIX"]}] for a in asked)
    zones = sorted({a["availabilityZone"] for a in asked})
    assert len({SPOT["g5.xlarge"][z] for z in zones}) >= 2 and all(z.startswith("eu-west-1") for z in zones)
    # Karpenter's price-capacity-optimized spot launch may land in any zone: the highest price of the stack's zones.
    dearest = max(zones, key=lambda z: float(SPOT["g5.xlarge"][z]))
    spot = run.outputs["labs"]["vision"]["cost"]["spot"]
    assert spot["g5.xlarge"] == {
        "usdPerHour": float(SPOT["g5.xlarge"][dearest]),
        "pricedAs": "spot",
        "region": "eu-west-1",
        "source": f"EC2 DescribeSpotPriceHistory, {dearest}, {SPOT_PUBLISHED[dearest]} (the highest of its zones)",
        "zones": {z: float(SPOT["g5.xlarge"][z]) for z in zones},
    }
    # EC2 has no spot price for g4dn.xlarge in these zones (the mock refuses): on-demand, eu-west-1's, said so.
    assert (spot["g4dn.xlarge"]["pricedAs"], spot["g4dn.xlarge"]["region"]) == ("on-demand", "eu-west-1")
    assert spot["g4dn.xlarge"]["usdPerHour"] == float(EU_WEST_1["g4dn.xlarge"])
    assert spot["g4dn.xlarge"]["source"].startswith("no spot price from EC2 in eu-west-1's zones: priced at on-demand")


def test_offline_a_spot_node_is_priced_at_on_demand_and_labelled_so():
    run = harness.run("test", as_cli_config(stack_values(**{"gpulab:labs": SPOT_LAB})))
    assert not [i for i in run.invokes if i.token == GET_SPOT_PRICE]
    spot = run.outputs["labs"]["vision"]["cost"]["spot"]
    assert set(spot) == {"g5.xlarge", "g4dn.xlarge"}
    for instance_type, line in spot.items():
        assert line["pricedAs"] == "on-demand", instance_type
        assert line["usdPerHour"] == LIST.on_demand[instance_type], instance_type
        assert line["source"].startswith("no spot price offline: priced at on-demand, as Karpenter prices spot"), line
        # The us-east-1 list's on-demand price, for a eu-west-1 stack: said so.
        assert line["region"] == "us-east-1", line
        assert line["source"].endswith(
            "priced from us-east-1, not eu-west-1: gpulab has no eu-west-1 prices offline "
            "(`pulumi preview` prices them in eu-west-1)"
        ), line


def test_a_lab_without_spot_has_no_spot_line(market):
    assert live(BASE).outputs["labs"]["intro"]["cost"]["spot"] == {}


def test_a_type_unpriced_in_the_region_is_named_not_borrowed(market):
    values = stack_values(**{"gpulab:labs": {"big": lab(["g6.xlarge"], 2)}})  # us-east-1's list has g6.xlarge
    run = live(values)
    cost = run.outputs["labs"]["big"]["cost"]
    assert (cost["atMostPerHour"]["usd"], cost["unpriced"]) == (None, ["g6.xlarge"])
    assert run.outputs["cost"]["perHour"]["labsCeiling"] is None
    assert run.outputs["cost"]["perHour"]["total"] is None


def test_a_capped_lab_with_an_unpriced_type_is_refused(market):
    values = stack_values(**{"gpulab:labs": {"big": lab(["g6.xlarge"], 2, maxHourlyCost=100)}})
    refused = (
        r"gpulab:labs\.big\.maxHourlyCost: cannot be checked: g6\.xlarge has no price \(eu-west-1 .*"
        r"no on-demand price in eu-west-1 from the AWS Price List API"
    )
    with pytest.raises(pulumi.RunError, match=refused):
        live(values)


def test_a_lab_over_its_cap_at_the_regions_prices_is_refused(market):
    # The us-east-1 list's ceiling, 4 x 0.52819178 = 2.1128, is within the cap; eu-west-1's, 2.3587, is not.
    values = stack_values(**{"gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, max_gpus=4, maxHourlyCost=2.2)}})
    with pytest.raises(
        pulumi.RunError, match=r"gpulab:labs\.intro\.maxHourlyCost: the lab may cost up to 2\.3587 USD per hour"
    ):
        live(values)


def priced_lines(cost: dict) -> dict[str, dict]:
    """The lines of a lab's `cost` output that carry a figure with its region and source."""
    return {
        key: line for key, line in cost.items() if isinstance(line, dict) and {"usd", "region", "source"} <= line.keys()
    }


# A stack with every line: the hub and its load balancer, the meter, and a class with a term.
EVERY_LINE = stack_values(
    **{
        "gpulab:labs": {
            "intro": lab(
                ["g4dn.xlarge"],
                3,
                notebookImage=NOTEBOOK_IMAGE,
                classes=[
                    {"schedule": "0 10 * * mon", "duration": "1h", "term": {"start": "2027-01-11", "end": "2027-03-22"}}
                ],
            )
        },
        "gpulab:jupyterhub": HUB,
        "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
        "gpulab:metrics": {},
    }
)
# What AWS's Price List answers per region at a preview (components/live_prices.py, components/regional_prices.py):
# the instances' on-demand prices (and spot, per zone), the workspace's, the EBS volumes', the load balancer's and the
# control plane's.
LINES = {
    "seatHour",
    "rootVolumePerNodeHour",
    "atMostPerHour",
    "perLearnerHour",
    "perLearnerTerm",
    "emptyLabPerHour",
    "emptyLabTerm",
    "term",
}
# The line priced from the EBS prices alone (the others count the instances too).
DISKS_ONLY = {"rootVolumePerNodeHour"}
# The lines that count the always-on parts (the load balancer and the control plane).
ALWAYS_ON = {"perLearnerTerm", "emptyLabPerHour", "emptyLabTerm"}
TODAY = r"\d{4}-\d{2}-\d{2}"


GP3_LIVE = rf"eu-west-1 gp3 GB-month, IOPS-month and MiB/s-month \(GiB/s-month / 1024\) of {TODAY}, AWS Price List API"
CLB_LIVE = rf"eu-west-1 Classic Load Balancer-hour and GB processed of {TODAY}, AWS Price List API"


def test_every_line_of_a_eu_west_1_preview_is_priced_from_eu_west_1_with_its_sources(market):
    run = live(EVERY_LINE)
    lines = priced_lines(run.outputs["labs"]["intro"]["cost"])
    assert set(lines) == LINES
    for key, line in lines.items():
        assert line["region"] == "eu-west-1", key
        sources = [rf"eu-west-1 on-demand prices of {TODAY}, AWS Price List API", GP3_LIVE]
        if key in DISKS_ONLY:
            sources = [GP3_LIVE]
        if key in ALWAYS_ON:
            sources += [
                CLB_LIVE,
                rf"eu-west-1 EKS cluster-hour, extended support's added to it for the extended price, of {TODAY}, "
                "AWS Price List API",
            ]
        assert re.fullmatch("; ".join(sources), line["source"]), key
    cost = run.outputs["labs"]["intro"]["cost"]
    # Each class's warm-up is the lab's nodes at atMostPerHour's prices, and says so.
    assert cost["warmups"] and all(
        (w["region"], w["source"]) == (cost["atMostPerHour"]["region"], cost["atMostPerHour"]["source"])
        for w in cost["warmups"]
    )
    assert run.outputs["cost"]["pricesFrom"] == "eu-west-1"
    assert run.outputs["labs"]["intro"]["cost"]["pricesFrom"] == run.outputs["cost"]["pricesFrom"]
    # eu-west-1's mocked load balancer-hour, 0.031, plus the database volume (us-east-1's list has 0.025).
    assert run.outputs["cost"]["perHour"]["hub"] > 0.031
    # The rate of the data the hub's load balancer processes, eu-west-1's (the us-east-1 list has 0.008).
    data = run.outputs["cost"]["loadBalancerDataPerGb"]
    assert (data["usd"], data["region"]) == (0.0093, "eu-west-1")
    assert re.fullmatch(CLB_LIVE, data["source"]), data
    # The workspace's prices are asked of eu-west-1 (unpriced here: the mock's catalogue has none), never borrowed.
    assert run.outputs["cost"]["meter"]["pricesFrom"] == "eu-west-1, AWS Price List API"


def test_a_root_volume_above_gp3s_included_performance_is_priced_at_the_regions_iops_and_throughput(market):
    root = {"sizeGib": 100, "iops": 6000, "throughputMibps": 500}
    values = stack_values(**{"gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, rootVolume=root)}})
    cost = live(values).outputs["labs"]["intro"]["cost"]
    # eu-west-1's mocked gp3: 100 GiB x 0.097 + (6000 - 3000) IOPS x 0.0061 + (500 - 125) MiB/s x 46.08 / 1024
    # = 9.7 + 18.3 + 16.875 = 44.875 USD a month, / 730 hours = 0.06147 per node-hour (the us-east-1 list: 38 / 730
    # = 0.0521).
    assert (cost["rootVolumePerNodeHour"]["usd"], cost["rootVolumePerNodeHour"]["region"]) == (0.0615, "eu-west-1")
    assert re.search(GP3_LIVE, cost["rootVolumePerNodeHour"]["source"]), cost["rootVolumePerNodeHour"]


@pytest.mark.parametrize(
    ("left_out", "group", "listed", "missing"),
    [
        ({"gp3"}, "EBS", "us-east-1 gp3 list prices", "gp3 GB-month"),
        ({"gp3_iops"}, "EBS", "us-east-1 gp3 list prices", "gp3 IOPS-month"),
        ({"gp3_throughput"}, "EBS", "us-east-1 gp3 list prices", "gp3 GiB/s-month"),
        ({"clb"}, "load balancer", "aws.amazon.com/elasticloadbalancing/pricing", "Classic Load Balancer-hour"),
        ({"clb_data"}, "load balancer", "aws.amazon.com/elasticloadbalancing/pricing", "Classic Load Balancer GB"),
        ({"extended"}, "EKS", "AWS Containers blog", "EKS extended support-hour"),
    ],
)
def test_a_price_missing_in_the_region_is_the_us_east_1_lists_said_so(market, left_out, group, listed, missing):
    LEFT_OUT.update(left_out)
    run = live(EVERY_LINE)
    others = ", ".join(g for g in ("instances", "EBS", "load balancer", "EKS") if g != group)
    assert run.outputs["cost"]["pricesFrom"] == f"eu-west-1 ({others}); us-east-1 list ({group})"
    line = run.outputs["labs"]["intro"]["cost"]["emptyLabPerHour"]
    assert line["region"] == f"eu-west-1 ({others}); us-east-1 ({group})"
    said = f"{listed}[^;]*; no eu-west-1 price from the AWS Price List API \\({missing}[^)]*{re.escape(NOT_FOUND)}\\)"
    assert re.search(said, line["source"]), line["source"]
    assert line["source"].endswith(f"; {group} priced from the us-east-1 list, not eu-west-1")
    # The lab's nodes are priced from the instances and EBS only: each of its lines names its own prices' region.
    lab_cost = run.outputs["labs"]["intro"]["cost"]
    seat_hour, disk = lab_cost["seatHour"], lab_cost["rootVolumePerNodeHour"]
    if group == "EBS":
        assert (seat_hour["region"], disk["region"]) == ("eu-west-1 (instances); us-east-1 (EBS)", "us-east-1")
        assert disk["source"].endswith("; EBS priced from the us-east-1 list, not eu-west-1"), disk["source"]
        assert re.search(said, disk["source"]), disk["source"]
    else:
        assert (seat_hour["region"], disk["region"]) == ("eu-west-1", "eu-west-1")
        assert "us-east-1" not in seat_hour["source"] + disk["source"]


def test_the_load_balancers_data_rate_missing_in_the_region_is_the_us_east_1_lists_said_so(market):
    LEFT_OUT.add("clb_data")
    data = live(EVERY_LINE).outputs["cost"]["loadBalancerDataPerGb"]
    assert (data["usd"], data["region"]) == (0.008, "us-east-1")
    assert data["source"].endswith("; load balancer priced from the us-east-1 list, not eu-west-1"), data


GROUPS = {
    "GP3_STORAGE": "EBS",
    "GP3_IOPS": "EBS",
    "GP3_THROUGHPUT": "EBS",
    "CLB_HOUR": "load balancer",
    "CLB_DATA": "load balancer",
    "EKS_CLUSTER_HOUR": "EKS",
    "EKS_EXTENDED_ADDED": "EKS",
}


@pytest.mark.parametrize(
    ("wanted", "attribute"),
    [(w, a) for w in GROUPS for a in getattr(regional_prices, w).attributes],
)
def test_a_filter_lost_matches_several_products_and_is_said(market, monkeypatch, wanted, attribute):
    """Planted: each filter of the program's EBS, load balancer and EKS look-ups lost in turn; the mocked Price List
    API then holds several products for it, as AWS does, and the group is the list's, said so."""
    product = getattr(regional_prices, wanted)
    kept = {k: v for k, v in product.attributes.items() if k != attribute}
    monkeypatch.setattr(regional_prices, wanted, product._replace(attributes=kept))
    run = live(EVERY_LINE)
    assert f"us-east-1 list ({GROUPS[wanted]})" in run.outputs["cost"]["pricesFrom"]
    source = run.outputs["labs"]["intro"]["cost"]["emptyLabPerHour"]["source"]
    assert re.search(f"{product.name}: [^)]*{NOT_PRECISE.format('[2-9]')}", source), source


def test_a_lost_region_filter_matches_several_products_and_is_said(market, monkeypatch):
    """Planted: regionCode lost from every EBS, load balancer and EKS look-up; the mocked Price List API holds each
    product in two regions, and every such group is the list's, said so."""
    asks = regional_prices.filters
    monkeypatch.setattr(regional_prices, "filters", lambda wanted, region: asks(wanted, region)[1:])
    run = live(EVERY_LINE)
    assert run.outputs["cost"]["pricesFrom"] == "eu-west-1 (instances); us-east-1 list (EBS, load balancer, EKS)"
    assert NOT_PRECISE.format(2) in run.outputs["cost"]["loadBalancerDataPerGb"]["source"]


def test_every_line_of_a_eu_west_1_render_says_it_is_priced_from_us_east_1():
    run = harness.run("test", as_cli_config(EVERY_LINE))
    lines = priced_lines(run.outputs["labs"]["intro"]["cost"])
    assert set(lines) == LINES
    for key, line in lines.items():
        assert line["region"] == "us-east-1", key
        assert (
            "priced from us-east-1, not eu-west-1: gpulab has no eu-west-1 prices offline (`pulumi preview` prices "
            "them in eu-west-1)"
        ) in line["source"], key
    warmups = run.outputs["labs"]["intro"]["cost"]["warmups"]
    assert warmups and all(
        w["region"] == "us-east-1" and "priced from us-east-1, not eu-west-1" in w["source"] for w in warmups
    )
    assert run.outputs["cost"]["pricesFrom"] == "us-east-1 list"


# A stack with every kind of priced line: EVERY_LINE's, and a spot lab's spot lines.
EVERY_KIND = {
    **EVERY_LINE,
    "gpulab:labs": {
        **EVERY_LINE["gpulab:labs"],
        "vision": {**SPOT_LAB["vision"], "notebookImage": NOTEBOOK_IMAGE},
    },
}


def unnamed(tree: object, path: str) -> list[str]:
    """Where under `tree` a priced line (a mapping with `usd` or `usdPerHour`) does not name its region and source."""
    found = []
    if isinstance(tree, dict):
        if {"usd", "usdPerHour"} & tree.keys() and not {"region", "source"} <= tree.keys():
            found.append(path)
        for key, value in tree.items():
            found += unnamed(value, f"{path}.{key}")
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            found += unnamed(value, f"{path}[{i}]")
    return found


@pytest.mark.parametrize("preview", [False, True], ids=["render", "preview"])
def test_no_priced_line_of_the_cost_outputs_lacks_its_region_and_source(market, preview):
    run = live(EVERY_KIND) if preview else harness.run("test", as_cli_config(EVERY_KIND))
    costs = {"cost": run.outputs["cost"], **{f"labs.{n}.cost": lab["cost"] for n, lab in run.outputs["labs"].items()}}
    assert [where for name, cost in costs.items() for where in unnamed(cost, name)] == []
    # The parts of the stack's cost are bare figures per hour and per month: `sources` names each one's, the meter's
    # too (the stack has gpulab:metrics).
    assert set(run.outputs["cost"]["sources"]) == {*PARTS, "meter"}
    assert run.outputs["cost"]["sources"]["meter"]["region"] == ("eu-west-1" if preview else None)
    assert run.outputs["labs"]["vision"]["cost"]["spot"], "the stack has spot lines"
