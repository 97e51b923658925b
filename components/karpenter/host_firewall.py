"""The lab nodes' host firewall: no pod on the pod network opens a connection to an address of its own node, and no
pod or host but the node itself reaches the DCGM host engine.

Why a host firewall and not a policy: the VPC CNI's network policy agent always allows a pod to reach the primary IP
of the node it runs on, on every port, whatever its NetworkPolicies say (aws/aws-network-policy-agent v1.3.1
pkg/fwruleprocessor/fw_rule_processor.go 80-84 and 101-103, PR #65). On that IP listen the node's services
(domain/upstream/node_listeners.py), the EKS node monitoring agent's DCGM host engine among them: host port 5555,
privileged, every GPU, no authentication, and its add-on cannot rebind it (aws/eks-node-monitoring-agent v1.6.1
charts/configuration.schema.json: dcgmAgent takes no command, port or host setting). Only the node can refuse them.

The rule: a packet that comes in from a pod's host-side veth (the VPC CNI names them eni..., amazon-vpc-cni-k8s
v1.21.1 charts/aws-vpc-cni/values.yaml 82, AWS_VPC_K8S_CNI_VETHPREFIX), is addressed to any address of this node
(`fib daddr type local`: the primary IP, secondary ENI IPs, the Pod Identity agent's 169.254.170.23) and opens a new
connection is dropped. In a table of its own, which neither kube-proxy nor the VPC CNI touches, on the prerouting hook
at priority -140: after conntrack (-200), so replies to connections the node opened (kubelet's probes of a learner's
server) pass as established, and before DNAT (-100), so a host port (the DCGM server's) is seen with its node
address, not the pod it forwards to. A Service's ClusterIP is no local address, so pods still reach every Service.
Host processes and host-network pods (the node monitoring agent reading the host engine, gpulab's dcgm-exporter,
components/metrics/dcgm_exporter.py) reach the node through the loopback, which the rule does not match, so
Karpenter's node repair keeps its GPU signal (the agent's AcceleratedHardwareReady condition).

The host engine from anywhere else: it is a pod (the dcgm-server, on the pod network with `-b ALL`) published on host
port 5555, so it answers at its pod IP and, through the CNI portmap plugin's DNAT, at every address of the node. A
learner's policies refuse both from another node (every private range is an except, components/jupyterhub/walls.py), but
in the pinned standard mode a new pod is allowed everything until its policies reach its node's agent
(aws-network-policy-agent v1.3.1 pkg/rpc/rpc_handler.go 80-84), and that is every learner's new server. So a second rule
drops every new TCP connection the node forwards to one of its pods (out of an eni... veth) on the host engine's port,
on the forward hook: after DNAT, so the host port and the pod IP are one case, and never on the node's own connections
(the agent's localhost:5555, the exporter's $(NODE_IP):5555), which leave through the output hook. Keyed on the outgoing
veth rather than on the port alone (`tcp dport 5555 fib saddr type != local` on prerouting) so that a learner's own
connections to port 5555 elsewhere, which pass through the node on their way out, are not dropped with it
(tests/test_host_firewall.py: a learner still reaches another host's 5555). Everything else on the node stays open to
other hosts as before: the metrics collector's scrape of the exporter's 9400, kube-proxy's health on 10256, the kubelet.

Costs: a pod on the pod network on a lab node can use no node-local service (node-local DNS, a hostPort, the Pod
Identity agent), and no pod on a lab node can serve TCP 5555 to another pod or host; none does today but the host
engine (docs/network-walls.md). Were the add-on to run the host engine on the host network, the second rule would not
see it (that is the input hook's path): the chart publishes a host port and sets no hostNetwork at v1.6.1 and v1.7.0
(aws/eks-node-monitoring-agent charts/eks-node-monitoring-agent/templates/dcgm-daemonset.yaml, 58-59 at v1.6.1, 73-74
at v1.7.0; CONFIRMED).
The rules ran in network namespaces built as the VPC CNI wires pods (tests/test_host_firewall.py, nftables 1.0.6 here);
AL2023 installs nftables (amazon-eks-ami v20260714 templates/al2023/provisioners/install-worker.sh 57, 93).

Delivered as a user data script that cloud-init runs once per instance in cloud-final, before nodeadm-run starts the
kubelet (user_data.py says why that order holds), through a oneshot unit enabled for every boot.
"""

from domain.upstream.node_listeners import DCGM_PORT

VETH_PREFIX = "eni"  # amazon-vpc-cni-k8s v1.21.1 charts/aws-vpc-cni/values.yaml 82
# TCP ports of the node's pods that no connection from outside the node reaches: the DCGM host engine's, which
# authenticates no one (domain/upstream/node_listeners.py).
PODS_CLOSED_PORTS = (DCGM_PORT,)
TABLE = "gpulab_lab_node"
RULES_PATH = "/etc/gpulab/lab-node.nft"
UNIT = "gpulab-lab-firewall.service"

# The first two lines make loading it again replace the table rather than add a second rule (nft has no
# "destroy table" before 1.0.8).
RULESET = f"""\
table inet {TABLE}
delete table inet {TABLE}
table inet {TABLE} {{
  chain prerouting {{
    type filter hook prerouting priority -140; policy accept;
    iifname "{VETH_PREFIX}*" fib daddr type local ct state new counter drop
  }}
  chain forward {{
    type filter hook forward priority 0; policy accept;
    oifname "{VETH_PREFIX}*" tcp dport {{ {", ".join(map(str, PODS_CLOSED_PORTS))} }} ct state new counter drop
  }}
}}
"""

_UNIT_TEXT = f"""\
[Unit]
Description=gpulab: pods open nothing on this node, and only the node reaches its DCGM host engine
Before=kubelet.service nodeadm-run.service
DefaultDependencies=no
After=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/sbin/nft -f {RULES_PATH}

[Install]
WantedBy=multi-user.target
"""


def script() -> str:
    """The user data script that installs and starts the firewall; the unit reloads it at every boot."""
    return f"""\
#!/bin/bash
set -euo pipefail
mkdir -p {RULES_PATH.rsplit("/", 1)[0]}
cat > {RULES_PATH} <<'GPULAB_LAB_FIREWALL_RULES'
{RULESET}GPULAB_LAB_FIREWALL_RULES
cat > /etc/systemd/system/{UNIT} <<'GPULAB_LAB_FIREWALL_UNIT'
{_UNIT_TEXT}GPULAB_LAB_FIREWALL_UNIT
systemctl daemon-reload
systemctl enable --now {UNIT}
"""
