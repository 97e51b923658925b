"""Who may reach the cluster's public Kubernetes API endpoint: the CIDR blocks EKS and the AWS provider accept.

EKS User Guide, "Control network access to cluster API server endpoint" (cluster-endpoint): the blocks cannot include
reserved addresses, there is a maximum number of them, and without the private endpoint the nodes reach the API
through the public one, so the blocks must then include the VPC's egress (NAT gateway) addresses.
"""

import ipaddress
import re

# EKS quota "Public endpoint access CIDR ranges per cluster": 40, not adjustable (AWS General Reference, "Amazon EKS
# endpoints and quotas", https://docs.aws.amazon.com/general/latest/gr/eks.html#limits_eks).
MAX_PUBLIC_ACCESS_CIDRS = 40

# The reserved IPv4 ranges the EKS guide points to (Wikipedia, "Reserved IP addresses"; IANA IPv4 Special-Purpose
# Address Registry, plus multicast). No request that reaches a public endpoint comes from inside one of them, so a
# block inside one can only be a mistake, typically the VPC's own range, which privateEndpoint serves instead.
RESERVED_IPV4_BLOCKS = tuple(
    ipaddress.IPv4Network(block)
    for block in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",  # includes the limited broadcast address 255.255.255.255
    )
)

EVERYWHERE = "0.0.0.0/0"

# Address/prefix, as Go's net.ParseCIDR reads it: the AWS provider validates public_access_cidrs with it
# (terraform-provider-aws internal/verify, ValidCIDRNetworkAddress), and ipaddress alone would take a bare address.
_CIDR_NOTATION = re.compile(r"[0-9.]+/[0-9]+")


def public_access_cidr(value: str) -> str:
    """A block EKS accepts in publicAccessCidrs: IPv4 CIDR notation, a network address, outside reserved ranges."""
    if ":" in value:
        # The cluster is IPv4 (pulumi-eks' default ipFamily); EKS takes IPv6 blocks only for IPv6 clusters.
        raise ValueError(f"must be an IPv4 block; the cluster is IPv4, so EKS refuses the IPv6 block {value!r}")
    if not _CIDR_NOTATION.fullmatch(value):
        raise ValueError(f"must be an IPv4 CIDR block (address/prefix length) such as 1.2.3.4/32, got {value!r}")
    try:
        network = ipaddress.IPv4Network(value, strict=False)
    except ValueError:
        raise ValueError(
            f"must be an IPv4 CIDR block (address/prefix length) such as 1.2.3.4/32, got {value!r}"
        ) from None
    if str(network) != value:
        # The provider's check: the address must be the block's network address (no host bits, no leading zeros).
        raise ValueError(f"must be written as its network address, {network}, got {value!r}")
    for reserved in RESERVED_IPV4_BLOCKS:
        if network.subnet_of(reserved):
            raise ValueError(
                f"{value} lies in the reserved range {reserved}: no request reaches the public endpoint from there "
                "(nodes and connected networks use the private endpoint)"
            )
    return value


def at_most_quota(blocks: list[str]) -> list[str]:
    if len(blocks) > MAX_PUBLIC_ACCESS_CIDRS:
        raise ValueError(
            f"at most {MAX_PUBLIC_ACCESS_CIDRS} blocks (an EKS quota that cannot be raised), got {len(blocks)}"
        )
    return blocks
