"""NetworkPolicies as EKS enforces them: the network policy controller turns each policy into a PolicyEndpoint, and the
VPC CNI's network policy agent turns a pod's PolicyEndpoints into the eBPF maps its veth's programs look packets up in.

Modelled from their source, not from the NetworkPolicy specification (render/walls.py asks it; docs/network-walls.md
says where they differ). Neither is a Go module this project can depend on: the module proxy does not serve
github.com/aws/aws-network-policy-agent v1.3.1 ("403 This module version is not available", asked 2026-12-04), so each
rule is written here with the lines it follows.
- AGENT = aws/aws-network-policy-agent v1.3.1 = 6035dc585f59adb9aaac2107f7f8c39f545eacc5, the agent the pinned VPC CNI
  v1.21.1 runs (aws/amazon-vpc-cni-k8s v1.21.1 charts/aws-vpc-cni/values.yaml 29-32, nodeAgent image tag v1.3.1).
- CONTROLLER = aws/amazon-network-policy-controller-k8s v1.1.7 = ecc7e6a79394528bdb397e1fbd927dae64383bec. EKS runs the
  controller in its control plane and does not say which version: this is the one read (REPORTED for EKS).

Only IPv4 is modelled, as the cluster is (VPC CNI values.yaml 72, ENABLE_IPv6 false): the agent skips every IPv6 rule
in an IPv4 cluster (AGENT pkg/fwruleprocessor/fw_rule_processor.go 110-113) and its v4 programs pass every non-IPv4
frame (pkg/ebpf/c/tc.v4egress.bpf.c 358, 478). No ClusterNetworkPolicy is rendered, so the admin and baseline tiers
pass (tc.v4egress.bpf.c 249-271, 290-310) and only the namespaced policies and the pod's default state decide.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ANY = "ANY"  # AGENT pkg/utils/utils.go 26 ANY_IP_PROTOCOL, 254: a rule without ports
DENY = "DENY"  # utils.go 25 RESERVED_IP_PROTOCOL_NUMBER, 255: an except range's entry
# tc.v4egress.bpf.c 15 MAX_PORT_PROTOCOL; utils.go 29 TRIE_VALUE_LENGTH 288 = 24 entries of 12 bytes, and
# ComputeTrieValue (utils.go 364-366) drops the rest with only a log line.
MAX_ENTRIES = 24
HOST_MASK = "/32"  # the agent's host mask in an IPv4 cluster
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class ContainerPort:
    number: int
    protocol: str = "TCP"
    name: str = ""


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: Mapping[str, str] = field(hash=False)
    ip: str = ""  # status.podIP: a host-network pod's is its node's
    node_ip: str = ""  # status.hostIP
    host_network: bool = False
    ports: tuple[ContainerPort, ...] = ()


@dataclass(frozen=True)
class ServicePort:
    port: int
    target: int | str
    protocol: str = "TCP"


@dataclass(frozen=True)
class Service:
    name: str
    namespace: str
    cluster_ip: str
    selector: Mapping[str, str] | None = field(hash=False)
    ports: tuple[ServicePort, ...] = ()


@dataclass(frozen=True)
class Cluster:
    pods: tuple[Pod, ...]
    services: tuple[Service, ...]
    namespaces: Mapping[str, Mapping[str, str]]  # name -> labels
    policies: tuple[Mapping[str, Any], ...]
    strict: bool = False  # NETWORK_POLICY_ENFORCING_MODE; the pinned VPC CNI's is standard (values.yaml 112)


@dataclass(frozen=True)
class PortRule:
    """One L4 entry of a PolicyEndpoint and of the agent's map: protocol (TCP, UDP, SCTP, ANY, DENY), port, end."""

    protocol: str
    port: int | None = None
    end: int | None = None


@dataclass(frozen=True)
class Endpoint:
    """A PolicyEndpoint's ingress or egress entry (CONTROLLER api/v1alpha1 EndpointInfo), with the policy it is from."""

    cidr: str
    ports: tuple[PortRule, ...]
    policy: str
    except_: tuple[str, ...] = ()


@dataclass(frozen=True)
class PolicyEndpoint:
    policy: str
    namespace: str
    targets: tuple[Pod, ...]
    ingress: tuple[Endpoint, ...]
    egress: tuple[Endpoint, ...]
    isolation: frozenset[str]


