"""The policy pack's control-plane and trust rules, on the base stack's render (gpulab's defaults) and on bad input.

Every stack file's render passing every rule is tested in tests/test_policy.py.
"""

import json
import re
from typing import Any

import pytest

from render.harness import Run
from tests.test_policy import (
    CLUSTER_NAME,
    eks_cluster,
    mutated,
    only,
    rules,
    violations,
)

ENDPOINT = "eks-endpoint-not-open-in-production"
DELETION = "eks-deletion-protection-in-production"
RETENTION = "log-group-retention"
TRUST = "pod-identity-trust-scoped"
LOG_GROUP_NAME = "cluster-control-plane-logs"
CONTROLLER_ROLE = "karpenter-controller"


def component(run: Run, **changes: Any) -> dict[str, Any]:
    """The pulumi-eks component's inputs with some keys set, or removed when given None."""
    props = mutated(run, rules.EKS_COMPONENT, CLUSTER_NAME) | changes
    return {key: value for key, value in props.items() if value is not None}


# --- eks-endpoint-not-open-in-production ---------------------------------------------------------------------------

OPEN_WITHOUT_PRIVATE = {
    "endpointPublicAccess": True,
    "publicAccessCidrs": ["0.0.0.0/0"],
    "endpointPrivateAccess": False,
}


def test_a_public_only_endpoint_open_to_all_fires_in_prod_only(base_run: Run) -> None:
    props = component(base_run, deletionProtection=True, **OPEN_WITHOUT_PRIVATE)
    message = only(violations((rules.EKS_COMPONENT, props), stack="prod"), ENDPOINT)
    assert re.search(
        r"^the API endpoint is public to 0\.0\.0\.0/0 with no private endpoint in production stack 'prod'", message
    )
    assert violations((rules.EKS_COMPONENT, props), stack="staging") == {}


@pytest.mark.parametrize(
    "endpoint",
    [
        {"endpointPrivateAccess": True},
        {"publicAccessCidrs": ["1.2.3.4/32"]},
        {"endpointPublicAccess": False, "publicAccessCidrs": None, "endpointPrivateAccess": True},
    ],
    ids=["private-endpoint-too", "restricted-public", "private-only"],
)
def test_a_private_or_restricted_endpoint_passes_in_prod(base_run: Run, endpoint: dict[str, Any]) -> None:
    props = component(base_run, deletionProtection=True, **(OPEN_WITHOUT_PRIVATE | endpoint))
    assert violations((rules.EKS_COMPONENT, props), stack="prod") == {}


def test_a_cluster_with_eks_default_endpoint_fires_in_prod(base_run: Run) -> None:
    # EKS's defaults: public access on, from 0.0.0.0/0, no private endpoint.
    props = eks_cluster(base_run) | {
        "vpcConfig": {"subnetIds": ["subnet-1", "subnet-2"]},
        "deletionProtection": True,
    }
    message = only(violations((rules.EKS_CLUSTER, props), stack="prod"), ENDPOINT)
    assert re.search(r"public to 0\.0\.0\.0/0 with no private endpoint", message)


def test_a_cluster_with_gpulabs_default_endpoint_passes_in_prod(base_run: Run) -> None:
    # The base stack leaves every endpoint key to gpulab's defaults: public to 0.0.0.0/0, and the private endpoint.
    props = eks_cluster(base_run) | {"deletionProtection": True}
    assert violations((rules.EKS_CLUSTER, props), stack="prod") == {}


# --- eks-deletion-protection-in-production -------------------------------------------------------------------------


@pytest.mark.parametrize("value", [False, None], ids=["off", "unset"])
def test_production_cluster_without_deletion_protection_fires(base_run: Run, value: bool | None) -> None:
    props = component(base_run, deletionProtection=value)
    message = only(violations((rules.EKS_COMPONENT, props), stack="prod-eu"), DELETION)
    assert re.search(rf"^deletionProtection is {value!r}, not true, in production stack 'prod-eu'", message)
    assert violations((rules.EKS_COMPONENT, props), stack="staging") == {}


def test_a_prod_cluster_without_deletion_protection_fires(base_run: Run) -> None:
    props = eks_cluster(base_run)
    props.pop("deletionProtection", None)
    message = only(violations((rules.EKS_CLUSTER, props), stack="prod"), DELETION)
    assert re.search(r"^deletionProtection is None, not true", message)
    props["deletionProtection"] = True
    assert violations((rules.EKS_CLUSTER, props), stack="prod") == {}


