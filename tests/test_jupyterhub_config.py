"""gpulab:jupyterhub and the labs' hub keys: what a stack may write, the one-line messages for what it may not, and
that the OAuth client secret is taken only as a Pulumi secret and never reaches the render."""

import math
import re

import pulumi
import pytest
import yaml
from jupyterhub.traitlets import ByteSpecification

import domain.stack
import render.run
from components.jupyterhub.spawn_profiles import MPS_LEARNER_UID, description, kubespawner_memory, profile, profile_list
from domain.capacity.quantity import quantity
from domain.stack.jupyterhub import CLIENT_SECRET_KEY
from render import charts, harness
from tests.conftest import as_cli_config, stack_values
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab

SECRET_KEY = f"gpulab:{CLIENT_SECRET_KEY}"


def hub_stack(hub: dict | None = None, **labs: dict) -> dict:
    labs = labs or {"intro": lab(["g4dn.xlarge"], 3, notebookImage=NOTEBOOK_IMAGE)}
    return stack_values(**{"gpulab:labs": labs, "gpulab:jupyterhub": {**HUB, **(hub or {})}})


def load(values: dict, secrets: tuple[str, ...] = (SECRET_KEY,)) -> domain.stack.StackConfig:
    """Loads the values as the program does, with `secrets` marked secret as `pulumi config set --secret` marks them."""
    pulumi.runtime.set_all_config(as_cli_config(values), [k for k in secrets if k in values])
    return domain.stack.load()


def problems(values: dict, secrets: tuple[str, ...] = (SECRET_KEY,)) -> list[str]:
    with pytest.raises(domain.stack.ConfigError, match=r"^gpulab:") as caught:
        load(values, secrets)
    return caught.value.lines


def with_secret(values: dict, secret: str = "s3cr3t-0f-the-oauth-app") -> dict:
    return {**values, SECRET_KEY: secret}


def test_no_hub_means_none_and_a_github_hub_with_secret_loads():
    assert load(stack_values()).settings.jupyterhub is None
    stack = load(with_secret(hub_stack()))
    assert (stack.settings.jupyterhub.auth.type, stack.jupyterhub_client_secret) == (
        "github",
        "s3cr3t-0f-the-oauth-app",
    )
    assert "s3cr3t" not in repr(stack)