# Label selectors, as metav1.LabelSelectorAsSelector reads them.
def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether a LabelSelector matches labels; None selects everything, as the controller's createPodLabelSelector
    (CONTROLLER pkg/resolvers/endpoints.go 437-448) and getMatchingServiceClusterIPs (464-466) make it."""
    labels = labels or {}
    if selector is None:
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def pod_identifier(name: str, namespace: str) -> str:
    """The agent's key for a pod's programs and maps: the pod's name without its last "-" part, and the namespace
    (AGENT pkg/utils/utils.go 156-167 GetPodIdentifier; "." becomes "_")."""
    name = name.replace(".", "_")
    prefix = "-".join(name.split("-")[:-1]) if "-" in name else name
    return f"{prefix}-{namespace}"


def _network_ready(pod: Pod) -> bool:
    return bool(pod.ip)  # CONTROLLER pkg/k8s/pod_utils.go 24-29 (the pods here all run)


def _policy_ports(ports: Sequence[Mapping[str, Any]]) -> list[tuple[str, int | str | None, int | None]]:
    # The API server defaults a NetworkPolicyPort's protocol to TCP (networking/v1 SetDefaults_NetworkPolicyPort).
    return [(p.get("protocol", "TCP"), p.get("port"), p.get("endPort")) for p in ports]


def _cidr_port(port: tuple[str, int | str | None, int | None]) -> PortRule | None:
    """convertToPolicyInfoPortForCIDRs (endpoints.go 378-397): a named port has nothing to resolve against."""
    protocol, number, end = port
    if number is None:
        return PortRule(protocol)
    if isinstance(number, str):
        return None
    return PortRule(protocol, number, end)


def container_port(pod: Pod, port: int | str, protocol: str) -> int | None:
    """LookupContainerPortAndName (pod_utils.go 32-54): by name or number among the pod's ports of that protocol; a
    number the pod does not declare is kept as it is, a name it does not declare is not resolved."""
    for p in pod.ports:
        if p.protocol == protocol and (p.name == port if isinstance(port, str) else p.number == port):
            return p.number
    return port if isinstance(port, int) else None


def _pod_ports(pod: Pod, ports: Sequence[tuple[str, int | str | None, int | None]]) -> list[PortRule]:
    """getPortList (endpoints.go 355-376): a port the pod cannot resolve is left out."""
    found = []
    for protocol, number, end in ports:
        if number is None:
            found.append(PortRule(protocol, None, end))
            continue
        resolved = container_port(pod, number, protocol)
        if resolved is not None:
            found.append(PortRule(protocol, resolved, end))
    return found


def _peer_namespaces(cluster: Cluster, policy_namespace: str, peer: Mapping[str, Any]) -> list[str]:
    """resolvePeerNamespaces (endpoints.go 417-423): the policy's own without a namespaceSelector."""
    if "namespaceSelector" not in peer:
        return [policy_namespace]
    return [n for n, labels in cluster.namespaces.items() if selects(peer["namespaceSelector"], labels)]


def _peer_pods(cluster: Cluster, namespace: str, selector: Mapping[str, Any] | None) -> list[Pod]:
    """listMatchingPods (endpoints.go 425-435): no host-network filter, so a host-network pod is its node's IP
    (GetPodIP, pod_utils.go 16-22)."""
    return [p for p in cluster.pods if p.namespace == namespace and selects(selector, p.labels) and _network_ready(p)]


def _service_port(cluster: Cluster, service: Service, port: int | str, protocol: str) -> int | None:
    """getMatchingServicePort (endpoints.go 676-707): a Service port whose targetPort is the policy's port, else one
    whose targetPort names or numbers the container port a backing pod gives the policy's port."""
    for sp in service.ports:
        if type(sp.target) is type(port) and sp.target == port and sp.protocol == protocol:
            return sp.port  # LookupServiceListenPort, pkg/k8s/service_utils.go 13-20
    for pod in cluster.pods:
        if pod.namespace != service.namespace or not selects({"matchLabels": service.selector or {}}, pod.labels):
            continue
        number = container_port(pod, port, protocol)
        if number is None:
            continue
        names = {p.name for p in pod.ports if p.number == number and p.protocol == protocol}
        for sp in service.ports:  # LookupListenPortFromPodSpec, service_utils.go 24-46
            if sp.protocol == protocol and (sp.target in names if isinstance(sp.target, str) else sp.target == number):
                return sp.port
    return None


