"""Who can reach whom through a rendered stack's NetworkPolicies, as an upstream NetworkPolicy engine answers it:
devtools/netpol (`make netpol`), the matcher of github.com/mattfenwick/cyclonus v0.5.6, the simulator that
kubernetes-sigs/network-policy-api carries on as policy-assistant. gpulab only lays out the pods and addresses and asks.

The pods are the stack's own: learners as the hub's KubeSpawner builds them from the rendered chart
(tests/support/hub_config.py), the hub, the proxy and the user-scheduler from the chart's Deployments,
kube-state-metrics from the render when gpulab:metrics is on; CoreDNS as EKS labels it. Addresses stand for what a pod
could dial: the VPC's (the render's stand-in VPC, render/harness.py), the API server (its Service's ClusterIP,
10.100.0.1 on EKS in a 192.168/16 VPC, and its endpoints, ENIs in the VPC), the instance metadata service, the Pod
Identity agent and the internet. The engine sees pods and addresses, not Services: a Service's ClusterIP is an address
to it. Without the binary every caller skips, in one line.

`python -m tests.support.reachability <stack>` prints the stack's table (docs/jupyterhub.md holds staging's).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from components.jupyterhub.hub import RELEASE
from rehearsal.learner_pods import learner_pod
from render.harness import VPC_CIDR
from tests.conftest import ROOT
from tests.support.chart_checks import one
from tests.support.hub_config import stack_hub_config
from tests.support.rendered import rendered

BINARY = Path(os.environ.get("GPULAB_NETPOL") or ROOT / "devtools" / "netpol" / "bin" / "netpol")

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by the API server


@dataclass(frozen=True)
class Port:
    number: int
    protocol: str = "TCP"
    name: str = ""

    def __str__(self) -> str:
        return f"{self.number}/{self.protocol}"


@dataclass(frozen=True)
class Peer:
    """A pod (with a namespace) or an address outside the cluster's pods."""

    name: str
    ip: str
    namespace: str = ""
    pod_labels: dict[str, str] = field(default_factory=dict, hash=False)
    ports: tuple[Port, ...] = ()

    def as_json(self) -> dict[str, Any]:
        if not self.namespace:
            return {"ip": self.ip}
        return {
            "ip": self.ip,
            "namespace": self.namespace,
            "namespaceLabels": {NAMESPACE_NAME_LABEL: self.namespace},
            "podLabels": self.pod_labels,
        }


@dataclass(frozen=True)
class Verdict:
    source: str
    destination: str
    port: Port
    egress: bool  # the source's policies let it out
    ingress: bool  # the destination's policies let it in

    @property
    def allowed(self) -> bool:
        return self.egress and self.ingress

    def words(self) -> str:
        if self.allowed:
            return "allowed"
        refused = [side for side, ok in (("egress", self.egress), ("ingress", self.ingress)) if not ok]
        return f"denied ({' and '.join(refused)})"


def _vpc_address(offset: int) -> str:
    return str(ipaddress.ip_network(VPC_CIDR)[offset])


def _container_ports(pod_spec: dict[str, Any]) -> tuple[Port, ...]:
    return tuple(
        Port(p["containerPort"], p.get("protocol", "TCP"), p.get("name", ""))
        for c in pod_spec["containers"]
        for p in c.get("ports") or []
    )


def _in_namespace(o: dict[str, Any], namespace: str) -> dict[str, Any]:
    return o if o["metadata"].get("namespace") else {**o, "metadata": {**o["metadata"], "namespace": namespace}}


def _deployment_pod(objects: list[dict[str, Any]], name: str, ip: str) -> Peer:
    deployment = one(objects, "Deployment", f"the {name} Deployment", name=name)
    template = deployment["spec"]["template"]
    return Peer(
        name,
        ip,
        deployment["metadata"].get("namespace", ""),
        dict(template["metadata"]["labels"]),
        _container_ports(template["spec"]),
    )


# Addresses outside the cluster's pods, each with the port a pod would dial there.
INTERNET = Peer("internet (203.0.113.10)", "203.0.113.10", ports=(Port(443),))
METADATA = Peer("instance metadata (169.254.169.254)", "169.254.169.254", ports=(Port(80),))
METADATA_IPV6 = Peer("instance metadata (fd00:ec2::254)", "fd00:ec2::254", ports=(Port(80),))
POD_IDENTITY = Peer("Pod Identity agent (169.254.170.23)", "169.254.170.23", ports=(Port(80),))
API_SERVICE = Peer("kube-apiserver Service (10.100.0.1)", "10.100.0.1", ports=(Port(443),))


@dataclass(frozen=True)
class Cluster:
    """The stack's pods and the addresses around them."""

    stack: str
    policies: list[dict[str, Any]]
    learners: dict[str, tuple[Peer, Peer]]  # two learners of each lab on the spawn page
    internet_open: dict[str, bool]
    hub: Peer
    proxy: Peer
    dns: Peer
    others: list[Peer]  # other pods of the cluster
    vpc: Peer
    api_endpoint: Peer


