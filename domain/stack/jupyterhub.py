"""`gpulab:jupyterhub`: the optional JupyterHub (zero-to-jupyterhub-k8s) learners sign in to and spawn notebooks from.

Absent, nothing of JupyterHub is installed. Its client secret is not here: OAuth client secrets come from the Pulumi
secret `gpulab:jupyterhubClientSecret` (domain/stack/load.py), so that the stack file and the render never hold one.
"""

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from domain.problems import FieldProblem, report
from domain.stack.fields import (
    Duration,
    ImageReference,
    Model,
    Namespace,
    SubnetId,
    between,
    data_checked,
    labs_checked,
    matching,
    unique,
)
from domain.stack.images import DOCKER_HUB
from domain.stack.namespaces import namespace_clash
from domain.time import durations

# The Pulumi secret that holds the OAuth client secret of the GitHub or OIDC app.
CLIENT_SECRET_KEY = "jupyterhubClientSecret"


def _at_least_a_minute(value: str) -> str:
    if durations.seconds(value) < 60:
        raise ValueError("must be at least 1m")
    return value


# DNS names are at most 253 characters written out (RFC 1035 3.1: 255 octets on the wire, its length octets
# included), each label at most 63; ACM refuses longer domain names, and the certificate must cover the host.
MAX_HOST_NAME = 253


def _dns_length(host: str) -> str:
    if len(host) > MAX_HOST_NAME:
        raise ValueError(f"must be at most {MAX_HOST_NAME} characters, as DNS names are, got {len(host)}")
    return host


HostName = Annotated[
    str,
    matching(
        r"([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?",
        "a lowercase DNS name of labels of at most 63 characters, such as hub.example.edu",
    ),
    AfterValidator(_dns_length),
]
# An OpenID issuer has no query or fragment (OpenID Connect Discovery 1.0, section 3: `issuer`).
HttpsUrl = Annotated[str, matching(r"https://[^\s/?#]+(/[^\s?#]*)?", "an https:// URL without query or fragment")]
# An endpoint may carry a query, which OAuthenticator keeps (tornado's url_concat adds its own parameters to it): Azure
# AD B2C names its user flow so, https://<tenant>.b2clogin.com/<tenant>.onmicrosoft.com/oauth2/v2.0/authorize?p=<flow>.
HttpsEndpoint = Annotated[
    str, matching(r"https://[^\s/?#]+(/[^\s?#]*)?(\?[^\s#]*)?", "an https:// URL without a fragment")
]
CertificateArn = Annotated[
    str,
    matching(
        r"arn:aws(-[a-z]+)*:acm:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:certificate/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}",
        "an ACM certificate ARN such as arn:aws:acm:eu-west-1:123456789012:certificate/"
        "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
    ),
]
Name = Annotated[str, Field(min_length=1)]
NameList = Annotated[list[Name], AfterValidator(unique)]
# EKS add-on versions are the driver's release and an EKS build number (aws eks describe-addon-versions).
AddonVersion = Annotated[
    str, matching(r"v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+", "an EKS add-on version such as v1.2.3-eksbuild.1")
]

# Images that cannot start a JupyterHub server, by repository as containerd names it (domain/stack/images.py): none of
# them has the `jupyterhub-singleuser` command the chart runs (singleuser.cmd), so the learner's server never starts.
NO_SINGLEUSER = {
    f"{DOCKER_HUB}/tensorflow/tensorflow": "TensorFlow's images have no JupyterHub (the -jupyter tags run a plain "
    "notebook server)",
    f"{DOCKER_HUB}/pytorch/pytorch": "PyTorch's images have no Jupyter at all",
    f"{DOCKER_HUB}/nvidia/cuda": "NVIDIA's CUDA base images have no Jupyter at all",
}


def notebook_image_problem(image: str) -> str | None:
    """Why a (qualified) image cannot be a learner's notebook server, or None when gpulab knows no reason."""
    repository = re.sub(r":[^:/]*$", "", image.partition("@")[0])  # without its digest and tag
    reason = NO_SINGLEUSER.get(repository)
    if reason is None:
        return None
    return (
        f"cannot run jupyterhub-singleuser, which starts a learner's server: {reason}; use a Jupyter Docker Stacks "
        "CUDA image (quay.io/jupyter/pytorch-notebook:cuda12-...) or an image that installs jupyterhub"
    )


def _runs_a_notebook_server(image: str) -> str:
    if problem := notebook_image_problem(image):
        raise ValueError(problem)
    return image


# A lab's notebookImage: a reference as containerd names it, of an image that can start a learner's server.
NotebookImage = Annotated[ImageReference, AfterValidator(_runs_a_notebook_server)]


