"""The walls around learners as EKS enforces them (render/walls.py over render/network_policy_agent.py): one test per
kind of probe on every stack with a hub, the defects each must catch when planted, and the agent's rules where they
differ from the NetworkPolicy specification, on small clusters built here."""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import json
from typing import Any

import pytest
import yaml

from components.jupyterhub.walls import NOT_INTERNET
from domain.upstream.node_listeners import DCGM_PORT, KUBELET_PORT
from rehearsal.learner_pods import learner_pod
from render import network_policy_agent as npa
from render import walls
from render.run import walls_main
from reports.walls_table import table
from tests.conftest import ROOT
from tests.support.hub_config import stack_hub_config
from tests.support.rendered import HUB_STACKS, rendered
from tests.support.synthetic import SYNTHETIC

pytestmark = pytest.mark.charts

PLANTED = "synthetic-jupyterhub"  # isolated keeps the internet, turns is closed to it, staff-only is off the page


@functools.cache
def _layout(stack: str) -> walls.Layout:
    r = rendered(stack)
    r.require_charts()
    return walls.layout(r.run, r.out)


@functools.cache
def _document(stack: str) -> dict[str, Any]:
    return walls.walls(_layout(stack))


def _probes(stack: str, kind: str) -> list[dict[str, Any]]:
    found = [p for p in _document(stack)["probes"] if p["to"] == kind or p["to"].startswith(f"{kind}:")]
    assert found, kind
    return found


def _labs(stack: str) -> set[str]:
    return set(_layout(stack).learners)


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_every_hub_stack_keeps_its_walls(stack):
    assert walls.breaches(_document(stack)) == []


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_a_learner_reaches_no_other_learner(stack):
    found = _probes(stack, "learner")
    assert {p["from"] for p in found if p["to"] == p["from"]} == {f"learner:{lab}" for lab in _labs(stack)}
    assert not [p for p in found if p["allowed"]]


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_hubs_api_and_no_other_hub_port(stack):
    found = _probes(stack, "hub")
    assert {(p["port"], p["allowed"]) for p in found} == {(8081, True)} | {
        (p["port"], False) for p in found if p["port"] != 8081
    }
    # Through the pod and through the hub Service's ClusterIP, which the agent sees before DNAT.
    assert len({p["address"] for p in found if p["port"] == 8081}) == 2


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_hub_and_the_proxy_reach_every_learners_server(stack):
    # What a learner needs of the walls the other way: the proxy forwards the learner's browser to the server and the
    # hub checks on it, both at the server's named port, which the agent resolves on the learner's pod (ingress) and
    # on each destination pod (the hub's and the proxy's egress).
    w = _layout(stack)
    agent = npa.Agent(w.cluster)
    refused = []
    for learner in (p for pair in w.learners.values() for p in pair):
        port = next(p.number for p in learner.ports if p.name == walls.NOTEBOOK_PORT_NAME)
        for source in (w.hub, w.proxy):
            egress, ingress = agent.connection(source, learner.ip, "TCP", port)
            assert ingress is not None  # a learner's server has its own programs
            if not (egress.allowed and ingress.allowed):
                refused.append(f"{source.name} -> {learner.name}:{port}: {egress.why}; {ingress.why}")
    assert refused == []


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_never_the_proxys_api(stack):
    found = _probes(stack, "proxy-api")
    assert {(p["port"], p["allowed"]) for p in found} == {(8001, False)}


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_no_service_of_its_own_node_without_authentication(stack):
    found = _probes(stack, "node-self")
    ports = {p["port"] for p in found}
    assert {DCGM_PORT, KUBELET_PORT} <= ports
    assert not [p for p in found if p["allowed"] and "no authentication" in p["why"]]
    # The agent lets it through (the node-IP rule); the host firewall is what closes it.
    node_ips = {p["address"] for p in found if p["port"] == KUBELET_PORT}
    dcgm = [p["why"] for p in found if p["port"] == DCGM_PORT and p["address"] in node_ips]
    assert dcgm and all("the node's own IP, always allowed" in w and "host firewall drops it" in w for w in dcgm)


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_proxys_node_ports_are_closed_as_any_node_port(stack):
    # The hub's load balancer reaches the proxy through a nodePort of proxy-public on every node, lab nodes included.
    found = [p for p in _document(stack)["probes"] if "NodePort of the LoadBalancer Service proxy-public" in p["why"]]
    assert {p["to"] for p in found} == {"node-self", "node-other"}
    assert not [p for p in found if p["allowed"]]


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_no_service_of_another_node(stack):
    found = _probes(stack, "node-other")
    assert {DCGM_PORT, KUBELET_PORT} <= {p["port"] for p in found}
    assert not [p for p in found if p["allowed"]]


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_dcgm_host_engine_stays_closed_before_a_servers_policies_arrive(stack):
    # In the standard mode a new server is allowed everything until its policies reach its node's agent: no learner
    # code runs then (the server's walls gate), and the host engine of its own node and of every other, at the node's
    # address (the host port) and at its pod's own IP, is closed by the host firewall as well; the table says both.
    dcgm = [p for p in _document(stack)["probes"] if p["port"] == DCGM_PORT and p["to"] in ("node-self", "node-other")]
    assert {p["to"] for p in dcgm} == {"node-self", "node-other"}
    assert len({p["address"] for p in dcgm}) == len(dcgm) >= 4  # per lab: each node's address and its pod's IP
    assert not [p for p in dcgm if p["allowed"] or p["_first_moments"]]
    assert all("before its policies arrive the standard mode lets it through" in p["why"] for p in dcgm)
    first = [p["why"].split("before its policies arrive")[1] for p in dcgm]
    assert all("no learner code runs then" in why and "host firewall" in why for why in first)