@functools.cache
def cluster(stack: str) -> Cluster:
    r = rendered(stack)
    namespace = r.run.stack.settings.jupyterhub.namespace
    # helm installs a release's objects that name no namespace into the release's.
    hub_objects = [_in_namespace(o, namespace) for o in r.chart(RELEASE)]
    objects = [*hub_objects, *r.manifests()]
    config = stack_hub_config(stack)
    labs = {n: lab for n, lab in r.run.stack.settings.labs.items() if lab.on_spawn_page}
    learners = {}
    for i, name in enumerate(labs):
        pair = []
        for j, user in enumerate(("a", "b")):
            pod = learner_pod(config, name, user=f"learner-{user}")
            pair.append(
                Peer(
                    f"learner {user.upper()} ({name})",
                    _vpc_address(1000 + 10 * i + j),
                    pod["metadata"].get("namespace") or namespace,
                    dict(pod["metadata"]["labels"]),
                    _container_ports(pod["spec"]),
                )
            )
        learners[name] = (pair[0], pair[1])
    hub = _deployment_pod(hub_objects, "hub", _vpc_address(100))
    proxy = _deployment_pod(hub_objects, "proxy", _vpc_address(101))
    # CoreDNS as the EKS add-on runs it: kube-system, k8s-app=kube-dns, DNS on 53 (EKS User Guide, managing-coredns).
    dns = Peer(
        "CoreDNS",
        _vpc_address(50),
        "kube-system",
        {"k8s-app": "kube-dns"},
        (Port(53, "UDP", "dns"), Port(53, "TCP", "dns-tcp")),
    )
    others = [
        _deployment_pod(hub_objects, "user-scheduler", _vpc_address(102)),
        *[
            _deployment_pod(objects, o["metadata"]["name"], _vpc_address(60 + k))
            for k, o in enumerate(
                o for o in objects if o["kind"] == "Deployment" and "kube-state-metrics" in o["metadata"]["name"]
            )
        ],
    ]
    return Cluster(
        stack=stack,
        policies=[o for o in objects if o["kind"] == "NetworkPolicy"],
        learners=learners,
        internet_open={name: lab.internet for name, lab in labs.items()},
        hub=hub,
        proxy=proxy,
        dns=dns,
        others=others,
        vpc=Peer(f"VPC address ({_vpc_address(10)})", _vpc_address(10), ports=(Port(443), Port(22))),
        api_endpoint=Peer(f"kube-apiserver endpoint ({_vpc_address(20)})", _vpc_address(20), ports=(Port(443),)),
    )


def probes(c: Cluster) -> Iterator[tuple[Peer, Peer, Port]]:
    """The connections the table answers: every way out of a learner, every way into one, and the hub's own."""
    first = next(iter(c.learners.values()))
    for a, b in c.learners.values():
        destinations = [b, *(pair[0] for pair in c.learners.values() if pair[0] is not a), c.hub, c.proxy, c.dns]
        destinations += [*c.others, c.vpc, c.api_endpoint, API_SERVICE, METADATA, METADATA_IPV6, POD_IDENTITY, INTERNET]
        for destination in destinations:
            for port in destination.ports:
                yield a, destination, port
    a = first[0]
    for source in (c.proxy, c.hub, c.dns, *c.others, c.vpc, INTERNET, first[1]):
        for port in a.ports:
            yield source, a, port
    for destination in (API_SERVICE, c.api_endpoint, POD_IDENTITY, INTERNET):
        for port in destination.ports:
            yield c.hub, destination, port


def evaluate(c: Cluster, asked: Sequence[tuple[Peer, Peer, Port]]) -> list[Verdict]:
    if not BINARY.is_file():
        pytest.skip(f"no NetworkPolicy evaluator at {BINARY}: `make netpol` builds it (Go 1.26, ~5 CPU-minutes cold)")
    request = {
        "policies": c.policies,
        "probes": [
            {
                "source": s.as_json(),
                "destination": d.as_json(),
                "port": p.number,
                "portName": p.name,
                "protocol": p.protocol,
            }
            for s, d, p in asked
        ],
    }
    done = subprocess.run(
        [str(BINARY)], input=json.dumps(request), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    return [
        Verdict(s.name, d.name, p, egress=a["egress"], ingress=a["ingress"])
        for (s, d, p), a in zip(asked, answers, strict=True)
    ]


@functools.cache
def table(stack: str) -> tuple[Verdict, ...]:
    c = cluster(stack)
    return tuple(evaluate(c, list(probes(c))))


def breaches(c: Cluster, verdicts: Sequence[Verdict]) -> list[str]:
    """Every answer that breaks the walls of docs/jupyterhub.md, in words. Each wall is judged on its own: a learner's
    policies must refuse what it should not reach (egress) and what should not reach it (ingress), whatever the other
    side's policies say, and what it needs must get through both."""
    learners = {p.name: lab for lab, pair in c.learners.items() for p in pair}
    found = []

    def judge(v: Verdict, side: str, got: bool, should: bool) -> None:
        if got != should:
            found.append(
                f"{v.source} -> {v.destination} {v.port}: {side} {'allowed' if got else 'denied'}, should not be"
            )
        elif should and not v.allowed:
            found.append(f"{v.source} -> {v.destination} {v.port}: {v.words()}, should be allowed")

    for v in verdicts:
        if v.source in learners:
            out = v.destination in (c.hub.name, c.dns.name) or (v.destination, v.port.number) == (c.proxy.name, 8000)
            judge(
                v, "egress", v.egress, out or (v.destination == INTERNET.name and c.internet_open[learners[v.source]])
            )
        if v.destination in learners:
            judge(v, "ingress", v.ingress, v.source in (c.proxy.name, c.hub.name))
    return found


def markdown(verdicts: Sequence[Verdict]) -> str:
    lines = ["| from | to | port | |", "|---|---|---|---|"]
    lines += [f"| {v.source} | {v.destination} | {v.port} | {v.words()} |" for v in verdicts]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(table(sys.argv[1])))
