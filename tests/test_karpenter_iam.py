"""The Karpenter controller's IAM and EventBridge documents against the upstream 1.14.1 CloudFormation template."""

from __future__ import annotations

import copy
import json
import re

import pytest
import yaml

from components.karpenter.iam_policies import (
    INTERRUPTION_EVENTS,
    Scope,
    controller_policies,
    controller_trust_policy,
    queue_policy,
)
from tests.support import upstream_data

SCOPE = Scope(
    partition="aws",
    region="eu-west-1",
    account_id="123456789012",
    cluster_name="gpulab-test",
    node_role_arn="arn:aws:iam::123456789012:role/gpulab-test-karpenter-node",
    queue_arn="arn:aws:sqs:eu-west-1:123456789012:gpulab-test",
)

# Every ${...} the template uses, resolved to SCOPE; a variable missing here fails the parse rather than passing.
CFN_VARIABLES = {
    "ClusterName": SCOPE.cluster_name,
    "AWS::Partition": SCOPE.partition,
    "AWS::Region": SCOPE.region,
    "AWS::AccountId": SCOPE.account_id,
    "AWS::URLSuffix": "amazonaws.com",
    "KarpenterNodeRole.Arn": SCOPE.node_role_arn,
    "KarpenterInterruptionQueue.Arn": SCOPE.queue_arn,
}

# Upstream resource name -> our stable key.
UPSTREAM_POLICIES = {
    "NodeLifecyclePolicy": "node-lifecycle",
    "IAMIntegrationPolicy": "iam-integration",
    "EKSIntegrationPolicy": "eks-integration",
    "InterruptionPolicy": "interruption",
    "ZonalShiftPolicy": "zonal-shift",
    "ResourceDiscoveryPolicy": "resource-discovery",
}
UPSTREAM_RULES = {
    "ScheduledChangeRule": "scheduled-change",
    "SpotInterruptionRule": "spot-interruption",
    "RebalanceRule": "rebalance",
    "InstanceStateChangeRule": "instance-state-change",
    "CapacityReservationInterruptionRule": "capacity-reservation-interruption",
}


UPSTREAM_TEMPLATE = upstream_data.KARPENTER / "cloudformation.yaml"
requires_upstream = pytest.mark.skipif(
    not UPSTREAM_TEMPLATE.is_file(),
    reason=upstream_data.absent(UPSTREAM_TEMPLATE),
)


# --- reading the upstream template ---


def _substitute(template: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{([^}!]+)\}", lambda match: variables[match.group(1)], template)


def _cfn_loader(variables: dict[str, str]) -> type[yaml.SafeLoader]:
    """A SafeLoader that resolves the template's intrinsic functions with the given values."""

    class CfnLoader(yaml.SafeLoader):
        pass

    def sub(loader: yaml.SafeLoader, node: yaml.Node) -> object:
        # The policy documents are !Sub JSON strings (upstream needs an interpolated tag key); decode those.
        text = _substitute(loader.construct_scalar(node), variables)
        return json.loads(text) if text.lstrip().startswith("{") else text

    def get_att(loader: yaml.SafeLoader, node: yaml.Node) -> str:
        return variables[loader.construct_scalar(node)]

    def ref(loader: yaml.SafeLoader, node: yaml.Node) -> object:
        name = loader.construct_scalar(node)
        return variables.get(name, {"Ref": name})

    CfnLoader.add_constructor("!Sub", sub)
    CfnLoader.add_constructor("!GetAtt", get_att)
    CfnLoader.add_constructor("!Ref", ref)
    return CfnLoader


@pytest.fixture(scope="module")
def upstream_resources() -> dict[str, dict]:
    with UPSTREAM_TEMPLATE.open() as stream:
        return yaml.load(stream, Loader=_cfn_loader(CFN_VARIABLES))["Resources"]


# --- comparing policy documents ---


def _as_set(value: object) -> frozenset[str]:
    values = value if isinstance(value, list | tuple) else [value]
    # YAML reads `false` as a boolean, JSON policies carry "false": IAM treats both as the same string.
    return frozenset(str(item).lower() if isinstance(item, bool) else str(item) for item in values)


