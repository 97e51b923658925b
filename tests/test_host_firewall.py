"""The lab nodes' host firewall (components/karpenter/host_firewall.py): nft accepts it, it loads before the kubelet at
every boot, and, in network namespaces wired as the VPC CNI wires a pod, it drops what a pod opens to its node and
nothing else."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from components.karpenter import host_firewall
from components.karpenter.user_data import node_user_data
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


# --- the rule at work, in throwaway network namespaces ---------------------------------------------------------------
NODE_IP, LEARNER_IP, OTHER_POD_IP = "10.0.0.1", "10.0.1.2", "10.0.1.3"
NODE_PORT, HOST_PORT, POD_PORT, LEARNER_PORT = 5555, 5556, 5555, 8888
LISTEN = (
    "import socket,sys;s=socket.socket();s.bind((sys.argv[1],int(sys.argv[2])));s.listen()\n"
    "while True: s.accept()[0].close()"
)
CONNECT = "import socket,sys;socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=1.5)"
# The CNI portmap plugin's DNAT of a host port, for traffic from pods (prerouting) and from the node (output).
_DNAT = f"ip daddr {NODE_IP} tcp dport {HOST_PORT} dnat to {OTHER_POD_IP}:{POD_PORT}"
PORTMAP = f"""\
table ip portmap {{
  chain pre {{ type nat hook prerouting priority -100; policy accept; {_DNAT}; }}
  chain out {{ type nat hook output priority -100; policy accept; {_DNAT}; }}
}}
"""


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def _mac(ns: str, link: str) -> str:
    shown = subprocess.run(["ip", "-n", ns, "-o", "link", "show", link], capture_output=True, text=True, check=True)
    words = shown.stdout.split()
    return words[words.index("link/ether") + 1]


@contextlib.contextmanager
def _namespaces() -> Iterator[tuple[str, str, str]]:
    tag = f"gl{os.getpid() % 100000}"
    node, learner, other = f"{tag}n", f"{tag}a", f"{tag}b"
    servers: list[subprocess.Popen] = []
    try:
        for ns in (node, learner, other):
            _run("ip", "netns", "add", ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", node, "addr", "add", f"{NODE_IP}/32", "dev", "lo")
        _run("ip", "netns", "exec", node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for pod, veth, ip in (
            (learner, f"{host_firewall.VETH_PREFIX}{tag}1", LEARNER_IP),
            (other, f"{host_firewall.VETH_PREFIX}{tag}2", OTHER_POD_IP),
        ):
            # As the VPC CNI wires a pod: a /32, a default route through 169.254.1.1 answered by the host's veth.
            _run("ip", "link", "add", veth, "netns", node, "type", "veth", "peer", "name", "eth0", "netns", pod)
            _run("ip", "-n", node, "link", "set", veth, "up")
            _run("ip", "-n", pod, "link", "set", "eth0", "up")
            _run("ip", "-n", pod, "addr", "add", f"{ip}/32", "dev", "eth0")
            _run("ip", "-n", pod, "route", "add", "169.254.1.1", "dev", "eth0")
            _run("ip", "-n", pod, "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")
            mac = _mac(node, veth)
            _run("ip", "-n", pod, "neigh", "add", "169.254.1.1", "lladdr", mac, "dev", "eth0", "nud", "permanent")
            _run("ip", "netns", "exec", node, "sysctl", "-qw", f"net.ipv4.conf.{veth}.proxy_arp=1")
            _run("ip", "-n", node, "route", "add", f"{ip}/32", "dev", veth)
        for ns, ip, port in (
            (node, NODE_IP, NODE_PORT),
            (other, OTHER_POD_IP, POD_PORT),
            (learner, LEARNER_IP, LEARNER_PORT),
        ):
            servers.append(subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", LISTEN, ip, str(port)]))
        subprocess.run(["ip", "netns", "exec", node, "nft", "-f", "-"], input=PORTMAP, text=True, check=True)
        deadline = time.monotonic() + 10
        while not _opens(node, NODE_IP, NODE_PORT) and time.monotonic() < deadline:  # the listeners are up
            time.sleep(0.2)
        yield node, learner, other
    finally:
        for server in servers:
            server.kill()
            server.wait()
        for ns in (node, learner, other):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def _opens(ns: str, ip: str, port: int) -> bool:
    done = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", CONNECT, ip, str(port)], capture_output=True, check=False
    )
    return done.returncode == 0


@pytest.mark.skipif(
    os.geteuid() != 0 or NFT is None or shutil.which("ip") is None,
    reason="needs root, nft and ip to build network namespaces",
)
def test_a_pod_opens_nothing_on_its_node_the_node_reaches_it():
    with _namespaces() as (node, learner, _):
        asked = {
            "a node service": (learner, NODE_IP, NODE_PORT),
            "a host port": (learner, NODE_IP, HOST_PORT),
            "another pod": (learner, OTHER_POD_IP, POD_PORT),
            "the node to the pod": (node, LEARNER_IP, LEARNER_PORT),
            "the node to its host port": (node, NODE_IP, HOST_PORT),
        }
        before = {name: _opens(*probe) for name, probe in asked.items()}
        subprocess.run(
            ["ip", "netns", "exec", node, "nft", "-f", "-"], input=host_firewall.RULESET, text=True, check=True
        )
        after = {name: _opens(*probe) for name, probe in asked.items()}
    assert before == dict.fromkeys(asked, True)
    assert after == {
        "a node service": False,
        "a host port": False,
        "another pod": True,  # the NetworkPolicies' job
        "the node to the pod": True,  # kubelet's probes
        "the node to its host port": True,  # the node monitoring agent's way to the DCGM host engine
    }
