"""Pure builders of the network walls around learners' servers: the jupyterhub chart's own singleuser NetworkPolicy
(zero-to-jupyterhub 4.4.0 templates/singleuser/netpol.yaml and _helpers-netpol.tpl, set through
singleuser.networkPolicy), and one NetworkPolicy per lab whose learners may reach the internet.

The chart's policy takes a learner's traffic in only from pods labelled hub.jupyter.org/network-access-singleuser
(the hub and the proxy), on the notebook port, and lets it out to the hub's API (8081), the proxy (8000, the pages the
load balancer serves anyway) and, with the rules kept on here, DNS in kube-system. Policies only add what they allow,
so the internet cannot be closed to one lab by a policy of its own: it is opened to each lab that keeps it instead.
The VPC CNI's network policy agent enforces them (components/cluster.py); docs/jupyterhub.md has the truth table.
"""

from collections.abc import Mapping, Sequence
from ipaddress import ip_network
from typing import Any

from components.labels import LAB_LABEL
from domain.stack.model import Lab

# The chart's egressAllowRules for learners, every one named so that a new chart default cannot open a way out.
# - dnsPortsKubeSystemNamespace: DNS to kube-system, CoreDNS's namespace. EKS's network policy controller adds the
#   ClusterIPs of that namespace's Services whose selectors match the rule's (here empty) pod selector, kube-dns's
#   among them, since its eBPF programs see the address before kube-proxy's DNAT (aws/amazon-network-policy-
#   controller-k8s pkg/resolvers/endpoints.go, getMatchingServiceClusterIPs, at ecc7e6a).
# - dnsPortsPrivateIPs off: it would open port 53 of every address in 10/8, 172.16/12 and 192.168/16, every other
#   learner's and the VPC's among them.
# - dnsPortsCloudMetadataServer and cloudMetadataServer off: the instance metadata service is the node's, its role's
#   credentials included.
# - nonPrivateIPs off: the internet is each lab's own policy below; privateIPs off: the VPC, the cluster's Services
#   (the API server's among them) and the other learners stay out of reach.
LEARNER_EGRESS_ALLOW_RULES = {
    "cloudMetadataServer": False,
    "dnsPortsCloudMetadataServer": False,
    "dnsPortsKubeSystemNamespace": True,
    "dnsPortsPrivateIPs": False,
    "nonPrivateIPs": False,
    "privateIPs": False,
}

# What "the internet" leaves out whatever the VPC: the private ranges (RFC 1918), the shared address space that
# VPCs may add as a secondary CIDR (RFC 6598), and link-local, where the instance metadata service (169.254.169.254),
# the EKS Pod Identity agent (169.254.170.23), the Amazon DNS server (169.254.169.253) and the time service answer
# (Amazon EC2 User Guide, instancedata-data-retrieval; EKS User Guide, pod-id-how-it-works). The walls are IPv4 only:
# no rule names an IPv6 block, so fd00:ec2::254 (the metadata service over IPv6) and every IPv6 address are closed.
NOT_INTERNET = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")

# The chart's label of a learner's server pod, which KubeSpawner sets (the chart's jupyterhub_config.py, extra_labels).
LEARNER_COMPONENT = {"component": "singleuser-server"}


def learner_network_policy() -> dict[str, Any]:
    """The chart's singleuser.networkPolicy."""
    return {"enabled": True, "egressAllowRules": dict(LEARNER_EGRESS_ALLOW_RULES)}


def internet_exceptions(vpc_cidrs: Sequence[str]) -> list[str]:
    """NOT_INTERNET and each of the VPC's IPv4 blocks outside it (a VPC may use public ranges too)."""
    kept = [ip_network(c) for c in NOT_INTERNET]
    extra = [c for c in vpc_cidrs if not any(ip_network(c).subnet_of(k) for k in kept)]  # type: ignore[arg-type]
    return [*NOT_INTERNET, *sorted(set(extra))]


def open_labs(labs: Mapping[str, Lab]) -> list[str]:
    """The labs on the spawn page whose learners reach the internet."""
    return [name for name, lab in labs.items() if lab.on_spawn_page and lab.internet]


def internet_policy(lab_name: str, namespace: str, release: str, vpc_cidrs: Sequence[str]) -> dict[str, Any]:
    """The NetworkPolicy that lets the lab's learners out to the internet, and nowhere else."""
    return {
        "metadata": {"name": f"learners-internet-{lab_name}", "namespace": namespace},
        "spec": {
            "podSelector": {
                "matchLabels": {"app": "jupyterhub", "release": release, **LEARNER_COMPONENT, LAB_LABEL: lab_name}
            },
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": internet_exceptions(vpc_cidrs)}}]}],
        },
    }
