"""The IAM policy the identity that runs `pulumi up` and `pulumi destroy` needs: the actions of every resource type and
look-up the program registers, from the table below.

    python -m reports.deployer_policy [<stack name or stack file> ...]

prints the policy document of every row (what docs/deploying.md shows), or, for the stacks named, of the resource types
and look-ups the program registers for them under the render's mocks, with the Price List look-ups that `pulumi
preview` and `pulumi up` make and the render does not (components/live_prices.py). tests/test_deployer_policy.py holds
the table to the program: a type or look-up the program registers without a row fails it, so does a row for one it
never registers, and docs/deploying.md must show the policy this prints.

What each row lists: the API operations the resource's create, read, update and delete call, named as IAM actions
(an action is named after its operation: Service Authorization Reference, "Actions, resources, and condition keys",
https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html).
pulumi-aws 7 runs terraform-provider-aws's resources; CONFIRMED means the operations were read in that resource's file
(internal/service/..., the stored version named), REPORTED that the row follows the service's Create/Describe/Update/
Delete/tag operations without that file read here. Resource ARNs are not narrowed (`"Resource": "*"`): the names
Pulumi gives resources carry random suffixes, so a narrower policy would be a guess; narrow it for your account.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import domain.stack
from components.live_prices import GET_PRODUCT, GET_SPOT_PRICE
from components.tag_activation import TAG_ACTIVATION
from render import harness, run

# What `pulumi preview` and `pulumi up` look up and the render does not: they price from the Price List in the stack's
# region (components/live_prices.py), the render from its list.
PREVIEW_LOOKUPS = (GET_PRODUCT, GET_SPOT_PRICE)


@dataclass(frozen=True)
class Permission:
    actions: tuple[str, ...]
    source: str


def _crud(service: str, noun: str, *, tags: bool = True, update: bool = True) -> tuple[str, ...]:
    """The Create/Describe/Update/Delete actions of a noun, and the service's tag actions."""
    actions = [f"{service}:Create{noun}", f"{service}:Describe{noun}", f"{service}:Delete{noun}"]
    if update:
        actions.append(f"{service}:Update{noun}")
    if tags:
        actions += [f"{service}:TagResource", f"{service}:UntagResource", f"{service}:ListTagsForResource"]
    return tuple(actions)


TF = "terraform-provider-aws internal/service"
# Types and look-ups that need no AWS permission: gpulab's components (groupings in Pulumi's state), the providers, the
# Kubernetes objects, which go to the cluster's API server under the deployer's EKS access entry
# (gpulab:cluster.adminRoleArns, docs/deploying.md "Cluster access"), not to AWS IAM, and pulumi-tls's key and
# certificate, which the provider makes on the deployer's machine (components/jupyterhub/proxy_tls.py).
NO_AWS_ACTIONS = ("gpulab:", "pulumi:providers:", "kubernetes:", "tls:")

