"""The deployer's IAM policy (reports/deployer_policy.py, docs/deploying.md) is derived from what the program registers:
every resource type and look-up of every stack the tests build, the optional parts included, has its row of IAM
actions, no row is for something the program never registers, and the page shows the policy the table makes."""

import json
import re

import pytest

from reports import deployer_policy
from tests.conftest import BASE, ROOT, run_values, stack_values
from tests.support.rendered import STACKS, rendered
from tests.support.synthetic import lab
from tests.test_budgets import budgeted
from tests.test_live_prices import live, market  # noqa: F401 (the fixture answers the Price List look-ups)

DOC = ROOT / "docs" / "deploying.md"


@pytest.fixture(scope="module")
def registered() -> set[str]:
    """What the program registers for every stack of the chart tests and for a stack with budgets, the cost allocation
    tag and an admin role."""
    cluster = {**BASE["gpulab:cluster"], "adminRoleArns": ["arn:aws:iam::123456789012:role/operators"]}
    runs = [rendered(stack).run for stack in STACKS]
    runs.append(run_values(budgeted(**{"gpulab:costAllocationTag": "activate", "gpulab:cluster": cluster})))
    return deployer_policy.tokens(runs)


def test_every_type_and_look_up_the_program_registers_has_its_actions(registered, market):  # noqa: F811
    # And a stack priced as `pulumi preview` prices it, spot too.
    spot = stack_values(**{"gpulab:labs": {"vision": lab(["g5.xlarge"], 2, capacityTypes=["spot", "on-demand"])}})
    previewed = deployer_policy.tokens([live(spot)])
    assert set(deployer_policy.PREVIEW_LOOKUPS) <= previewed
    assert deployer_policy.unmapped(registered | previewed) == []
    # And no row for something the program never registers: a row is a permission the deployer is asked to grant.
    needed = {t for t in registered | previewed if deployer_policy.needs_aws(t)}
    assert set(deployer_policy.PERMISSIONS) == needed


def test_a_type_without_a_row_is_refused_by_name():
    with pytest.raises(KeyError, match=r"no IAM actions for aws:s3/bucket:Bucket: add a row to reports/deployer_pol"):
        deployer_policy.policy({"aws:eks/addon:Addon", "aws:s3/bucket:Bucket"})


def test_kubernetes_objects_and_components_need_no_aws_action():
    found = {"kubernetes:core/v1:Namespace", "gpulab:eks:Cluster", "pulumi:providers:kubernetes", "aws:ec2/tag:Tag"}
    (statement,) = deployer_policy.policy(found)["Statement"]
    assert statement["Action"] == ["ec2:CreateTags", "ec2:DeleteTags", "ec2:DescribeTags"]


def test_deploying_md_shows_the_policy_of_every_row():
    text = DOC.read_text()
    section = text[text.index("### The deployer's IAM policy") :]
    (block,) = re.findall(r"```json\n(.*?)\n```", section.split("\n## ", 1)[0], re.S)
    assert json.loads(block) == deployer_policy.policy(deployer_policy.PERMISSIONS)


def test_a_stacks_policy_is_its_own_types_and_the_preview_look_ups(tmp_path, capsys):
    path = tmp_path / "Pulumi.base.yaml"
    path.write_text(json.dumps({"config": stack_values()}))
    assert deployer_policy.main([str(path)]) == 0
    (statement,) = json.loads(capsys.readouterr().out)["Statement"]
    actions = set(statement["Action"])
    assert {"eks:CreateCluster", "iam:PassRole", "ssm:GetParameter", "pricing:GetProducts"} <= actions
    # The base stack has no budget, so none of the budget actions.
    assert not {a for a in actions if a.startswith(("budgets:", "ce:"))}
    assert actions < set(deployer_policy.policy(deployer_policy.PERMISSIONS)["Statement"][0]["Action"])
