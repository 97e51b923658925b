"""The check a learner's server's first init container runs (components/jupyterhub/walls_gate_check.py), run for real
in network namespaces wired as the VPC CNI wires a pod, with the network policy agent's egress program stood in for
by an nftables rule on the same hook (the ingress of the pod's host-side veth, before the node's netfilter and DNAT;
aws-network-policy-agent v1.3.1 pkg/ebpf/bpf_client.go 812) that drops the API server's address once "the policies
arrive": the check lets the server start only after they have, and never when they do not, when the API server
refuses rather than drops, or when the hub does not answer either."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.jupyterhub import walls_gate
from components.jupyterhub.walls import HUB_API_PORT
from tests.support.netns import LISTEN, run, wire_pod

NFT, IP = shutil.which("nft"), shutil.which("ip")
NEEDS_NETNS = pytest.mark.skipif(
    os.geteuid() != 0 or NFT is None or IP is None, reason="needs root, nft and ip to build network namespaces"
)
POD_IP = "10.0.1.2"
API_IP, API_PORT = "10.100.0.1", 443  # the `kubernetes` Service's ClusterIP in EKS's 10.100.0.0/16
HUB_IP = "10.100.1.1"
CLOSED_PORT = 444  # nothing listens there: the node refuses it
# Long enough for the drops the check counts, each round of it two connection timeouts at most: a check that counted
# the wrong thing would have the time to pass.
ROUNDS_S = (walls_gate.DROPS + 2) * 2 * walls_gate.CONNECT_TIMEOUT_S


@contextlib.contextmanager
def _pod_on_a_node() -> Iterator[tuple[str, str, str]]:
    """(node netns, pod netns, the pod's host-side veth): the API server and the hub answer on the node's side."""
    tag = f"gw{os.getpid() % 100000}"
    node, pod, veth = f"{tag}n", f"{tag}p", f"eni{tag}"
    servers: list[subprocess.Popen] = []
    try:
        for ns in (node, pod):
            run("ip", "netns", "add", ns)
            run("ip", "-n", ns, "link", "set", "lo", "up")
        for address in (API_IP, HUB_IP):
            run("ip", "-n", node, "addr", "add", f"{address}/32", "dev", "lo")
        wire_pod(node, pod, veth, POD_IP)
        for address, port in ((API_IP, API_PORT), (HUB_IP, HUB_API_PORT)):
            serve = ["ip", "netns", "exec", node, sys.executable, "-c", LISTEN, address, str(port)]
            servers.append(subprocess.Popen(serve))
        # The agent's egress program's hook, with nothing in it yet: a new pod in standard mode, default allow.
        hook = f'type filter hook ingress device "{veth}" priority 0; policy accept;'
        table = f"table netdev agent {{\n chain egress {{\n  {hook}\n }}\n}}\n"
        run("ip", "netns", "exec", node, "nft", "-f", "-", stdin=table)
        yield node, pod, veth
    finally:
        for server in servers:
            server.kill()
            server.wait()
        for ns in (node, pod):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def _policies_arrive(node: str, *addresses: str) -> None:
    """What the agent's program does once the pod's state is POLICIES_APPLIED: drop what its maps do not allow."""
    for address in addresses:
        rule = ("ip", "daddr", address, "drop")
        run("ip", "netns", "exec", node, "nft", "add", "rule", "netdev", "agent", "egress", *rule)


def _gate(pod: str, tmp: Path, deadline_s: int, api_port: int = API_PORT) -> tuple[int, str, float]:
    """Runs the init container's command in the pod, as the pod holds it but for the hub's address and the deadline:
    (exit status, what it said, when it ended)."""
    python, flag, program, *_ = walls_gate.command()
    message = tmp / "termination-log"
    arguments = (HUB_IP, HUB_API_PORT, walls_gate.DROPS, walls_gate.CONNECT_TIMEOUT_S, deadline_s, message)
    done = subprocess.run(
        ["ip", "netns", "exec", pod, "env", f"KUBERNETES_SERVICE_HOST={API_IP}", f"KUBERNETES_SERVICE_PORT={api_port}",
         python, flag, program, *map(str, arguments)],
        capture_output=True, text=True, check=False, timeout=deadline_s + 30,
    )  # fmt: skip
    ended = time.monotonic()
    said = message.read_text() if message.exists() else done.stdout
    return done.returncode, said, ended


@NEEDS_NETNS
def test_the_server_starts_only_once_its_policies_drop_the_api_server(tmp_path):
    arrive_after = 4.0
    with _pod_on_a_node() as (node, pod, _):
        started = time.monotonic()
        arrived: list[float] = []

        def arrive() -> None:
            _policies_arrive(node, API_IP)
            arrived.append(time.monotonic())

        timer = threading.Timer(arrive_after, arrive)
        timer.start()
        try:
            status, said, ended = _gate(pod, tmp_path, deadline_s=60)
        finally:
            timer.join()
    assert status == 0, said
    assert "network walls are enforced" in said
    # Not before the policies, and then within the drops it counts (each a connection timeout) and a little slack.
    assert ended - arrived[0] >= walls_gate.DROPS * walls_gate.CONNECT_TIMEOUT_S
    assert ended - started < arrive_after + (walls_gate.DROPS + 2) * walls_gate.CONNECT_TIMEOUT_S + 3


@NEEDS_NETNS
def test_the_server_never_starts_unwalled_and_says_why(tmp_path):
    with _pod_on_a_node() as (_, pod, _):
        started = time.monotonic()
        status, said, ended = _gate(pod, tmp_path, deadline_s=4)
    assert status == 1
    assert said == (
        f"gpulab: this server's network walls were not enforced within 4 s (the Kubernetes API at {API_IP}:{API_PORT}: "
        f"opened, expected timed out; the hub at {HUB_IP}:{HUB_API_PORT}: opened, expected opened), so the server does "
        "not start"
    )
    assert 4 <= ended - started < 4 + 2 * walls_gate.CONNECT_TIMEOUT_S + 3


@NEEDS_NETNS
def test_a_refused_connection_is_no_drop(tmp_path):
    with _pod_on_a_node() as (_, pod, _):
        status, said, _ = _gate(pod, tmp_path, deadline_s=ROUNDS_S, api_port=CLOSED_PORT)
    assert status == 1
    assert f"the Kubernetes API at {API_IP}:{CLOSED_PORT}: Connection refused" in said


@NEEDS_NETNS
def test_a_timeout_without_the_hub_is_no_drop(tmp_path):
    # A node whose Service addresses lead nowhere yet (kube-proxy's rules not there) times out on both.
    with _pod_on_a_node() as (node, pod, _):
        _policies_arrive(node, API_IP, HUB_IP)
        status, said, _ = _gate(pod, tmp_path, deadline_s=ROUNDS_S)
    assert status == 1
    assert f"the hub at {HUB_IP}:{HUB_API_PORT}: timed out, expected opened" in said
