"""The lab nodes' host firewall (components/karpenter/host_firewall.py): nft accepts it, it loads before the kubelet at
every boot, and, in network namespaces wired as the VPC CNI wires a pod, it drops what a pod opens to its node and
what anything but the node opens to the DCGM host engine, and nothing else."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from components.karpenter import host_firewall
from components.karpenter.user_data import node_user_data
from components.metrics import dcgm_exporter
from domain.upstream.node_listeners import DCGM_PORT
from tests.support.netns import LISTEN, wire_pod
from tests.support.user_data_parts import firewall_script

NFT = shutil.which("nft")


def _unit(script: str) -> list[str]:
    start = script.index("[Unit]")
    return script[start : script.index("GPULAB_LAB_FIREWALL_UNIT", start)].splitlines()


def test_the_unit_loads_the_rules_before_kubelet_every_boot():
    script = firewall_script(node_user_data(pod_pids_limit=1024, prepull_images=[], fast_image_pull=False))
    unit = _unit(script)
    before = next(line for line in unit if line.startswith("Before="))
    assert set(before.removeprefix("Before=").split()) >= {"kubelet.service", "nodeadm-run.service"}
    assert "WantedBy=multi-user.target" in unit
    assert f"ExecStart=/usr/sbin/nft -f {host_firewall.RULES_PATH}" in unit
    assert script.rstrip().splitlines()[-1] == f"systemctl enable --now {host_firewall.UNIT}"
    assert host_firewall.RULESET in script


@pytest.mark.skipif(NFT is None, reason="no nft on this machine (apt-get install nftables)")
def test_nft_accepts_the_rules(tmp_path):
    rules = tmp_path / "lab-node.nft"
    rules.write_text(host_firewall.RULESET)
    done = subprocess.run([NFT, "-c", "-f", str(rules)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


# --- the rules at work, in throwaway network namespaces ---------------------------------------------------------------
# A lab node, a learner's pod and the dcgm-server's pod on it (behind eni... veths, as the VPC CNI wires pods), and
# another host of the VPC (another node, the metrics collector) reaching the node over its network interface.
NODE_IP, LEARNER_IP, DCGM_POD_IP, REMOTE_IP = "10.0.0.1", "10.0.1.2", "10.0.1.3", "10.0.2.9"
NOTEBOOK_PORT = 8888
EXPORTER_PORT = dcgm_exporter.METRICS_PORT  # the exporter, on the node's network
KUBE_PROXY_HEALTH_PORT, KUBELET_PORT = 10256, 10250
NODE_SERVICES = (EXPORTER_PORT, KUBE_PROXY_HEALTH_PORT, KUBELET_PORT)
CONNECT = "import socket,sys;socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=1.5)"
# The dcgm-server's host port as the CNI portmap plugin publishes it: DNAT of the port on every local address, for
# traffic from outside (prerouting) and from the node (output); a connection to 127.0.0.1 DNATed to a pod needs
# route_localnet (set below) and a masquerade of 127.0.0.1.
_DNAT = f"fib daddr type local tcp dport {DCGM_PORT} dnat to {DCGM_POD_IP}:{DCGM_PORT}"
PORTMAP = f"""\
table ip portmap {{
  chain pre {{ type nat hook prerouting priority -100; policy accept; {_DNAT}; }}
  chain out {{ type nat hook output priority -100; policy accept; {_DNAT}; }}
  chain post {{ type nat hook postrouting priority 100; policy accept; ip saddr 127.0.0.1 masquerade; }}
}}
"""


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


@dataclasses.dataclass(frozen=True)
class Lab:
    node: str
    learner: str
    remote: str


@contextlib.contextmanager
def _namespaces() -> Iterator[Lab]:
    tag = f"gl{os.getpid() % 100000}"
    node, learner, dcgm, remote = f"{tag}n", f"{tag}a", f"{tag}d", f"{tag}r"
    servers: list[subprocess.Popen] = []
    try:
        for ns in (node, learner, dcgm, remote):
            _run("ip", "netns", "add", ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", node, "addr", "add", f"{NODE_IP}/32", "dev", "lo")
        _run("ip", "netns", "exec", node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        _run("ip", "netns", "exec", node, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1")
        for pod, veth, ip in (
            (learner, f"{host_firewall.VETH_PREFIX}{tag}1", LEARNER_IP),
            (dcgm, f"{host_firewall.VETH_PREFIX}{tag}2", DCGM_POD_IP),
        ):
            wire_pod(node, pod, veth, ip)
            _run("ip", "netns", "exec", node, "sysctl", "-qw", f"net.ipv4.conf.{veth}.proxy_arp=1")
        # Another host of the VPC, on the node's own network interface (no eni... name), which routes the node's and
        # its pods' addresses to it, as the VPC does.
        uplink = f"ens{tag}"
        _run("ip", "link", "add", uplink, "netns", node, "type", "veth", "peer", "name", "eth0", "netns", remote)
        _run("ip", "-n", node, "link", "set", uplink, "up")
        _run("ip", "-n", remote, "link", "set", "eth0", "up")
        _run("ip", "-n", remote, "addr", "add", f"{REMOTE_IP}/32", "dev", "eth0")
        _run("ip", "-n", remote, "route", "add", "10.0.0.0/16", "dev", "eth0")
        _run("ip", "-n", node, "route", "add", f"{REMOTE_IP}/32", "dev", uplink)
        _run("ip", "-n", node, "route", "add", "default", "dev", uplink)
        for ns, link in ((node, uplink), (remote, "eth0")):
            _run("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv4.conf.{link}.proxy_arp=1")
        listeners = [
            *((node, "0.0.0.0", port) for port in NODE_SERVICES),
            (dcgm, "0.0.0.0", DCGM_PORT),  # nv-hostengine -b ALL
            (dcgm, DCGM_POD_IP, NOTEBOOK_PORT),  # a port of another pod
            (learner, LEARNER_IP, NOTEBOOK_PORT),
            (remote, REMOTE_IP, DCGM_PORT),  # port 5555 of a host outside the node
        ]
        for ns, ip, port in listeners:
            servers.append(subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", LISTEN, ip, str(port)]))
        subprocess.run(["ip", "netns", "exec", node, "nft", "-f", "-"], input=PORTMAP, text=True, check=True)
        deadline = time.monotonic() + 10
        while not all(_opens(node, NODE_IP, port) for port in NODE_SERVICES) and time.monotonic() < deadline:
            time.sleep(0.2)
        yield Lab(node, learner, remote)
    finally:
        for server in servers:
            server.kill()
            server.wait()
        for ns in (node, learner, dcgm, remote):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def _opens(ns: str, ip: str, port: int) -> bool:
    done = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", CONNECT, ip, str(port)], capture_output=True, check=False
    )
    return done.returncode == 0


def _before_and_after(asked: dict[str, tuple[str, str, int]]) -> tuple[dict[str, bool], dict[str, bool]]:
    """Which connections open on the lab's node without, then with, the host firewall."""
    with _namespaces() as lab:
        probes = {name: (getattr(lab, who), ip, port) for name, (who, ip, port) in asked.items()}
        before = {name: _opens(*probe) for name, probe in probes.items()}
        subprocess.run(
            ["ip", "netns", "exec", lab.node, "nft", "-f", "-"], input=host_firewall.RULESET, text=True, check=True
        )
        after = {name: _opens(*probe) for name, probe in probes.items()}
    return before, after


