"""The walls around learners as EKS enforces them: every way out of a learner's server that issue #46 names, asked of
the rendered stack's NetworkPolicies through the network policy controller and agent (render/network_policy_agent.py)
and of the lab nodes' host firewall (components/karpenter/host_firewall.py), written to walls.json.

`python -m tools.walls <stack name or stack file> --out <dir>` (render/run.py walls_main) renders the stack into
<dir>, charts included, and writes <dir>/walls.json: {"enforcedBy": ..., "probes": [{"from": "learner:<lab>", "to":
<kind>, "address", "port", "protocol", "allowed", "why"}]}. It exits with status 1, one line per breach, when a
learner reaches what it must not (another learner, a node service that does not authenticate its callers, the API
server, the metadata service, a private range, DNS anywhere but CoreDNS, the internet of a closed lab), when it
cannot reach the hub's API or CoreDNS, or when two learners' servers share the agent's rules. `python -m tools.render`
runs the same check.

The cluster is laid out from the render: the chart's hub, proxy and user-scheduler, learners of every lab on the spawn
page as the hub's KubeSpawner builds them (rehearsal/learner_pods.py) with two learners whose names differ only after
their last "-" (the agent's pod identifier drops it), every DaemonSet on the lab nodes it lands on (the EKS add-ons' of
eks-addons.json, the charts' and the stack's), and CoreDNS and the API server as EKS runs them. Each lab has two nodes:
its learners' and another. Addresses are the render's stand-in VPC's (render/harness.py).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.jupyterhub import walls_gate
from components.jupyterhub.hub import RELEASE
from components.jupyterhub.walls import COREDNS_LABELS, COREDNS_NAMESPACE, DNS_PORT, HUB_API_PORT, NOT_INTERNET
from components.karpenter import host_firewall
from components.labels import GPU_TAINT
from domain.upstream.node_listeners import DCGM_PORT, DCGM_SERVER, HOST_NETWORK_DAEMONSETS, LISTENERS, Listener
from domain.upstream.versions import builds, one_release
from render import addons, harness
from render import network_policy_agent as npa

FILE = "walls.json"
ENFORCED_BY = (
    f"aws-network-policy-agent v1.3.1 (VPC CNI add-on {builds('vpc-cni')}, VPC CNI {one_release('vpc-cni')}), "
    "amazon-network-policy-controller-k8s v1.1.7 (run by EKS, its version not published), standard enforcing mode, "
    f"and the lab nodes' host firewall (nftables table {host_firewall.TABLE})"
)
# EKS's Service range in a VPC outside 10/8 (EKS User Guide, "Service IP address range"); the render's VPC is
# 192.168/16.
SERVICE_CIDR = ipaddress.ip_network("10.100.0.0/16")
API_SERVICE_IP = str(SERVICE_CIDR[1])  # default/kubernetes
KUBE_DNS_IP = str(SERVICE_CIDR[10])  # kube-system/kube-dns
METADATA = "169.254.169.254"
AMAZON_DNS = "169.254.169.253"  # the VPC's resolver at its link-local address (Amazon VPC User Guide, AmazonDNS)
INTERNET = "203.0.113.10"  # TEST-NET-3, standing for any public address
NOTEBOOK_PORT_NAME = "notebook-port"  # KubeSpawner's name of the server's port (kubespawner/objects.py make_pod)
PROXY_API_PORT = 8001
# Two learners per lab, each a user of their own (a user runs one default server), all named learner-<n>: names that
# differ only after their last "-", which the agent's pod identifier drops.
LEARNERS_PER_LAB = 2


@dataclass(frozen=True)
class Probe:
    lab: str
    to: str
    address: str
    port: int
    protocol: str
    expect: bool | None  # True: the learner needs it; False: it must not reach it; None: either (it authenticates)
    note: str = ""  # what is there, for `why`
    backend: npa.Pod | None = None  # the pod behind a Service's ClusterIP
    backend_port: int | None = None
    node_local: bool = False  # an address of the learner's own node
    listener: Listener | None = None  # the node service asked


@dataclass(frozen=True)
class Layout:
    cluster: npa.Cluster
    learners: Mapping[str, tuple[npa.Pod, npa.Pod]]
    internet: Mapping[str, bool]
    other_node: Mapping[str, str]  # lab -> the IP of its second node
    hub: npa.Pod
    proxy: npa.Pod
    coredns: npa.Pod
    services: Mapping[str, npa.Service]
    node_listeners: Mapping[str, tuple[Listener, ...]]  # lab -> what listens on its nodes
    # (DaemonSet, node IP) -> its pod there, for those on the pod network: a host port's listener is also at its pod IP
    daemon_pods: Mapping[tuple[str, str], npa.Pod]
    firewalled: Mapping[str, bool]  # lab -> its nodes' user data loads the host firewall
    gated: Mapping[str, bool]  # lab -> its learners' servers wait for their walls first (walls_gate.py)
    vpc: ipaddress.IPv4Network
    api_endpoint: str


def _load(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(text, Loader=yaml.CSafeLoader) if doc]


def _ports(spec: Mapping[str, Any]) -> tuple[npa.ContainerPort, ...]:
    return tuple(
        npa.ContainerPort(p["containerPort"], p.get("protocol", "TCP"), p.get("name", ""))
        for c in spec.get("containers") or []
        for p in c.get("ports") or []
    )


def _tolerates_gpu(spec: Mapping[str, Any]) -> bool:
    return any(
        t.get("operator") == "Exists" and t.get("key") in (None, GPU_TAINT["key"])
        for t in spec.get("tolerations") or []
    )


def layout(run: harness.Run, out: Path) -> Layout:
    """The stack's cluster as the walls are asked of it; `out` holds the render with its charts."""
    settings = run.stack.settings
    assert settings.jupyterhub is not None, "check() asks only stacks with a hub"
    namespace = settings.jupyterhub.namespace
    chart = [
        o if o["metadata"].get("namespace") else {**o, "metadata": {**o["metadata"], "namespace": namespace}}
        for o in _load((out / "charts" / f"{RELEASE}.yaml").read_text())
    ]
    manifests = [o for p in sorted((out / "manifests").glob("*.yaml")) for o in _load(p.read_text())]
    others = [o for p in sorted((out / "charts").glob("*.yaml")) if p.stem != RELEASE for o in _load(p.read_text())]
    vpc = ipaddress.IPv4Network(harness.VPC_CIDR)
    addresses = iter(vpc[1000 + i] for i in range(10_000))
    system_node = str(vpc[30])
    labs = [name for name, lab in settings.labs.items() if lab.on_spawn_page]
    nodes = {name: (str(vpc[40 + 2 * i]), str(vpc[41 + 2 * i])) for i, name in enumerate(labs)}
    pods: list[npa.Pod] = []

    def add(name: str, ns: str, labels: Mapping[str, str], spec: Mapping[str, Any], node: str) -> npa.Pod:
        host = bool(spec.get("hostNetwork"))
        pod = npa.Pod(name, ns, dict(labels), node if host else str(next(addresses)), node, host, _ports(spec))
        pods.append(pod)
        return pod

    def deployment(o: Mapping[str, Any]) -> npa.Pod:
        template = o["spec"]["template"]
        # A ReplicaSet's pod: <deployment>-<template hash>-<5 characters>.
        name = f"{o['metadata']['name']}-5d8f7c6b9-x2x7k"
        return add(
            name,
            o["metadata"].get("namespace", "default"),
            template["metadata"]["labels"],
            template["spec"],
            system_node,
        )

    by_name = {}
    for o in [*chart, *manifests, *others]:
        if o["kind"] == "Deployment":
            pod = deployment(o)
            by_name[(pod.namespace, o["metadata"]["name"])] = pod
    # Imported here, not with the module: rehearsal.learner_pods brings kubernetes_asyncio, kubernetes_validate and
    # jsonschema (2.2 CPU-seconds here), which every command importing render.run would pay, `make plan`'s check of
    # its inputs (render/inputs.py, meant to answer in under a second) included.
    from rehearsal.learner_pods import hub_config, learner_pod

    with contextlib.redirect_stdout(io.StringIO()):  # the chart's jupyterhub_config.py prints what it loads
        config = hub_config(chart, namespace)
    learners: dict[str, tuple[npa.Pod, npa.Pod]] = {}
    gated: dict[str, bool] = {}
    for i, name in enumerate(labs):
        pair = []
        for j in range(LEARNERS_PER_LAB):
            built = learner_pod(config, name, user=f"learner-{i * LEARNERS_PER_LAB + j + 1}")
            first = (built["spec"].get("initContainers") or [{}])[0]
            gated[name] = (first.get("name"), first.get("command")) == (walls_gate.NAME, walls_gate.command())
            meta = built["metadata"]
            pair.append(
                add(meta["name"], meta.get("namespace") or namespace, meta["labels"], built["spec"], nodes[name][0])
            )
        learners[name] = (pair[0], pair[1])
    # CoreDNS as the EKS add-on runs it (EKS User Guide, managing-coredns): Deployment coredns in kube-system.
    coredns_spec = {
        "containers": [
            {
                "ports": [
                    {"name": "dns", "containerPort": DNS_PORT, "protocol": "UDP"},
                    {"name": "dns-tcp", "containerPort": DNS_PORT, "protocol": "TCP"},
                    {"name": "metrics", "containerPort": 9153},
                ]
            }
        ]
    }
    coredns = add("coredns-787cb67946-abcde", COREDNS_NAMESPACE, COREDNS_LABELS, coredns_spec, system_node)
    # DaemonSets: every node for those that tolerate every taint, lab nodes for those that tolerate the GPU taint.
    daemonsets = [*addons.daemonsets(run), *(o for o in [*manifests, *others] if o["kind"] == "DaemonSet")]
    present: set[str] = set()
    daemon_pods: dict[tuple[str, str], npa.Pod] = {}
    for o in daemonsets:
        template, name = o["spec"]["template"], o["metadata"]["name"]
        spec = dict(template["spec"])
        if name in HOST_NETWORK_DAEMONSETS:  # eks-addons.json keeps only placement and requests
            spec["hostNetwork"] = True
        if name == DCGM_SERVER:
            spec["containers"] = [{"ports": [{"containerPort": DCGM_PORT, "hostPort": DCGM_PORT}]}]
        if not _tolerates_gpu(spec):
            continue
        present.add(name)
        for lab_nodes in nodes.values():
            for i, node in enumerate(lab_nodes):
                pod = add(
                    f"{name}-{i}{node.rsplit('.', 1)[1]}",
                    o["metadata"].get("namespace") or "kube-system",
                    template["metadata"].get("labels") or {},
                    spec,
                    node,
                )
                if not pod.host_network:
                    daemon_pods[(name, node)] = pod
    node_listeners = tuple(ln for ln in LISTENERS if ln.daemonset is None or ln.daemonset in present)
    node_listeners += tuple(_node_ports([*chart, *manifests, *others]))
    services: dict[str, npa.Service] = {
        "kubernetes": npa.Service("kubernetes", "default", API_SERVICE_IP, None, (npa.ServicePort(443, 443),)),
        "kube-dns": npa.Service(
            "kube-dns",
            COREDNS_NAMESPACE,
            KUBE_DNS_IP,
            dict(COREDNS_LABELS),
            (
                npa.ServicePort(DNS_PORT, DNS_PORT, "UDP"),
                npa.ServicePort(DNS_PORT, DNS_PORT),
                npa.ServicePort(9153, 9153),
            ),
        ),
    }
    for i, o in enumerate(o for o in chart if o["kind"] == "Service"):
        spec = o["spec"]
        ports = tuple(
            npa.ServicePort(p["port"], p.get("targetPort", p["port"]), p.get("protocol", "TCP")) for p in spec["ports"]
        )
        ip = "None" if spec.get("clusterIP") == "None" else str(SERVICE_CIDR[257 + i])
        services[o["metadata"]["name"]] = npa.Service(o["metadata"]["name"], namespace, ip, spec.get("selector"), ports)
    namespaces = {p.namespace for p in pods} | {s.namespace for s in services.values()} | {namespace}
    cluster = npa.Cluster(
        tuple(pods),
        tuple(services.values()),
        {n: {npa.NAMESPACE_NAME_LABEL: n} for n in sorted(namespaces)},
        tuple(o for o in [*chart, *manifests, *others] if o["kind"] == "NetworkPolicy"),
    )
    node_classes = {o["metadata"]["name"]: o for o in manifests if o["kind"] == "EC2NodeClass"}
    return Layout(
        cluster=cluster,
        learners=learners,
        internet={name: settings.labs[name].internet for name in labs},
        other_node={name: nodes[name][1] for name in labs},
        hub=by_name[(namespace, "hub")],
        proxy=by_name[(namespace, "proxy")],
        coredns=coredns,
        services=services,
        node_listeners=dict.fromkeys(labs, node_listeners),
        daemon_pods=daemon_pods,
        firewalled={
            name: host_firewall.RULESET in (node_classes.get(name, {}).get("spec", {}).get("userData") or "")
            for name in labs
        },
        gated=gated,
        vpc=vpc,
        api_endpoint=str(vpc[20]),
    )


