"""gpulab:jupyterhub:Hub's resources: what the release waits for on create, and what outlives what on destroy."""

import json

import pytest

from components.jupyterhub.hub import EBS_CSI_NAMESPACE, EBS_CSI_SERVICE_ACCOUNT
from components.jupyterhub.hub import RELEASE as HELM_RELEASE
from components.jupyterhub.values import LB_IDLE_TIMEOUT_SECONDS
from domain.stack.jupyterhub import NEEDS_CLIENT_SECRET
from render import harness
from tests.conftest import BASE, as_cli_config
from tests.support.chart_checks import one
from tests.support.hub_config import authenticator_class, stack_hub_config
from tests.support.rendered import HUB_STACKS, rendered

ADDON = "aws:eks/addon:Addon::jupyterhub-ebs-csi"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass::jupyterhub-storage"
NAMESPACE = "kubernetes:core/v1:Namespace::jupyterhub-namespace"
OAUTH_SECRET = "kubernetes:core/v1:Secret::jupyterhub-oauth-client"
RELEASE = "kubernetes:helm.sh/v3:Release::jupyterhub"


def _resources(stack: str) -> dict:
    return {f"{r.type}::{r.name}": r for r in rendered(stack).run.resources}


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_release_waits_for_cluster_csi_driver_storage_class(stack):
    resources = _resources(stack)
    needs = set(resources[RELEASE].dependencies)
    assert {ADDON, STORAGE_CLASS, NAMESPACE, "eks:index:Cluster::cluster-eks"} <= needs
    assert (OAUTH_SECRET in needs) == (OAUTH_SECRET in resources)
    # GitHub and OIDC sign-in have a client secret, which the hub reads from that Secret; LTI 1.3 and dummy none.
    assert (OAUTH_SECRET in resources) == (
        rendered(stack).run.stack.settings.jupyterhub.auth.type in ("github", "oidc")
    )


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_learners_namespace_goes_before_the_volume_driver(stack):
    # Pulumi deletes in reverse dependency order: the namespace, and the PVCs KubeSpawner made in it, go first.
    assert {ADDON, STORAGE_CLASS} <= set(_resources(stack)[NAMESPACE].dependencies)


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_only_the_csi_controller_gets_its_role_by_pod_identity(stack):
    resources = _resources(stack)
    association = resources["aws:eks/podIdentityAssociation:PodIdentityAssociation::jupyterhub-ebs-csi"].inputs
    assert (association["namespace"], association["serviceAccount"]) == (EBS_CSI_NAMESPACE, EBS_CSI_SERVICE_ACCOUNT)
    assert association["disableSessionTags"] is False
    trust = json.loads(resources["aws:iam/role:Role::jupyterhub-ebs-csi"].inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    conditions = statement["Condition"]["StringEquals"]
    assert conditions["aws:RequestTag/kubernetes-namespace"] == EBS_CSI_NAMESPACE
    assert conditions["aws:RequestTag/kubernetes-service-account"] == EBS_CSI_SERVICE_ACCOUNT
    attachment = resources["aws:iam/rolePolicyAttachment:RolePolicyAttachment::jupyterhub-ebs-csi"].inputs
    assert attachment["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
    assert {"aws:eks/podIdentityAssociation:PodIdentityAssociation::jupyterhub-ebs-csi"} <= set(
        resources[ADDON].dependencies
    )


def test_a_hubless_run_after_a_hub_run_has_none_of_it():
    rendered("synthetic-jupyterhub")  # runs in this process first (cached), as in a test session
    run = harness.run("test", as_cli_config(BASE))  # a run of its own, not the cached one made before any hub run
    assert not [r.name for r in run.resources if "jupyterhub" in f"{r.type}::{r.name}"]
    assert "jupyterhub" not in run.outputs


# --- the load balancer in front of the proxy -----------------------------------------------------------------------

LB = "service.beta.kubernetes.io/aws-load-balancer-"


def _load_balancer_annotations(stack: str) -> dict[str, str]:
    service = one(rendered(stack).chart(HELM_RELEASE), "Service", "the proxy's load balancer", name="proxy-public")
    assert service["spec"]["type"] == "LoadBalancer"
    return service["metadata"]["annotations"]


def test_the_synthetic_hub_stacks_have_internal_and_public_load_balancers():
    # Both schemes are tested on stacks of the tests, whatever the repository's stack files choose.
    synthetic = [s for s in HUB_STACKS if s.startswith("synthetic-")]
    schemes = {rendered(s).run.stack.settings.jupyterhub.load_balancer.scheme for s in synthetic}
    assert schemes == {"internal", "internet-facing"}


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_load_balancer_is_internal_iff_the_stack_says_so(stack):
    # cloud-provider-aws makes an internet-facing Classic Load Balancer unless this annotation is set (aws.go).
    scheme = rendered(stack).run.stack.settings.jupyterhub.load_balancer.scheme
    assert (_load_balancer_annotations(stack).get(f"{LB}internal") == "true") == (scheme == "internal")


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_load_balancer_idles_an_hour_and_offers_tls_1_2_only(stack):
    annotations = _load_balancer_annotations(stack)
    # The Classic Load Balancer's default of 60 s would cut a kernel's websocket after a minute of quiet.
    timeout = int(annotations[f"{LB}connection-idle-timeout"])
    assert timeout == LB_IDLE_TIMEOUT_SECONDS and 1 <= timeout <= 4000  # the range cloud-provider-aws documents
    # The policy is one of a Classic Load Balancer: no annotation asks for an NLB or the AWS Load Balancer Controller.
    assert f"{LB}type" not in annotations and "service.beta.kubernetes.io/load-balancer-class" not in annotations
    assert annotations[f"{LB}ssl-negotiation-policy"] == "ELBSecurityPolicy-TLS-1-2-2017-01"


# --- the OAuth client secret -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_an_oauth_hub_reads_its_secret_from_the_stacks_secret(stack, monkeypatch):
    r = rendered(stack)
    if r.run.stack.settings.jupyterhub.auth.type not in NEEDS_CLIENT_SECRET:
        assert OAUTH_SECRET not in _resources(stack)
        return
    secret = _resources(stack)[OAUTH_SECRET].inputs
    deployment = one(r.chart(HELM_RELEASE), "Deployment", "the hub", name="hub")
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "hub"]
    from_secret = [
        e["name"]
        for e in container["env"]
        if e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == secret["metadata"]["name"]
        and e["valueFrom"]["secretKeyRef"]["key"] in secret["stringData"]
    ]
    assert from_secret, "the hub container has no variable from the client secret's Secret"
    # The authenticator the hub runs, with that variable set as the kubelet sets it from the Secret.
    for name in from_secret:
        monkeypatch.setenv(name, "the-client-secret")
    config = stack_hub_config(stack)
    authenticator = authenticator_class(config.JupyterHub.authenticator_class)(config=config)
    assert authenticator.client_secret == "the-client-secret"