def test_a_host_firewall_open_to_other_nodes_fails_without_the_walls_gate(monkeypatch):
    # The lab nodes' firewall without its forward rule, and servers that start at once: a learner's new server on
    # another node reaches the host engine before its policies arrive, though its policies close it afterwards.
    monkeypatch.setattr(walls.host_firewall, "PODS_CLOSED_PORTS", ())
    w = _layout(PLANTED)
    found = _breaches(dataclasses.replace(w, gated=dict.fromkeys(w.gated, False)))
    other = [line for line in found if "node-other" in line and f":{DCGM_PORT}/TCP before its policies arrive" in line]
    assert other and all("no host firewall drops it" in line for line in other), found
    # Its own node's address stays closed: the prerouting rule drops whatever a pod opens to it.
    own = {f"node-self {a.node_ip}:{DCGM_PORT}/TCP" for a, _ in w.learners.values()}
    assert not [line for line in found if any(o in line for o in own)], found
    # With the gate, no learner code runs in those moments: the firewall's forward rule is a second wall there.
    assert _breaches(w) == []


def test_a_learner_pod_without_the_walls_gate_is_seen(monkeypatch):
    # The render reads the gate off the pods the hub's KubeSpawner builds, not off gpulab's own builder.
    w = _layout(PLANTED)
    assert set(w.gated.values()) == {True}
    monkeypatch.setattr(walls.walls_gate, "NAME", "another-init-container")
    r = rendered(PLANTED)
    assert set(walls.layout(r.run, r.out).gated.values()) == {False}


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_learners_hold_no_token_for_kubelet_or_the_api(stack):
    # The kubelet and the API server authenticate their callers, and a learner's server has nothing to show them:
    # KubeSpawner 7.0.0 mounts no token without a service_account (spawner.py automount_service_account_token).
    layout = _layout(stack)
    config = stack_hub_config(stack)
    for lab in layout.learners:
        spec = learner_pod(config, lab, user="learner-1")["spec"]
        assert spec["automountServiceAccountToken"] is False and not spec.get("serviceAccountName")
        assert not [v for v in spec.get("volumes", []) if "projected" in v]


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_no_kubernetes_api(stack):
    found = _probes(stack, "kube-api")
    assert {p["address"] for p in found} == {walls.API_SERVICE_IP, _layout(stack).api_endpoint}
    assert not [p for p in found if p["allowed"]]


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_no_instance_metadata(stack):
    assert [p["allowed"] for p in _probes(stack, "imds")] == [False] * len(_labs(stack))


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_no_private_range(stack):
    found = [p for p in _probes(stack, "cidr") if p["to"] != "cidr:0.0.0.0/0"]
    assert {p["to"] for p in found} == {
        f"cidr:{c}" for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
    }
    assert not [p for p in found if p["allowed"]]


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_internet_as_each_lab_says(stack):
    found = {p["from"]: p["allowed"] for p in _probes(stack, "cidr:0.0.0.0/0")}
    assert found == {f"learner:{lab}": open_ for lab, open_ in _layout(stack).internet.items()}


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_dns_reaches_coredns(stack):
    found = _probes(stack, "coredns")
    assert {(p["address"], p["protocol"]) for p in found if p["allowed"]} == {
        (a, proto) for a in (_layout(stack).coredns.ip, walls.KUBE_DNS_IP) for proto in ("UDP", "TCP")
    }


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_dns_goes_nowhere_else(stack):
    found = _probes(stack, "dns-elsewhere")
    assert {p["port"] for p in found} == {53}
    assert not [p for p in found if p["allowed"]]


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_every_learners_server_has_rules_of_its_own(stack):
    # Users whose names differ only after a "-", or only in characters KubeSpawner's slugs replace, or past its
    # 48-character slug: the hub's own pod names keep them apart in the network policy agent's identifiers.
    config = stack_hub_config(stack)
    users = ["alice", "alice-1", "alice-2", "ann-lee", "ann-lee-1", "Ann.Lee@example.org", "ann.lee@example.org"]
    users += ["l" * 60 + "-1", "l" * 60 + "-2"]
    for lab in _layout(stack).learners:
        pods = [learner_pod(config, lab, user=user)["metadata"] for user in users]
        identifiers = {npa.pod_identifier(m["name"], m.get("namespace") or "hub") for m in pods}
        assert len(identifiers) == len(users), sorted(m["name"] for m in pods)