def _someone_may_sign_in(value: list[str], info: ValidationInfo, keys: tuple[str, ...]) -> list[str]:
    # OAuthenticator 16+ lets nobody in unless an allow list names them (or allow_all, which gpulab does not offer
    # for OAuth: anyone with a GitHub account would get a GPU).
    if not value and not any(info.data.get(key) for key in keys):
        names = " or ".join(to_camel(k) for k in (*keys, info.field_name or ""))
        raise ValueError(f"nobody could sign in: name at least one user, organization or group in {names}")
    return value


# GitHub logins of users and organizations: letters, digits and single hyphens inside, at most 39 (GitHub's sign-up
# form). OAuthenticator's GitHubOAuthenticator reads an allowed organization as `org` or `org:team` (the team's slug,
# as in github.com/orgs/<org>/teams/<slug>): it splits the entry at ':' and asks GitHub's API for
# /orgs/<org>/teams/<team>/members/<user>, so `org/team`, `@org/team` or a second ':' match nobody.
_GITHUB_LOGIN = r"[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}"
_TEAM_SLUG = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
GitHubLogin = Annotated[str, matching(_GITHUB_LOGIN, "a GitHub user name (letters, digits, single hyphens)")]


def _org_or_team(value: str) -> str:
    if re.fullmatch(f"{_GITHUB_LOGIN}(:{_TEAM_SLUG})?", value):
        return value
    guess = re.fullmatch(f"@?({_GITHUB_LOGIN})/({_TEAM_SLUG})", value)
    hint = f"; did you mean {guess[1]}:{guess[2]}?" if guess else ""
    raise ValueError(
        "must be a GitHub organization (org) or one of its teams (org:team-slug), the form OAuthenticator reads, "
        f"got {value!r}{hint}"
    )


GitHubOrgOrTeam = Annotated[str, AfterValidator(_org_or_team)]


