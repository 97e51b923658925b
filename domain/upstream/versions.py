"""Pinned upstream versions, defined once. Tests check rendered objects against the upstream data of these versions."""

# Karpenter 1.14.1 serves Kubernetes 1.26 to 1.36 (aws/karpenter-provider-aws v1.14.1, commit bde00654,
# pkg/providers/version/version.go lines 43-44: MinK8sVersion "1.26", MaxK8sVersion "1.36"), every version gpulab
# accepts. Karpenter 1.15.x (MaxK8sVersion "1.37") is not buildable here as released, so the chart, the CRDs, the
# controller policy, the planner and the twin all stay at 1.14.1: the Go module proxy refuses the source of
# sigs.k8s.io/karpenter v1.15.1 (which provider v1.15.1 and v1.15.2 require) and of
# github.com/aws/aws-sdk-go-v2/service/timestreamwrite v1.43.1 (which every 1.15 provider requires: pkg/aws/sdk.go
# imports it), "403 Forbidden ... This module version is not available", tried on 2026-12-04. What the move to 1.15
# changes for gpulab (the CRDs of 1.14.1 and 1.15.2 compared, ../shared/upstream/karpenter-*/crds): EC2NodeClass
# spec.kubelet is no longer checked by the API server (any KubeletConfiguration field is kept, and the controller
# reports ValidationSucceeded=False for a wrong one), NodePool spec.disruption.consolidateAfter is optional with a
# default of 0s, and a disruption budget may name the reason Unhealthy (docs/configuration.md, "Kubernetes versions").
KARPENTER_CHART_VERSION = "1.14.1"
KARPENTER_CHART_REPOSITORY = "oci://public.ecr.aws/karpenter"

NVIDIA_DEVICE_PLUGIN_CHART_VERSION = "0.20.0"
NVIDIA_DEVICE_PLUGIN_CHART_REPOSITORY = "https://nvidia.github.io/k8s-device-plugin"

# jupyterhub/zero-to-jupyterhub-k8s, chart jupyterhub (JupyterHub 5.5.0); domain/upstream/fetch.py fetches its reference
# data.
JUPYTERHUB_CHART_VERSION = "4.4.0"
JUPYTERHUB_CHART_REPOSITORY = "https://hub.jupyter.org/helm-chart/"

