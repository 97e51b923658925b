"""gpulab:karpenter:Controller: IAM role and permissions, interruption queue and rules, and the two Helm releases."""

import json

import pytest

from components.karpenter.iam_policies import CONTROLLER_POLICY_KEYS, INTERRUPTION_EVENTS, Scope, controller_policies
from tests.conftest import run_values, stack_values

QUEUE_ARN = "arn:aws:sqs:eu-west-1:123456789012:lab-test"


def test_controller_role_is_assumed_through_pod_identity_only(base_run):
    trust = json.loads(base_run.one("aws:iam/role:Role", "karpenter-controller").inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]


@pytest.mark.parametrize("namespace", ["kube-system", "karpenter"])
def test_the_role_trusts_only_this_clusters_associated_account(namespace):
    run = run_values(stack_values(**{"gpulab:karpenter": {"namespace": namespace}}))
    trust = json.loads(run.one("aws:iam/role:Role", "karpenter-controller").inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    association = run.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpenter-pod-identity").inputs
    release = run.one("kubernetes:helm.sh/v3:Release", "karpenter").inputs
    assert association["namespace"] == release["namespace"] == namespace
    assert association["serviceAccount"] == release["values"]["serviceAccount"]["name"]
    assert statement["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-arn": "arn:aws:eks:eu-west-1:123456789012:cluster/lab-test",
            "aws:RequestTag/kubernetes-namespace": association["namespace"],
            "aws:RequestTag/kubernetes-service-account": association["serviceAccount"],
        }
    }
    # The conditions read the session tags, which an association can turn off.
    assert association["disableSessionTags"] is False


def test_pod_identity_binds_the_role_to_the_charts_account(base_run):
    association = base_run.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpenter-pod-identity")
    values = base_run.one("kubernetes:helm.sh/v3:Release", "karpenter").inputs["values"]
    assert association.inputs["serviceAccount"] == values["serviceAccount"]["name"] == "karpenter"
    assert association.inputs["namespace"] == "kube-system"
    assert association.inputs["clusterName"] == "lab-test"
    assert association.inputs["roleArn"].startswith("arn:aws:iam::123456789012:role/karpenter-controller-")


def test_six_policies_are_upstreams_for_cluster_queue_node_role(base_run):
    expected = controller_policies(
        Scope(
            partition="aws",
            region="eu-west-1",
            account_id="123456789012",
            cluster_name="lab-test",
            node_role_arn=base_run.outputs["nodeRoleArn"],
            queue_arn=QUEUE_ARN,
        )
    )
    recorded = {
        r.name.removeprefix("karpenter-"): json.loads(r.inputs["policy"])
        for r in base_run.of_type("aws:iam/policy:Policy")
    }
    assert recorded == expected


def test_every_controller_policy_is_on_the_controller_role(base_run):
    attachments = {
        r.name
        for r in base_run.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.parent == "gpulab:karpenter:Controller::karpenter"
    }
    assert attachments == {f"karpenter-{key}" for key in CONTROLLER_POLICY_KEYS}
    assert len(attachments) == 6
    for name in attachments:
        attachment = base_run.one("aws:iam/rolePolicyAttachment:RolePolicyAttachment", name)
        assert attachment.inputs["role"].startswith("karpenter-controller-")
        assert f"aws:iam/policy:Policy::{name}" in attachment.dependencies


def test_pass_role_is_granted_for_the_node_role_alone(base_run):
    document = json.loads(base_run.one("aws:iam/policy:Policy", "karpenter-iam-integration").inputs["policy"])
    passing = [s for s in document["Statement"] if "iam:PassRole" in s["Action"]]
    assert [s["Resource"] for s in passing] == [base_run.outputs["nodeRoleArn"]]


def test_queue_is_encrypted_keeps_300s_named_for_the_cluster(base_run):
    queue = base_run.one("aws:sqs/queue:Queue", "karpenter-interruption").inputs
    assert queue == {"name": "lab-test", "messageRetentionSeconds": 300, "sqsManagedSseEnabled": True}