def test_an_eks_component_without_inputs_is_not_judged_in_prod() -> None:
    assert violations((rules.EKS_COMPONENT, {}), stack="prod") == {}


# --- log-group-retention --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("days", [None, 0], ids=["unset", "never-expire"])
def test_log_group_kept_forever_fires(base_run: Run, days: int | None) -> None:
    props = mutated(base_run, rules.LOG_GROUP, LOG_GROUP_NAME) | {"retentionInDays": days}
    message = only(violations((rules.LOG_GROUP, props)), RETENTION)
    assert message == f"retentionInDays is {days!r}: the log group {props['name']!r} keeps its events forever"


@pytest.mark.parametrize(
    "changes",
    [{"retentionInDays": 365.0}, {"retentionInDays": None, "logGroupClass": "DELIVERY"}],
    ids=["float-from-the-engine", "delivery-class-forced-to-2-days"],
)
def test_log_group_that_expires_its_events_passes(base_run: Run, changes: dict[str, Any]) -> None:
    props = mutated(base_run, rules.LOG_GROUP, LOG_GROUP_NAME) | changes
    assert violations((rules.LOG_GROUP, props)) == {}


# --- pod-identity-trust-scoped --------------------------------------------------------------------------------------


def trust(run: Run) -> dict[str, Any]:
    return json.loads(run.one(rules.IAM_ROLE, CONTROLLER_ROLE).inputs["assumeRolePolicy"])


def with_trust(run: Run, document: Any) -> tuple[str, dict[str, Any]]:
    props = mutated(run, rules.IAM_ROLE, CONTROLLER_ROLE)
    props["assumeRolePolicy"] = document if isinstance(document, str) else json.dumps(document)
    return rules.IAM_ROLE, props


def test_pod_identity_trust_without_conditions_fires(base_run: Run) -> None:
    document = trust(base_run)
    del document["Statement"][0]["Condition"]
    message = only(violations(with_trust(base_run, document)), TRUST)
    assert re.search(
        r"^Statement\[0\] \(AllowEksPodIdentity\) lets EKS Pod Identity assume the role with no condition fixing "
        r"aws:RequestTag/eks-cluster-arn, aws:RequestTag/kubernetes-namespace, "
        r"aws:RequestTag/kubernetes-service-account: any Pod Identity association",
        message,
    )


@pytest.mark.parametrize("tag", ["eks-cluster-arn", "kubernetes-namespace", "kubernetes-service-account"])
def test_pod_identity_trust_missing_one_scope_fires_naming_it(base_run: Run, tag: str) -> None:
    document = trust(base_run)
    del document["Statement"][0]["Condition"]["StringEquals"][f"aws:RequestTag/{tag}"]
    message = only(violations(with_trust(base_run, document)), TRUST)
    assert re.search(rf"no condition fixing aws:RequestTag/{tag}: ", message)


def test_a_wildcard_trust_fires_an_exact_string_like_passes(base_run: Run) -> None:
    document = trust(base_run)
    condition = document["Statement"][0]["Condition"]
    condition["StringLike"] = condition.pop("StringEquals")
    assert violations(with_trust(base_run, document)) == {}
    condition["StringLike"]["aws:RequestTag/kubernetes-service-account"] = "*"
    message = only(violations(with_trust(base_run, document)), TRUST)
    assert re.search(r"no condition fixing aws:RequestTag/kubernetes-service-account: ", message)


def test_a_trust_with_lowercase_condition_keys_passes(base_run: Run) -> None:
    document = trust(base_run)
    equals = document["Statement"][0]["Condition"]["StringEquals"]
    document["Statement"][0]["Condition"]["StringEquals"] = {key.lower(): value for key, value in equals.items()}
    assert violations(with_trust(base_run, document)) == {}


def test_role_trusted_by_ec2_alone_is_not_judged(base_run: Run) -> None:
    node_role = base_run.one(rules.IAM_ROLE, "karpenter-nodes-role")
    assert violations(node_role) == {}


def test_trust_policy_that_is_not_json_fires(base_run: Run) -> None:
    message = only(violations(with_trust(base_run, "{not json")), TRUST)
    assert re.search(r"^assumeRolePolicy is not valid JSON \(.+\), so it cannot be checked$", message)
