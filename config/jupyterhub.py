"""`gpulab:jupyterhub`: the optional JupyterHub (zero-to-jupyterhub-k8s) learners sign in to and spawn notebooks from.

Absent, nothing of JupyterHub is installed. Its client secret is not here: OAuth client secrets come from the Pulumi
secret `gpulab:jupyterhubClientSecret` (config/load.py), so that the stack file and the render never hold one.

The models repeat config.model's base configuration rather than import it, because config.model imports this module
for Settings and Lab (config/ imports run one way).
"""

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from config import durations
from config.images import DOCKER_HUB

# The Pulumi secret that holds the OAuth client secret of the GitHub or OIDC app.
CLIENT_SECRET_KEY = "jupyterhubClientSecret"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, alias_generator=to_camel)


def _matching(pattern: str, what: str) -> AfterValidator:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"must be {what}, got {value!r}")
        return value

    return AfterValidator(check)


def _unique(values: list[str]) -> list[str]:
    duplicates = sorted({v for v in values if values.count(v) > 1})
    if duplicates:
        raise ValueError(f"must not repeat {', '.join(duplicates)}")
    return values


def _between(low: int, high: int) -> AfterValidator:
    def check(value: int) -> int:
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return AfterValidator(check)


def _at_least_a_minute(value: str) -> str:
    if durations.seconds(value) < 60:
        raise ValueError("must be at least 1m")
    return value


