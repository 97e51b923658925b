"""Pure builder of the init container that holds a learner's server until its network walls are enforced.

Why: in the pinned standard mode the VPC CNI's network policy agent lets a new pod's traffic through until the
PolicyEndpoints of its NetworkPolicies reach its node's agent (aws/aws-network-policy-agent v1.3.1
pkg/rpc/rpc_handler.go 80-84: DEFAULT_ALLOW unless the agent already holds policies for the pod's identifier, which
with one identifier per server, components/jupyterhub/walls.py, a new server's never does). Learner code started then
would reach other nodes' unauthenticated ports, other learners, the VPC and the internet of a closed lab. A pod's
containers start only after its init containers have all exited 0, and share their network namespace, so a first
init container that waits until the walls hold keeps every line of learner code out of that window.

How it tells (walls_gate_check.py): a TCP connection to the Kubernetes API server's Service times out, and one to the
hub's API opens, several times in a row. Every lab's walls deny the API server (the render fails a stack where a
learner reaches it, render/walls.py) whatever its `internet` setting: the Service range is private (EKS User Guide,
"Service IP address range": 10.100.0.0/16 or 172.20.0.0/16), so an open lab's internet rule holds it in an except,
which the agent makes a deny-all key (fw_rule_processor.go 139-151), and a closed lab has no rule holding it, which
denies it once the pod's state is POLICIES_APPLIED (pkg/ebpf/c/tc.v4egress.bpf.c 186-191); the controller never adds
its ClusterIP to a map, the `kubernetes` Service having no selector (amazon-network-policy-controller-k8s v1.1.7
pkg/resolvers/endpoints.go 451-560). Denied is dropped, not refused: BPF_DROP (tc.v4egress.bpf.c 284-289), so the
connection times out. Before that its address is open, and the API server answers every pod of a working cluster.
The agent programs a pod's ingress and egress maps and then its state in one reconcile, the egress map from every
PolicyEndpoint of the pod's identifier it holds (controllers/policyendpoints_controller.go 235-257, 445-462), and
while it holds only policies without egress rules it writes an allow-all egress entry (250-254), through which the API
server answers. With part of a learner's policies the server reaches no more than with all of them: the chart's
policy allows pods' and Services' /32s, a lab's internet policy everything outside the private ranges, and a /32 wins
over an except range in the agent's longest-prefix lookup (tc.v4egress.bpf.c 182-220), so neither narrows the other.
The hub answering proves the timeout is the walls' and not a network without its Service rules (kube-proxy's, on a
node just started), and that the server's own way to the hub works. The controller takes a pod as a target as soon as
it has an IP, running or not (pkg/k8s/pod_utils.go 24-28, internal/eventhandlers/pod.go 60-89), so a pod still in its
init containers gets its PolicyEndpoints.

When they never come: the container exits 1 after DEADLINE_S with its message in the pod's termination message, the
kubelet restarts it (KubeSpawner 7.0.0 pods restart OnFailure, kubespawner/objects.py 350; the hub's progress page
shows the pod's events, the kubelet's back-off naming this container among them), and the hub gives up after its
start timeout: the server never starts unwalled.

Cost: a learner's wait grows by the time the agent takes to program the server's policies (not measured: AWS
publishes no figure, and no cluster was run here) plus DROPS connection timeouts. Its requests are the server's own
CPU and memory and no GPU, so the pod's requests (the larger of any init container's and the containers' sum) are
unchanged and no GPU slice is held by it.
"""

from pathlib import Path
from typing import Any

from components.jupyterhub.walls import HUB_API_PORT, HUB_SERVICE

NAME = "wait-for-network-walls"
CHECK = Path(__file__).with_name("walls_gate_check.py")
# Drops in a row that count as enforced, each a connection attempt of CONNECT_TIMEOUT_S: a SYN the agent drops is
# never answered, while an open API server answers a connection within a round trip.
DROPS = 3
CONNECT_TIMEOUT_S = 1
# One attempt's bound before the container exits 1 and the kubelet restarts it: a choice, far above the seconds AWS's
# EKS User Guide reports a new pod's policies take in standard mode ("Configure your cluster for Kubernetes network
# policies", REPORTED; no published figure), and far below the hub's start timeout (values.py, 20 minutes).
DEADLINE_S = 120
MESSAGE_PATH = "/dev/termination-log"  # Kubernetes' default terminationMessagePath, named so the program writes it
# No identity of the image's: the overflow user of Linux (65534, "nobody"), with what the restricted Pod Security
# profile asks (no capabilities, no escalation, the runtime's seccomp profile), nothing written but the termination
# message.
NOBODY = 65534


def command() -> list[str]:
    """What the container runs, as the pod holds it."""
    arguments = (HUB_SERVICE, HUB_API_PORT, DROPS, CONNECT_TIMEOUT_S, DEADLINE_S, MESSAGE_PATH)
    return ["python3", "-c", CHECK.read_text(), *map(str, arguments)]


def init_container(image: str, cpu: str, memory: str) -> dict[str, Any]:
    """KubeSpawner's init container (a profile's `init_containers`) of a learner's server of `image` asking `cpu` and
    `memory` (the server's own)."""
    resources = {"cpu": cpu, "memory": memory}
    return {
        "name": NAME,
        "image": image,
        # KubeSpawner 7.0.0 formats every string of an init container with the user's names (kubespawner/spawner.py
        # 2321, _expand_user_properties 2105: str.format), which would read the program's braces as fields.
        "command": [part.replace("{", "{{").replace("}", "}}") for part in command()],
        "terminationMessagePath": MESSAGE_PATH,
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "securityContext": {
            "runAsUser": NOBODY,
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