# The range the API server gives a Service's nodePort from when its spec names none (kube-apiserver
# --service-node-port-range, default 30000-32767): the render cannot know which; the walls take them in order, and
# treat every port alike.
NODE_PORT_RANGE_START = 30000


def _node_ports(objects: list[dict[str, Any]]) -> Iterator[Listener]:
    """A NodePort or LoadBalancer Service listens on every node's addresses, each of its ports at a nodePort that
    kube-proxy forwards to the Service's pods (Kubernetes, Service type NodePort): a port of the node as any other."""
    unset = iter(range(NODE_PORT_RANGE_START, NODE_PORT_RANGE_START + 2768))
    for o in objects:
        if o["kind"] != "Service" or o["spec"].get("type") not in ("NodePort", "LoadBalancer"):
            continue
        for port in o["spec"]["ports"]:
            yield Listener(
                f"NodePort of the {o['spec']['type']} Service {o['metadata']['name']} (its port {port['port']})",
                None,
                port.get("nodePort") or next(unset),
                port.get("protocol", "TCP"),
                None,
                "kube-proxy on every node (Kubernetes Service type NodePort; LoadBalancer Services have one too)",
            )


def _ports_of(pod: npa.Pod) -> list[npa.ContainerPort]:
    return list(dict.fromkeys(pod.ports))


