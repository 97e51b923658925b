"""EC2NodeClass `userData` for AL2023 GPU nodes: the pod PID limit, parallel image pull, the host firewall
(host_firewall.py) and image pre-pulling.

The v1 EC2NodeClass `kubelet` block has no `podPidsLimit` and no feature gates, so both travel as a nodeadm NodeConfig
part.
Karpenter 1.14.1 (pkg/providers/amifamily/bootstrap/nodeadm.go, `parseUserData`) keeps every part of a document that
starts with `MIME-Version:` and appends its own NodeConfig last; nodeadm merges NodeConfig parts in order with later
parts winning per field, and Karpenter's kubelet config never sets `podPidsLimit`, so ours survives the merge.
Karpenter re-serialises each part with its Content-Type header only (bootstrap/mime/mime.go), which is why the parts
are plain 7-bit text: a Content-Transfer-Encoding such as base64 would be dropped and the body passed on still encoded.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import yaml

from components.karpenter import host_firewall

MIME_BOUNDARY = "GPULAB"
NODECONFIG_CONTENT_TYPE = "application/node.eks.aws"  # the media type nodeadm looks for in a multipart document
SHELL_SCRIPT_CONTENT_TYPE = 'text/x-shellscript; charset="us-ascii"'

PREPULL_UNIT = "gpulab-prepull.service"
PREPULL_SCRIPT_PATH = "/usr/local/sbin/gpulab-prepull"
# kubelet only sees images in the namespace the CRI plugin serves.
CONTAINERD_NAMESPACE = "k8s.io"
PULL_ATTEMPTS = 5
PREPULL_TIMEOUT_SECONDS = 3600
FAST_IMAGE_PULL_GATE = "FastImagePull"  # amazon-eks-ami nodeadm/api/v1alpha1/nodeconfig_types.go, Feature

# The snapshotter the CRI unpacks images into, by whether the gate is on. nodeadm's containerd templates
# (amazon-eks-ami v20260714 nodeadm/internal/containerd/config.template.toml and config2.template.toml) set the CRI's
# `snapshotter = "soci"` only when UseSOCISnapshotter holds, and set none otherwise, which leaves containerd's default,
# overlayfs. An image unpacked into another snapshotter is not one the kubelet's pod can start from without a pull.
CRI_SNAPSHOTTER = {True: "soci", False: "overlayfs"}


def node_config(*, pod_pids_limit: int, fast_image_pull: bool) -> dict:
    """The nodeadm NodeConfig that carries the settings Karpenter's EC2NodeClass cannot express."""
    spec: dict = {"kubelet": {"config": {"podPidsLimit": pod_pids_limit}}}
    if fast_image_pull:
        # Karpenter's own NodeConfig, merged after this one, sets no feature gates (bootstrap/nodeadm.go).
        spec["featureGates"] = {FAST_IMAGE_PULL_GATE: True}
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


# How we know the ordering works (amazon-eks-ami v20260724, templates/al2023/runtime/rootfs/etc/systemd/system/; the
# Before/After lines are unchanged since AL2023 landed in 6c054415):
# - nodeadm-config.service is `Before=cloud-init.service` and writes /etc/containerd/config.toml without starting
#   containerd; the AMI build never enables containerd.service (templates/al2023/provisioners/install-worker.sh).
# - This script is an x-shellscript part, which cloud-init runs in cloud-final.service (scripts-user module). Here
#   containerd is not running yet, so a pull would fail, and waiting for containerd would hang the boot, because
# - nodeadm-run.service is `After=... cloud-final.service`; it restarts containerd and waits until systemd reports it
#   active (nodeadm/internal/containerd/daemon.go, daemon/systemd.go RestartDaemon), then starts kubelet.
# So the script only installs a oneshot unit ordered `After=nodeadm-run.service containerd.service` and queues it with
# `--no-block`: its job waits behind nodeadm-run's, which waits behind the cloud-final run this script is part of. It
# deliberately has no Wants=/Requires= on containerd: that would start containerd before nodeadm-run restarts it and
# cut off a pull in flight. The pull loop still waits for containerd to answer, in case nodeadm-run failed.
# Pulled images are not pinned: kubelet's image GC may remove them once unused and the disk passes its high threshold.
#
# The pull goes into the CRI's namespace and snapshotter (CRI_SNAPSHOTTER), through nerdctl, which the AL2023 AMI
# installs (templates/al2023/provisioners/install-worker.sh). `ctr images pull` would not do for SOCI: the snapshotter's
# parallel mode fetches each layer itself from the image reference and layer digests that the CRI passes as snapshot
# labels (containerd's snapshotters.AppendInfoHandlerWrapper), and fails without them (awslabs/soci-snapshotter v0.15.0
# fs/fs.go MountLocal, "unable to get image ref from labels"); nerdctl adds the same labels for a snapshotter named
# soci (containerd/nerdctl v2.3.5 pkg/imgutil/snapshotter.go), so the pre-pull is the parallel pull the kubelet's
# would be.
def prepull_command(fast_image_pull: bool) -> str:
    """The command the pre-pull script runs per image (the image follows it)."""
    return f"nerdctl --namespace {CONTAINERD_NAMESPACE} --snapshotter {CRI_SNAPSHOTTER[fast_image_pull]} pull --quiet"


