"""Network namespaces wired as the VPC CNI wires a pod (amazon-vpc-cni-k8s: a /32 on the pod's eth0, a default route
through 169.254.1.1, which a permanent neighbour entry resolves to the host-side veth's address, and a /32 route to
the pod on the node), for the tests that run nftables rules for real."""

from __future__ import annotations

import subprocess

# A TCP listener: `python -c LISTEN <address> <port>` accepts and closes every connection.
LISTEN = (
    "import socket,sys;s=socket.socket();s.bind((sys.argv[1],int(sys.argv[2])));s.listen()\n"
    "while True: s.accept()[0].close()"
)


def run(*args: str, stdin: str | None = None) -> None:
    subprocess.run(args, check=True, capture_output=True, input=stdin, text=True)


def _mac(ns: str, link: str) -> str:
    shown = subprocess.run(["ip", "-n", ns, "-o", "link", "show", link], capture_output=True, text=True, check=True)
    words = shown.stdout.split()
    return words[words.index("link/ether") + 1]


def wire_pod(node: str, pod: str, veth: str, ip: str) -> None:
    """Connects the network namespace `pod` to `node` through the host-side veth `veth`, at address `ip`."""
    run("ip", "link", "add", veth, "netns", node, "type", "veth", "peer", "name", "eth0", "netns", pod)
    run("ip", "-n", node, "link", "set", veth, "up")
    run("ip", "-n", pod, "link", "set", "eth0", "up")
    run("ip", "-n", pod, "addr", "add", f"{ip}/32", "dev", "eth0")
    run("ip", "-n", pod, "route", "add", "169.254.1.1", "dev", "eth0")
    run("ip", "-n", pod, "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")
    run("ip", "-n", pod, "neigh", "add", "169.254.1.1", "lladdr", _mac(node, veth), "dev", "eth0", "nud", "permanent")
    run("ip", "-n", node, "route", "add", f"{ip}/32", "dev", veth)
