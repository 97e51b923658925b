"""gpulab:costAllocationTag: activate never fails a `pulumi up`: the activation (components/tag_activation.py) records
what Cost Explorer answered (pending before billing has seen the key, refused in a member account), the lab budgets are
made either way, every later `pulumi up` asks again until AWS accepts, and the stack output and the summary say which.

Cost Explorer is botocore's own client for the pinned `ce` model behind a Stubber: every answer below is checked against
the model's shapes, and a call without a stubbed answer fails instead of reaching AWS. The first `pulumi up` is played
over the resources the program registers under the render's mocks: what each would do against an account."""

import base64
import os
import subprocess
import sys
from collections.abc import Iterator

import boto3
import pytest
from botocore.stub import Stubber
from pulumi.dynamic import Config, ConfigureRequest

from components.tag_activation import HOW_TO_ACTIVATE, MEANS, TAG_ACTIVATION, ActivationProvider
from render import harness
from reports.summary import summary
from tests.conftest import ROOT, run_values
from tests.test_budgets import BUDGET, budgeted

KEY = "gpulab.dev/lab"
UPDATE = "update_cost_allocation_tags_status"
ASKED = {"CostAllocationTagsStatus": [{"TagKey": KEY, "Status": "Active"}]}
# API Reference, UpdateCostAllocationTagsStatus, Example 2: a key billing does not know, answered with HTTP 200.
NOT_SEEN = {
    "Errors": [
        {"TagKey": KEY, "Code": "TagKeysNotFoundException", "Message": f"Failed to update Cost Allocation Tag: {KEY}"}
    ]
}
# A member account's answer (2i2c-org/infrastructure PR #4932, runs-on/runs-on #458), REPORTED.
LINKED = "Failed to update Cost Allocation Tag: Linked account doesn't have access to cost allocation tags."
# terraform-provider-aws #29068: pulumi-aws's CostAllocationTag fails the update for a key billing has not seen.
OLD_TAG = "aws:costexplorer/costAllocationTag:CostAllocationTag"


@pytest.fixture
def cost_explorer() -> Iterator[tuple[object, Stubber]]:
    client = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="eu-west-1").client("ce")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def first_up(run: harness.Run, provider: ActivationProvider) -> tuple[list[str], dict[str, dict]]:
    """A first `pulumi up` of what `run` registered, in an account whose billing has never seen the lab tag: the steps
    that fail, and the state of every activation."""
    failed, activations = [], {}
    for resource in run.resources:
        if resource.type == OLD_TAG:
            failed.append(f"{resource.name}: reading AWS CE (Cost Explorer) Cost Allocation Tags ({KEY}): empty result")
        elif resource.type == TAG_ACTIVATION:
            activations[resource.name] = provider.create(resource.inputs).outs
    return failed, activations


def test_a_first_up_in_a_new_account_is_pending_and_makes_the_budgets(cost_explorer):
    client, stubber = cost_explorer
    stubber.add_response(UPDATE, NOT_SEEN, ASKED)
    run = run_values(budgeted(**{"gpulab:costAllocationTag": "activate"}))
    failed, activations = first_up(run, ActivationProvider(client))
    assert failed == []
    assert activations == {
        "budgets-lab-tag": {
            "tagKey": KEY,
            "status": "pending",
            "message": f"TagKeysNotFoundException: Failed to update Cost Allocation Tag: {KEY}",
        }
    }
    assert sorted(r.name for r in run.of_type(BUDGET)) == ["budgets-advanced", "budgets-intro"]
    # Nothing waits for the activation.
    assert not any(d.startswith(TAG_ACTIVATION) for r in run.resources for d in r.dependencies)


def test_a_later_up_asks_again_and_activates(cost_explorer):
    client, stubber = cost_explorer
    provider = ActivationProvider(client)
    stubber.add_response(UPDATE, NOT_SEEN, ASKED)
    pending = provider.create({"tagKey": KEY}).outs
    # `pulumi preview` and `pulumi up` see a change while it is not active: the next up asks again.
    assert provider.diff(KEY, pending, {"tagKey": KEY}).changes is True
    stubber.add_response(UPDATE, {"Errors": []}, ASKED)
    active = provider.update(KEY, pending, {"tagKey": KEY}).outs
    assert active == {"tagKey": KEY, "status": "active", "message": "AWS accepted the activation"}
    # Then nothing more to do: no call on the ups after that (the Stubber would fail one).
    assert provider.diff(KEY, active, {"tagKey": KEY}).changes is False


