"""The program of a learner's server's first init container (components/jupyterhub/walls_gate.py says why): it exits 0
once the server's NetworkPolicies are enforced on its pod, and 1, with a message, when they are not within its time.

Run as `python3 -c <this file> <hub host> <hub port> <drops> <connect timeout s> <deadline s> <message file>`, with
the standard library alone (the learner's notebook image brings its own python3). Enforced means, `drops` times in a
row: a TCP connection to the Kubernetes API server's Service (KUBERNETES_SERVICE_HOST and _PORT, which the kubelet
gives every container) times out, as it does when the agent's eBPF program drops its SYN, while one to the hub's API
opens. A refused or otherwise failed connection to the API server is no drop, and without the hub a timeout may be a
network that does not work yet (kube-proxy's rules not yet on a new node): neither counts.
"""

from __future__ import annotations  # the image's python3 may predate list[str]

import os
import socket
import sys
import time


def attempt(host: str, port: int, timeout: float) -> str:
    """'opened', 'timed out', or what else ended a TCP connection to host:port."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except socket.timeout:  # noqa: UP041 - the image's python3 may predate 3.10, where it became TimeoutError
        return "timed out"
    except OSError as error:
        return error.strerror or type(error).__name__
    return "opened"


def main(argv: list[str]) -> int:
    hub_host, hub_port, drops, timeout, deadline, message_file = argv
    api_host, api_port = os.environ["KUBERNETES_SERVICE_HOST"], int(os.environ["KUBERNETES_SERVICE_PORT"])
    start = time.monotonic()
    in_a_row = 0
    while True:
        api = attempt(api_host, api_port, float(timeout))
        hub = attempt(hub_host, int(hub_port), float(timeout))
        in_a_row = in_a_row + 1 if (api, hub) == ("timed out", "opened") else 0
        waited = time.monotonic() - start
        if in_a_row == int(drops):
            print(f"gpulab: this server's network walls are enforced after {waited:.1f} s", flush=True)
            return 0
        if waited >= float(deadline):
            message = (
                f"gpulab: this server's network walls were not enforced within {deadline} s (the Kubernetes API at "
                f"{api_host}:{api_port}: {api}, expected timed out; the hub at {hub_host}:{hub_port}: {hub}, "
                "expected opened), so the server does not start"
            )
            print(message, file=sys.stderr, flush=True)
            with open(message_file, "w") as out:
                out.write(message)
            return 1
        if api != "timed out":
            time.sleep(float(timeout))  # a timeout has waited already


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