def probes(w: Layout) -> Iterator[Probe]:
    """Every way out of a learner that issue #46 names, for every lab."""
    for lab, (a, b) in w.learners.items():
        notebook = next(p.number for p in b.ports if p.name == NOTEBOOK_PORT_NAME)
        yield Probe(lab, f"learner:{lab}", b.ip, notebook, "TCP", False, f"{b.name}, a learner of the same lab")
        for other, (c, _) in w.learners.items():
            if other != lab:
                yield Probe(lab, f"learner:{other}", c.ip, notebook, "TCP", False, f"{c.name}, a learner of {other}")
        hub_service = w.services["hub"]
        for port in _ports_of(w.hub):
            needed = port.number == HUB_API_PORT
            yield Probe(
                lab, "hub", w.hub.ip, port.number, port.protocol, needed, f"the hub pod ({port.name or port.number})"
            )
        for sp in hub_service.ports:
            yield Probe(
                lab,
                "hub",
                hub_service.cluster_ip,
                sp.port,
                sp.protocol,
                sp.port == HUB_API_PORT,
                "the hub Service",
                w.hub,
                npa.container_port(w.hub, sp.target, sp.protocol),
            )
        yield Probe(lab, "proxy-api", w.proxy.ip, PROXY_API_PORT, "TCP", False, "the proxy pod's API")
        api = w.services["proxy-api"]
        yield Probe(
            lab,
            "proxy-api",
            api.cluster_ip,
            PROXY_API_PORT,
            "TCP",
            False,
            "the proxy-api Service",
            w.proxy,
            npa.container_port(w.proxy, api.ports[0].target, "TCP"),
        )
        node_self = a.node_ip
        for listener in w.node_listeners[lab]:
            expect = None if listener.authenticates else False
            what = listener.component + (
                f" (authenticates: {listener.authenticates})" if listener.authenticates else ", no authentication"
            )
            yield Probe(
                lab,
                "node-self",
                listener.address or node_self,
                listener.port,
                listener.protocol,
                expect,
                what,
                node_local=True,
                listener=listener,
            )
            if listener.address is None:  # a node-local link-local address is every node's own
                yield Probe(
                    lab,
                    "node-other",
                    w.other_node[lab],
                    listener.port,
                    listener.protocol,
                    expect,
                    what,
                    listener=listener,
                )
            # A host port's listener answers at its pod's own IP too (the dcgm-server's nv-hostengine -b ALL).
            for to, node in (("node-self", node_self), ("node-other", w.other_node[lab])):
                pod = w.daemon_pods.get((listener.daemonset or "", node))
                if pod is not None:
                    yield Probe(
                        lab,
                        to,
                        pod.ip,
                        listener.port,
                        listener.protocol,
                        expect,
                        f"{what}, at its pod {pod.name}'s own IP",
                        listener=listener,
                    )
        yield Probe(lab, "kube-api", API_SERVICE_IP, 443, "TCP", False, "the default/kubernetes Service")
        yield Probe(lab, "kube-api", w.api_endpoint, 443, "TCP", False, "the API server's endpoint in the VPC")
        yield Probe(lab, "imds", METADATA, 80, "TCP", False, "the instance metadata service")
        for cidr in (*NOT_INTERNET[:4],):
            network = ipaddress.ip_network(cidr)
            yield Probe(lab, f"cidr:{cidr}", str(network[10]), 443, "TCP", False, f"an address of {cidr}")
        yield Probe(lab, "cidr:0.0.0.0/0", INTERNET, 443, "TCP", w.internet[lab], "the internet")
        for protocol in ("UDP", "TCP"):
            yield Probe(lab, "coredns", w.coredns.ip, DNS_PORT, protocol, True, "a CoreDNS pod")
            kube_dns = w.services["kube-dns"]
            yield Probe(
                lab,
                "coredns",
                kube_dns.cluster_ip,
                DNS_PORT,
                protocol,
                True,
                "the kube-dns Service",
                w.coredns,
                DNS_PORT,
            )
            yield Probe(lab, "dns-elsewhere", w.other_node[lab], DNS_PORT, protocol, False, "another node")
            yield Probe(lab, "dns-elsewhere", node_self, DNS_PORT, protocol, False, "its own node", node_local=True)
        yield Probe(lab, "dns-elsewhere", str(w.vpc[2]), DNS_PORT, "UDP", False, "the VPC's resolver")
        yield Probe(lab, "dns-elsewhere", AMAZON_DNS, DNS_PORT, "UDP", False, "the VPC's resolver, link-local")