def test_the_queue_lets_eventbridge_send_and_denies_plain_http(base_run):
    document = json.loads(base_run.one("aws:sqs/queuePolicy:QueuePolicy", "karpenter-interruption").inputs["policy"])
    send, deny = document["Statement"]
    assert send["Principal"]["Service"] == ["events.amazonaws.com", "sqs.amazonaws.com"]
    assert (send["Action"], send["Resource"]) == ("sqs:SendMessage", QUEUE_ARN)
    assert deny["Sid"] == "DenyHTTP" and deny["Effect"] == "Deny"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_five_eventbridge_rules_each_target_the_queue(base_run):
    rules = {
        r.name.removeprefix("karpenter-"): json.loads(r.inputs["eventPattern"])
        for r in base_run.of_type("aws:cloudwatch/eventRule:EventRule")
    }
    assert rules == dict(INTERRUPTION_EVENTS)
    assert {p["detail-type"][0] for p in rules.values()} == {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }
    targets = base_run.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == 5
    assert all(t.inputs["arn"] == QUEUE_ARN for t in targets)
    assert all(f"aws:cloudwatch/eventRule:EventRule::{t.name}" in t.dependencies for t in targets)
    assert {t.inputs["targetId"] for t in targets} == {"KarpenterInterruptionQueueTarget"}


def test_the_crd_chart_comes_first_the_controller_skips_crds(base_run):
    crds = base_run.one("kubernetes:helm.sh/v3:Release", "karpenter-crd")
    controller = base_run.one("kubernetes:helm.sh/v3:Release", "karpenter")
    assert crds.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert controller.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    for release, name in ((crds, "karpenter-crd"), (controller, "karpenter")):
        assert (release.inputs["name"], release.inputs["version"], release.inputs["namespace"]) == (
            name,
            "1.14.1",
            "kube-system",
        )
    assert controller.inputs["skipCrds"] is True
    assert "kubernetes:helm.sh/v3:Release::karpenter-crd" in controller.dependencies


def test_releases_wait_for_system_nodes_and_pod_identity(base_run):
    controller = base_run.one("kubernetes:helm.sh/v3:Release", "karpenter")
    assert "aws:eks/nodeGroup:NodeGroup::cluster-system" in controller.dependencies
    assert "aws:eks/podIdentityAssociation:PodIdentityAssociation::karpenter-pod-identity" in controller.dependencies


def test_controller_values_name_cluster_queue_pin_system_nodes(base_run):
    values = base_run.one("kubernetes:helm.sh/v3:Release", "karpenter").inputs["values"]
    assert values["settings"]["clusterName"] == "lab-test"
    assert values["settings"]["interruptionQueue"] == "lab-test"
    assert values["nodeSelector"]["gpulab.dev/node-role"] == "system"
    resources = {"cpu": "1", "memory": "1Gi"}
    assert values["controller"]["resources"] == {"requests": resources, "limits": resources}


def test_controller_resources_and_chart_come_from_config():
    run = run_values(
        stack_values(
            **{
                "gpulab:karpenter": {
                    "chartVersion": "1.14.2",
                    "namespace": "karpenter",
                    "controllerResources": {"cpu": "500m", "memory": "2Gi"},
                }
            }
        )
    )
    release = run.one("kubernetes:helm.sh/v3:Release", "karpenter").inputs
    assert (release["version"], release["namespace"]) == ("1.14.2", "karpenter")
    assert release["values"]["controller"]["resources"]["limits"] == {"cpu": "500m", "memory": "2Gi"}
    association = run.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpenter-pod-identity")
    assert association.inputs["namespace"] == "karpenter"


@pytest.mark.parametrize(
    ("slices", "gate"),
    [({"a": 1, "b": 1}, False), ({"a": 1, "b": 3}, True), ({}, False)],
    ids=["no-lab-shares", "one-lab-shares", "no-labs"],
)
def test_the_overlay_gate_is_on_iff_some_lab_shares_gpus(slices, gate):
    labs = {
        name: {"instanceTypes": ["g4dn.xlarge"], "slicesPerGpu": n, "ami": "al2023@latest"}
        for name, n in slices.items()
    }
    run = run_values(stack_values(**{"gpulab:labs": labs}))
    values = run.one("kubernetes:helm.sh/v3:Release", "karpenter").inputs["values"]
    assert values["settings"]["featureGates"]["nodeOverlay"] is gate