PERMISSIONS: dict[str, Permission] = {
    "eks:index:Cluster": Permission(
        (
            *_crud("eks", "Cluster", update=False),
            "eks:UpdateClusterConfig",
            "eks:UpdateClusterVersion",
            "eks:ListClusters",
            # Its cluster role (a ServiceRole: aws.iam.Role and RolePolicyAttachment), passed to EKS.
            "iam:PassRole",
            # EKS makes its service-linked role AWSServiceRoleForAmazonEKS on the account's first cluster.
            "iam:CreateServiceLinkedRole",
            # The cluster's network: the private subnets and the cluster security group EKS creates.
            "ec2:DescribeSubnets",
            "ec2:DescribeVpcs",
            "ec2:DescribeSecurityGroups",
            # The secrets key of encryption_config_key_arn: EKS checks the caller may use it.
            "kms:DescribeKey",
            "kms:CreateGrant",
        ),
        "pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts at 7bf0c1b (createCore: a ServiceRole, aws.eks.Cluster, the "
        "kube-proxy, vpc-cni and coredns aws.eks.Addon; no security group with skipDefaultSecurityGroups, no OIDC "
        "provider with createOidcProvider false), CONFIRMED; its children's actions are the rows of aws:eks/cluster, "
        "aws:iam/role, aws:iam/rolePolicyAttachment and aws:eks/addon, which this row and theirs cover, REPORTED",
    ),
    "aws:eks/addon:Addon": Permission(
        (*_crud("eks", "Addon"), "eks:DescribeAddonVersions", "iam:PassRole"),
        f"{TF}/eks/addon.go (pod identity associations pass a role), REPORTED",
    ),
    "aws:eks/accessEntry:AccessEntry": Permission(
        _crud("eks", "AccessEntry"),
        f"{TF}/eks/access_entry.go at 01f4311: CreateAccessEntry, DescribeAccessEntry, UpdateAccessEntry, "
        "DeleteAccessEntry, tags through @Tags, CONFIRMED",
    ),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": Permission(
        ("eks:AssociateAccessPolicy", "eks:ListAssociatedAccessPolicies", "eks:DisassociateAccessPolicy"),
        f"{TF}/eks/access_policy_association.go, REPORTED",
    ),
    "aws:eks/nodeGroup:NodeGroup": Permission(
        (
            *_crud("eks", "Nodegroup", update=False),
            "eks:UpdateNodegroupConfig",
            "eks:UpdateNodegroupVersion",
            "iam:PassRole",
            "iam:CreateServiceLinkedRole",
            "ec2:DescribeSubnets",
        ),
        f"{TF}/eks/node_group.go, REPORTED",
    ),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": Permission(
        (*_crud("eks", "PodIdentityAssociation"), "iam:PassRole", "iam:GetRole"),
        f"{TF}/eks/pod_identity_association.go, REPORTED",
    ),
    "aws:iam/role:Role": Permission(
        (
            "iam:CreateRole",
            "iam:GetRole",
            "iam:UpdateRole",
            "iam:UpdateAssumeRolePolicy",
            "iam:DeleteRole",
            "iam:TagRole",
            "iam:UntagRole",
            "iam:ListRolePolicies",
            "iam:ListAttachedRolePolicies",
            "iam:ListInstanceProfilesForRole",
        ),
        f"{TF}/iam/role.go, REPORTED",
    ),
    "aws:iam/rolePolicy:RolePolicy": Permission(
        ("iam:PutRolePolicy", "iam:GetRolePolicy", "iam:DeleteRolePolicy"), f"{TF}/iam/role_policy.go, REPORTED"
    ),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": Permission(
        ("iam:AttachRolePolicy", "iam:ListAttachedRolePolicies", "iam:DetachRolePolicy"),
        f"{TF}/iam/role_policy_attachment.go, REPORTED",
    ),
    "aws:iam/policy:Policy": Permission(
        (
            "iam:CreatePolicy",
            "iam:GetPolicy",
            "iam:GetPolicyVersion",
            "iam:ListPolicyVersions",
            "iam:CreatePolicyVersion",
            "iam:DeletePolicyVersion",
            "iam:DeletePolicy",
            "iam:TagPolicy",
            "iam:UntagPolicy",
        ),
        f"{TF}/iam/policy.go, REPORTED",
    ),
    "aws:kms/key:Key": Permission(
        (
            "kms:CreateKey",
            "kms:DescribeKey",
            "kms:GetKeyPolicy",
            "kms:PutKeyPolicy",
            "kms:GetKeyRotationStatus",
            "kms:EnableKeyRotation",
            "kms:UpdateKeyDescription",
            "kms:ScheduleKeyDeletion",
            "kms:TagResource",
            "kms:UntagResource",
            "kms:ListResourceTags",
        ),
        f"{TF}/kms/key.go, REPORTED",
    ),
    "aws:kms/alias:Alias": Permission(
        ("kms:CreateAlias", "kms:ListAliases", "kms:UpdateAlias", "kms:DeleteAlias"), f"{TF}/kms/alias.go, REPORTED"
    ),
    "aws:sqs/queue:Queue": Permission(
        (
            "sqs:CreateQueue",
            "sqs:GetQueueAttributes",
            "sqs:GetQueueUrl",
            "sqs:SetQueueAttributes",
            "sqs:DeleteQueue",
            "sqs:TagQueue",
            "sqs:UntagQueue",
            "sqs:ListQueueTags",
        ),
        f"{TF}/sqs/queue.go, REPORTED",
    ),
    "aws:sqs/queuePolicy:QueuePolicy": Permission(
        ("sqs:SetQueueAttributes", "sqs:GetQueueAttributes"), f"{TF}/sqs/queue_policy.go, REPORTED"
    ),
    "aws:cloudwatch/eventRule:EventRule": Permission(
        (
            "events:PutRule",
            "events:DescribeRule",
            "events:EnableRule",
            "events:DisableRule",
            "events:DeleteRule",
            "events:TagResource",
            "events:UntagResource",
            "events:ListTagsForResource",
        ),
        f"{TF}/events/rule.go, REPORTED",
    ),
    "aws:cloudwatch/eventTarget:EventTarget": Permission(
        ("events:PutTargets", "events:ListTargetsByRule", "events:RemoveTargets"), f"{TF}/events/target.go, REPORTED"
    ),
    "aws:cloudwatch/logGroup:LogGroup": Permission(
        (
            "logs:CreateLogGroup",
            "logs:DescribeLogGroups",
            "logs:PutRetentionPolicy",
            "logs:DeleteRetentionPolicy",
            "logs:DeleteLogGroup",
            "logs:TagResource",
            "logs:UntagResource",
            "logs:ListTagsForResource",
        ),
        f"{TF}/logs/group.go, REPORTED",
    ),
    "aws:ec2/tag:Tag": Permission(
        ("ec2:CreateTags", "ec2:DescribeTags", "ec2:DeleteTags"), f"{TF}/ec2/tag.go, REPORTED"
    ),
    "aws:amp/workspace:Workspace": Permission(
        (
            "aps:CreateWorkspace",
            "aps:DescribeWorkspace",
            "aps:UpdateWorkspaceAlias",
            "aps:DeleteWorkspace",
            "aps:TagResource",
            "aps:UntagResource",
            "aps:ListTagsForResource",
        ),
        f"{TF}/amp/workspace.go, REPORTED",
    ),
    "aws:amp/ruleGroupNamespace:RuleGroupNamespace": Permission(
        (
            "aps:CreateRuleGroupsNamespace",
            "aps:DescribeRuleGroupsNamespace",
            "aps:PutRuleGroupsNamespace",
            "aps:DeleteRuleGroupsNamespace",
        ),
        f"{TF}/amp/rule_group_namespace.go, REPORTED",
    ),
    "aws:amp/scraper:Scraper": Permission(
        (
            "aps:CreateScraper",
            "aps:DescribeScraper",
            "aps:UpdateScraper",
            "aps:DeleteScraper",
            "aps:TagResource",
            "aps:UntagResource",
            "aps:ListTagsForResource",
            # A scraper reads its cluster and network, and makes its service-linked role on first use.
            "eks:DescribeCluster",
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
            "iam:CreateServiceLinkedRole",
        ),
        f"{TF}/amp/scraper.go, REPORTED",
    ),
    "aws:budgets/budget:Budget": Permission(
        ("budgets:ModifyBudget", "budgets:ViewBudget"), f"{TF}/budgets/budget.go, REPORTED"
    ),
    TAG_ACTIVATION: Permission(
        ("ce:UpdateCostAllocationTagsStatus",),
        "components/tag_activation.py, its only AWS call, CONFIRMED; AWS answers AccessDeniedException without it",
    ),
    # The look-ups (invokes).
    "aws:index/getCallerIdentity:getCallerIdentity": Permission(
        (), "sts:GetCallerIdentity needs no permission (AWS STS API reference, GetCallerIdentity), REPORTED"
    ),
    "aws:index/getPartition:getPartition": Permission((), "answered by the provider, no AWS call, REPORTED"),
    "aws:ec2/getVpc:getVpc": Permission(("ec2:DescribeVpcs",), f"{TF}/ec2/vpc_data_source.go, REPORTED"),
    "aws:ec2/getSubnet:getSubnet": Permission(("ec2:DescribeSubnets",), f"{TF}/ec2/subnet_data_source.go, REPORTED"),
    "aws:ssm/getParameter:getParameter": Permission(
        ("ssm:GetParameter",),
        "EKS User Guide, Retrieve recommended Amazon Linux AMI IDs: 'must have the ssm:GetParameter IAM "
        "permission', CONFIRMED (research 48-50.md Q8)",
    ),
    "aws:pricing/getProduct:getProduct": Permission(
        ("pricing:GetProducts",), f"{TF}/pricing/product_data_source.go, REPORTED"
    ),
    "aws:ec2/getSpotPrice:getSpotPrice": Permission(
        ("ec2:DescribeSpotPriceHistory",), f"{TF}/ec2/spot_price_data_source.go, REPORTED"
    ),
}