# --- planted defects: each must fail the walls -----------------------------------------------------------------------
def _with_policies(w: walls.Layout, policies: list[dict[str, Any]]) -> walls.Layout:
    return dataclasses.replace(w, cluster=dataclasses.replace(w.cluster, policies=tuple(policies)))


def _with_learners(w: walls.Layout, change) -> walls.Layout:
    renamed = {p: change(p) for pair in w.learners.values() for p in pair}
    pods = tuple(renamed.get(p, p) for p in w.cluster.pods)
    learners = {lab: (renamed[a], renamed[b]) for lab, (a, b) in w.learners.items()}
    return dataclasses.replace(w, cluster=dataclasses.replace(w.cluster, pods=pods), learners=learners)


def _internet_policy(w: walls.Layout) -> dict[str, Any]:
    (policy,) = [p for p in w.cluster.policies if p["metadata"]["name"].startswith("learners-internet-")]
    return policy


def _singleuser(w: walls.Layout) -> dict[str, Any]:
    (policy,) = [p for p in w.cluster.policies if p["metadata"]["name"] == "singleuser"]
    return policy


def _breaches(w: walls.Layout) -> list[str]:
    return walls.breaches(walls.walls(w))


def test_an_internet_policy_that_lets_172_16_in_fails():
    w = _layout(PLANTED)
    policy = _internet_policy(w)
    (rule,) = policy["spec"]["egress"]
    (peer,) = rule["to"]
    block = {**peer["ipBlock"], "except": [c for c in peer["ipBlock"]["except"] if c != "172.16.0.0/12"]}
    planted = {**policy, "spec": {**policy["spec"], "egress": [{"to": [{"ipBlock": block}]}]}}
    others = [p for p in w.cluster.policies if p is not policy]
    found = _breaches(_with_policies(w, [*others, planted]))
    assert [line for line in found if "cidr:172.16.0.0/12" in line], found


def test_kubespawners_own_pod_names_share_rules_and_fail():
    # KubeSpawner 7.0.0's own pod_name_template, jupyter-{user_server}: learner-1, learner-2... lose the part that
    # tells them apart, and every lab's learners get one set of rules, the union of all the labs' walls.
    w = _with_learners(
        _layout(PLANTED), lambda p: dataclasses.replace(p, name=f"jupyter-{p.name.split('-', 1)[1].rsplit('-', 1)[0]}")
    )
    found = _breaches(w)
    assert [line for line in found if "share the network policy agent's rules" in line], found
    assert [line for line in found if line.startswith("learner:turns reaches cidr:0.0.0.0/0")], found


