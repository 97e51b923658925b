"""The AL2023 user data must be a MIME document Karpenter and nodeadm both accept, carrying the pod PID limit."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from components.karpenter.user_data import (
    CREDENTIAL_PROVIDER,
    CREDENTIAL_PROVIDER_DIR,
    PREPULL_SCRIPT_PATH,
    PREPULL_UNIT,
    node_user_data,
)
from tests.support.user_data_parts import firewall_script, flag, mime_parts, prepull_script, pull_command, scripts

TENSORFLOW = "docker.io/tensorflow/tensorflow:2.12.0-gpu"
UBUNTU = "docker.io/library/ubuntu:22.04"


def _unit_section(script: str) -> list[str]:
    start = script.index("[Unit]")
    return script[start : script.index("[Service]", start)].splitlines()


def test_user_data_starts_with_a_mime_header_karpenter_knows():
    # Karpenter only keeps the parts of user data that starts with MIME-Version: or Content-Type:; anything else it
    # wraps whole as a single NodeConfig or shell-script part.
    assert node_user_data(pod_pids_limit=4096, prepull_images=[], fast_image_pull=False).startswith(
        "MIME-Version: 1.0\n"
    )


def test_nodeconfig_part_carries_pod_pids_limit():
    part, _ = mime_parts(node_user_data(pod_pids_limit=4096, prepull_images=[], fast_image_pull=False))
    assert part.get_content_type() == "application/node.eks.aws"
    config = yaml.safe_load(part.get_payload())
    assert config["apiVersion"] == "node.eks.aws/v1alpha1"
    assert config["kind"] == "NodeConfig"
    assert config["spec"]["kubelet"]["config"]["podPidsLimit"] == 4096


def test_without_images_the_one_script_is_the_firewall():
    user_data = node_user_data(pod_pids_limit=1024, prepull_images=(), fast_image_pull=False)
    types = [part.get_content_type() for part in mime_parts(user_data)]
    assert types == ["application/node.eks.aws", "text/x-shellscript"]
    assert scripts(user_data) == [firewall_script(user_data)]


def test_nodeconfig_then_the_firewall_then_the_prepull():
    user_data = node_user_data(pod_pids_limit=1024, prepull_images=[TENSORFLOW], fast_image_pull=False)
    types = [part.get_content_type() for part in mime_parts(user_data)]
    assert types == ["application/node.eks.aws", "text/x-shellscript", "text/x-shellscript"]
    assert scripts(user_data) == [firewall_script(user_data), prepull_script(user_data)]


def test_parts_use_no_transfer_encoding_karpenter_would_drop():
    for part in mime_parts(node_user_data(pod_pids_limit=1024, prepull_images=[TENSORFLOW], fast_image_pull=False)):
        assert part["Content-Transfer-Encoding"] is None
        assert part.get_payload().isascii()


def test_script_pulls_each_quoted_image():
    script = prepull_script(node_user_data(pod_pids_limit=1024, prepull_images=[TENSORFLOW], fast_image_pull=False))
    assert f"images=({shlex.quote(TENSORFLOW)})" in script


# What nodeadm makes of the NodeConfig, from its containerd config templates (amazon-eks-ami v20260714
# nodeadm/internal/containerd/config*.template.toml): the CRI serves namespace k8s.io, and unpacks into `soci` when
# UseSOCISnapshotter holds (the FastImagePull gate, on every type gpulab knows: tests/test_disks.py), else into
# containerd's default snapshotter, overlayfs. Written out here, apart from the code under test.
def cri_snapshotter(node_config: dict) -> str:
    return "soci" if node_config["spec"].get("featureGates", {}).get("FastImagePull") else "overlayfs"


@pytest.mark.parametrize("fast_image_pull", [False, True])
def test_the_prepull_lands_where_the_cri_unpacks_images(fast_image_pull):
    user_data = node_user_data(pod_pids_limit=1024, prepull_images=[TENSORFLOW], fast_image_pull=fast_image_pull)
    node_config = yaml.safe_load(mime_parts(user_data)[0].get_payload())
    command = pull_command(prepull_script(user_data))
    # nerdctl passes a soci snapshotter the image and layer labels its parallel pull needs; ctr does not.
    assert command[0] == "nerdctl" and "pull" in command
    assert flag(command, "--namespace") == "k8s.io"
    assert flag(command, "--snapshotter") == cri_snapshotter(node_config)


def test_the_gate_is_in_the_nodeconfig_only_when_asked_for():
    def gates(fast_image_pull):
        part, _ = mime_parts(node_user_data(pod_pids_limit=1024, prepull_images=[], fast_image_pull=fast_image_pull))
        return yaml.safe_load(part.get_payload())["spec"].get("featureGates")

    assert (gates(True), gates(False)) == ({"FastImagePull": True}, None)


def test_prepull_unit_runs_after_nodeadm_run_and_containerd():
    unit = _unit_section(
        prepull_script(node_user_data(pod_pids_limit=1024, prepull_images=[TENSORFLOW], fast_image_pull=False))
    )
    after = next(line for line in unit if line.startswith("After="))
    assert set(after.removeprefix("After=").split()) >= {"nodeadm-run.service", "containerd.service"}


def test_prepull_unit_never_pulls_containerd_in_early():
    # A Wants=/Requires= on containerd would start it before nodeadm-run restarts it, cutting off a pull in flight.
    unit = _unit_section(
        prepull_script(node_user_data(pod_pids_limit=1024, prepull_images=[TENSORFLOW], fast_image_pull=False))
    )
    assert not [line for line in unit if line.startswith(("Wants=", "Requires=", "BindsTo=", "Requisite="))]


def test_script_queues_the_unit_without_blocking_cloud_final():
    # nodeadm-run waits for cloud-final; a blocking start would wait for nodeadm-run in turn and deadlock the boot.
    script = prepull_script(node_user_data(pod_pids_limit=1024, prepull_images=[TENSORFLOW], fast_image_pull=False))
    assert f"cat > /etc/systemd/system/{PREPULL_UNIT} <<'" in script
    assert f"cat > {PREPULL_SCRIPT_PATH} <<'" in script
    assert script.rstrip().splitlines()[-1] == f"systemctl start --no-block {PREPULL_UNIT}"
    assert "systemctl daemon-reload" in script


def test_user_data_is_deterministic():
    first = node_user_data(pod_pids_limit=2048, prepull_images=[TENSORFLOW, UBUNTU], fast_image_pull=False)
    second = node_user_data(pod_pids_limit=2048, prepull_images=[TENSORFLOW, UBUNTU], fast_image_pull=False)
    assert first == second


# --- the pre-pull run, with stand-ins for nerdctl and the kubelet's credential provider -----------------------------

ECR_IMAGE = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/labs/notebook:2026-09"
# nodeadm's CredentialProviderConfig on a 1.32+ node (amazon-eks-ami v20260714
# nodeadm/test/e2e/cases/image-credential-provider/expected-image-credential-provider-config.json), abridged.
PROVIDER_CONFIG = {
    "apiVersion": "kubelet.config.k8s.io/v1",
    "kind": "CredentialProviderConfig",
    "providers": [
        {
            "name": "ecr-credential-provider",
            "matchImages": ["*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr-fips.*.amazonaws.com", "public.ecr.aws"],
            "defaultCacheDuration": "12h0m0s",
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        }
    ],
}
# Each stand-in appends what it was asked to the log; nerdctl's pull also notes the logins it could read.
FAKE_NERDCTL = """#!/bin/bash
case " $* " in
  *" login "*) echo "$* password=$(cat)" >>"$LOG"; echo '{"auths": {}}' >"$DOCKER_CONFIG/config.json" ;;
  *" pull "*) echo "pull ${*: -1} logins=$(ls "$DOCKER_CONFIG")" >>"$LOG" ;;
