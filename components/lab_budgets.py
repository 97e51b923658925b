"""gpulab:billing:LabBudgets, an AWS Budgets cost budget per budgeted lab, over the cost allocation tag its nodes carry.

Every instance Karpenter launches for a lab carries the tag `gpulab.dev/lab: <lab>` (the EC2NodeClass's `tags`,
components/karpenter/manifests.py; Karpenter 1.14.1's CRD refuses only eks:eks-cluster-name, kubernetes.io/cluster/*,
karpenter.sh/nodepool, karpenter.sh/nodeclaim and karpenter.k8s.aws/ec2nodeclass there). A budget filters on a tag
once the tag key is activated for cost allocation, under the name `user:<key>` (AWS Billing User Guide, "Using
user-defined cost allocation tags").
"""

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from components.labels import LAB_LABEL
from domain.stack.budgets import BudgetAlerts, budget_name, limit_amount

TYPE = "gpulab:billing:LabBudgets"
# AWS Budgets' cost filter of one tag's value: "user:<tag key>$<tag value>" (the TagKeyValue example of pulumi-aws
# 7.51.1's budgets.Budget, "user:business-unit$human_resources", as the AWS CLI's create-budget takes it too).
TAG_FILTER = "TagKeyValue"


def tag_filter_value(lab_name: str) -> str:
    return f"user:{LAB_LABEL}${lab_name}"


class LabBudgets(pulumi.ComponentResource):
    """The activation of the lab tag for cost allocation, and one monthly cost budget per entry of `budgets` (USD by
    lab name) with an alert when the month's actual spend passes it and one when AWS forecasts it will."""

    def __init__(
        self,
        name: str,
        cluster_name: str,
        budgets: Mapping[str, float],
        alerts: BudgetAlerts,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Activation is account-wide (the management account's, in an organization): another stack's budgets may rely
        # on it, so destroying this stack leaves the tag active.
        tag = aws.costexplorer.CostAllocationTag(
            f"{name}-lab-tag",
            tag_key=LAB_LABEL,
            status="Active",
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(retain_on_delete=True)),
        )
        after_tag = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[tag]))
        subscribers = {
            "subscriber_email_addresses": alerts.emails or None,
            "subscriber_sns_topic_arns": [alerts.sns_topic_arn] if alerts.sns_topic_arn else None,
        }
        for lab_name, amount in budgets.items():
            aws.budgets.Budget(
                f"{name}-{lab_name}",
                name=budget_name(cluster_name, lab_name),
                budget_type="COST",
                time_unit="MONTHLY",
                limit_amount=limit_amount(amount),
                limit_unit="USD",
                cost_filters=[aws.budgets.BudgetCostFilterArgs(name=TAG_FILTER, values=[tag_filter_value(lab_name)])],
                notifications=[
                    aws.budgets.BudgetNotificationArgs(
                        notification_type=kind,
                        comparison_operator="GREATER_THAN",
                        threshold=100,
                        threshold_type="PERCENTAGE",
                        **subscribers,
                    )
                    for kind in ("ACTUAL", "FORECASTED")
                ],
                opts=after_tag,
            )
        self.register_outputs({})
