"""Reference on-demand hourly prices (USD) of the GPU instance types, as data.

Source: aws/karpenter-provider-aws, tag v1.14.1, pkg/providers/pricing/zz_generated.pricing_aws.go, the on-demand
prices Karpenter starts from before it reaches the AWS Pricing API. The file says "generated at 2026-07-06T14:20:29Z
for us-east-1" and holds that one region. The figures below are copied as written there, for the instance types in
domain/capacity/instance_types.py.

These are list prices of one region on one day: other regions differ, spot capacity costs less (capacity reservations
are billed at the on-demand rate), so every figure derived from them is labelled with PRICE_SOURCE.

Deliberately absent, because that file has no price for them (a type without a price is never given one here):
g7 (every size) and p5e.48xlarge.
"""

from collections.abc import Mapping
from types import MappingProxyType

SOURCE_REPOSITORY = "aws/karpenter-provider-aws"
SOURCE_TAG = "v1.14.1"
SOURCE_FILE = "pkg/providers/pricing/zz_generated.pricing_aws.go"
GENERATED_AT = "2026-07-06T14:20:29Z"
REGION = "us-east-1"

PRICE_SOURCE = f"{REGION} on-demand list prices of {GENERATED_AT[:10]}, Karpenter {SOURCE_TAG.removeprefix('v')}"

# fmt: off
ON_DEMAND_USD_PER_HOUR: Mapping[str, float] = MappingProxyType({
    # g4dn family
    "g4dn.12xlarge": 3.912000, "g4dn.16xlarge": 4.352000, "g4dn.2xlarge": 0.752000, "g4dn.4xlarge": 1.204000,
    "g4dn.8xlarge": 2.176000, "g4dn.metal": 7.824000, "g4dn.xlarge": 0.526000,
    # g5 family
    "g5.12xlarge": 5.672000, "g5.16xlarge": 4.096000, "g5.24xlarge": 8.144000, "g5.2xlarge": 1.212000,
    "g5.48xlarge": 16.288000, "g5.4xlarge": 1.624000, "g5.8xlarge": 2.448000, "g5.xlarge": 1.006000,
    # g5g family
    "g5g.16xlarge": 2.744000, "g5g.2xlarge": 0.556000, "g5g.4xlarge": 0.828000, "g5g.8xlarge": 1.372000,
    "g5g.metal": 2.744000, "g5g.xlarge": 0.420000,
    # g6 family
    "g6.12xlarge": 4.601600, "g6.16xlarge": 3.396800, "g6.24xlarge": 6.675200, "g6.2xlarge": 0.977600,
    "g6.48xlarge": 13.350400, "g6.4xlarge": 1.323200, "g6.8xlarge": 2.014400, "g6.xlarge": 0.804800,
    # g6e family
    "g6e.12xlarge": 10.492640, "g6e.16xlarge": 7.577190, "g6e.24xlarge": 15.065590, "g6e.2xlarge": 2.242080,
    "g6e.48xlarge": 30.131180, "g6e.4xlarge": 3.004240, "g6e.8xlarge": 4.528560, "g6e.xlarge": 1.861000,
    # g7e family
    "g7e.12xlarge": 8.286080, "g7e.24xlarge": 16.572160, "g7e.2xlarge": 3.363120, "g7e.48xlarge": 33.144320,
    "g7e.4xlarge": 3.998160, "g7e.8xlarge": 5.268240,
    # gr6 family
    "gr6.4xlarge": 1.539200, "gr6.8xlarge": 2.446400,
    # p3dn family
    "p3dn.24xlarge": 31.212000,
    # p4d family
    "p4d.24xlarge": 21.957642,
    # p4de family
    "p4de.24xlarge": 27.447050,
    # p5 family
    "p5.48xlarge": 55.040000, "p5.4xlarge": 6.880000,
    # p5en family
    "p5en.48xlarge": 63.296000,
    # p6-b200 family
    "p6-b200.48xlarge": 113.932800,
    # p6-b300 family
    "p6-b300.48xlarge": 142.416000,
})
# fmt: on