def _target_port_bypass(cluster: Cluster, service: Service, port: int, protocol: str, ports: Sequence) -> bool:
    """hasTargetPortBypass (endpoints.go 569-621): a Service port whose named targetPort leads some backing pod to a
    container port the policy does not allow is left out."""
    targets = [sp.target for sp in service.ports if sp.port == port and sp.protocol == protocol]
    name = targets[0] if targets else None
    if not isinstance(name, str):
        return False
    for pod in cluster.pods:
        if pod.namespace != service.namespace or not selects({"matchLabels": service.selector or {}}, pod.labels):
            continue
        numbers = [p.number for p in pod.ports if p.name == name and p.protocol == protocol][:1]
        if numbers and not _numeric_allowed(numbers[0], protocol, ports):
            return True
    return False


def _numeric_allowed(number: int, protocol: str, ports: Sequence[tuple[str, int | str | None, int | None]]) -> bool:
    """isNumericPortAllowed (endpoints.go 629-655)."""
    for p_protocol, p_number, p_end in ports:
        if p_protocol != protocol or isinstance(p_number, str):
            continue
        if p_number is None or p_number <= number <= (p_end or p_number):
            return True
    return False


def _service_endpoints(cluster: Cluster, selector: Mapping[str, Any] | None, namespace: str, ports, policy: str):
    """getMatchingServiceClusterIPs (endpoints.go 451-567): the ClusterIP of each Service of the namespace, not
    headless, whose selector the peer's pod selector matches (the agent sees a ClusterIP before kube-proxy's DNAT)."""
    found = []
    for service in cluster.services:
        if service.namespace != namespace or not service.cluster_ip or service.cluster_ip == "None":
            continue
        if not selects(selector or {}, service.selector):
            continue
        rules = []
        for protocol, number, end in ports:
            if number is None:
                rules.append(PortRule(protocol, None, end))
                continue
            listen = _service_port(cluster, service, number, protocol)
            if listen is None:
                continue
            if isinstance(number, int) and _target_port_bypass(cluster, service, listen, protocol, ports):
                continue
            rules.append(PortRule(protocol, listen, end))
        if ports and not rules:
            continue
        found.append(Endpoint(f"{service.cluster_ip}{HOST_MASK}", tuple(rules), policy))
    return found


def _isolation(spec: Mapping[str, Any]) -> frozenset[str]:
    """The PolicyEndpoint's podIsolation is the policy's policyTypes (CONTROLLER pkg/policyendpoints/manager.go 434),
    which the API server defaults to Ingress, and Egress with egress rules (networking/v1 SetDefaults_NetworkPolicy)."""
    if "policyTypes" in spec:
        return frozenset(spec["policyTypes"])
    return frozenset(["Ingress", *(["Egress"] if spec.get("egress") else [])])