# A pull from a private registry (ECR) needs the node's credentials, and nerdctl has no kubelet credential provider.
# So the script asks the kubelet's own provider, as the kubelet would: nodeadm (amazon-eks-ami v20260714
# nodeadm/internal/kubelet/image-credential-provider.go) installs ecr-credential-provider and writes its
# CredentialProviderConfig into CREDENTIAL_PROVIDER_DIR before it starts the kubelet, and this script runs after
# nodeadm-run. For an image whose registry matches the provider's matchImages (one domain segment per `*`, the
# kubelet's rule), the script sends the provider a CredentialProviderRequest on stdin and logs nerdctl in with the
# username and password of its answer's `auth` (kubernetes/cloud-provider-aws cmd/ecr-credential-provider; the node
# role's AmazonEC2ContainerRegistryPullOnly lets it get an ECR token), with the `https://` prefix nerdctl's login
# needs (install-nodeadm.sh at the same tag). Other images are pulled anonymously, as the kubelet pulls them. The
# logins live in a DOCKER_CONFIG of the run's own (nerdctl reads `${DOCKER_CONFIG}/config.json`, nerdctl v2.3.5
# docs/registry.md), removed when it ends.
CREDENTIAL_PROVIDER_DIR = "/etc/eks/image-credential-provider"
CREDENTIAL_PROVIDER = "ecr-credential-provider"


def _prepull_script(images: Sequence[str], fast_image_pull: bool) -> str:
    image_words = " ".join(shlex.quote(image) for image in images)
    runner = f"""\
#!/bin/bash
set -uo pipefail
images=({image_words})
provider_dir={CREDENTIAL_PROVIDER_DIR}
DOCKER_CONFIG=$(mktemp -d)
export DOCKER_CONFIG
trap 'rm -rf "$DOCKER_CONFIG"' EXIT

# Logs nerdctl in to the registry of image $1 with the kubelet's credentials, if the kubelet would ask for them.
login_for() {{
  local host=${{1%%/*}} pattern request answer user
  while IFS= read -r pattern; do
    pattern=${{pattern//./\\\\.}}
    pattern=${{pattern//\\*/[^.]*}}
    [[ $host =~ ^${{pattern}}$ ]] || continue
    # shellcheck disable=SC2016 # $image is jq's variable
    request='{{apiVersion: "credentialprovider.kubelet.k8s.io/v1", kind: "CredentialProviderRequest", image: $image}}'
    answer=$(jq -n --arg image "$1" "$request" | "$provider_dir/{CREDENTIAL_PROVIDER}") || return 1
    user=$(jq -r --arg host "$host" '.auth[$host].username' <<<"$answer")
    jq -r --arg host "$host" '.auth[$host].password' <<<"$answer" |
      nerdctl login --username "$user" --password-stdin "https://$host" >/dev/null
    return
  done < <(jq -r '.providers[] | select(.name == "{CREDENTIAL_PROVIDER}") | .matchImages[]' "$provider_dir/config.json")
}}

for _ in $(seq 1 60); do
  nerdctl --namespace {CONTAINERD_NAMESPACE} version >/dev/null 2>&1 && break
  sleep 5
done
failed=0
for image in "${{images[@]}}"; do
  for attempt in $(seq 1 {PULL_ATTEMPTS}); do
    login_for "$image" || echo "gpulab-prepull: the kubelet's credential provider gave nothing for $image" >&2
    if {prepull_command(fast_image_pull)} "$image" >/dev/null; then
      echo "gpulab-prepull: pulled $image"
      continue 2
    fi
    echo "gpulab-prepull: attempt $attempt/{PULL_ATTEMPTS} to pull $image failed" >&2
    sleep $((attempt * 20))
  done
  failed=1
done
exit "$failed"
"""
    unit = f"""\
[Unit]
Description=gpulab: pre-pull lab images into containerd ({CONTAINERD_NAMESPACE} namespace)
After=nodeadm-run.service containerd.service

[Service]
Type=oneshot
ExecStart={PREPULL_SCRIPT_PATH}
TimeoutStartSec={PREPULL_TIMEOUT_SECONDS}
"""
    return f"""\
#!/bin/bash
set -euo pipefail
cat > {PREPULL_SCRIPT_PATH} <<'GPULAB_PREPULL_SCRIPT'
{runner}GPULAB_PREPULL_SCRIPT
chmod 0755 {PREPULL_SCRIPT_PATH}
cat > /etc/systemd/system/{PREPULL_UNIT} <<'GPULAB_PREPULL_UNIT'
{unit}GPULAB_PREPULL_UNIT
systemctl daemon-reload
systemctl start --no-block {PREPULL_UNIT}
"""


