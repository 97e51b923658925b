"""The activation of the lab tag for cost allocation (gpulab:costAllocationTag: activate), as a step that never fails
`pulumi up`: a Pulumi dynamic resource that asks Cost Explorer to activate the key and records AWS's answer in its state
(`status`: active, pending, refused or unanswered), asking again on every later `pulumi up` until AWS has accepted it.

Why not pulumi-aws's `aws.costexplorer.CostAllocationTag`: it fails the update for a key billing has not yet seen
("empty result", terraform-provider-aws #29068), which is every new stack's key until a lab's node has carried it for up
to 24 hours (pulumi-aws 7.51.1, costexplorer/cost_allocation_tag.py, its NOTE), and for a member account of an
organization always; Pulumi starts no new step after a failed one. Nor a look-up at preview that makes that resource
only once billing lists the key: the look-up would be boto3 in the program (pulumi-aws 7.51.1 has no invoke for
ListCostAllocationTags, costexplorer/ holds get_cost_category and get_tags only), a call at every preview and render,
and it would still not say what AWS answered.

What AWS answers UpdateCostAllocationTagsStatus (botocore 1.44.8's `ce` 2017-10-25 model: output `Errors`, a list of
{TagKey, Code, Message}; modelled error LimitExceededException only):
- HTTP 200 and no Errors: accepted; activating an active key "doesn't have any effect" (API Reference,
  UpdateCostAllocationTagsStatus). CONFIRMED. The activation itself "can take up to 24 hours" (AWS Billing User Guide,
  "Activating AWS-generated tags cost allocation tags"). CONFIRMED for AWS-generated tags, REPORTED for user-defined.
- HTTP 200 with `{"TagKey": ..., "Code": "TagKeysNotFoundException", ...}` in Errors: a key it does not know (API
  Reference, UpdateCostAllocationTagsStatus, Example 2). CONFIRMED.
- AccessDeniedException (HTTP 400), "Failed to update Cost Allocation Tag: Linked account doesn't have access to cost
  allocation tags", from a member account (2i2c-org/infrastructure PR #4932, runs-on/runs-on #458). REPORTED; an
  identity without ce:UpdateCostAllocationTagsStatus gets AccessDeniedException too, with its own message, kept here.
Nothing else is mapped to a cause: any other answer is recorded with AWS's code and message, and asked again.

The stack's state holds the provider by reference, `components.tag_activation.ActivationProvider` and its instance's
fields (pulumi 3.272.0 dynamic/dynamic.py serialize_provider: dill names a class of an importable module), and Pulumi
runs it with `python -m pulumi.dynamic` in the program's directory (pulumi/pulumi sdk/python/dist/
pulumi-resource-pulumi-python finds the project's `.venv` from $PWD), where this module imports. Moving or renaming the
class leaves every stack's activation without a provider: keep both.
"""

from typing import Any

import pulumi
from pulumi import dynamic

from components.labels import LAB_LABEL

# The resource's type token: pulumi 3.272.0 names a dynamic resource "pulumi-python:dynamic/<module>:<name>".
TAG_ACTIVATION = "pulumi-python:dynamic/gpulab:CostAllocationTagActivation"

# How a person activates the tag where this stack does not or may not (AWS Billing User Guide, "Activating
# AWS-generated tags cost allocation tags", whose console steps user-defined tags share; AWS CLI reference,
# `aws ce update-cost-allocation-tags-status`, shorthand TagKey=string,Status=string).
HOW_TO_ACTIVATE = (
    f"Billing and Cost Management console > Cost allocation tags > {LAB_LABEL} > Activate, or `aws ce "
    f"update-cost-allocation-tags-status --cost-allocation-tags-status TagKey={LAB_LABEL},Status=Active`"
)