BAD = {
    "no sign-in named": (
        stack_values(**{"gpulab:jupyterhub": {k: v for k, v in HUB.items() if k != "auth"}}),
        "gpulab:jupyterhub.auth: required key is missing",
    ),
    "sign-in as a word": (hub_stack({"auth": "github"}), "gpulab:jupyterhub.auth: must be a mapping of keys to values"),
    "an authenticator gpulab does not offer": (
        hub_stack({"auth": {"type": "gitlab"}}),
        "gpulab:jupyterhub.auth: type must be one of 'github', 'oidc', 'lti13', 'dummy', got 'gitlab'",
    ),
    "a client secret in the auth block": (
        hub_stack({"auth": {**HUB["auth"], "clientSecret": "x"}}),
        "gpulab:jupyterhub.auth.clientSecret: unknown key; did you mean gpulab:jupyterhubClientSecret? The OAuth "
        "client secret is not in the settings: set it with `pulumi config set --secret",
    ),
    "github letting nobody in": (
        hub_stack({"auth": {"type": "github", "clientId": "x"}}),
        "gpulab:jupyterhub.auth.allowedOrganizations: nobody could sign in",
    ),
    "oidc over plain http": (
        hub_stack(
            {
                "auth": {
                    "type": "oidc",
                    "clientId": "x",
                    "authorizeUrl": "http://idp.example.edu/authorize",
                    "tokenUrl": "https://idp.example.edu/token",
                    "userdataUrl": "https://idp.example.edu/userinfo",
                    "allowedGroups": ["gpu-learners"],
                }
            }
        ),
        "gpulab:jupyterhub.auth.authorizeUrl: must be an https:// URL",
    ),
    "lti without a client id": (
        hub_stack(
            {
                "auth": {
                    "type": "lti13",
                    "clientIds": [],
                    "issuer": "https://x.edu",
                    "authorizeUrl": "https://x.edu/a",
                    "jwksEndpoint": "https://x.edu/j",
                }
            }
        ),
        "gpulab:jupyterhub.auth.clientIds: must not be empty",
    ),
    "a host that is not a DNS name": (
        hub_stack({"host": "Hub_1"}),
        "gpulab:jupyterhub.host: must be a lowercase DNS name",
    ),
    "a certificate that is not an ACM ARN": (
        hub_stack(
            {
                "loadBalancer": {
                    **HUB["loadBalancer"],
                    "certificateArn": "arn:aws:iam::123456789012:server-certificate/x",
                }
            }
        ),
        "gpulab:jupyterhub.loadBalancer.certificateArn: must be an ACM certificate ARN",
    ),
    "no load balancer subnets": (
        hub_stack({"loadBalancer": {**HUB["loadBalancer"], "subnetIds": []}}),
        "gpulab:jupyterhub.loadBalancer.subnetIds: must not be empty",
    ),
    "a load balancer scheme AWS does not have": (
        hub_stack({"loadBalancer": {**HUB["loadBalancer"], "scheme": "public"}}),
        "gpulab:jupyterhub.loadBalancer.scheme: must be one of 'internal' or 'internet-facing', got 'public'",
    ),
    "an idle timeout of seconds": (
        hub_stack({"culling": {"idleTimeout": "30s"}}),
        "gpulab:jupyterhub.culling.idleTimeout: must be at least 1m",
    ),
    "homes the chart does not have": (
        hub_stack({"homes": "shared"}),
        "gpulab:jupyterhub.homes: must be one of 'none' or 'perLearner', got 'shared'",
    ),
    "the default namespace": (
        hub_stack({"namespace": "default"}),
        "gpulab:jupyterhub.namespace: must be a namespace of its own, not 'default'",
    ),
    "a culling interval of seconds": (
        hub_stack({"culling": {"every": "59s"}}),
        "gpulab:jupyterhub.culling.every: must be at least 1m",
    ),
    "a maximum age of seconds": (
        hub_stack({"culling": {"maxAge": "30s"}}),
        "gpulab:jupyterhub.culling.maxAge: must be at least 1m",
    ),
    "a namespace another component uses": (
        hub_stack({"namespace": "nvidia-device-plugin"}),
        "gpulab:jupyterhub.namespace: must be a namespace of its own",
    ),
    "an add-on version that is not one": (
        hub_stack({"ebsCsiDriverVersion": "1.64.0"}),
        "gpulab:jupyterhub.ebsCsiDriverVersion: must be an EKS add-on version",
    ),
    "a lab on the spawn page without an image": (
        hub_stack(intro=lab(["g4dn.xlarge"], 3)),
        "gpulab:labs.intro.notebookImage: required for a lab on the JupyterHub spawn page",
    ),
    "no lab on the spawn page": (
        hub_stack(intro=lab(["g4dn.xlarge"], 3, onSpawnPage=False)),
        "gpulab:jupyterhub: needs at least one lab on the spawn page",
    ),
    "a notebook image without jupyterhub-singleuser": (
        hub_stack(intro=lab(["g4dn.xlarge"], 3, notebookImage="tensorflow/tensorflow:2.12.0-gpu")),
        "gpulab:labs.intro.notebookImage: cannot run jupyterhub-singleuser",
    ),
}


@pytest.mark.parametrize(("values", "expected"), BAD.values(), ids=BAD.keys())
def test_a_bad_jupyterhub_setting_is_reported_at_its_key(values, expected):
    lines = problems(with_secret(values))
    assert any(line.startswith(expected) for line in lines), lines


