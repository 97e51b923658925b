"""IAM and EventBridge documents for the Karpenter controller, as plain dicts.

They mirror the Karpenter 1.14.1 getting-started CloudFormation template statement for statement (same Sids, actions,
resources and conditions); tests/test_karpenter_iam.py compares them with that template so that an upgrade which
changes upstream's permissions shows up as a failing test rather than as a controller that cannot launch nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

POLICY_VERSION = "2012-10-17"

# Tag keys Karpenter writes on what it creates and reads back before it touches anything. Scoping on them is what keeps
# the controller away from instances, launch templates and instance profiles that belong to other clusters or to
# other tools in the same account.
NODEPOOL_TAG = "karpenter.sh/nodepool"
NODECLAIM_TAG = "karpenter.sh/nodeclaim"
EC2NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
EKS_CLUSTER_NAME_TAG = "eks:eks-cluster-name"
REGION_TAG = "topology.kubernetes.io/region"
NAME_TAG = "Name"

# Upstream lists the China-partition principal too; keeping it costs nothing and keeps the policy identical.
EC2_SERVICE_PRINCIPALS = ("ec2.amazonaws.com", "ec2.amazonaws.com.cn")
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
# Session tags EKS Pod Identity attaches when it assumes a role (EKS User Guide, pod-id-abac).
POD_IDENTITY_CLUSTER_ARN_TAG = "eks-cluster-arn"
POD_IDENTITY_NAMESPACE_TAG = "kubernetes-namespace"
POD_IDENTITY_SERVICE_ACCOUNT_TAG = "kubernetes-service-account"
# EventBridge delivers the interruption events; sqs.amazonaws.com is in upstream's queue policy as well.
QUEUE_SENDER_PRINCIPALS = ("events.amazonaws.com", "sqs.amazonaws.com")

# What Karpenter launches into but does not create: these carry no Karpenter tags, so they are scoped by region only.
_LAUNCH_INPUT_TYPES_WITHOUT_ACCOUNT = ("image", "snapshot")  # public AMIs and snapshots have no owning account in ARNs
_LAUNCH_INPUT_TYPES = ("security-group", "subnet", "capacity-reservation", "placement-group")
# What a RunInstances/CreateFleet/CreateLaunchTemplate call creates; Karpenter must tag each of them at creation.
_CREATED_TYPES = ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")


@dataclass(frozen=True)
class Scope:
    """Everything the upstream template interpolates into the documents."""

    partition: str
    region: str
    account_id: str
    cluster_name: str
    node_role_arn: str
    queue_arn: str


# --- ARNs ---------------------------------------------------------------------------------------------------------


def _arn(scope: Scope, service: str, resource: str, *, region: str = "", account: str = "") -> str:
    return f"arn:{scope.partition}:{service}:{region}:{account}:{resource}"


def _ec2_arns(scope: Scope, resource_types: tuple[str, ...], *, account: str = "*") -> list[str]:
    return [_arn(scope, "ec2", f"{kind}/*", region=scope.region, account=account) for kind in resource_types]


def _instance_profiles_arn(scope: Scope) -> str:
    return _arn(scope, "iam", "instance-profile/*", account=scope.account_id)


def _cluster_arn(scope: Scope) -> str:
    return _arn(scope, "eks", f"cluster/{scope.cluster_name}", region=scope.region, account=scope.account_id)


def _public_ssm_parameters_arn(scope: Scope) -> str:
    # Only AWS's public parameters: Karpenter resolves AMI aliases (al2023@...) from /aws/service/...
    return _arn(scope, "ssm", "parameter/aws/service/*", region=scope.region)


# --- conditions -------------------------------------------------------------------------------------------------------


def _cluster_tag(scope: Scope) -> str:
    return f"kubernetes.io/cluster/{scope.cluster_name}"


def _request_tag(key: str) -> str:
    return f"aws:RequestTag/{key}"


def _resource_tag(key: str) -> str:
    return f"aws:ResourceTag/{key}"


def _merge(*conditions: dict[str, dict]) -> dict[str, dict]:
    merged: dict[str, dict] = {}
    for condition in conditions:
        for operator, entries in condition.items():
            merged.setdefault(operator, {}).update(entries)
    return merged


def _owned_by_nodepool(scope: Scope, context: Callable[[str], str] = _resource_tag) -> dict[str, dict]:
    """Carries (or, with _request_tag, is being created with) this cluster's ownership tag and a NodePool tag."""
    return {
        "StringEquals": {context(_cluster_tag(scope)): "owned"},
        "StringLike": {context(NODEPOOL_TAG): "*"},
    }


def _requests_cluster_tags(scope: Scope) -> dict[str, dict]:
    """Is being created with the tags Karpenter always sets on node resources for this cluster."""
    return _merge(
        _owned_by_nodepool(scope, _request_tag),
        {"StringEquals": {_request_tag(EKS_CLUSTER_NAME_TAG): scope.cluster_name}},
    )


