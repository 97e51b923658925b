"""Image references are stored as containerd names them, so that a pre-pulled image counts for a pod."""

import pytest

from domain.stack.images import qualify_image

TENSORFLOW = "tensorflow/tensorflow:2.12.0-gpu"
TENSORFLOW_QUALIFIED = "docker.io/tensorflow/tensorflow:2.12.0-gpu"
DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        (TENSORFLOW, TENSORFLOW_QUALIFIED),
        ("ubuntu:22.04", "docker.io/library/ubuntu:22.04"),
        ("docker.io/ubuntu:22.04", "docker.io/library/ubuntu:22.04"),
        ("index.docker.io/tensorflow/tensorflow:2.12.0-gpu", TENSORFLOW_QUALIFIED),
        ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io/nvidia/pytorch:24.01-py3"),
        ("localhost:5000/lab/app:1", "localhost:5000/lab/app:1"),
        ("registry.example.com:5000/app:v1", "registry.example.com:5000/app:v1"),
        (f"ubuntu@{DIGEST}", f"docker.io/library/ubuntu@{DIGEST}"),
        (f"ubuntu:22.04@{DIGEST}", f"docker.io/library/ubuntu:22.04@{DIGEST}"),
    ],
)
def test_qualify_image_applies_docker_hub_short_name_rules(reference, expected):
    assert qualify_image(reference) == expected


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("ubuntu", "explicit tag or digest"),
        ("localhost:5000/app", "explicit tag or digest"),
        ("", "non-empty"),
        ("ubuntu:22.04; rm -rf /", "no whitespace"),
        ("Ubuntu:22.04", "malformed repository"),
        ("ubuntu:bad$tag", "malformed tag"),
        ("ubuntu@sha256:xyz", "malformed digest"),
        ("bad_host.example.com/app:1", "malformed registry"),
    ],
)
def test_qualify_image_rejects_what_ctr_could_not_pull_reliably(reference, message):
    with pytest.raises(ValueError, match=message):
        qualify_image(reference)