# EKS add-ons, pinned so that the DaemonSets on every node, and what they request of it (domain/capacity/daemonsets.py),
# do not follow whatever version EKS or pulumi-eks picks on the day of a `pulumi up`. pulumi-eks 4.4.0 creates the
# kube-proxy and vpc-cni add-ons itself, at the most recent version for the cluster's Kubernetes version unless told one
# (nodejs/eks/cluster/cluster.ts and nodejs/eks/addons/cni-addon.ts, `getAddonVersion` with `mostRecent: true`; checked
# at pulumi/pulumi-eks v4.3.0 and at main 7bf0c1b, identical there: the mirror holds no v4.4.0 tag).
#
# kube-proxy builds exist per Kubernetes minor version. 1.28 to 1.34: the versions the EKS API listed on 2025-11-14
# (`aws eks describe-addon-versions`, quoted in awsdocs/amazon-eks-user-guide pull request #1168, "Fix kube-proxy addon
# versions to match EKS API"). 1.35 and 1.36: the EKS User Guide's table of "the latest version of the Amazon EKS add-on
# type for each Kubernetes version" (docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md, the
# Japanese edition: the only stored edition with these rows; 1.36 v1.36.0-eksbuild.14 is also the version
# ministryofjustice/modernisation-platform-environments pull request #18214 moved a 1.36 cluster to). A cluster
# version without one here, or without EKS dates (domain/upstream/eks_calendar.py), is refused
# (domain.stack.fields.known_version).
KUBE_PROXY_ADDON_VERSIONS = {
    "1.36": "v1.36.0-eksbuild.14",
    "1.35": "v1.35.3-eksbuild.13",
    "1.34": "v1.34.0-eksbuild.4",
    "1.33": "v1.33.3-eksbuild.10",
    "1.32": "v1.32.6-eksbuild.12",
    "1.31": "v1.31.10-eksbuild.12",
    "1.30": "v1.30.14-eksbuild.18",
    "1.29": "v1.29.15-eksbuild.26",
    "1.28": "v1.28.15-eksbuild.41",
}
# The kube-scheduler of the jupyterhub chart's user-scheduler, one per cluster minor version: Kubernetes' version skew
# policy lets kube-scheduler be at most one minor version older than the API server and never newer, and the chart's
# own v1.30.14 is four behind 1.34. The newest patch of each minor version that the Go module proxy serves as
# k8s.io/kubernetes (each a kubernetes/kubernetes release tag; `go list -m -json k8s.io/kubernetes@<tag>` on
# 2026-12-04 gave 1.36.5 of 2026-09-23T17:07:00Z and 1.35.8 of 2026-08-20T15:16:14Z, and not v1.36.6 nor v1.35.9; on
# 2026-12-02 it gave 1.34.12 of 2026-09-23, 1.33.13 of 2026-06-11, 1.32.13 of 2026-02-27, 1.31.14 of 2025-11-12,
# 1.30.14 of 2025-06-18, 1.29.15 of 2025-03-11, 1.28.15 of 2024-10-22; the next patch of each, e.g. v1.34.13, it does
# not serve). Each release lists registry.k8s.io/kube-scheduler:<tag> among its container images (CHANGELOG-1.34.md in
# the v1.34.12 tree lists it for v1.34.11 and earlier, CHANGELOG-1.35.md of v1.35.8 for v1.35.7, CHANGELOG-1.36.md of
# v1.36.5 for v1.36.4); that registry is out of reach here, so the images of exactly these tags are not checked. The
# permissions each version needs: tests/test_jupyterhub_user_scheduler.py, SCHEDULER_ROLES.
KUBE_SCHEDULER_VERSIONS = {
    "1.36": "v1.36.5",
    "1.35": "v1.35.8",
    "1.34": "v1.34.12",
    "1.33": "v1.33.13",
    "1.32": "v1.32.13",
    "1.31": "v1.31.14",
    "1.30": "v1.30.14",
    "1.29": "v1.29.15",
    "1.28": "v1.28.15",
}
# The add-ons below are one build for every Kubernetes version above: no source here lists their builds per version
# for 1.35 and 1.36 as the kube-proxy table does, and EKS refuses an incompatible build at CreateAddon, so a wrong
# guess fails `pulumi up` rather than a node. What is known of each on 1.35 and 1.36 is said beside it.
#
# Listed for Kubernetes 1.33 by `eksctl utils describe-addon-versions` on 2026-05-19 (ministryofjustice/
# cloud-platform-infrastructure pull request #4638). EKS publishes one VPC CNI build for all its Kubernetes versions
# (the version table of the EKS User Guide, managing-vpc-cni), but this build's compatibility with each version above
# is not confirmed here. On 1.35: AWS's default vpc-cni add-on for 1.35 in April 2026 was v1.21.1-eksbuild.1
# (awslabs/cdk-eks-blueprints commit 0f89ff76, lib/addons/vpc-cni/index.ts line 12, "checked against `aws eks
# describe-addon-versions`"), and a 1.35 cluster ran v1.21.1-eksbuild.5 (ministryofjustice/modernisation-platform-
# environments pull request #18214, REPORTED): the same release. On 1.36: unconfirmed; the one 1.36 cluster a source
# shows moved to v1.23.0-eksbuild.1 (the same pull request, REPORTED). Kept at v1.21.1 for every version all the same:
# VPC CNI v1.23.0 "must be run with Network Policy Agent `v1.4.1`" (its CHANGELOG.md: the IPAMD gRPC server moved to a
# Unix socket), AWS asks for one VPC CNI minor version at a time (v1.21 -> v1.22 -> v1.23 on a live cluster), and
# gpulab's network policies are reasoned against the network policy agent v1.3.1 that v1.21.1 ships (docs/jupyterhub.md;
# aws/amazon-vpc-cni-k8s v1.21.1 charts/aws-vpc-cni/values.yaml, nodeAgent.image.tag).
VPC_CNI_ADDON_VERSION = "v1.21.1-eksbuild.8"
# Shown by `aws eks describe-addon-configuration --addon-version v1.3.9-eksbuild.1` on 2025-10-02 (aws/eks-hybrid pull
# request #763); compatibility with each Kubernetes version above is not confirmed here. AWS's default for 1.35 in April
# 2026 was v1.3.10-eksbuild.2 (awslabs/cdk-eks-blueprints commit 0f89ff76, lib/addons/eks-pod-identity-agent/index.ts
# line 8), and a 1.36 cluster ran v1.4.0-eksbuild.1 (ministryofjustice/modernisation-platform-environments pull request
# #18214, REPORTED): this build on 1.35 and 1.36 is unconfirmed; its node requests are measured from this build
# (domain/capacity/daemonsets.py), so a move is a change of its own.
POD_IDENTITY_AGENT_ADDON_VERSION = "v1.3.9-eksbuild.1"
# The add-on version zalando-incubator/kubernetes-on-aws pull request #10794 (2026-03-17) moved to, built from
# aws/eks-node-monitoring-agent v1.6.1 (its chart's nodeAgent.image.tag is v1.6.1-eksbuild.1). The newest add-on
# version a public source names; later chart tags exist (v1.7.0, 2026-08-04), their add-on versions are unconfirmed.
# Its configuration accepts dcgmAgent.tolerations (charts/configuration.schema.json, from v1.6.0 on). Its compatibility
# with 1.35 and 1.36 is unconfirmed (a 1.35 cluster ran v1.6.2-eksbuild.1, a 1.36 one v1.7.0-eksbuild.1:
# ministryofjustice/modernisation-platform-environments pull request #18214, REPORTED). Not moved to v1.7.0: it runs the
# DCGM host engine from the agent's own image ("feat(dcgm): Run nv-hostengine from the agent image (#210)", git log
# v1.6.7..v1.7.0 of aws/eks-node-monitoring-agent), a change on every GPU node beside gpulab's dcgm-exporter that
# nothing here has tested.
NODE_MONITORING_AGENT_ADDON_VERSION = "v1.6.1-eksbuild.1"
# The version AWS marked defaultVersion of the aws-ebs-csi-driver add-on for Kubernetes 1.36 on 2026-09-21
# (mitodl/ol-infrastructure pull request #5959, "Bump the EBS CSI driver addon to v1.66.0-eksbuild.1"), built from
# kubernetes-sigs/aws-ebs-csi-driver v1.66.0. Its compatibility with each Kubernetes version above is not confirmed
# here (on 1.35 AWS's default in April 2026 was v1.57.1-eksbuild.1: awslabs/cdk-eks-blueprints commit 0f89ff76,
# lib/addons/ebs-csi-driver/index.ts line 13); EKS refuses an incompatible one at CreateAddon, and
# gpulab:jupyterhub.ebsCsiDriverVersion overrides it.
EBS_CSI_DRIVER_ADDON_VERSION = "v1.66.0-eksbuild.1"