def _owned_by_nodeclass(scope: Scope, context: Callable[[str], str] = _resource_tag) -> dict[str, dict]:
    """Instance profiles: IAM is global, so the region tag keeps two regional clusters of one name apart."""
    return {
        "StringEquals": {context(_cluster_tag(scope)): "owned", context(REGION_TAG): scope.region},
        "StringLike": {context(EC2NODECLASS_TAG): "*"},
    }


def _statement(sid: str, actions: Sequence[str], resources: str | Sequence[str], condition: dict | None = None) -> dict:
    # Fresh lists per statement: a caller editing one statement must not silently edit another that shares them.
    statement: dict = {
        "Sid": sid,
        "Effect": "Allow",
        "Action": list(actions),
        "Resource": resources if isinstance(resources, str) else list(resources),
    }
    if condition:
        statement["Condition"] = condition
    return statement


def _document(*statements: dict) -> dict:
    return {"Version": POLICY_VERSION, "Statement": list(statements)}


# --- controller policies ----------------------------------------------------------------------------------------------

_LAUNCH_ACTIONS = ("ec2:RunInstances", "ec2:CreateFleet")


def _node_lifecycle(scope: Scope) -> dict:
    created = _ec2_arns(scope, _CREATED_TYPES)
    (launch_templates,) = _ec2_arns(scope, ("launch-template",))
    (instances,) = _ec2_arns(scope, ("instance",))
    return _document(
        _statement(
            "AllowScopedEC2InstanceAccessActions",
            _LAUNCH_ACTIONS,
            _ec2_arns(scope, _LAUNCH_INPUT_TYPES_WITHOUT_ACCOUNT, account="") + _ec2_arns(scope, _LAUNCH_INPUT_TYPES),
        ),
        # Launching from an existing template is only allowed for templates Karpenter itself made for this cluster.
        _statement(
            "AllowScopedEC2LaunchTemplateAccessActions",
            _LAUNCH_ACTIONS,
            launch_templates,
            _owned_by_nodepool(scope),
        ),
        # Forces every instance, volume, ENI and template to be born with the cluster and NodePool tags; the other
        # statements rely on those tags, so untagged creation would put resources beyond the controller's own reach.
        _statement(
            "AllowScopedEC2InstanceActionsWithTags",
            [*_LAUNCH_ACTIONS, "ec2:CreateLaunchTemplate"],
            created,
            _requests_cluster_tags(scope),
        ),
        # ec2:CreateAction limits tag-on-create to those three calls, so CreateTags cannot relabel existing resources.
        _statement(
            "AllowScopedResourceCreationTagging",
            ["ec2:CreateTags"],
            created,
            _merge(
                _requests_cluster_tags(scope),
                {"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]}},
            ),
        ),
        # After launch Karpenter only adds Name, its NodeClaim name and the EKS cluster name tag; the TagKeys list
        # stops it from rewriting the ownership tags the other statements trust.
        _statement(
            "AllowScopedResourceTagging",
            ["ec2:CreateTags"],
            instances,
            _merge(
                _owned_by_nodepool(scope),
                {
                    "StringEqualsIfExists": {_request_tag(EKS_CLUSTER_NAME_TAG): scope.cluster_name},
                    "ForAllValues:StringEquals": {"aws:TagKeys": [EKS_CLUSTER_NAME_TAG, NODECLAIM_TAG, NAME_TAG]},
                },
            ),
        ),
        _statement(
            "AllowScopedDeletion",
            ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            [instances, launch_templates],
            _owned_by_nodepool(scope),
        ),
    )


def _iam_integration(scope: Scope) -> dict:
    profiles = _instance_profiles_arn(scope)
    return _document(
        # Karpenter puts the node role into the instance profiles it creates per EC2NodeClass; passing any other role
        # would let the controller hand an arbitrary role to an instance it launches.
        _statement(
            "AllowPassingInstanceRole",
            ["iam:PassRole"],
            scope.node_role_arn,
            {"StringEquals": {"iam:PassedToService": list(EC2_SERVICE_PRINCIPALS)}},
        ),
        _statement(
            "AllowScopedInstanceProfileCreationActions",
            ["iam:CreateInstanceProfile"],
            profiles,
            _merge(
                _owned_by_nodeclass(scope, _request_tag),
                {"StringEquals": {_request_tag(EKS_CLUSTER_NAME_TAG): scope.cluster_name}},
            ),
        ),
        # Both the existing and the requested tags must name this cluster and region, so tagging can neither adopt
        # another cluster's profile nor move one of ours out of reach of the statements above and below.
        _statement(
            "AllowScopedInstanceProfileTagActions",
            ["iam:TagInstanceProfile"],
            profiles,
            _merge(
                _owned_by_nodeclass(scope),
                _owned_by_nodeclass(scope, _request_tag),
                {"StringEquals": {_request_tag(EKS_CLUSTER_NAME_TAG): scope.cluster_name}},
            ),
        ),
        _statement(
            "AllowScopedInstanceProfileActions",
            ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            profiles,
            _owned_by_nodeclass(scope),
        ),
    )


def _eks_integration(scope: Scope) -> dict:
    # Karpenter reads the API server endpoint and CA from DescribeCluster for the nodes' bootstrap configuration.
    return _document(_statement("AllowAPIServerEndpointDiscovery", ["eks:DescribeCluster"], _cluster_arn(scope)))


def _interruption(scope: Scope) -> dict:
    return _document(
        _statement(
            "AllowInterruptionQueueActions",
            ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            scope.queue_arn,
        )
    )


def _zonal_shift(scope: Scope) -> dict:
    # GetManagedResource has no resource-level ARN; the condition pins it to this cluster. Karpenter reads the
    # cluster's ARC zonal shift to stop launching into a shifted-away zone.
    return _document(
        _statement(
            "AllowZonalShiftStatusReadOnly",
            ["arc-zonal-shift:GetManagedResource"],
            "*",
            {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": _cluster_arn(scope)}},
        )
    )


def _resource_discovery(scope: Scope) -> dict:
    return _document(
        # EC2 Describe* calls support no resource-level permissions; the region condition is the only narrowing.
        _statement(
            "AllowRegionalReadActions",
            [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "*",
            {"StringEquals": {"aws:RequestedRegion": scope.region}},
        ),
        _statement("AllowSSMReadActions", ["ssm:GetParameter"], _public_ssm_parameters_arn(scope)),
        # The Pricing API is global and has no resources; Karpenter uses it to rank on-demand and spot offerings.
        _statement("AllowPricingReadActions", ["pricing:GetProducts"], "*"),
        _statement("AllowUnscopedInstanceProfileListAction", ["iam:ListInstanceProfiles"], "*"),
        _statement("AllowInstanceProfileReadActions", ["iam:GetInstanceProfile"], _instance_profiles_arn(scope)),
    )


_CONTROLLER_POLICIES = {
    "node-lifecycle": _node_lifecycle,
    "iam-integration": _iam_integration,
    "eks-integration": _eks_integration,
    "interruption": _interruption,
    "zonal-shift": _zonal_shift,
    "resource-discovery": _resource_discovery,
}


# Stable keys of the six policies; resource names derive from them, so they must never change.
CONTROLLER_POLICY_KEYS = tuple(_CONTROLLER_POLICIES)


def controller_policies(scope: Scope) -> dict[str, dict]:
    """The six controller policy documents of the upstream template, keyed by a stable name.

    Keys: "node-lifecycle", "iam-integration", "eks-integration", "interruption", "zonal-shift", "resource-discovery".
    Each call returns fresh dicts.
    """
    return {key: build(scope) for key, build in _CONTROLLER_POLICIES.items()}


def controller_trust_policy(cluster_arn: str, namespace: str, service_account: str) -> dict:
    """Trust policy for the controller role under EKS Pod Identity, for this cluster's Karpenter service account only.

    EKS Pod Identity assumes the role with AssumeRole and attaches session tags naming the cluster, namespace and
    service account (hence sts:TagSession); the trust policy can condition on them as aws:RequestTag/<key> (EKS User
    Guide, pod-id-role "Setting Conditions", and pod-id-abac for the list of tags). Without the conditions, any Pod
    Identity association in the account that names this role, in any cluster and for any service account, would get
    the controller's EC2 and IAM permissions. The tags are on unless an association disables them (pod-id-abac), which
    gpulab's association does not.
    """
    return {
        "Version": POLICY_VERSION,
        "Statement": [
            {
                "Sid": "AllowEksPodIdentity",
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {
                    "StringEquals": {
                        _request_tag(POD_IDENTITY_CLUSTER_ARN_TAG): cluster_arn,
                        _request_tag(POD_IDENTITY_NAMESPACE_TAG): namespace,
                        _request_tag(POD_IDENTITY_SERVICE_ACCOUNT_TAG): service_account,
                    }
                },
            }
        ],
    }


def queue_policy(queue_arn: str) -> dict:
    """Resource policy of the interruption queue."""
    return {
        "Version": POLICY_VERSION,
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            # Upstream's send statement has no Sid; none is added so the statement stays identical.
            {
                "Effect": "Allow",
                "Principal": {"Service": list(QUEUE_SENDER_PRINCIPALS)},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": queue_arn,
                # Condition values are strings in the policy grammar; upstream's YAML boolean false means the same.
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }


# The events Karpenter's interruption controller acts on: it cordons and drains a node ahead of a Health scheduled
# change, a Spot interruption or a capacity-reservation reclaim, and when its instance is stopping or terminating.
# Rebalance recommendations are only recorded as Kubernetes events.
INTERRUPTION_EVENTS: Mapping[str, dict] = MappingProxyType(
    {
        key: {"source": [source], "detail-type": [detail_type]}
        for key, (source, detail_type) in {
            "scheduled-change": ("aws.health", "AWS Health Event"),
            "spot-interruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
            "rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
            "instance-state-change": ("aws.ec2", "EC2 Instance State-change Notification"),
            "capacity-reservation-interruption": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
        }.items()
    }
)