def test_culling_takes_a_minute_at_the_shortest():
    culling = load(with_secret(hub_stack({"culling": {"idleTimeout": "1m", "every": "60s", "maxAge": "1m"}})))
    settings = culling.settings.jupyterhub.culling
    assert (settings.idle_timeout, settings.every, settings.max_age) == ("1m", "60s", "1m")


def test_a_bad_hub_setting_exits_2_with_a_line_per_problem(tmp_path, capsys):
    stack = tmp_path / "Pulumi.case.yaml"
    stack.write_text(yaml.safe_dump({"config": hub_stack({"host": "Hub_1", "homes": "shared"})}))
    assert render.run.main([str(stack), "--out", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.splitlines()
    # The stack sets no client secret for its GitHub sign-in: that line no longer waits for the others to be fixed.
    assert [line.split(":", 2)[1] for line in lines] == [
        "jupyterhub.host",
        "jupyterhub.homes",
        "jupyterhubClientSecret",
    ]
    assert not (tmp_path / "out").exists()


def test_oauth_needs_a_client_secret_that_is_a_pulumi_secret():
    assert problems(hub_stack()) == [
        f"{SECRET_KEY}: required with gpulab:jupyterhub.auth.type github: the OAuth app's client secret; set it "
        f"with `pulumi config set --secret {SECRET_KEY} <secret>`"
    ]
    (line,) = problems(with_secret(hub_stack()), secrets=())
    assert line.startswith(f"{SECRET_KEY}: must be a Pulumi secret, not plain text in the stack file")


def test_a_client_secret_without_an_oauth_sign_in_is_refused():
    values = with_secret(hub_stack({"auth": {"type": "dummy"}}))
    assert problems(values) == [f"{SECRET_KEY}: only used with gpulab:jupyterhub.auth.type github or oidc; remove it"]


def test_the_client_secret_reaches_no_resource_value_or_chart(tmp_path):
    secret = "pl41n-t3xt-cl13nt-s3cr3t"
    run = harness.run("test", as_cli_config(with_secret(hub_stack(), secret)), secrets=[SECRET_KEY])
    render.run.write(run, tmp_path)
    not_rendered = charts.write(run, tmp_path)
    written = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    assert {p.relative_to(tmp_path).parts[0] for p in written} >= {"resources.json", "manifests", "helm"}
    assert [p for p, text in written.items() if secret in text] == []
    # It does reach the cluster: as the Secret the hub reads its environment variable from.
    oauth = run.one("kubernetes:core/v1:Secret", "jupyterhub-oauth-client")
    assert oauth.inputs["stringData"] == {"client-secret": harness.SECRET}
    if not_rendered:  # the rest holds; the charts' objects are not there to read
        pytest.skip("; ".join(not_rendered))
    assert (tmp_path / "charts").is_dir()


# --- the profile builder -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["4656Mi", "4Gi", "4G", "1.5Gi", "3000M", "1Ti", "123456789", "1.25Ki"])
def test_memory_in_kubespawner_units_is_the_same_bytes(text):
    written = kubespawner_memory(text)
    assert ByteSpecification().validate(None, written) == math.ceil(quantity(text))
    assert not re.search(r"[KMGT]i$", str(written))  # KubeSpawner refuses Kubernetes' binary suffixes


def test_an_mps_profile_pins_the_uid_and_says_the_gpu_share():
    settings = load(
        with_secret(hub_stack(isolated=lab(["g4dn.xlarge"], 4, sharing="mps", notebookImage=NOTEBOOK_IMAGE)))
    ).settings
    entry = profile("isolated", settings.labs["isolated"])
    assert entry["kubespawner_override"]["uid"] == MPS_LEARNER_UID
    assert entry["description"].startswith("NVIDIA T4 GPU, MPS, at most 4 GiB of GPU memory and 25% of the GPU compute")


def test_sliced_profiles_say_memory_is_shared_uid_is_the_charts():
    settings = load(with_secret(hub_stack())).settings
    entry = profile("intro", settings.labs["intro"])
    assert "uid" not in entry["kubespawner_override"]
    assert "GPU memory shared and uncapped" in description(settings.labs["intro"])


def test_labs_off_the_spawn_page_get_no_profile():
    labs = {
        "shown": lab(["g4dn.xlarge"], 3, notebookImage=NOTEBOOK_IMAGE),
        "hidden": lab(["g5.xlarge"], 1, onSpawnPage=False),
    }
    settings = load(with_secret(hub_stack(**labs))).settings
    assert [p["slug"] for p in profile_list(settings.labs)] == ["shown"]


@pytest.mark.parametrize(
    ("image", "refused"),
    [
        ("tensorflow/tensorflow:2.12.0-gpu", True),
        ("tensorflow/tensorflow:2.12.0-gpu@sha256:" + "a" * 64, True),
        ("docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", True),
        ("localhost:5000/tensorflow/tensorflow:2.12.0-gpu", False),  # a registry of one's own may add jupyterhub
        (NOTEBOOK_IMAGE, False),
    ],
)
def test_images_known_not_to_serve_are_refused_whatever_the_tag(image, refused):
    values = with_secret(hub_stack(intro=lab(["g4dn.xlarge"], 3, notebookImage=image)))
    if refused:
        (line,) = problems(values)
        assert line.startswith("gpulab:labs.intro.notebookImage: cannot run jupyterhub-singleuser")
    else:
        assert load(values).settings.labs["intro"].notebook_image.endswith(image.split("/", 1)[-1])


def test_labs_get_the_hubs_notebook_image_unless_they_name_one():
    own = "registry.example.edu/labs/notebook:2026-09"
    labs = {
        "plain": lab(["g4dn.xlarge"], 3),
        "own": lab(["g4dn.xlarge"], 3, notebookImage=own),
        "staff": lab(["g5.xlarge"], 1, onSpawnPage=False),
    }
    settings = load(with_secret(hub_stack({"notebookImage": NOTEBOOK_IMAGE}, **labs))).settings
    images = {name: lab.learner_image for name, lab in settings.labs.items()}
    assert images == {"plain": NOTEBOOK_IMAGE, "own": own, "staff": None}
    pods = {p["slug"]: p["kubespawner_override"]["image"] for p in profile_list(settings.labs)}
    assert pods == {"plain": NOTEBOOK_IMAGE, "own": own}


def test_a_labs_nodes_pull_its_learners_image_first():
    intro = lab(["g4dn.xlarge"], 3, prepullImages=["ubuntu:24.04", NOTEBOOK_IMAGE])
    labs = load(with_secret(hub_stack({"notebookImage": NOTEBOOK_IMAGE}, intro=intro))).settings.labs
    assert labs["intro"].node_images == [NOTEBOOK_IMAGE, "docker.io/library/ubuntu:24.04"]


@pytest.mark.parametrize(("secret", "what"), [("", "empty"), ("  \n", "only blanks")])
def test_an_empty_client_secret_is_refused_by_name(secret, what):
    # `pulumi config set --secret gpulab:jupyterhubClientSecret "$UNSET_VARIABLE"` stores an empty secret: the hub
    # would send it to GitHub, and every sign-in would fail there.
    assert problems(with_secret(hub_stack(), secret)) == [
        f"{SECRET_KEY}: is {what}; it must be the OAuth app's client secret, which gpulab:jupyterhub.auth.type github "
        f"needs; set it with `pulumi config set --secret {SECRET_KEY} <secret>`"
    ]


def test_a_client_secret_of_digits_stays_text():
    # The engine hands plain strings over as they are; decoded as JSON, these would be a number.
    assert load(with_secret(hub_stack(), "1234567890")).jupyterhub_client_secret == "1234567890"