# NVIDIA/dcgm-exporter tag 4.5.3-4.8.2 (commit 691c92762eb551313c825f6efe4ceeee20982801): DCGM 4.5.3, exporter 4.8.2,
# the first release with per-pod GPU utilisation and memory under time-slicing (PR #594, fb5e3dc, behind
# --kubernetes-virtual-gpus). The image is the tag its chart names (deployment/values.yaml image.tag); the chart's
# version is 4.8.2 (deployment/Chart.yaml).
DCGM_EXPORTER_VERSION = "4.5.3-4.8.2"
DCGM_EXPORTER_IMAGE = f"nvcr.io/nvidia/k8s/dcgm-exporter:{DCGM_EXPORTER_VERSION}-distroless"
# kubernetes/kube-state-metrics v2.20.0 (commit 4ffeda2ef866b0fef372849825a803296483b336): the image its
# examples/standard/deployment.yaml names.
KUBE_STATE_METRICS_VERSION = "v2.20.0"
KUBE_STATE_METRICS_IMAGE = f"registry.k8s.io/kube-state-metrics/kube-state-metrics:{KUBE_STATE_METRICS_VERSION}"
# awslabs/aws-sigv4-proxy v1.11.1 (commit ed72b374b7ba88f52ed012a60f98e05d1d39e7a0, aws-sdk-go v1.55.7, which reads EKS
# Pod Identity credentials): its release workflow publishes public.ecr.aws/aws-observability/aws-sigv4-proxy tagged
# with the VERSION file, 1.11.1 (.github/workflows/release.yaml).
AWS_SIGV4_PROXY_IMAGE = "public.ecr.aws/aws-observability/aws-sigv4-proxy:1.11.1"