def resolve(cluster: Cluster, policy: Mapping[str, Any]) -> PolicyEndpoint:
    """The controller's PolicyEndpoint of one NetworkPolicy (endpoints.go Resolve, 45-80)."""
    spec, namespace = policy["spec"], policy["metadata"]["namespace"]
    name = f"{namespace}/{policy['metadata']['name']}"
    # computePodSelectorEndpoints (285-321): host-network pods are never targets.
    targets = tuple(
        p
        for p in cluster.pods
        if p.namespace == namespace and selects(spec.get("podSelector") or {}, p.labels)
        if not p.host_network and _network_ready(p)
    )
    ingress: list[Endpoint] = []
    for rule in spec.get("ingress") or []:  # computeIngressEndpoints (85-138)
        ports = _policy_ports(rule.get("ports") or [])
        if any(isinstance(number, str) for _, number, _ in ports):
            # Named ports resolve against the policy's own pods (getIngressRulesPorts, 323-353), deduplicated.
            resolved = list(
                dict.fromkeys(
                    r
                    for p in cluster.pods
                    if p.namespace == namespace and selects(spec.get("podSelector") or {}, p.labels)
                    for r in _pod_ports(p, ports)
                )
            )
        else:
            resolved = [r for r in map(_cidr_port, ports) if r is not None]
        if ports and not resolved:
            continue  # 94-98
        if "from" not in rule:
            ingress.append(Endpoint("0.0.0.0/0", tuple(resolved), name))  # 101-104, buildAllowAllIngress 173-178
            continue
        for peer in rule["from"]:
            if "ipBlock" in peer:
                block = peer["ipBlock"]
                ingress.append(Endpoint(block["cidr"], tuple(resolved), name, tuple(block.get("except") or ())))
                continue
            for ns in _peer_namespaces(cluster, namespace, peer):
                for pod in _peer_pods(cluster, ns, peer.get("podSelector")):
                    ingress.append(Endpoint(f"{pod.ip}{HOST_MASK}", tuple(resolved), name))
    egress: list[Endpoint] = []
    for rule in spec.get("egress") or []:  # computeEgressEndpoints (198-265)
        ports = _policy_ports(rule.get("ports") or [])
        cidr_ports = [r for r in map(_cidr_port, ports) if r is not None]
        if "to" not in rule:  # buildAllowAllEgress (269-283)
            if not ports or cidr_ports:
                egress.append(Endpoint("0.0.0.0/0", tuple(cidr_ports), name))
            continue
        for peer in rule["to"]:
            if "ipBlock" in peer:
                if ports and not cidr_ports:
                    continue  # 220-223
                block = peer["ipBlock"]
                egress.append(Endpoint(block["cidr"], tuple(cidr_ports), name, tuple(block.get("except") or ())))
                continue
            for ns in _peer_namespaces(cluster, namespace, peer):
                for pod in _peer_pods(cluster, ns, peer.get("podSelector")):
                    pod_ports = _pod_ports(pod, ports)  # resolved per destination pod (243-252)
                    if ports and not pod_ports:
                        continue
                    egress.append(Endpoint(f"{pod.ip}{HOST_MASK}", tuple(pod_ports), name))
                egress += _service_endpoints(cluster, peer.get("podSelector"), ns, ports, name)
    return PolicyEndpoint(name, namespace, targets, tuple(ingress), tuple(egress), _isolation(spec))


@dataclass
class MapEntry:
    """One key of a pod's LPM trie: its L4 entries as the agent keeps them, and the policies they came from."""

    network: ipaddress.IPv4Network
    entries: list[PortRule]
    policies: set[str] = field(default_factory=set)
    why: str = ""

    @property
    def truncated(self) -> bool:
        return len(self.entries) > MAX_ENTRIES


def _network(cidr: str) -> ipaddress.IPv4Network | None:
    text = cidr if "/" in cidr else f"{cidr}{HOST_MASK}"  # fw_rule_processor.go 97-99
    network = ipaddress.ip_network(text, strict=False)
    return network if isinstance(network, ipaddress.IPv4Network) else None  # 110-113: no IPv6 in an IPv4 cluster


def firewall_map(node_ip: str, rules: Iterable[Endpoint]) -> dict[ipaddress.IPv4Network, MapEntry]:
    """ComputeMapEntriesFromEndpointRules (AGENT pkg/fwruleprocessor/fw_rule_processor.go 73-166) for one direction."""
    node = ipaddress.IPv4Network(f"{node_ip}{HOST_MASK}")
    # 80-84: the node's own IP allows everything, in both directions, whatever the policies say (PR #65).
    result: dict[ipaddress.IPv4Network, MapEntry] = {
        node: MapEntry(node, [PortRule(ANY)], why="the node's own IP, always allowed")
    }
    merged: dict[ipaddress.IPv4Network, MapEntry] = {}
    excepts: dict[ipaddress.IPv4Network, set[str]] = {}
    rule_excepts: dict[ipaddress.IPv4Network, list[ipaddress.IPv4Network]] = {}
    # 87, 169-191: broader prefixes first, so that a narrower key can take their ports (stable, as sort.Slice is not:
    # the outcome does not depend on the order within one prefix length).
    for rule in sorted(rules, key=lambda r: (_network(r.cidr) or ipaddress.ip_network("0.0.0.0/0")).prefixlen):
        network = _network(rule.cidr)
        if network is None:
            continue
        for e in rule.except_:  # 90-93: every except of every rule of the pod
            if (n := _network(e)) is not None:
                excepts.setdefault(n, set()).add(rule.policy)
        if network.network_address == node.network_address:
            continue  # 101-103, utils.go 444-450 IsNodeIP: no rule narrows the node's IP
        ports = list(rule.ports) or [PortRule(ANY)]  # 115-119: no ports is every protocol and port
        own_excepts = [n for e in rule.except_ if (n := _network(e)) is not None]
        if network in merged:  # 121-123: the same CIDR again adds its ports and excepts
            merged[network].entries += ports
            merged[network].policies.add(rule.policy)
            rule_excepts[network] += own_excepts
            continue
        entry = MapEntry(network, ports, {rule.policy})
        # 124-131, checkAndDeriveL4InfoFromAnyMatchingCIDRs 207-232: a narrower key takes the ports of each broader
        # (non-/32) CIDR seen so far that contains its address, unless the address is in that CIDR's excepts.
        for broader, known in merged.items():
            if broader.prefixlen == 32 or network.network_address not in broader:
                continue
            if any(network.network_address in x for x in rule_excepts[broader]):
                continue
            entry.entries += known.entries
            entry.policies |= known.policies
        merged[network] = entry
        rule_excepts[network] = own_excepts
    for network, policies in excepts.items():  # 139-151: an except that is no rule's CIDR denies everything
        if network not in merged:
            merged[network] = MapEntry(network, [PortRule(DENY)], policies, why="an ipBlock except")
    for network, entry in merged.items():  # 153-163, mergeDuplicateL4Info 234-268
        entry.entries = list(dict.fromkeys(entry.entries))
        result[network] = entry
    return result