esac
"""
FAKE_PROVIDER = """#!/bin/bash
request=$(cat)
echo "provider $(jq -c . <<<"$request")" >>"$LOG"
host=$(jq -r '.image | split("/")[0]' <<<"$request")
jq -n --arg host "$host" '{apiVersion: "credentialprovider.kubelet.k8s.io/v1", kind: "CredentialProviderResponse",
  cacheKeyType: "Registry", auth: {($host): {username: "AWS", password: "ecr-token"}}}'
"""


def _run_prepull(tmp_path, images: list[str]) -> list[str]:
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed here (the AL2023 AMI has it): the pre-pull run is not tried")
    script = prepull_script(node_user_data(pod_pids_limit=1024, prepull_images=images, fast_image_pull=True))
    runner = script.split("<<'GPULAB_PREPULL_SCRIPT'\n", 1)[1].split("\nGPULAB_PREPULL_SCRIPT\n", 1)[0]
    provider_dir, bin_dir, log = tmp_path / "provider", tmp_path / "bin", tmp_path / "log"
    for path, text in (
        (bin_dir / "nerdctl", FAKE_NERDCTL),
        (bin_dir / "sleep", "#!/bin/bash\n"),
        (provider_dir / CREDENTIAL_PROVIDER, FAKE_PROVIDER),
        (provider_dir / "config.json", json.dumps(PROVIDER_CONFIG)),
    ):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    runner = runner.replace(CREDENTIAL_PROVIDER_DIR, str(provider_dir))
    environment = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log)}
    done = subprocess.run(["bash", "-c", runner], env=environment, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def test_the_prepull_uses_kubelet_ecr_login_else_anonymous(tmp_path):
    log = _run_prepull(tmp_path, [ECR_IMAGE, UBUNTU])
    registry = ECR_IMAGE.split("/")[0]
    provider, login, ecr_pull, ubuntu_pull = log
    assert json.loads(provider.removeprefix("provider ")) == {
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderRequest",
        "image": ECR_IMAGE,
    }
    assert login == f"login --username AWS --password-stdin https://{registry} password=ecr-token"
    assert ecr_pull == f"pull {ECR_IMAGE} logins=config.json"
    assert ubuntu_pull.startswith(f"pull {UBUNTU} ")  # and no request to the provider for Docker Hub


def test_the_prepull_leaves_no_registry_login_behind(tmp_path):
    _run_prepull(tmp_path, [ECR_IMAGE])
    assert not list(Path(tempfile.gettempdir()).glob("tmp.*/config.json"))
