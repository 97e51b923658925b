"""Create and delete order: a lab's Karpenter objects go before everything that must outlive its nodes.

Karpenter's NodeClaims carry termination finalizers that only the running controller, with its IAM permissions, can
clear, and a node can only rejoin or be replaced while the node role's access entry exists. Pulumi deletes in reverse
dependency order, so every lab object must (transitively) depend on all of those.
"""

import pytest

from tests.conftest import STACK_FILES, run_stack_file, run_values, stack_values
from tests.support.dependencies import waits_for
from tests.support.synthetic import SYNTHETIC, lab

CASES = [(path.name, lambda path=path: run_stack_file(path)) for path in STACK_FILES] + [
    (f"synthetic-{name}", lambda values=values: run_values(values)) for name, values in SYNTHETIC.items()
]
KARPENTER_OBJECTS = (
    "kubernetes:karpenter.sh/v1:NodePool",
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
    "kubernetes:karpenter.sh/v1alpha1:NodeOverlay",
)
POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


@pytest.fixture(scope="module", params=CASES, ids=[name for name, _ in CASES])
def run(request):
    return request.param[1]()


def must_outlive_the_labs(run) -> set[str]:
    """The controller release, its policy attachments, its Pod Identity association, and the node role's."""
    controller_parts = {
        r.token
        for r in run.resources
        if r.parent == "gpulab:karpenter:Controller::karpenter"
        and r.type in (POLICY_ATTACHMENT, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    }
    node_role_parts = {
        r.token
        for r in run.resources
        if r.parent == "gpulab:iam:NodeRole::karpenter-nodes"
        and r.type in (POLICY_ATTACHMENT, "aws:eks/accessEntry:AccessEntry")
    }
    return {"kubernetes:helm.sh/v3:Release::karpenter", *controller_parts, *node_role_parts}


def test_lab_objects_are_deleted_before_controller_and_access(run):
    required = must_outlive_the_labs(run)
    assert len(required) == 1 + 6 + 1 + 4 + 1  # release, six policies, association, four node policies, entry
    for registration in run.resources:
        if registration.type in KARPENTER_OBJECTS:
            missing = required - waits_for(run, registration)
            assert not missing, f"{registration.name} does not wait for {sorted(missing)}"


def test_the_controller_depends_on_its_permissions_and_identity(run):
    release = run.one("kubernetes:helm.sh/v3:Release", "karpenter")
    attachments = {
        r.token for r in run.of_type(POLICY_ATTACHMENT) if r.parent == "gpulab:karpenter:Controller::karpenter"
    }
    assert attachments <= set(release.dependencies)
    assert "aws:eks/podIdentityAssociation:PodIdentityAssociation::karpenter-pod-identity" in release.dependencies


def test_a_node_pool_is_deleted_before_its_node_class(run):
    for lab_name in run.stack.settings.labs:
        pool = run.one("kubernetes:karpenter.sh/v1:NodePool", f"nodepool-{lab_name}")
        assert f"kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::ec2nodeclass-{lab_name}" in pool.dependencies


def test_pulumi_up_waits_for_each_class_pool_and_overlay(run):
    lab_objects = [r for r in run.resources if r.type in KARPENTER_OBJECTS]
    assert len(lab_objects) >= 2 * len(run.stack.settings.labs)
    for registration in lab_objects:
        assert registration.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Ready", (
            registration.name
        )


def test_pools_bound_draining_and_deletes_wait_that_plus_margin():
    labs = {"quick": lab(["g4dn.xlarge"], 3), "slow": lab(["g4dn.xlarge"], 3, terminationGracePeriod="8h30m")}
    run = run_values(stack_values(**{"gpulab:labs": labs}))
    for name, grace, delete_timeout in (("quick", "1h", "75m"), ("slow", "8h30m", "525m")):
        pool = run.one("kubernetes:karpenter.sh/v1:NodePool", f"nodepool-{name}")
        assert pool.inputs["spec"]["template"]["spec"]["terminationGracePeriod"] == grace
        lab_objects = [r for r in run.resources if r.parent == f"gpulab:karpenter:GpuNodePool::{name}"]
        assert {r.delete_timeout for r in lab_objects} == {delete_timeout}