def _port_matches(rule: PortRule, protocol: str, port: int) -> bool:
    """tc.v4egress.bpf.c 210-216 (the ingress program's is the same): the protocol, or any; port 0 (none) is every
    port; else the port, or one in (port, end]."""
    if rule.protocol not in (ANY, protocol):
        return False
    start = rule.port or 0
    return start == 0 or port == start or (rule.end is not None and start < port <= rule.end)


@dataclass(frozen=True)
class Lookup:
    allowed: bool
    certain: bool  # False when the deciding key holds more entries than the agent keeps (some are dropped at random)
    why: str


# evaluateNamespacePolicyByLookUp of each program: where no key holds the address, where a DENY entry denies.
_PROGRAM_LINES = {
    "egress": ("tc.v4egress.bpf.c 182-220", "186-192"),
    "ingress": ("tc.v4ingress.bpf.c 181-219", "184-190"),
}


def lookup(
    trie: Mapping[ipaddress.IPv4Network, MapEntry], ip: str, protocol: str, port: int, direction: str = "egress"
) -> Lookup:
    """evaluateNamespacePolicyByLookUp (tc.v4egress.bpf.c 182-220, tc.v4ingress.bpf.c 181-219) for a pod whose
    policies are applied: the longest prefix that holds the address decides alone; no key denies; a DENY entry denies
    (fw_rule_processor.go 139-151 puts them there)."""
    program, missing = _PROGRAM_LINES[direction]
    address = ipaddress.ip_address(ip)
    keys = [n for n in trie if address in n]
    if not keys:
        return Lookup(False, True, f"no entry of its {direction} map holds {ip} ({program.split()[0]} {missing})")
    entry = trie[max(keys, key=lambda n: n.prefixlen)]
    source = entry.why or ", ".join(sorted(entry.policies))
    kept = entry.entries[:MAX_ENTRIES]
    for rule in kept:
        if rule.protocol == DENY:
            return Lookup(False, True, f"{entry.network} is {source}: denied (fw_rule_processor.go 139-151)")
        if _port_matches(rule, protocol, port):
            if entry.truncated:
                # mergeDuplicateL4Info builds the list from a Go map (fw_rule_processor.go 263-265): which 24 survive
                # ComputeTrieValue (utils.go 364-366) is left to chance.
                return Lookup(
                    False,
                    False,
                    f"{entry.network} ({source}) holds {len(entry.entries)} port entries, more than the agent's "
                    f"{MAX_ENTRIES}: {port}/{protocol} may be among those it drops (utils.go 364-366)",
                )
            return Lookup(True, True, f"{entry.network} ({source}) allows {port}/{protocol}")
    if entry.truncated and any(_port_matches(r, protocol, port) for r in entry.entries[MAX_ENTRIES:]):
        return Lookup(
            False,
            False,
            f"{entry.network} ({source}) holds {len(entry.entries)} port entries, more than the agent's "
            f"{MAX_ENTRIES}: {port}/{protocol} may be among those it drops (utils.go 364-366)",
        )
    return Lookup(False, True, f"{entry.network} ({source}) does not allow {port}/{protocol}")