def test_a_member_account_is_refused_said_plainly_and_the_up_succeeds(cost_explorer):
    client, stubber = cost_explorer
    stubber.add_client_error(UPDATE, "AccessDeniedException", LINKED, 400, expected_params=ASKED)
    run = run_values(budgeted(**{"gpulab:costAllocationTag": "activate"}))
    failed, activations = first_up(run, ActivationProvider(client))
    assert failed == []
    assert activations["budgets-lab-tag"]["status"] == "refused"
    assert activations["budgets-lab-tag"]["message"] == f"AccessDeniedException: {LINKED}"
    assert "a member account of an organization cannot activate" in MEANS["refused"]
    assert HOW_TO_ACTIVATE in MEANS["refused"]
    assert sorted(r.name for r in run.of_type(BUDGET)) == ["budgets-advanced", "budgets-intro"]


@pytest.mark.parametrize(
    "answer",
    [
        lambda stubber: stubber.add_client_error(UPDATE, "LimitExceededException", "Slow down", 400),
        lambda stubber: stubber.add_response(UPDATE, {"Errors": [{"TagKey": KEY, "Code": "Other", "Message": "no"}]}),
    ],
    ids=["throttled", "another-code"],
)
def test_any_other_answer_is_recorded_and_asked_again_never_raised(cost_explorer, answer):
    client, stubber = cost_explorer
    answer(stubber)
    outs = ActivationProvider(client).create({"tagKey": KEY}).outs
    assert outs["status"] == "unanswered" and outs["message"].split(":")[0] in {"LimitExceededException", "Other"}
    assert ActivationProvider(client).diff(KEY, outs, {"tagKey": KEY}).changes is True


def test_no_credentials_is_a_state_not_a_failed_up(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = boto3.Session(region_name="eu-west-1").client("ce")
    outs = ActivationProvider(client).create({"tagKey": KEY}).outs
    assert outs["status"] == "unanswered" and outs["message"].startswith("NoCredentialsError")


def test_the_activation_runs_with_the_stacks_aws_profile_and_region():
    provider = ActivationProvider()
    config = {"aws:profile": "lab-deployer", "aws:region": "eu-west-1", "gpulab:cluster": "{}"}
    provider.configure(ConfigureRequest(Config(config, "gpulab")))
    assert (provider.profile, provider.region) == ("lab-deployer", "eu-west-1")


def test_the_stack_output_says_the_status_and_what_it_means():
    run = run_values(budgeted(**{"gpulab:costAllocationTag": "activate"}))
    assert set(run.outputs["costAllocationTag"]) == {"tagKey", "status", "awsAnswer", "means"}
    assert run.outputs["costAllocationTag"]["tagKey"] == KEY
    assert "costAllocationTag" not in run_values(budgeted()).outputs


def test_the_summary_of_activate_names_every_answer_and_when_budgets_count():
    lines = summary(run_values(budgeted(**{"gpulab:costAllocationTag": "activate"})))
    text = " ".join(" ".join(lines).split())
    assert "never fails the update for it" in text
    assert "a first `pulumi up` gets pending in a new account and refused in a member account" in text
    for status, means in MEANS.items():
        assert f"{status}: {' '.join(means.split())}" in text
    assert "the next `pulumi up` a day after a lab's first node activates it" in text


def test_the_stored_provider_runs_as_pulumi_runs_it():
    """The state names the provider's class (dill, by reference); Pulumi loads it in a Python of its own started in the
    program's directory. Loaded so, it answers, here from a fake that answers as Example 2 does."""
    from pulumi.dynamic.dynamic import serialize_provider

    stored = serialize_provider(ActivationProvider())
    assert b"components.tag_activation" in base64.b64decode(stored)
    script = (
        "import base64, dill\n"
        f"provider = dill.loads(base64.b64decode({stored!r}))\n"
        "class Fake:\n"
        "    def update_cost_allocation_tags_status(self, **asked):\n"
        f"        return {NOT_SEEN!r}\n"
        "provider.client = Fake()\n"
        f"print(provider.create({{'tagKey': {KEY!r}}}).outs['status'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pending"]