HostName = Annotated[
    str,
    _matching(
        r"([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?",
        "a lowercase DNS name such as hub.example.edu",
    ),
]
HttpsUrl = Annotated[str, _matching(r"https://[^\s/?#]+(/[^\s?#]*)?", "an https:// URL without query or fragment")]
CertificateArn = Annotated[
    str,
    _matching(
        r"arn:aws(-[a-z]+)*:acm:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:certificate/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}",
        "an ACM certificate ARN such as arn:aws:acm:eu-west-1:123456789012:certificate/"
        "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
    ),
]
SubnetId = Annotated[str, _matching(r"subnet-[0-9a-f]{8,17}", "a subnet ID such as subnet-0a1b2c3d4e5f60718")]
Namespace = Annotated[
    str, _matching(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", "a Kubernetes namespace name (a DNS-1123 label)")
]
# Karpenter's duration grammar, which the rest of the stack file uses too: 30m, 1h30m, 12h.
Duration = Annotated[str, _matching(r"([0-9]+(s|m|h))+", "a duration such as 30m, 1h30m or 12h")]
Name = Annotated[str, Field(min_length=1)]
NameList = Annotated[list[Name], AfterValidator(_unique)]
# EKS add-on versions are the driver's release and an EKS build number (aws eks describe-addon-versions).
AddonVersion = Annotated[
    str, _matching(r"v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+", "an EKS add-on version such as v1.2.3-eksbuild.1")
]

# Images that cannot start a JupyterHub server, by repository as containerd names it (config/images.py): none of
# them has the `jupyterhub-singleuser` command the chart runs (singleuser.cmd), so the learner's server never starts.
NO_SINGLEUSER = {
    f"{DOCKER_HUB}/tensorflow/tensorflow": "TensorFlow's images have no JupyterHub (the -jupyter tags run a plain "
    "notebook server)",
    f"{DOCKER_HUB}/pytorch/pytorch": "PyTorch's images have no Jupyter at all",
    f"{DOCKER_HUB}/nvidia/cuda": "NVIDIA's CUDA base images have no Jupyter at all",
}


def notebook_image_problem(image: str) -> str | None:
    """Why a (qualified) image cannot be a learner's notebook server, or None when gpulab knows no reason."""
    repository = re.sub(r"(@.*|:[^:/]*)$", "", image)
    reason = NO_SINGLEUSER.get(repository)
    if reason is None:
        return None
    return (
        f"cannot run jupyterhub-singleuser, which starts a learner's server: {reason}; use a Jupyter Docker Stacks "
        "CUDA image (quay.io/jupyter/pytorch-notebook:cuda12-...) or an image that installs jupyterhub"
    )


def _someone_may_sign_in(value: list[str], info: ValidationInfo, keys: tuple[str, ...]) -> list[str]:
    # OAuthenticator 16+ lets nobody in unless an allow list names them (or allow_all, which gpulab does not offer
    # for OAuth: anyone with a GitHub account would get a GPU).
    if not value and not any(info.data.get(key) for key in keys):
        names = " or ".join(to_camel(k) for k in (*keys, info.field_name or ""))
        raise ValueError(f"nobody could sign in: name at least one user, organization or group in {names}")
    return value


class GitHub(_Model):
    """Sign-in with GitHub (OAuthenticator's GitHubOAuthenticator): a GitHub OAuth app."""

    type: Literal["github"] = Field(description="GitHub OAuth.")
    client_id: Name = Field(
        description="Client ID of the GitHub OAuth app; its secret is gpulab:jupyterhubClientSecret."
    )
    admin_users: NameList = Field(default_factory=list, description="GitHub users who are JupyterHub admins.")
    allowed_users: NameList = Field(default_factory=list, description="GitHub users who may sign in.")
    allowed_organizations: NameList = Field(
        default_factory=list,
        validate_default=True,
        description="GitHub organizations (org) or teams (org:team) whose members may sign in.",
    )

    @field_validator("allowed_organizations")
    @classmethod
    def _someone(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return _someone_may_sign_in(value, info, ("allowed_users",))


class Oidc(_Model):
    """Sign-in with a generic OAuth 2 / OpenID Connect provider (OAuthenticator's GenericOAuthenticator)."""

    type: Literal["oidc"] = Field(description="Generic OAuth 2 / OIDC.")
    client_id: Name = Field(description="Client ID at the provider; its secret is gpulab:jupyterhubClientSecret.")
    authorize_url: HttpsUrl = Field(description="The provider's authorization endpoint.")
    token_url: HttpsUrl = Field(description="The provider's token endpoint.")
    userdata_url: HttpsUrl = Field(description="The provider's userinfo endpoint.")
    scope: NameList = Field(default=["openid", "profile", "email"], description="Scopes asked for.")
    username_claim: Name = Field(default="preferred_username", description="Userinfo claim that names the user.")
    groups_claim: Name = Field(default="groups", description="Userinfo claim that lists the user's groups.")
    admin_users: NameList = Field(default_factory=list, description="Users who are JupyterHub admins.")
    allowed_users: NameList = Field(default_factory=list, description="Users who may sign in.")
    allowed_groups: NameList = Field(
        default_factory=list,
        validate_default=True,
        description="Groups (from groupsClaim) whose members may sign in.",
    )

    @field_validator("allowed_groups")
    @classmethod
    def _someone(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return _someone_may_sign_in(value, info, ("allowed_users",))


class Lti13(_Model):
    """Launch from a learning platform (Canvas, Moodle, Open edX...) with LTI 1.3 (ltiauthenticator's
    LTI13Authenticator). The platform decides who may launch the tool, so without allowedUsers everyone it launches
    may sign in."""

    type: Literal["lti13"] = Field(description="LTI 1.3.")
    client_ids: Annotated[NameList, Field(min_length=1)] = Field(
        description="Client IDs the platform gave the tool when it was registered."
    )
    issuer: HttpsUrl = Field(description="The platform's issuer identifier.")
    authorize_url: HttpsUrl = Field(description="The platform's OIDC authorization endpoint.")
    jwks_endpoint: HttpsUrl = Field(description="The platform's JSON Web Key Set endpoint.")
    username_key: Name = Field(default="email", description="Claim of the launch that names the user.")
    admin_users: NameList = Field(default_factory=list, description="Users who are JupyterHub admins.")
    allowed_users: NameList = Field(
        default_factory=list, description="Users who may sign in; empty: everyone the platform launches."
    )


class Dummy(_Model):
    """No real sign-in: anyone who reaches the hub signs in under any name (JupyterHub's DummyAuthenticator). Only for
    a private test stack; the policy pack refuses it in production."""

    type: Literal["dummy"] = Field(description="No real authentication, said explicitly.")


Auth = Annotated[GitHub | Oidc | Lti13 | Dummy, Field(discriminator="type")]
# The authenticators that need gpulab:jupyterhubClientSecret.
NEEDS_CLIENT_SECRET = ("github", "oidc")


class LoadBalancer(_Model):
    """The AWS load balancer in front of the hub's proxy, which terminates TLS (the chart's `offload` mode)."""

    scheme: Literal["internal", "internet-facing"] = Field(
        default="internal", description="Reachable inside the VPC only (internal) or from the internet."
    )
    subnet_ids: Annotated[list[SubnetId], Field(min_length=1), AfterValidator(_unique)] = Field(
        description="Subnets of the load balancer, one per availability zone: public ones when internet-facing."
    )
    certificate_arn: CertificateArn = Field(
        description="ACM certificate for `host`, in the stack's region; the load balancer serves HTTPS with it."
    )


class Culling(_Model):
    """When the hub stops learners' servers (jupyterhub-idle-culler), so that a forgotten notebook frees its slice."""

    idle_timeout: Annotated[Duration, AfterValidator(_at_least_a_minute)] = Field(
        default="1h", description="Stop a server after this long without activity."
    )
    every: Annotated[Duration, AfterValidator(_at_least_a_minute)] = Field(
        default="10m", description="How often the culler looks."
    )
    max_age: Annotated[Duration, AfterValidator(_at_least_a_minute)] | None = Field(
        default=None, description="Stop a server this long after it started, active or not; unset: never."
    )


class JupyterHub(_Model):
    """The JupyterHub release, its sign-in, its load balancer and its volumes."""

    namespace: Namespace = Field(default="jupyterhub", description="Namespace of the hub and of learners' pods.")
    host: HostName = Field(
        description="DNS name learners open (a CNAME or alias to the load balancer, which you create); the "
        "certificate must cover it and the OAuth app's callback is https://<host>/hub/oauth_callback."
    )
    load_balancer: LoadBalancer = Field(description="The load balancer in front of the hub.")
    auth: Auth = Field(
        description="How learners sign in: github, oidc, lti13, or dummy (no real sign-in, refused in production)."
    )
    culling: Culling = Field(default_factory=Culling, description="Stopping idle and old servers.")
    homes: Literal["none", "perLearner"] = Field(
        default="none",
        description="Learners' home directories: none (lost when the server stops) or one volume per learner.",
    )
    home_size_gib: Annotated[int, _between(1, 16384)] = Field(
        default=10, description="Size of each learner's home volume (with homes: perLearner)."
    )
    hub_database_size_gib: Annotated[int, _between(1, 16384)] = Field(
        default=1, description="Size of the hub's database volume (SQLite: users, servers, tokens)."
    )
    ebs_csi_driver_version: AddonVersion | None = Field(
        default=None,
        description="Version of the EKS add-on aws-ebs-csi-driver; unset: EKS's default for the cluster's version.",
    )

    @property
    def address(self) -> str:
        return f"https://{self.host}/"