def _normalise_statement(statement: dict) -> dict:
    principal = statement.get("Principal")
    return {
        "Effect": statement.get("Effect"),
        "Principal": principal if principal in (None, "*") else {k: _as_set(v) for k, v in principal.items()},
        "Action": _as_set(statement.get("Action", [])),
        "NotAction": _as_set(statement.get("NotAction", [])),
        "Resource": _as_set(statement.get("Resource", [])),
        "NotResource": _as_set(statement.get("NotResource", [])),
        "Condition": {
            operator: {key: _as_set(value) for key, value in entries.items()}
            for operator, entries in statement.get("Condition", {}).items()
        },
    }


def _statements_by_sid(document: dict) -> dict[str, dict]:
    statements = document["Statement"]
    statements = statements if isinstance(statements, list) else [statements]
    return {
        statement.get("Sid", f"<statement {index} without Sid>"): _normalise_statement(statement)
        for index, statement in enumerate(statements)
    }


def policy_differences(ours: dict, upstream: dict) -> list[str]:
    """Every way in which our document differs from upstream's, one line each; empty when they grant the same."""
    ours_by_sid, upstream_by_sid = _statements_by_sid(ours), _statements_by_sid(upstream)
    differences = [f"{sid}: only in ours" for sid in ours_by_sid.keys() - upstream_by_sid.keys()]
    differences += [f"{sid}: missing from ours" for sid in upstream_by_sid.keys() - ours_by_sid.keys()]
    for sid in sorted(ours_by_sid.keys() & upstream_by_sid.keys()):
        mine, theirs = ours_by_sid[sid], upstream_by_sid[sid]
        for field in mine.keys() | theirs.keys():
            if mine[field] != theirs[field]:
                differences.append(f"{sid}: {field} is {mine[field]!r}, upstream has {theirs[field]!r}")
    return sorted(differences)


def _statement(document: dict, sid: str) -> dict:
    return next(statement for statement in document["Statement"] if statement.get("Sid") == sid)


# --- tests that need the upstream template ---


@requires_upstream
def test_upstream_has_exactly_the_six_mirrored_policies(upstream_resources):
    managed = {name for name, resource in upstream_resources.items() if resource["Type"] == "AWS::IAM::ManagedPolicy"}
    assert managed == set(UPSTREAM_POLICIES)
    assert set(controller_policies(SCOPE)) == set(UPSTREAM_POLICIES.values())


@requires_upstream
@pytest.mark.parametrize(("upstream_name", "key"), UPSTREAM_POLICIES.items())
def test_controller_policy_grants_exactly_what_upstream_grants(upstream_resources, upstream_name, key):
    upstream = upstream_resources[upstream_name]["Properties"]["PolicyDocument"]
    ours = controller_policies(SCOPE)[key]
    assert ours["Version"] == upstream["Version"]
    assert policy_differences(ours, upstream) == []


@requires_upstream
@pytest.mark.parametrize(
    ("sid", "mutate"),
    [
        pytest.param("AllowScopedDeletion", lambda s: s.pop("Condition"), id="dropped-condition"),
        pytest.param(
            "AllowScopedResourceTagging",
            lambda s: s["Condition"].pop("ForAllValues:StringEquals"),
            id="dropped-condition-operator",
        ),
        pytest.param(
            "AllowScopedEC2InstanceAccessActions", lambda s: s["Action"].append("ec2:*"), id="extra-wildcard-action"
        ),
        pytest.param("AllowScopedEC2LaunchTemplateAccessActions", lambda s: s.update(Resource="*"), id="any-resource"),
        pytest.param(
            "AllowScopedResourceCreationTagging",
            lambda s: s["Condition"]["StringEquals"]["ec2:CreateAction"].append("CreateVolume"),
            id="widened-condition-value",
        ),
        pytest.param(
            "AllowScopedEC2InstanceActionsWithTags",
            lambda s: s["Condition"]["StringLike"].update({"aws:RequestTag/karpenter.sh/nodepool": "gpu-*"}),
            id="changed-condition-value",
        ),
        pytest.param("AllowScopedDeletion", lambda s: s.update(Effect="Deny"), id="changed-effect"),
    ],
)
def test_comparison_reports_any_change_to_a_statement(upstream_resources, sid, mutate):
    upstream = upstream_resources["NodeLifecyclePolicy"]["Properties"]["PolicyDocument"]
    mutated = copy.deepcopy(controller_policies(SCOPE)["node-lifecycle"])
    mutate(_statement(mutated, sid))
    differences = policy_differences(mutated, upstream)
    assert differences, "the comparison missed a mutated statement"
    assert all(line.startswith(f"{sid}:") for line in differences)