def _host_firewall(w: Layout, probe: Probe) -> str | None:
    """Why the lab's nodes' host firewall drops a learner's new connection, or None when it lets it through."""
    if not w.firewalled[probe.lab]:
        return None
    if probe.node_local:
        return f"the node's host firewall drops it ({host_firewall.TABLE}, components/karpenter/host_firewall.py)"
    listener = probe.listener
    served_by_a_pod = listener is not None and any(name == listener.daemonset for name, _ in w.daemon_pods)
    if served_by_a_pod and probe.protocol == "TCP" and probe.port in host_firewall.PODS_CLOSED_PORTS:
        # Its host port is DNATed to the pod, so the forward hook sees both addresses as a connection to the pod.
        return (
            f"the node's host firewall drops it: only the node itself reaches its pods' {probe.port}/TCP "
            f"({host_firewall.TABLE} forward, components/karpenter/host_firewall.py)"
        )
    return None


def verdict(agent: npa.Agent, w: Layout, probe: Probe) -> tuple[bool, str, bool | None]:
    """Whether the learner's server reaches the probe's address once its policies apply, why, and, for a node service
    that gives control to anyone (Listener.controls), whether it reaches it in the server's first moments, before
    its policies reach the node's agent."""
    source = w.learners[probe.lab][0]
    egress, ingress = agent.connection(source, probe.address, probe.protocol, probe.port)
    if probe.backend is not None and probe.backend_port is not None:  # the backend's ingress sees the pod, after DNAT
        ingress = agent.side(probe.backend, source.ip, probe.protocol, probe.backend_port, "ingress")
    why = [f"{probe.note}: egress {'allowed' if egress.allowed else 'denied'} ({egress.why})"]
    allowed = egress.allowed
    if ingress is not None:
        why.append(f"ingress {'allowed' if ingress.allowed else 'denied'} ({ingress.why})")
        allowed = allowed and ingress.allowed
    dropped = _host_firewall(w, probe)
    said = False
    if allowed:
        if dropped is not None:
            why.append(dropped)
            allowed, said = False, True
        elif probe.node_local:
            why.append("no host firewall on the lab's nodes")
    if probe.listener is None or not probe.listener.controls:
        return allowed, "; ".join(why), None
    # A new pod is default-allow until the controller's PolicyEndpoint for it reaches the agent (standard mode,
    # aws-network-policy-agent v1.3.1 pkg/rpc/rpc_handler.go 80-84); with one pod identifier per learner's server
    # that is every new server. No learner code runs then where the server's first init container waits for its
    # walls (walls_gate.py); what the host firewall drops, it drops then too.
    if w.cluster.strict:
        return allowed, "; ".join(why), False
    first = "before its policies arrive the standard mode lets it through (rpc_handler.go 80-84)"
    if w.gated[probe.lab]:
        first += (
            f", but no learner code runs then: the server's first init container, {walls_gate.NAME}, holds it until "
            "its policies drop the API server (components/jupyterhub/walls_gate.py)"
        )
    if dropped is None:
        why.append(f"{first}, and no host firewall drops it")
    else:
        why.append(f"{first}, and the host firewall still drops it" if said else f"{first}, and {dropped}")
    return allowed, "; ".join(why), dropped is None and not w.gated[probe.lab]


