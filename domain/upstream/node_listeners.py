"""What listens on a lab node's own addresses, from each component's source at the version gpulab pins, and whether it
authenticates its callers. The walls (render/walls.py) probe every one of them from a learner on that node and on
another; docs/network-walls.md lists them with how each is closed.

A listener on 127.0.0.1 or a unix socket is out of a pod's reach (a pod's 127.0.0.1 is its own) and is not listed:
aws-node's introspection 127.0.0.1:61679 and gRPC 127.0.0.1:50051 (amazon-vpc-cni-k8s v1.21.1 pkg/ipamd/introspect.go
32-36, rpc_handler.go 46), the Pod Identity agent's probes localhost:2703 (eks-pod-identity-agent v0.1.37
cmd/server.go 107, 137), the device plugin's and the network policy agent's unix sockets (NVIDIA/k8s-device-plugin
v0.20.0 internal/plugin/server.go 179; aws-network-policy-agent v1.3.1 pkg/rpc/rpc_handler.go 199-213), and:
- kubelet's healthz, 127.0.0.1:10248. CONFIRMED at the AMI release the stacks pin: nodeadm's kubelet configuration
  sets no healthz address or port (awslabs/amazon-eks-ami v20260714 nodeadm/internal/kubelet/config.go 80-125, its
  defaults; the file has no healthz field), so kubelet's own defaults apply (kubernetes/kubernetes
  pkg/kubelet/apis/config/v1beta1/defaults.go 126-131 at v1.36.5, the same at v1.35.8 and v1.34.12; the AMI's 1.36
  kubelet is 1.36.2, CHANGELOG.md 67 at amazon-eks-ami v20260724).
- kube-proxy's metrics, 127.0.0.1:10249: kube-proxy's default when its configuration leaves metricsBindAddress empty
  (kubernetes/kubernetes pkg/proxy/apis/config/v1alpha1/defaults.go 52-53, 145-148 and pkg/cluster/ports/ports.go 28
  at v1.36.5, the same at v1.35.8 and v1.34.12: CONFIRMED upstream). The EKS add-on starts kube-proxy with --config
  from its kube-proxy-config ConfigMap, whose content for the pinned builds is not public; that EKS writes
  127.0.0.1:10249 there is REPORTED (eksctl-io/eksctl issue #4081, 2021). Bound to 0.0.0.0 it would still be closed:
  the host firewall drops every new connection from a pod to its node (components/karpenter/host_firewall.py).
Pods on the pod network are not the node's: a learner reaches them only through its policies, which refuse every
private address. ebs-csi-node runs there (node.hostNetwork false; its probes 9809 and 9808, metrics 3302 only with
node.enableMetrics: kubernetes-sigs/aws-ebs-csi-driver v1.64.0 charts/aws-ebs-csi-driver/templates/_node.tpl 58, 78,
159, 200, 226, values.yaml 150, 254, 455). Read at v1.64.0, not at the pinned v1.66.0, whose source is out of reach
here (the git snapshot ends at v1.64.0, 2026-08-19; the Go module proxy refuses v1.66.0, 403): REPORTED for v1.66.0.
gpulab's dcgm-exporter runs on the node's network, so it is listed.
"""

from __future__ import annotations

from dataclasses import dataclass

# Why the Pod Identity agent's listeners are REPORTED for the pinned add-on builds: its builds (v1.3.10-eksbuild.2
# and .3, domain/upstream/versions.py) are numbered apart from aws/eks-pod-identity-agent's tags (v0.1.x; the chart's
# values name image v0.1.20 at v0.1.37 and at main), none of the repository's files names a v1.x build (read at main
# 2b8e78c, 2026-05-27), and AWS answers which builds exist only through DescribeAddonVersions (aws/containers-roadmap
# issue #2410): which source a build is made from cannot be known here. What the listeners rest on is the same at
# every tag read: hostNetwork, --port 80 on 169.254.170.23, metrics 0.0.0.0:2705, probes localhost:2703
# (cmd/server.go, templates/daemonset.yaml at v0.1.20 of 2025-01-22, v0.1.30, v0.1.37 and main 2b8e78c).
POD_IDENTITY_AGENT_BUILD = "REPORTED for the add-on build: read at the repository's tags, which no build names"

