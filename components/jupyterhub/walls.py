"""Pure builders of the network walls around learners' servers: the jupyterhub chart's own singleuser NetworkPolicy
(zero-to-jupyterhub 4.4.0 templates/singleuser/netpol.yaml and _helpers-netpol.tpl, set through
singleuser.networkPolicy), and one NetworkPolicy per lab whose learners may reach the internet.

The chart's policy takes a learner's traffic in only from pods labelled hub.jupyter.org/network-access-singleuser
(the hub and the proxy), on the notebook port, and lets it out to the hub's API (8081), the proxy (8000, the pages the
load balancer serves anyway) and, with the rule added here, DNS to CoreDNS's pods. Policies only add what they allow,
so the internet cannot be closed to one lab by a policy of its own: it is opened to each lab that keeps it instead.
The VPC CNI's network policy agent enforces them (components/cluster.py); docs/jupyterhub.md has the truth table.
"""

import copy
from collections.abc import Mapping, Sequence
from ipaddress import ip_network
from typing import Any

from components.labels import LAB_LABEL
from domain.stack.model import Lab

# The chart's egressAllowRules for learners, every one named so that a new chart default cannot open a way out.
# - dnsPortsKubeSystemNamespace off: it allows 53 to every pod of kube-system, and EKS's network policy controller
#   resolves a host-network pod there (aws-node, kube-proxy, the Pod Identity agent run on every node) to its node's
#   IP (aws/amazon-network-policy-controller-k8s v1.1.7 = ecc7e6a, pkg/resolvers/endpoints.go 233-253 lists peers
#   with no hostNetwork filter, pkg/k8s/pod_utils.go 16-22 GetPodIP): port 53 of every node would be open. COREDNS
#   below allows DNS to CoreDNS's pods alone.
# - dnsPortsPrivateIPs off: it would open port 53 of every address in 10/8, 172.16/12 and 192.168/16, every other
#   learner's and the VPC's among them.
# - dnsPortsCloudMetadataServer and cloudMetadataServer off: the instance metadata service is the node's, its role's
#   credentials included.
# - nonPrivateIPs off: the internet is each lab's own policy below; privateIPs off: the VPC, the cluster's Services
#   (the API server's among them) and the other learners stay out of reach.
LEARNER_EGRESS_ALLOW_RULES = {
    "cloudMetadataServer": False,
    "dnsPortsCloudMetadataServer": False,
    "dnsPortsKubeSystemNamespace": False,
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

# The chart's hub Service and its API port, the learners' way to the hub (zero-to-jupyterhub 4.4.0
# templates/hub/service.yaml 4 and 24-26, files/hub/jupyterhub_config.py 105-107 hub_connect_url; the name is the
# chart's with no fullnameOverride, which gpulab sets none of).
HUB_SERVICE = "hub"
HUB_API_PORT = 8081

# The chart's label of a learner's server pod, which KubeSpawner sets (the chart's jupyterhub_config.py, extra_labels).
LEARNER_COMPONENT = {"component": "singleuser-server"}


# CoreDNS as the EKS add-on runs it: kube-system, pods labelled k8s-app=kube-dns behind the kube-dns Service (EKS
# User Guide, managing-coredns). The controller also adds the ClusterIP of each Service in kube-system whose selector
# this pod selector matches, kube-dns's, with these ports, since the agent's eBPF programs see the address before
# kube-proxy's DNAT (endpoints.go 256-259, getMatchingServiceClusterIPs 451-567).
COREDNS_NAMESPACE = "kube-system"
COREDNS_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53
LEARNER_DNS_EGRESS = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": COREDNS_NAMESPACE}},
            "podSelector": {"matchLabels": dict(COREDNS_LABELS)},
        }
    ],
    "ports": [{"port": DNS_PORT, "protocol": "UDP"}, {"port": DNS_PORT, "protocol": "TCP"}],
}


def learner_network_policy() -> dict[str, Any]:
    """The chart's singleuser.networkPolicy: its rules named above, and DNS to CoreDNS (singleuser.networkPolicy.egress,
    which the chart appends to the learners' egress rules, templates/_helpers-netpol.tpl renderEgressRules)."""
    return {
        "enabled": True,
        "egressAllowRules": dict(LEARNER_EGRESS_ALLOW_RULES),
        "egress": [copy.deepcopy(LEARNER_DNS_EGRESS)],
    }


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


# The name of a learner's pod. The VPC CNI's network policy agent (aws/aws-network-policy-agent v1.3.1 = 6035dc5)
# keeps one set of eBPF maps per "pod identifier", the pod's name without its last "-" part plus its namespace
# (pkg/utils/utils.go 156-167 GetPodIdentifier), fills it with every PolicyEndpoint that selects any pod of that
# identifier in the cluster (controllers/policyendpoints_controller.go 553-561, 589-616, 357-426), and shares it among
# that identifier's pods on a node (pkg/ebpf/bpf_client.go 746-772). KubeSpawner 7.0.0's default, jupyter-{user_server}
# (kubespawner/spawner.py pod_name_template), gives jupyter-alice and jupyter-bob one identifier, jupyter-<namespace>:
# every learner would get the union of all labs' walls, a closed lab the internet of an open one. A fixed last part
# keeps the whole server name ({user_server}, unique per server in the namespace, hence so is the pod's name) in the
# identifier: one identifier per learner's server. The chart's singleuser.podNameTemplate sets it (z2jh 4.4.0
# jupyterhub_config.py). 8 + 48 (KubeSpawner's longest slug) + 2 characters, within a DNS label.
LEARNER_POD_NAME_TEMPLATE = "jupyter-{user_server}-0"