NEEDS_NETNS = pytest.mark.skipif(
    os.geteuid() != 0 or NFT is None or shutil.which("ip") is None,
    reason="needs root, nft and ip to build network namespaces",
)


@NEEDS_NETNS
def test_a_pod_opens_nothing_on_its_node_the_node_reaches_it():
    before, after = _before_and_after(
        {
            "a node service": ("learner", NODE_IP, EXPORTER_PORT),
            "the host engine's host port": ("learner", NODE_IP, DCGM_PORT),
            "the host engine's pod": ("learner", DCGM_POD_IP, DCGM_PORT),
            "another pod": ("learner", DCGM_POD_IP, NOTEBOOK_PORT),
            "port 5555 of a host outside the node": ("learner", REMOTE_IP, DCGM_PORT),
            "the node to the pod": ("node", LEARNER_IP, NOTEBOOK_PORT),
            "the node to the host engine on the loopback": ("node", "127.0.0.1", DCGM_PORT),
            "the node to the host engine at its address": ("node", NODE_IP, DCGM_PORT),
        }
    )
    assert before == dict.fromkeys(before, True)
    assert after == {
        "a node service": False,
        "the host engine's host port": False,
        "the host engine's pod": False,  # the standard mode's first moments: the agent would let it through
        "another pod": True,  # the NetworkPolicies' job
        "port 5555 of a host outside the node": True,  # a lab's internet, when it has one
        "the node to the pod": True,  # kubelet's probes
        "the node to the host engine on the loopback": True,  # the node monitoring agent's localhost:5555
        "the node to the host engine at its address": True,  # gpulab's dcgm-exporter's $(NODE_IP):5555
    }


@NEEDS_NETNS
def test_another_host_reaches_the_nodes_services_but_not_the_host_engine():
    before, after = _before_and_after(
        {
            "the host engine's host port": ("remote", NODE_IP, DCGM_PORT),
            "the host engine's pod": ("remote", DCGM_POD_IP, DCGM_PORT),
            "another pod": ("remote", DCGM_POD_IP, NOTEBOOK_PORT),
            **{f"the node's {port}": ("remote", NODE_IP, port) for port in NODE_SERVICES},
        }
    )
    assert before == dict.fromkeys(before, True)
    assert after == {
        # A learner's new server on another node, allowed everything until its policies arrive (standard mode).
        "the host engine's host port": False,
        "the host engine's pod": False,
        "another pod": True,
        # The metrics collector's scrape of the exporter, kube-proxy's health check, the API server to the kubelet.
        **{f"the node's {port}": True for port in NODE_SERVICES},
    }