# Amazon EBS gp3 in us-east-1, from AWS's EBS pricing page (aws.amazon.com/ebs/pricing, US East (N. Virginia)), as
# strings for Decimal arithmetic: storage per GB-month, IOPS above the 3,000 every gp3 volume includes per IOPS-month,
# throughput above the 125 MiB/s it includes per MiB/s-month (the page writes MB/s for the unit gp3 is provisioned in,
# MiB/s). Billing is per second; a month is taken as 730 hours (8,760 hours a year / 12), the month of AWS's Pricing
# Calculator, so that per-hour figures do not depend on the length of a calendar month. What every gp3 volume
# includes is a property of the volume, not a price: GP3_INCLUDED_IOPS and GP3_INCLUDED_MIBPS in
# domain/capacity/disks.py.
# Not confirmed from AWS's US page itself when this was written (no internet access): the gp3 baseline (3,000 IOPS and
# 125 MB/s included), per-second billing and the "(IOPS provisioned - 3,000)" formula are as AWS's EBS pricing page
# states them for its European sovereign region (aws.eu/ebs/pricing); the us-east-1 amounts and the 730-hour month are
# the commonly quoted ones. Check them against aws.amazon.com/ebs/pricing before relying on a figure.
GP3_USD_PER_GB_MONTH = "0.08"
GP3_USD_PER_IOPS_MONTH = "0.005"
GP3_USD_PER_MIBPS_MONTH = "0.04"
HOURS_PER_MONTH = 730

DISK_PRICE_SOURCE = f"{REGION} gp3 list prices (aws.amazon.com/ebs/pricing), {HOURS_PER_MONTH} hours a month"

# The system node group's instances (domain/stack/model.py SystemNodes: x86_64 types the AL2023 x86_64 AMI runs), at the
# same source as the GPU types above: the zz_generated file of Karpenter v1.14.1, us-east-1, copied as written there
# for the general-purpose and compute sizes a system node group is commonly given. A type not listed has no price.
# fmt: off
SYSTEM_NODE_USD_PER_HOUR: Mapping[str, float] = MappingProxyType({
    "c5.large": 0.085000, "c5.xlarge": 0.170000, "c6i.large": 0.085000, "c6i.xlarge": 0.170000,
    "c7i.large": 0.089250, "c7i.xlarge": 0.178500,
    "m5.large": 0.096000, "m5.xlarge": 0.192000, "m5.2xlarge": 0.384000,
    "m5a.large": 0.086000, "m5a.xlarge": 0.172000, "m5a.2xlarge": 0.344000,
    "m6a.large": 0.086400, "m6a.xlarge": 0.172800, "m6a.2xlarge": 0.345600,
    "m6i.large": 0.096000, "m6i.xlarge": 0.192000, "m6i.2xlarge": 0.384000,
    "m7a.large": 0.115920, "m7a.xlarge": 0.231840, "m7a.2xlarge": 0.463680,
    "m7i.large": 0.100800, "m7i.xlarge": 0.201600, "m7i.2xlarge": 0.403200,
    "t3.medium": 0.041600, "t3.large": 0.083200, "t3.xlarge": 0.166400,
})
# fmt: on

# The EKS control plane, USD per cluster-hour: the AWS Containers blog, "Amazon EKS extended support for Kubernetes
# versions pricing" (2024): "a total of $0.60 per cluster per hour" in extended support, "you will continue to pay
# $0.10 per cluster per hour" in standard support. The post gives one figure for every region; these are taken as
# us-east-1's (the EKS pricing page itself was not read here).
EKS_USD_PER_CLUSTER_HOUR = MappingProxyType({"standard": "0.10", "extended": "0.60"})
EKS_PRICE_SOURCE = "AWS Containers blog, Amazon EKS extended support for Kubernetes versions pricing (2024)"
# When a version leaves standard support, and so when the extended price starts: domain/upstream/eks_calendar.py.

# The hub's Classic Load Balancer (components/jupyterhub/values.py) in us-east-1, USD per load-balancer-hour and per GB
# of data it processes. AWS's Classic Load Balancer pricing page (stored copy of aws.amazon.com/elasticloadbalancing/
# classicloadbalancer/pricing, CONFIRMED there): "You are charged for each hour or partial hour that a Classic Load
# Balancer is running and for each GB of data transferred through your load balancer"; the stored copy does not show
# the amounts. 0.025 per hour and 0.008 per GB are the commonly quoted us-east-1 figures (REPORTED: e.g. a third party's
# fixture of the AWSELB product "Data processed by Classic Load Balancer", unit GB, USD 0.008, search index id
# 53018500912), not confirmed here. The data processed is a rate only: gpulab does not know the hub's traffic, so no
# hourly figure counts it (domain/cost/stack_cost.py, loadBalancerDataPerGb).
CLB_USD_PER_HOUR = "0.025"
CLB_USD_PER_GB = "0.008"
CLB_PRICE_SOURCE = (
    "aws.amazon.com/elasticloadbalancing/pricing, Classic Load Balancer-hour and GB processed (not confirmed here)"
)