def walls(w: Layout) -> dict[str, Any]:
    agent = npa.Agent(w.cluster)
    found = []
    for probe in probes(w):
        allowed, why, first_moments = verdict(agent, w, probe)
        found.append(
            {
                "from": f"learner:{probe.lab}",
                "to": probe.to,
                "address": probe.address,
                "port": probe.port,
                "protocol": probe.protocol,
                "allowed": allowed,
                "why": why,
                "_expect": probe.expect,
                "_first_moments": first_moments,
            }
        )
    return {"enforcedBy": ENFORCED_BY, "probes": found, "_identifiers": _shared_identifiers(w)}


def _shared_identifiers(w: Layout) -> list[str]:
    """Learners' servers that share the agent's rules with another pod (npa.pod_identifier)."""
    learners = {p for pair in w.learners.values() for p in pair}
    by_identifier: dict[str, list[npa.Pod]] = {}
    for pod in w.cluster.pods:
        if not pod.host_network:
            by_identifier.setdefault(npa.pod_identifier(pod.name, pod.namespace), []).append(pod)
    return [
        f"{', '.join(p.name for p in group)} share the network policy agent's rules (pod identifier {identifier}: "
        'the name without its last "-" part, aws-network-policy-agent v1.3.1 pkg/utils/utils.go 156-167)'
        for identifier, group in by_identifier.items()
        if len(group) > 1 and learners & set(group)
    ]


