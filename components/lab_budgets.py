"""gpulab:billing:LabBudgets, an AWS Budgets cost budget per budgeted lab, over the cost allocation tag its nodes carry,
and the tag's activation where the stack asks for it (gpulab:costAllocationTag: activate).

Every instance Karpenter launches for a lab carries the tag `gpulab.dev/lab: <lab>` (the EC2NodeClass's `tags`,
components/karpenter/manifests.py; Karpenter 1.14.1's CRD refuses only eks:eks-cluster-name, kubernetes.io/cluster/*,
karpenter.sh/nodepool, karpenter.sh/nodeclaim and karpenter.k8s.aws/ec2nodeclass there). A budget filters on a tag
under the name `user:<key>` and counts from the day the key is activated for cost allocation (AWS Billing User Guide,
"Using user-defined cost allocation tags").

The budgets never wait for the activation, and the activation never fails the update: AWS refuses to activate a key it
has not yet seen on a resource (terraform-provider-aws #29068) and refuses a member account of an organization (the
guide above); components/tag_activation.py records either answer in the stack's state and asks again on the next
`pulumi up`. AWS documents no refusal of a budget whose tag is not active; such a budget is made and reads 0 until the
tag is (terraform-provider-aws #39850, a filter on a key billing did not know). Not tried here against AWS.
"""

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from components.labels import LAB_LABEL
from components.tag_activation import TagActivation
from domain.stack.budgets import BudgetAlerts, LabBudget, budget_name, limit_amount

TYPE = "gpulab:billing:LabBudgets"
# AWS Budgets' cost filter of one tag's value: "user:<tag key>$<tag value>" (the TagKeyValue example of pulumi-aws
# 7.51.1's budgets.Budget, "user:business-unit$human_resources", as the AWS CLI's create-budget takes it too).
TAG_FILTER = "TagKeyValue"


# The alerts of a lab's budget, as (NotificationType, percent of the budget's amount): the teacher hears when the actual
# spend passes 80% and 100%, and when AWS forecasts that it will pass 100% by the period's end. A PERCENTAGE threshold
# is of the budget's amount ("if you have a budget for 200 dollars and you want to be notified when you go over 160
# dollars, create a notification with ... ACTUAL ... PERCENTAGE ... GREATER_THAN ... threshold of 80"), and
# FORECASTED is "for how much that you're forecasted to spend"; a budget holds up to ten notifications (AWS Budgets API
# Reference, Notification data type, as the AWS SDK for Kotlin's budgets model documents it). CONFIRMED there.
NOTIFICATIONS = (("ACTUAL", 80), ("ACTUAL", 100), ("FORECASTED", 100))


# A term's budget is deleted by AWS after the term's end (domain/stack/budgets.py LabBudget.aws_time_period), while
# Pulumi's state still holds it: updating it to the next term's span would call UpdateBudget on a budget that is gone,
# and fail. A new end therefore replaces it, the old one deleted first (the same name cannot be made twice in an
# account; the provider takes a budget already gone as deleted, NotFoundException, hashicorp/terraform-provider-aws
# internal/service/budgets/budget.go resourceBudgetDelete, read at commit 01d5888a, REPORTED for the version
# pulumi-aws 7.51.1 bridges). A term moved while it runs gets a new budget too: AWS
# counts it from its billing data again, and an alert already sent this month may be sent again.
NEXT_TERM = pulumi.ResourceOptions(replace_on_changes=["timePeriodEnd"], delete_before_replace=True)


def tag_filter_value(lab_name: str) -> str:
    return f"user:{LAB_LABEL}${lab_name}"


class LabBudgets(pulumi.ComponentResource):
    """One monthly cost budget per entry of `budgets` (by lab name; a term's at the term's pace, LabBudget.
    aws_monthly_limit, over the term's span only) with the alerts of NOTIFICATIONS; with
    `activate`, the activation of the lab tag for cost allocation (`activation`, else None), which nothing waits for."""

    def __init__(
        self,
        name: str,
        cluster_name: str,
        budgets: Mapping[str, LabBudget],
        alerts: BudgetAlerts | None,
        activate: bool,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        for lab_name, budget in budgets.items():
            # Validation gives every stack with a budget its alerts (domain/stack/budgets.py alerts_fit).
            assert alerts is not None
            aws.budgets.Budget(
                f"{name}-{lab_name}",
                name=budget_name(cluster_name, lab_name),
                budget_type="COST",
                time_unit="MONTHLY",
                limit_amount=limit_amount(budget.aws_monthly_limit()),
                limit_unit="USD",
                time_period_start=window[0] if (window := budget.aws_time_period()) else None,
                time_period_end=window[1] if window else None,
                cost_filters=[aws.budgets.BudgetCostFilterArgs(name=TAG_FILTER, values=[tag_filter_value(lab_name)])],
                notifications=[
                    aws.budgets.BudgetNotificationArgs(
                        notification_type=kind,
                        comparison_operator="GREATER_THAN",
                        threshold=percent,
                        threshold_type="PERCENTAGE",
                        subscriber_email_addresses=alerts.emails or None,
                        subscriber_sns_topic_arns=[alerts.sns_topic_arn] if alerts.sns_topic_arn else None,
                    )
                    for kind, percent in NOTIFICATIONS
                ],
                opts=pulumi.ResourceOptions.merge(child, NEXT_TERM),
            )
        self.activation = None
        if activate:
            # Activation is account-wide (the management account's, in an organization): another stack's budgets may
            # rely on it, so destroying this stack, or setting gpulab:costAllocationTag back to managementAccount,
            # leaves the tag active.
            self.activation = TagActivation(
                f"{name}-lab-tag",
                LAB_LABEL,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(retain_on_delete=True)),
            )
        self.register_outputs({})