class GitHub(Model):
    """Sign-in with GitHub (OAuthenticator's GitHubOAuthenticator): a GitHub OAuth app."""

    type: Literal["github"] = Field(description="GitHub OAuth.")
    client_id: Name = Field(
        description="Client ID of the GitHub OAuth app; its secret is gpulab:jupyterhubClientSecret."
    )
    admin_users: Annotated[list[GitHubLogin], AfterValidator(unique)] = Field(
        default_factory=list, description="GitHub users who are JupyterHub admins."
    )
    allowed_users: Annotated[list[GitHubLogin], AfterValidator(unique)] = Field(
        default_factory=list, description="GitHub users who may sign in."
    )
    allowed_organizations: Annotated[list[GitHubOrgOrTeam], AfterValidator(unique)] = Field(
        default_factory=list,
        validate_default=True,
        description="GitHub organizations (org) or teams (org:team) whose members may sign in.",
    )

    @field_validator("allowed_organizations")
    @classmethod
    def _someone(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return _someone_may_sign_in(value, info, ("allowed_users",))


class Oidc(Model):
    """Sign-in with a generic OAuth 2 / OpenID Connect provider (OAuthenticator's GenericOAuthenticator)."""

    type: Literal["oidc"] = Field(description="Generic OAuth 2 / OIDC.")
    client_id: Name = Field(description="Client ID at the provider; its secret is gpulab:jupyterhubClientSecret.")
    authorize_url: HttpsEndpoint = Field(description="The provider's authorization endpoint.")
    token_url: HttpsEndpoint = Field(description="The provider's token endpoint.")
    userdata_url: HttpsEndpoint = Field(description="The provider's userinfo endpoint.")
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


class Lti13(Model):
    """Launch from a learning platform (Canvas, Moodle, Open edX...) with LTI 1.3 (ltiauthenticator's
    LTI13Authenticator). The platform decides who may launch the tool, so without allowedUsers everyone it launches
    may sign in."""

    type: Literal["lti13"] = Field(description="LTI 1.3.")
    client_ids: Annotated[NameList, Field(min_length=1)] = Field(
        description="Client IDs the platform gave the tool when it was registered."
    )
    issuer: HttpsUrl = Field(description="The platform's issuer identifier.")
    authorize_url: HttpsEndpoint = Field(description="The platform's OIDC authorization endpoint.")
    jwks_endpoint: HttpsEndpoint = Field(description="The platform's JSON Web Key Set endpoint.")
    username_key: Name = Field(default="email", description="Claim of the launch that names the user.")
    admin_users: NameList = Field(default_factory=list, description="Users who are JupyterHub admins.")
    allowed_users: NameList = Field(
        default_factory=list, description="Users who may sign in; empty: everyone the platform launches."
    )


class Dummy(Model):
    """No real sign-in: anyone who reaches the hub signs in under any name (JupyterHub's DummyAuthenticator). Only for
    a private test stack; the policy pack refuses it in production."""

    type: Literal["dummy"] = Field(description="No real authentication, said explicitly.")


Auth = Annotated[GitHub | Oidc | Lti13 | Dummy, Field(discriminator="type")]
# The sign-in types, by the `type` key that tells them apart.
AUTH_TYPES = tuple(get_args(kind.model_fields["type"].annotation)[0] for kind in (GitHub, Oidc, Lti13, Dummy))
# The authenticators that need gpulab:jupyterhubClientSecret.
NEEDS_CLIENT_SECRET = ("github", "oidc")


class LoadBalancer(Model):
    """The AWS load balancer in front of the hub's proxy: it serves HTTPS with the ACM certificate and passes each
    connection on to the proxy over TLS again, and port 80 to the proxy's redirect to https."""

    scheme: Literal["internal", "internet-facing"] = Field(
        default="internal", description="Reachable inside the VPC only (internal) or from the internet."
    )
    subnet_ids: Annotated[list[SubnetId], Field(min_length=1), AfterValidator(unique)] = Field(
        description="Subnets of the load balancer, one per availability zone: public ones when internet-facing."
    )
    certificate_arn: CertificateArn = Field(
        description="ACM certificate for `host`, in the stack's region; the load balancer serves HTTPS with it."
    )


class Culling(Model):
    """When the hub stops learners' servers (jupyterhub-idle-culler), so that a forgotten notebook frees its slice."""

    enabled: bool = Field(
        default=True,
        description="Stop idle servers (and old ones, with maxAge); false: a server runs until its learner stops it, "
        "and its GPU slice stays taken.",
    )
    idle_timeout: Annotated[Duration, AfterValidator(_at_least_a_minute)] = Field(
        default="1h", description="Stop a server after this long without activity."
    )
    every: Annotated[Duration, AfterValidator(_at_least_a_minute)] = Field(
        default="10m", description="How often the culler looks."
    )
    max_age: Annotated[Duration, AfterValidator(_at_least_a_minute)] | None = Field(
        default=None, description="Stop a server this long after it started, active or not; unset: never."
    )

    @field_validator("max_age")
    @classmethod
    def _only_when_culling(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The chart runs jupyterhub-idle-culler only with cull.enabled, and its maxAge is an option of that culler.
        if value is not None and info.data.get("enabled") is False:
            raise ValueError("is an option of culling: it needs culling.enabled: true, or remove it")
        return value


class JupyterHub(Model):
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
    notebook_image: NotebookImage | None = Field(
        default=None,
        description="Learners' notebook image of every lab on the spawn page that sets no notebookImage of its own; it "
        "must run jupyterhub-singleuser.",
    )
    culling: Culling = Field(default_factory=Culling, description="Stopping idle and old servers.")
    homes: Literal["none", "perLearner"] = Field(
        default="none",
        description="Learners' home directories: none (lost when the server stops) or one volume per learner.",
    )
    home_size_gib: Annotated[int, between(1, 16384)] = Field(
        default=10, description="Size of each learner's home volume (with homes: perLearner)."
    )
    hub_database_size_gib: Annotated[int, between(1, 16384)] = Field(
        default=1, description="Size of the hub's database volume (SQLite: users, servers, tokens)."
    )
    ebs_csi_driver_version: AddonVersion | None = Field(
        default=None,
        description="Version of the EKS add-on aws-ebs-csi-driver; by default the one pinned for the cluster's "
        "Kubernetes version (domain/upstream/versions.py says where each is from).",
    )

    @property
    def address(self) -> str:
        return f"https://{self.host}/"


def hub_has_its_labs(hub: JupyterHub | None, info: ValidationInfo) -> JupyterHub | None:
    """gpulab:jupyterhub beside the labs and the other components: a namespace of its own, a lab on the spawn page,
    a notebook image for every lab there, its own or the hub's, and a lab's internet closed only where a hub runs its
    learners. Every problem is reported; with a wrong lab, the other labs are checked, and whether any lab is on the
    spawn page is not judged (the wrong one may be)."""
    labs, every_lab = labs_checked(info)
    problems: list[ValueError] = [
        # The walls are NetworkPolicies around the hub's learners (components/jupyterhub/walls.py): a lab whose
        # learners the hub does not start has no server to close.
        FieldProblem(
            f"labs.{name}.internet",
            "false closes the internet to the lab's JupyterHub learners: it needs gpulab:jupyterhub and the lab "
            "on its spawn page (onSpawnPage: true)",
        )
        for name, lab in labs.items()
        if not lab.internet and (hub is None or not lab.on_spawn_page)
    ]
    if hub is not None:
        if clash := namespace_clash(hub.namespace, data_checked(info), ("karpenter", "nvidia_device_plugin")):
            problems.append(FieldProblem("jupyterhub.namespace", clash))
        if cluster := info.data.get("cluster"):
            problems += _load_balancer_problems(hub.load_balancer, cluster.private_subnet_ids)
        offered = {name: lab for name, lab in labs.items() if lab.on_spawn_page}
        if not offered and every_lab:
            # With no profile KubeSpawner starts a pod without the GPU toleration or a lab's node selector.
            problems.append(ValueError("needs at least one lab on the spawn page (a lab with onSpawnPage: true)"))
        problems += [
            FieldProblem(
                f"labs.{name}.notebookImage",
                "required for a lab on the JupyterHub spawn page, unless gpulab:jupyterhub.notebookImage gives every "
                "lab one (or onSpawnPage: false)",
            )
            for name, lab in offered.items()
            if lab.notebook_image is None and hub.notebook_image is None
        ]
        if problem := _work_lost(hub, labs):
            problems.append(FieldProblem("jupyterhub.homes", problem))
    report(problems)
    return hub


def server_stoppers(hub: JupyterHub, labs: Mapping[str, Any]) -> list[str]:
    """What stops a learner's server without the learner asking, as the stack's keys say it: the hub's idle culler
    (jupyterhub-idle-culler: inactivity, and maxAge even when active), gpulab's idle-GPU culler (a lab's
    gpuIdleTimeout, components/jupyterhub/gpu_culler.py) and consolidation that moves running learners. Not here: a
    node's expiry (expireAfter) and drift, which replace a node whatever runs on it (docs/jupyterhub.md)."""
    stoppers = []
    if hub.culling.enabled:
        stoppers.append(f"gpulab:jupyterhub.culling (idleTimeout {hub.culling.idle_timeout}; on unless enabled: false)")
        if hub.culling.max_age:
            stoppers.append(f"gpulab:jupyterhub.culling.maxAge {hub.culling.max_age}")
    stoppers += [
        f"gpulab:labs.{name}.gpuIdleTimeout {lab.gpu_idle_timeout}"
        for name, lab in labs.items()
        if lab.gpu_idle_timeout
    ]
    # Karpenter's consolidation of underutilized nodes moves running learners, that is deletes their pods.
    stoppers += [
        f"gpulab:labs.{name}.disruption.consolidationPolicy WhenEmptyOrUnderutilized"
        for name, lab in labs.items()
        if lab.on_spawn_page and lab.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    ]
    return stoppers


def _work_lost(hub: JupyterHub, labs: Mapping[str, Any]) -> str | None:
    """Why the stack would delete learners' work by its own choice, or None. With homes: none a learner's files live in
    the server's pod, and every stop deletes the pod (KubeSpawner 7.0.0, stop); a stop the learner did not ask for
    must not cost them their files."""
    if hub.homes != "none" or not (stoppers := server_stoppers(hub, labs)):
        return None
    return (
        "none keeps a learner's files only while their server runs, and this stack stops servers itself: "
        f"{', '.join(stoppers)}; each such stop would delete the learner's files. Set homes: perLearner (a volume per "
        "learner, kept when the server stops), or stop no server by the stack's choice (culling: {enabled: false}, "
        "no maxAge, no lab's gpuIdleTimeout, consolidationPolicy WhenEmpty)"
    )


def _load_balancer_problems(lb: LoadBalancer, private_subnet_ids: list[str]) -> list[ValueError]:
    # The cloud provider's service controller puts the Classic Load Balancer in the subnets of its `subnets` annotation
    # (components/jupyterhub/values.py); an internet-facing one in subnets without a route to an internet gateway
    # gets a public DNS name that nobody reaches (Elastic Load Balancing User Guide for Classic Load Balancers,
    # "Internet-facing Classic Load Balancers"). The cluster's private subnets are such subnets.
    private = [subnet for subnet in lb.subnet_ids if subnet in private_subnet_ids]
    if lb.scheme == "internet-facing" and private:
        return [
            FieldProblem(
                "jupyterhub.loadBalancer.subnetIds",
                f"must be public subnets with scheme internet-facing, but {', '.join(private)} "
                f"{'is' if len(private) == 1 else 'are'} in gpulab:cluster.privateSubnetIds; use the VPC's public "
                "subnets, or scheme internal",
            )
        ]
    return []


def certificate_region_problem(load_balancer: LoadBalancer, region: str) -> str | None:
    """Why the hub's certificate cannot serve its load balancer in `region`, or None: ELB takes ACM certificates of
    its own region only (ACM User Guide, "Services integrated with ACM": the certificate must be requested or imported
    in the load balancer's region)."""
    certificate_region = load_balancer.certificate_arn.split(":")[3]
    if certificate_region == region:
        return None
    return (
        f"must be an ACM certificate in the stack's region {region}, where the load balancer is, got one in "
        f"{certificate_region}: request or import the certificate in {region}"
    )