# The EKS add-ons' DaemonSets whose pods run on the node's network (domain/capacity/daemonsets.py keeps only their
# placement and requests): their listeners are the node's, and no NetworkPolicy applies to them.
HOST_NETWORK_DAEMONSETS = {
    "aws-node": "aws/amazon-vpc-cni-k8s v1.21.1 config/master/aws-k8s-cni.yaml 438. CONFIRMED",
    "eks-node-monitoring-agent": "aws/eks-node-monitoring-agent v1.6.1 charts/eks-node-monitoring-agent/templates/"
    "daemonset.yaml 41. CONFIRMED",
    "eks-pod-identity-agent": "aws/eks-pod-identity-agent v0.1.37 charts/eks-pod-identity-agent/templates/"
    f"daemonset.yaml 35. CONFIRMED for the tag; {POD_IDENTITY_AGENT_BUILD}",
    "kube-proxy": "eksctl-io/eksctl v0.230.0 pkg/addons/default/testdata/sample-1.25.json (EKS's DaemonSet for "
    "Kubernetes 1.25). REPORTED for the pinned add-on",
}

# The node monitoring agent's DCGM host engine, the one listener that gives control without authentication.
DCGM_SERVER = "dcgm-server"
DCGM_PORT = 5555
KUBELET_PORT = 10250
# The Pod Identity agent's link-local address, on a dummy interface of every node (eks-pod-identity-agent v0.1.37
# configuration/config.go 4-5): a local address of the learner's own node only.
POD_IDENTITY_ADDRESS = "169.254.170.23"


@dataclass(frozen=True)
class Listener:
    component: str
    daemonset: str | None  # the DaemonSet (domain/capacity/daemonsets.py names) that brings it; None: the host's own
    port: int
    protocol: str
    authenticates: str | None  # how it authenticates a caller, or None: anyone who connects is served
    source: str
    address: str | None = None  # the one local address it binds, when not every address of the node
    # A caller it does not authenticate can change the node or its GPUs, not only read them: closed to every pod even in
    # a new pod's first moments, before its policies arrive (render/walls.py).
    controls: bool = False

    @property
    def name(self) -> str:
        return f"{self.component} {self.port}/{self.protocol}"