def test_the_charts_dns_rule_to_all_of_kube_system_fails():
    w = _layout(PLANTED)
    singleuser = _singleuser(w)
    dns = {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
    dns["to"] = [{"namespaceSelector": {"matchLabels": {npa.NAMESPACE_NAME_LABEL: "kube-system"}}}]
    planted = {**singleuser, "spec": {**singleuser["spec"], "egress": [*singleuser["spec"]["egress"], dns]}}
    others = [p for p in w.cluster.policies if p is not singleuser]
    found = _breaches(_with_policies(w, [*others, planted]))
    other_node = next(iter(w.other_node.values()))
    assert [line for line in found if f"dns-elsewhere {other_node}:53/UDP" in line], found


def test_lab_nodes_without_the_host_firewall_fail():
    w = _layout(PLANTED)
    found = _breaches(dataclasses.replace(w, firewalled=dict.fromkeys(w.firewalled, False)))
    assert [line for line in found if "node-self" in line and f":{DCGM_PORT}/TCP" in line], found


def test_more_ports_than_the_agent_keeps_toward_the_hub_fail():
    w = _layout(PLANTED)
    singleuser = _singleuser(w)
    (to_hub,) = [r for r in singleuser["spec"]["egress"] if {"port": 8081} in r.get("ports", [])]
    many = {**to_hub, "ports": [{"port": 9000 + i} for i in range(npa.MAX_ENTRIES)]}
    planted = {**singleuser, "spec": {**singleuser["spec"], "egress": [*singleuser["spec"]["egress"], many]}}
    others = [p for p in w.cluster.policies if p is not singleuser]
    found = _breaches(_with_policies(w, [*others, planted]))
    assert [line for line in found if "cannot reach hub" in line and "more than the agent's 24" in line], found


def test_a_learner_on_the_hosts_network_fails():
    w = _with_learners(_layout(PLANTED), lambda p: dataclasses.replace(p, host_network=True, ip=p.node_ip))
    found = _breaches(w)
    assert [line for line in found if "reaches cidr:10.0.0.0/8" in line and "host-network" in line], found


def test_a_policy_that_opens_learners_to_each_other_fails():
    w = _layout(PLANTED)
    learners = {"podSelector": {"matchLabels": {"component": "singleuser-server"}}}
    planted = {
        "metadata": {"name": "planted", "namespace": _singleuser(w)["metadata"]["namespace"]},
        "spec": {
            **learners,
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [learners]}],
            "egress": [{"to": [learners]}],
        },
    }
    found = _breaches(_with_policies(w, [*w.cluster.policies, planted]))
    assert [line for line in found if line.startswith("learner:turns reaches learner:isolated")], found


def test_docs_hold_the_example_stacks_table_as_the_walls_answer_it():
    # A synthetic stack the tests own, so that a lab added to a stack file changes no page.
    doc = (ROOT / "docs" / "network-walls.md").read_text()
    current = "\n".join(table(_document(PLANTED)))
    assert current in doc, f"docs/network-walls.md holds an old table; the current one:\n{current}"


def test_tools_walls_writes_the_table_of_the_issue(tmp_path):
    rendered(PLANTED).require_charts()  # the command reads the charts: skip, as the rest, where helm is not
    # A stack file of a synthetic hub stack, so that the command is tested whether or not a stack file has a hub.
    stack_file = tmp_path / "Pulumi.hub.yaml"
    stack_file.write_text(yaml.safe_dump({"config": SYNTHETIC[PLANTED.removeprefix("synthetic-")]}))
    assert walls_main([str(stack_file), "--out", str(tmp_path / "out")]) == 0
    document = json.loads((tmp_path / "out" / walls.FILE).read_text())
    assert document["enforcedBy"].startswith("aws-network-policy-agent v1.3.1")
    for probe in document["probes"]:
        assert set(probe) == {"from", "to", "address", "port", "protocol", "allowed", "why"}
        assert probe["protocol"] in ("TCP", "UDP") and isinstance(probe["allowed"], bool)


# --- the agent's own rules, on small clusters ------------------------------------------------------------------------
NODE, OTHER_NODE = "10.0.0.1", "10.0.0.2"


def _pod(name: str, ip: str, ns: str = "lab", **labels: str) -> npa.Pod:
    return npa.Pod(name, ns, labels, ip, NODE, ports=(npa.ContainerPort(8888, "TCP", "notebook-port"),))


def _policy(name: str, spec: dict[str, Any], ns: str = "lab") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def _cluster(pods, policies, strict: bool = False) -> npa.Cluster:
    namespaces = {p.namespace for p in pods}
    return npa.Cluster(tuple(pods), (), {n: {npa.NAMESPACE_NAME_LABEL: n} for n in namespaces}, tuple(policies), strict)


@pytest.mark.parametrize(
    ("name", "identifier"),
    [
        ("jupyter-alice", "jupyter-lab"),
        ("jupyter-ann-lee", "jupyter-ann-lab"),
        ("jupyter-alice-0", "jupyter-alice-lab"),
        ("hub-5d8f7c6b9-x2x7k", "hub-5d8f7c6b9-lab"),
        ("a.b-c", "a_b-lab"),
        ("solo", "solo-lab"),
    ],
)
def test_the_pod_identifier_drops_the_last_part_of_the_name(name, identifier):
    assert npa.pod_identifier(name, "lab") == identifier