@dataclass(frozen=True)
class Enforcement:
    """What a pod's programs hold: its default state or its maps."""

    applied: bool
    ingress: Mapping[ipaddress.IPv4Network, MapEntry]
    egress: Mapping[ipaddress.IPv4Network, MapEntry]
    policies: tuple[str, ...]


class Agent:
    """The controller's PolicyEndpoints of a cluster and the maps the agent builds from them for each pod."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.endpoints = [resolve(cluster, p) for p in cluster.policies]
        # The agent files each PolicyEndpoint under the identifier of every pod it selects, anywhere in the cluster
        # (controllers/policyendpoints_controller.go 553-561, updatePodIdentifierToPEMap 589-616), and every agent
        # watches every PolicyEndpoint (674-678).
        self.by_identifier: dict[str, list[PolicyEndpoint]] = {}
        for pe in self.endpoints:
            for identifier in dict.fromkeys(pod_identifier(p.name, p.namespace) for p in pe.targets):
                self.by_identifier.setdefault(identifier, []).append(pe)

    def enforcement(self, pod: Pod) -> Enforcement | None:
        """None for a host-network pod: it has no veth, so no programs (AGENT pkg/ebpf/bpf_client.go 698, 775, 812)."""
        if pod.host_network:
            return None
        pes = self.by_identifier.get(pod_identifier(pod.name, pod.namespace), [])
        ingress = [e for pe in pes for e in pe.ingress]
        egress = [e for pe in pes for e in pe.egress if e.cidr]  # 396-404: an entry without a CIDR is skipped
        # deriveIngressAndEgressFirewallRules (357-426), deriveDefaultPodIsolation (428-443): isolated in a direction
        # that a PolicyEndpoint names when no rule of that direction was gathered, and not once one is.
        ingress_isolated = any("Ingress" in pe.isolation for pe in pes) and not ingress
        egress_isolated = any("Egress" in pe.isolation for pe in pes) and not egress
        if not ingress and not ingress_isolated and not egress and not egress_isolated:
            # 315-330: no policy: the pod's default state, allow in standard mode, deny in strict.
            return Enforcement(False, {}, {}, ())
        # 244-254: a direction with no rules and no isolation gets a catch-all entry.
        if not ingress and not ingress_isolated:
            ingress = [Endpoint("0.0.0.0/0", (), "no policy isolates it")]
        if not egress and not egress_isolated:
            egress = [Endpoint("0.0.0.0/0", (), "no policy isolates it")]
        return Enforcement(
            True,
            firewall_map(pod.node_ip, ingress),
            firewall_map(pod.node_ip, egress),
            tuple(dict.fromkeys(pe.policy for pe in pes)),
        )

    def side(self, pod: Pod, peer_ip: str, protocol: str, port: int, direction: str) -> Lookup:
        enforced = self.enforcement(pod)
        if enforced is None:
            return Lookup(True, True, f"{pod.name} is host-network: no programs (bpf_client.go 698)")
        if not enforced.applied:
            if self.cluster.strict:
                return Lookup(False, True, f"{pod.name} has no policy: default deny in strict mode")
            return Lookup(
                True, True, f"{pod.name} has no policy: default allow in standard mode (rpc_handler.go 80-84)"
            )
        trie = enforced.egress if direction == "egress" else enforced.ingress
        return lookup(trie, peer_ip, protocol, port, direction)

    def connection(self, source: Pod, address: str, protocol: str, port: int) -> tuple[Lookup, Lookup | None]:
        """A new connection from a pod to an address and port: the source's egress program (keyed on the destination,
        tc.v4egress.bpf.c 396-400) and, when the address is a pod with its own veth, that pod's ingress program
        (keyed on the source, tc.v4ingress.bpf.c 379-383). A Service's ClusterIP is judged as the egress program
        sees it, before DNAT; its backends' ingress is asked by the caller with the backend's address."""
        egress = self.side(source, address, protocol, port, "egress")
        destination = next((p for p in self.cluster.pods if p.ip == address and not p.host_network), None)
        if destination is None:
            return egress, None
        return egress, self.side(destination, source.ip, protocol, port, "ingress")