LISTENERS: tuple[Listener, ...] = (
    Listener(
        "DCGM host engine (nv-hostengine, privileged, every GPU)",
        DCGM_SERVER,
        DCGM_PORT,
        "TCP",
        None,
        "aws/eks-node-monitoring-agent v1.6.1 charts/eks-node-monitoring-agent/templates/dcgm-daemonset.yaml 47-48 "
        "(nv-hostengine -n -b ALL), 58-59 (hostPort 5555); NVIDIA/DCGM v4.5.2 modules/core/DcgmModuleCore.cpp "
        "1697-1717: a client's login carries no credential; modules/config/DcgmConfigManager.cpp 118, 325, 636, 712: "
        "it sets power limits, clocks, ECC and compute modes. CONFIRMED",
        controls=True,
    ),
    Listener(
        "kubelet",
        None,
        KUBELET_PORT,
        "TCP",
        "x509 client certificates or a bearer token checked by the API server (webhook authentication, anonymous "
        "off) and webhook authorization",
        "awslabs/amazon-eks-ami v20260714 nodeadm/internal/kubelet/config.go 86-105 (address 0.0.0.0, anonymous off, "
        "webhook authentication and authorization), 120 (read-only port 10255 off). CONFIRMED",
    ),
    Listener(
        "EKS node monitoring agent health",
        "eks-node-monitoring-agent",
        8002,
        "TCP",
        None,
        "aws/eks-node-monitoring-agent v1.6.1 charts/eks-node-monitoring-agent/templates/daemonset.yaml 41 "
        "(hostNetwork), 52 (--probe-address=:8002). "
        "CONFIRMED",
    ),
    Listener(
        "EKS node monitoring agent metrics",
        "eks-node-monitoring-agent",
        8003,
        "TCP",
        None,
        "aws/eks-node-monitoring-agent v1.6.1 charts/eks-node-monitoring-agent/templates/daemonset.yaml 53 "
        "(--metrics-address=:8003). CONFIRMED",
    ),
    Listener(
        "VPC CNI ipamd metrics",
        "aws-node",
        61678,
        "TCP",
        None,
        "aws/amazon-vpc-cni-k8s v1.21.1 cmd/aws-k8s-agent/main.go 37-38, 171; "
        'utils/prometheusmetrics/prometheusmetrics.go 207-213 (Addr ":" + port). CONFIRMED',
    ),
    Listener(
        "network policy agent metrics",
        "aws-node",
        8162,
        "TCP",
        None,
        "aws/amazon-vpc-cni-k8s v1.21.1 config/master/aws-k8s-cni.yaml 583 (--metrics-bind-addr=:8162). CONFIRMED",
    ),
    Listener(
        "network policy agent health",
        "aws-node",
        8163,
        "TCP",
        None,
        "aws/amazon-vpc-cni-k8s v1.21.1 config/master/aws-k8s-cni.yaml 584 (--health-probe-bind-addr=:8163). CONFIRMED",
    ),
    Listener(
        "EKS Pod Identity agent metrics",
        "eks-pod-identity-agent",
        2705,
        "TCP",
        None,
        "aws/eks-pod-identity-agent v0.1.37 cmd/server.go 108, 138-139 (always on 0.0.0.0:2705). CONFIRMED for the "
        f"tag; {POD_IDENTITY_AGENT_BUILD}",
    ),
    Listener(
        "EKS Pod Identity agent credentials",
        "eks-pod-identity-agent",
        80,
        "TCP",
        "the caller's own service account token, exchanged at EKS Auth AssumeRoleForPodIdentity",
        "aws/eks-pod-identity-agent v0.1.37 templates/daemonset.yaml 75-76 (--port 80), configuration/config.go 4-5, "
        f"pkg/handlers/eks_credential_handler.go 66-80. CONFIRMED for the tag; {POD_IDENTITY_AGENT_BUILD}",
        address=POD_IDENTITY_ADDRESS,
    ),
    Listener(
        "gpulab's dcgm-exporter metrics (per-pod GPU use)",
        "dcgm-exporter",
        9400,
        "TCP",
        None,
        "components/metrics/dcgm_exporter.py (hostNetwork, DCGM_EXPORTER_LISTEN :9400)",
    ),
    Listener(
        "kube-proxy health",
        "kube-proxy",
        10256,
        "TCP",
        None,
        "kubernetes/kubernetes v1.36.5 pkg/proxy/apis/config/v1alpha1/defaults.go 41-42, 47-48, 145-147 "
        "(healthzBindAddress, when the configuration leaves it empty, 0.0.0.0:10256; pkg/cluster/ports/ports.go 43), "
        "the same at v1.35.8 and v1.34.12: CONFIRMED upstream. The EKS add-on's kube-proxy-config ConfigMap, which "
        "its kube-proxy reads (--config), is not public for any pinned build: REPORTED on a node",
    ),
    Listener(
        "sshd",
        None,
        22,
        "TCP",
        "public keys only where the EC2NodeClass or EC2 Instance Connect adds one",
        "awslabs/amazon-eks-ami v20260714 templates/al2023/provisioners/install-worker.sh 53-58 (ec2-instance-connect "
        "installed), 102-107 (sshd_config given strong ciphers, sshd.service restarted while the AMI is built); "
        "nothing under templates/al2023 disables sshd (cleanup.sh 12 only removes its host keys): CONFIRMED that the "
        "AMI keeps sshd. That it starts at boot on every address, and takes keys only, comes from AL2023's own "
        "sshd.service and sshd_config, which that repository does not hold: REPORTED",
    ),
)