def test_no_policy_narrows_the_nodes_own_ip():
    learner = _pod("jupyter-a-0", "10.1.0.5", component="learner")
    dns_only = {"podSelector": {}, "policyTypes": ["Egress"]}
    dns_only["egress"] = [
        {
            "to": [{"ipBlock": {"cidr": f"{ip}/32"}} for ip in (NODE, OTHER_NODE)],
            "ports": [{"port": 53, "protocol": "UDP"}],
        }
    ]
    agent = npa.Agent(_cluster([learner], [_policy("dns", dns_only)]))
    assert agent.connection(learner, NODE, "TCP", DCGM_PORT)[0].allowed  # fw_rule_processor.go 80-84, 101-103
    assert not agent.connection(learner, OTHER_NODE, "TCP", DCGM_PORT)[0].allowed
    assert agent.connection(learner, OTHER_NODE, "UDP", 53)[0].allowed


def test_one_policys_except_denies_anothers_broader_allow():
    # Upstream allows 10.1.2.3:443 through the second policy; the agent keeps one map per pod, where 10/8 is deny-all.
    learner = _pod("jupyter-a-0", "192.168.0.5")
    internet = {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}
    policies = [
        _policy("internet", {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [internet]}]}),
        _policy("https", {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"ports": [{"port": 443}]}]}),
    ]
    agent = npa.Agent(_cluster([learner], policies))
    assert not agent.connection(learner, "10.1.2.3", "TCP", 443)[0].allowed
    assert agent.connection(learner, "203.0.113.7", "TCP", 443)[0].allowed


def test_named_ports_resolve_on_pods_never_on_an_ip_block():
    a, b = _pod("jupyter-a-0", "10.1.0.5", app="x"), _pod("jupyter-b-0", "10.1.0.6", app="x")
    ingress = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    ingress["ingress"] = [{"from": [{"podSelector": {}}], "ports": [{"port": "notebook-port"}]}]
    ingress["egress"] = [
        {"to": [{"podSelector": {}}], "ports": [{"port": "notebook-port"}]},
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": "notebook-port"}]},
    ]
    agent = npa.Agent(_cluster([a, b], [_policy("named", ingress)]))
    egress, into = agent.connection(a, b.ip, "TCP", 8888)
    assert egress.allowed and into is not None and into.allowed
    assert not agent.connection(a, "203.0.113.7", "TCP", 8888)[0].allowed  # endpoints.go 220-223


@pytest.mark.parametrize(("strict", "allowed"), [(False, True), (True, False)])
def test_a_pod_no_policy_selects_follows_the_enforcing_mode(strict, allowed):
    pod = _pod("loner-0", "10.1.0.9")
    agent = npa.Agent(_cluster([pod], [], strict))
    assert agent.connection(pod, "169.254.169.254", "TCP", 80)[0].allowed is allowed


def test_the_twenty_fifth_port_of_an_address_is_not_certain():
    trie = npa.firewall_map(
        NODE, [npa.Endpoint("10.9.0.0/16", tuple(npa.PortRule("TCP", 1000 + i) for i in range(25)), "p")]
    )
    assert npa.lookup(trie, "10.9.1.1", "TCP", 1000).allowed is False
    assert npa.lookup(trie, "10.9.1.1", "TCP", 1000).certain is False
    assert npa.lookup(trie, "10.9.1.1", "TCP", 80).allowed is False


def test_probes_cover_every_range_the_walls_keep_out():
    kinds = {p["to"] for p in _document(PLANTED)["probes"]}
    assert {f"cidr:{c}" for c in NOT_INTERNET if ipaddress.ip_network(c).prefixlen < 16} <= kinds


def test_an_address_key_inherits_broader_ports_outside_excepts():
    # The most specific key decides alone, so a /32 carries the ports of each broader range that holds it, unless it
    # sits in that range's except (fw_rule_processor.go 124-131, 207-232).
    learner = _pod("jupyter-a-0", "192.168.0.5")
    egress = [
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}], "ports": [{"port": 443}]},
        {
            "to": [{"ipBlock": {"cidr": "203.0.113.7/32"}}, {"ipBlock": {"cidr": "10.1.2.3/32"}}],
            "ports": [{"port": 22}],
        },
    ]
    agent = npa.Agent(
        _cluster([learner], [_policy("p", {"podSelector": {}, "policyTypes": ["Egress"], "egress": egress})])
    )
    assert agent.connection(learner, "203.0.113.7", "TCP", 443)[0].allowed
    assert agent.connection(learner, "203.0.113.7", "TCP", 22)[0].allowed
    assert not agent.connection(learner, "10.1.2.3", "TCP", 443)[0].allowed
    assert agent.connection(learner, "10.1.2.3", "TCP", 22)[0].allowed