def breaches(document: Mapping[str, Any]) -> list[str]:
    """What the walls must not let through, and what they must, in words."""
    found = list(document["_identifiers"])
    for p in document["probes"]:
        expect = p["_expect"]
        if p["_first_moments"]:
            found.append(
                f"{p['from']} reaches {p['to']} {p['address']}:{p['port']}/{p['protocol']} before its policies "
                f"arrive: {p['why']}"
            )
        if expect is None or expect == p["allowed"]:
            continue
        if p["allowed"]:
            found.append(f"{p['from']} reaches {p['to']} {p['address']}:{p['port']}/{p['protocol']}: {p['why']}")
        else:
            found.append(f"{p['from']} cannot reach {p['to']} {p['address']}:{p['port']}/{p['protocol']}: {p['why']}")
    return found


def write(document: Mapping[str, Any], out: Path) -> None:
    public = {
        "enforcedBy": document["enforcedBy"],
        "probes": [{k: v for k, v in p.items() if not k.startswith("_")} for p in document["probes"]],
    }
    (out / FILE).write_text(json.dumps(public, indent=2) + "\n")


def check(run: harness.Run, out: Path) -> list[str]:
    """Writes out/walls.json for a render with its charts and returns its breaches; nothing without a hub."""
    if run.stack.settings.jupyterhub is None:
        return []
    document = walls(layout(run, out))
    write(document, out)
    return breaches(document)