@requires_upstream
def test_comparison_reports_an_extra_statement(upstream_resources):
    upstream = upstream_resources["ResourceDiscoveryPolicy"]["Properties"]["PolicyDocument"]
    mutated = copy.deepcopy(controller_policies(SCOPE)["resource-discovery"])
    mutated["Statement"].append({"Sid": "AllowEverything", "Effect": "Allow", "Action": "*", "Resource": "*"})
    assert policy_differences(mutated, upstream) == ["AllowEverything: only in ours"]


@requires_upstream
def test_queue_policy_matches_upstream_statements(upstream_resources):
    upstream = upstream_resources["KarpenterInterruptionQueuePolicy"]["Properties"]["PolicyDocument"]
    ours = queue_policy(SCOPE.queue_arn)
    assert ours["Id"] == upstream["Id"]
    assert policy_differences(ours, upstream) == []


@requires_upstream
def test_interruption_event_patterns_equal_upstream_rules(upstream_resources):
    rules = {name: resource for name, resource in upstream_resources.items() if resource["Type"] == "AWS::Events::Rule"}
    assert set(rules) == set(UPSTREAM_RULES)
    assert {key: INTERRUPTION_EVENTS[key] for key in UPSTREAM_RULES.values()} == {
        key: rules[name]["Properties"]["EventPattern"] for name, key in UPSTREAM_RULES.items()
    }
    assert set(INTERRUPTION_EVENTS) == set(UPSTREAM_RULES.values())


# --- tests that stand on their own ---


def test_every_document_uses_the_current_policy_language():
    documents = [*controller_policies(SCOPE).values(), queue_policy(SCOPE.queue_arn), _trust_policy()]
    assert {document["Version"] for document in documents} == {"2012-10-17"}


def test_pass_role_is_only_for_the_node_role_and_only_to_ec2():
    pass_role = [
        statement
        for document in controller_policies(SCOPE).values()
        for statement in document["Statement"]
        if "iam:PassRole" in _as_set(statement["Action"])
    ]
    assert [(_as_set(s["Action"]), _as_set(s["Resource"])) for s in pass_role] == [
        (frozenset({"iam:PassRole"}), frozenset({SCOPE.node_role_arn}))
    ]
    assert pass_role[0]["Condition"] == {
        "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
    }


def test_no_statement_allows_a_whole_service_or_everything():
    actions = {
        action
        for document in controller_policies(SCOPE).values()
        for statement in document["Statement"]
        for action in _as_set(statement["Action"])
    }
    assert not [action for action in actions if "*" in action]


def test_controller_policies_are_fresh_on_every_call():
    first = controller_policies(SCOPE)
    first["node-lifecycle"]["Statement"].clear()
    assert controller_policies(SCOPE)["node-lifecycle"]["Statement"]


def test_interruption_events_cannot_be_reassigned():
    with pytest.raises(TypeError, match="does not support item assignment"):
        INTERRUPTION_EVENTS["spot-interruption"] = {}  # type: ignore[index]


CLUSTER_ARN = f"arn:aws:eks:{SCOPE.region}:{SCOPE.account_id}:cluster/{SCOPE.cluster_name}"


def _trust_policy() -> dict:
    return controller_trust_policy(CLUSTER_ARN, "kube-system", "karpenter")


def test_identity_may_assume_and_tag_for_one_clusters_account():
    (statement,) = _trust_policy()["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    # TagSession: Pod Identity attaches the session tags that the condition below reads.
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    assert statement["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-arn": CLUSTER_ARN,
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": "karpenter",
        }
    }
    assert "NotAction" not in statement and "NotPrincipal" not in statement


def test_event_patterns_serialise_to_json():
    assert json.loads(json.dumps(dict(INTERRUPTION_EVENTS))) == dict(INTERRUPTION_EVENTS)


def _containers(value: object) -> list[object]:
    if isinstance(value, dict):
        return [value, *(inner for item in value.values() for inner in _containers(item))]
    if isinstance(value, list):
        return [value, *(inner for item in value for inner in _containers(item))]
    return []


@pytest.mark.parametrize("key", sorted(controller_policies(SCOPE)))
def test_no_two_statements_share_a_list_or_dict(key):
    # Shared lists would let an edit to one statement (e.g. a caller's override) widen another one unnoticed.
    containers = _containers(controller_policies(SCOPE)[key])
    assert len({id(container) for container in containers}) == len(containers)