class ActivationProvider(dynamic.ResourceProvider):
    """Create and update: ask Cost Explorer to activate `tagKey`, and keep the answer as `status` and `message`. Diff:
    a change while the status is not `active`, so that every `pulumi up` asks again until AWS has accepted it."""

    ACTIVE = "active"
    PENDING = "pending"
    REFUSED = "refused"
    UNANSWERED = "unanswered"
    NOT_SEEN = "TagKeysNotFoundException"
    DENIED = "AccessDeniedException"

    def __init__(self, client: Any = None) -> None:
        # A Cost Explorer client; None in the stack, where the provider makes one from the stack's AWS settings. Tests
        # pass a fake: nothing here calls AWS in a test.
        self.client = client
        self.profile: str | None = None
        self.region: str | None = None

    def configure(self, req: dynamic.ConfigureRequest) -> None:
        # The default AWS provider's settings of the stack, so that the activation runs as the rest of the stack does: a
        # dynamic provider is handed the whole stack configuration, namespaces kept (pulumi/pulumi PR #17673), REPORTED.
        self.profile = req.config.get("aws:profile")
        self.region = req.config.get("aws:region")

    def _ce(self) -> Any:
        if self.client is None:
            import boto3

            # botocore 1.44.8 resolves `ce` to its partition's one endpoint whatever the region
            # (ce.us-east-1.amazonaws.com in `aws`): run here, CONFIRMED.
            self.client = boto3.Session(profile_name=self.profile, region_name=self.region).client("ce")
        return self.client

    def answer(self, tag_key: str) -> dict[str, str]:
        """AWS's answer to activating `tag_key`, as `status` and `message`; never raises for what AWS or the SDK say."""
        try:
            response = self._ce().update_cost_allocation_tags_status(
                CostAllocationTagsStatus=[{"TagKey": tag_key, "Status": "Active"}]
            )
        except Exception as error:
            found = getattr(error, "response", {}).get("Error", {})
            code, message = found.get("Code", type(error).__name__), found.get("Message", str(error))
            status = self.REFUSED if code == self.DENIED else self.UNANSWERED
            return {"status": status, "message": f"{code}: {message}"}
        errors = [e for e in response.get("Errors") or [] if e.get("TagKey", tag_key) == tag_key]
        if not errors:
            return {"status": self.ACTIVE, "message": "AWS accepted the activation"}
        code, message = errors[0].get("Code", ""), errors[0].get("Message", "")
        status = self.PENDING if code == self.NOT_SEEN else self.UNANSWERED
        return {"status": status, "message": f"{code}: {message}"}

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        return dynamic.CreateResult(props["tagKey"], {"tagKey": props["tagKey"], **self.answer(props["tagKey"])})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        return dynamic.DiffResult(changes=olds.get("status") != self.ACTIVE or olds.get("tagKey") != news["tagKey"])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        return dynamic.UpdateResult({"tagKey": news["tagKey"], **self.answer(news["tagKey"])})


class TagActivation(dynamic.Resource, module="gpulab", name=TAG_ACTIVATION.rsplit(":", 1)[1]):
    """`tag_key` activated for cost allocation where AWS allows it; `status` and `message` say what AWS answered."""

    status: pulumi.Output[str]
    message: pulumi.Output[str]

    def __init__(self, name: str, tag_key: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(ActivationProvider(), name, {"tagKey": tag_key, "status": None, "message": None}, opts)


# What each status means for the lab budgets and what comes next: the stack output and the summary say the same.
MEANS = {
    ActivationProvider.ACTIVE: (
        f"AWS accepted the activation of {LAB_LABEL}: the lab budgets count each lab's spend from when it applies, up "
        "to 24 hours later"
    ),
    ActivationProvider.PENDING: (
        f"billing has not seen {LAB_LABEL} yet (AWS offers a key up to 24 hours after a lab's first node carries it): "
        "the lab budgets count nothing until it is active; the next `pulumi up` a day after a lab's first node "
        "activates it, and until then every `pulumi up` asks again (the preview shows the activation as an update)"
    ),
    ActivationProvider.REFUSED: (
        "AWS refused this account: a member account of an organization cannot activate cost allocation tags (or the "
        "deployer lacks ce:UpdateCostAllocationTagsStatus: AWS's answer says which); the lab budgets count nothing "
        f"until the management account activates it ({HOW_TO_ACTIVATE}); set gpulab:costAllocationTag: "
        "managementAccount to stop asking"
    ),
    ActivationProvider.UNANSWERED: (
        "AWS did not activate it (its answer says why): the lab budgets count nothing until it is active; the next "
        "`pulumi up` asks again"
    ),
}


def activation_output(activation: TagActivation) -> pulumi.Output[dict[str, Any]]:
    """The stack output `costAllocationTag`: the key, AWS's answer to this `pulumi up` and what it means."""
    return pulumi.Output.all(activation.status, activation.message).apply(
        lambda answer: {"tagKey": LAB_LABEL, "status": answer[0], "awsAnswer": answer[1], "means": MEANS.get(answer[0])}
    )