def node_user_data(*, pod_pids_limit: int, prepull_images: Sequence[str], fast_image_pull: bool) -> str:
    """MIME multi-part user data for AL2023: a NodeConfig part, the host firewall's script part, then (only with
    images) the pre-pull script part.

    `prepull_images` are fully qualified references (domain/stack/images.py). The output is deterministic (a fixed
    boundary, images in the given order) so that an unchanged lab never shows a userData diff, which would make
    Karpenter treat its nodes as drifted.
    """
    images = list(prepull_images)

    config = node_config(pod_pids_limit=pod_pids_limit, fast_image_pull=fast_image_pull)
    parts = [(NODECONFIG_CONTENT_TYPE, yaml.dump(config, Dumper=yaml.CSafeDumper, sort_keys=False))]
    # Learners share these nodes: the node's own services are closed to its pods (host_firewall.py).
    parts.append((SHELL_SCRIPT_CONTENT_TYPE, host_firewall.script()))
    if images:
        parts.append((SHELL_SCRIPT_CONTENT_TYPE, _prepull_script(images, fast_image_pull)))

    delimiter = f"--{MIME_BOUNDARY}"
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"', ""]
    for content_type, body in parts:
        if any(line.startswith(delimiter) for line in body.splitlines()):
            raise ValueError(f"a user data part contains the MIME boundary {delimiter!r}")
        if not body.isascii():
            raise ValueError("user data parts must be 7-bit ASCII: Karpenter drops Content-Transfer-Encoding")
        lines += [delimiter, f"Content-Type: {content_type}", "", body.rstrip("\n")]
    lines.append(f"{delimiter}--")
    return "\n".join(lines) + "\n"


# EC2 takes at most 16 KB of user data, counted before base64 (EC2 User Guide, "Work with instance user data"); the
# CreateLaunchTemplate that Karpenter 1.14.1 makes fails past it (pkg/providers/launchtemplate/metrics.go,
# userDataMaxBytes = 16384, which Karpenter only warns about), and the lab never gets a node.
EC2_USER_DATA_MAX_BYTES = 16384
# What Karpenter adds to these parts (bootstrap/nodeadm.go Script): its own NodeConfig, with the cluster's name,
# endpoint, CIDR and CA bundle (an EKS cluster CA certificate in PEM, base64 again in the YAML: some 1.5 KB), the
# kubelet's clusterDNS, maxPods and the lab's taint, and --node-labels with the NodePool's labels (a 63-character
# lab name in four of them), under a MIME header of its own. An estimate with room to spare, not a measurement:
# Karpenter re-frames these parts with the boundary "//", shorter than ours, so their own bytes count in full.
KARPENTER_PART_BYTES = 3072


def user_data_problem(user_data: str) -> str | None:
    """Why EC2 would refuse the user data Karpenter launches a lab's nodes with, built from `user_data` (this
    module's), or None."""
    size = len(user_data.encode())
    if size + KARPENTER_PART_BYTES <= EC2_USER_DATA_MAX_BYTES:
        return None
    return (
        f"the lab's user data would be {size:,} bytes, and with the {KARPENTER_PART_BYTES:,} gpulab leaves for "
        f"Karpenter's own NodeConfig it passes EC2's {EC2_USER_DATA_MAX_BYTES:,} (16 KB before base64), so no node "
        f"would launch: pre-pull fewer images (at most {EC2_USER_DATA_MAX_BYTES - KARPENTER_PART_BYTES:,} bytes)"
    )