def needs_aws(token: str) -> bool:
    return not token.startswith(NO_AWS_ACTIONS)


def unmapped(tokens: Iterable[str]) -> list[str]:
    """The tokens that need AWS and have no row: each one a permission the policy would miss."""
    return sorted({t for t in tokens if needs_aws(t) and t not in PERMISSIONS})


def tokens(runs: Iterable[harness.Run]) -> set[str]:
    """Every resource type and look-up the runs registered."""
    return {t for r in runs for t in [*(x.type for x in r.resources), *(i.token for i in r.invokes)]}


def policy(found: Iterable[str]) -> dict[str, Any]:
    """The policy document for the tokens: one statement, every action of theirs, sorted."""
    found = set(found)
    if missing := unmapped(found):
        raise KeyError(f"no IAM actions for {', '.join(missing)}: add a row to reports/deployer_policy.py")
    actions = sorted({a for t in found if needs_aws(t) for a in PERMISSIONS[t].actions})
    return {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "GpulabDeploy", "Effect": "Allow", "Action": actions, "Resource": "*"}],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.deployer_policy", description=__doc__.split("\n\n")[0])
    parser.add_argument("stacks", nargs="*", help="stack names or stack files (default: every Pulumi.<stack>.yaml)")
    args = parser.parse_args(argv)
    found: set[str] = set(PERMISSIONS)
    if args.stacks:
        runs = []
        try:
            for stack in args.stacks:
                name, path = run.stack_file(stack)
                runs.append(harness.run(name, run.read_stack_file(path)))
        except domain.stack.ConfigError as error:
            print("\n".join(error.lines), file=sys.stderr)
            return 2
        found = tokens(runs) | set(PREVIEW_LOOKUPS)
    print(json.dumps(policy(found), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
