"""gpulab:jupyterhub:Hub's resources: what the release waits for on create, and what outlives what on destroy."""

import json

import pytest

from components.jupyterhub.hub import EBS_CSI_NAMESPACE, EBS_CSI_SERVICE_ACCOUNT
from tests.conftest import BASE, as_cli_config
from tests.rendered import HUB_STACKS, rendered
from tools import harness

ADDON = "aws:eks/addon:Addon::jupyterhub-ebs-csi"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass::jupyterhub-storage"
NAMESPACE = "kubernetes:core/v1:Namespace::jupyterhub-namespace"
OAUTH_SECRET = "kubernetes:core/v1:Secret::jupyterhub-oauth-client"
RELEASE = "kubernetes:helm.sh/v3:Release::jupyterhub"


def _resources(stack: str) -> dict:
    return {f"{r.type}::{r.name}": r for r in rendered(stack).run.resources}


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_release_waits_for_the_cluster_the_ebs_csi_driver_and_the_storage_class(stack):
    resources = _resources(stack)
    needs = set(resources[RELEASE].dependencies)
    assert {ADDON, STORAGE_CLASS, NAMESPACE, "eks:index:Cluster::cluster-eks"} <= needs
    assert (OAUTH_SECRET in needs) == (OAUTH_SECRET in resources)
    # GitHub and OIDC sign-in have a client secret, which the hub reads from that Secret; LTI 1.3 and dummy none.
    assert (OAUTH_SECRET in resources) == (
        rendered(stack).run.stack.settings.jupyterhub.auth.type in ("github", "oidc")
    )


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_namespace_with_learners_volumes_goes_before_the_driver_that_deletes_them(stack):
    # Pulumi deletes in reverse dependency order: the namespace, and the PVCs KubeSpawner made in it, go first.
    assert {ADDON, STORAGE_CLASS} <= set(_resources(stack)[NAMESPACE].dependencies)


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_ebs_csi_driver_gets_its_role_through_pod_identity_for_its_controller_only(stack):
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


def test_a_stack_without_jupyterhub_installs_and_exports_none_of_it_even_after_a_run_that_has_it():
    rendered("synthetic-jupyterhub")  # runs in this process first (cached), as in a test session
    run = harness.run("test", as_cli_config(BASE))  # a run of its own, not the cached one made before any hub run
    assert not [r.name for r in run.resources if "jupyterhub" in f"{r.type}::{r.name}"]
    assert "jupyterhub" not in run.outputs
