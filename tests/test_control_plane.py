"""The control plane's hardening keys: who reaches the API, log retention, the secrets key's alias, deletion protection
and the upgrade policy; what a stack file may say, and what reaches pulumi-eks and AWS.
"""

import inspect
import re

import pulumi_aws
import pytest

from components.control_plane import log_group_name, secrets_key_alias
from domain.stack.endpoint import MAX_PUBLIC_ACCESS_CIDRS
from domain.stack.log_retention import LOG_RETENTION_DAYS
from reports.summary import summary
from tests.conftest import run_values
from tests.support import tables
from tests.test_config import parsed, problems, with_cluster

EKS = "eks:index:Cluster"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"

# --- what a stack file may say -----------------------------------------------------------------------------------


def test_defaults_open_api_to_ci_keep_logs_a_year_std_support():
    cluster = parsed(with_cluster()).settings.cluster
    assert cluster.public_access_cidrs == ["0.0.0.0/0"]
    assert cluster.private_endpoint is True
    assert cluster.log_retention_days == 365
    assert cluster.deletion_protection is False
    assert cluster.support_type == "STANDARD"


@pytest.mark.parametrize(
    "cidrs",
    [["0.0.0.0/0"], ["1.2.3.4/32", "52.0.0.0/8"], [f"1.2.{i}.0/24" for i in range(MAX_PUBLIC_ACCESS_CIDRS)], []],
    ids=["everywhere", "two-blocks", "the-eks-quota", "no-public-endpoint"],
)
def test_public_access_cidrs_eks_accepts_are_valid(cidrs):
    assert parsed(with_cluster(publicAccessCidrs=cidrs)).settings.cluster.public_access_cidrs == cidrs


def test_retentions_are_the_pinned_providers_but_never_expire():
    source = inspect.getsource(pulumi_aws.cloudwatch.LogGroupArgs.__init__)
    documented = re.search(r"retention_in_days: .*?Possible values are: ([0-9, and]+)\.", source, re.S)
    assert documented, "pulumi-aws no longer documents the retention values where this test looks"
    assert {int(days) for days in re.findall(r"[0-9]+", documented.group(1))} == {*LOG_RETENTION_DAYS, 0}


@pytest.mark.parametrize("days", LOG_RETENTION_DAYS)
def test_every_retention_cloudwatch_accepts_is_valid(days):
    assert parsed(with_cluster(logRetentionDays=days)).settings.cluster.log_retention_days == days


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"publicAccessCidrs": ["10.0.0.0/8"]},
            "gpulab:cluster.publicAccessCidrs[0]: 10.0.0.0/8 lies in the reserved range 10.0.0.0/8: no request "
            "reaches the public endpoint from there",
        ),
        (
            {"publicAccessCidrs": ["1.2.3.4/32", "100.64.8.0/24"]},
            "gpulab:cluster.publicAccessCidrs[1]: 100.64.8.0/24 lies in the reserved range 100.64.0.0/10",
        ),
        (
            {"publicAccessCidrs": ["1.2.3.4/24"]},
            "gpulab:cluster.publicAccessCidrs[0]: must be written as its network address, 1.2.3.0/24, got '1.2.3.4/24'",
        ),
        (
            {"publicAccessCidrs": ["1.2.3.4"]},
            "gpulab:cluster.publicAccessCidrs[0]: must be an IPv4 CIDR block (address/prefix length) such as "
            "1.2.3.4/32, got '1.2.3.4'",
        ),
        ({"publicAccessCidrs": ["1.2.3.0/33"]}, "gpulab:cluster.publicAccessCidrs[0]: must be an IPv4 CIDR block"),
        ({"publicAccessCidrs": ["256.2.3.0/24"]}, "gpulab:cluster.publicAccessCidrs[0]: must be an IPv4 CIDR block"),
        (
            {"publicAccessCidrs": ["2600:1f00::/24"]},
            "gpulab:cluster.publicAccessCidrs[0]: must be an IPv4 block; the cluster is IPv4",
        ),
        (
            {"publicAccessCidrs": ["1.2.3.4/32", "1.2.3.4/32"]},
            "gpulab:cluster.publicAccessCidrs: must not repeat 1.2.3.4/32",
        ),
        (
            {"publicAccessCidrs": [f"1.2.{i}.0/24" for i in range(MAX_PUBLIC_ACCESS_CIDRS + 1)]},
            "gpulab:cluster.publicAccessCidrs: at most 40 blocks (an EKS quota that cannot be raised), got 41",
        ),
        ({"publicAccessCidrs": "0.0.0.0/0"}, "gpulab:cluster.publicAccessCidrs: must be a list, got '0.0.0.0/0'"),
        (
            {"publicAccessCidrs": [], "privateEndpoint": False},
            "gpulab:cluster.privateEndpoint: must be true when publicAccessCidrs is [] (no public endpoint): "
            "otherwise nothing, not even the cluster's own nodes, can reach the Kubernetes API",
        ),
        ({"privateEndpoint": "yes"}, "gpulab:cluster.privateEndpoint: must be true or false, got 'yes'"),
        (
            {"logRetentionDays": 100},
            "gpulab:cluster.logRetentionDays: must be a retention CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, "
            "90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653), got 100; the nearest "
            "are 90 or 120",
        ),
        ({"logRetentionDays": 0}, "gpulab:cluster.logRetentionDays: must be a retention CloudWatch Logs accepts"),
        ({"logRetentionDays": 4000}, "gpulab:cluster.logRetentionDays: must be a retention"),
        ({"logRetentionDays": "365"}, "gpulab:cluster.logRetentionDays: must be a whole number, got '365'"),
        ({"deletionProtection": "on"}, "gpulab:cluster.deletionProtection: must be true or false, got 'on'"),
        (
            {"supportType": "standard"},
            "gpulab:cluster.supportType: must be one of 'STANDARD' or 'EXTENDED', got 'standard'",
        ),
    ],
)
def test_a_bad_hardening_key_is_reported_on_one_line_naming_it(changes, expected):
    lines = problems(with_cluster(**changes))
    assert [line for line in lines if line.startswith(expected)], lines


def test_a_retention_off_the_list_names_the_nearest_allowed():
    assert problems(with_cluster(logRetentionDays=0))[0].endswith("got 0; the nearest is 1")
    assert problems(with_cluster(logRetentionDays=4000))[0].endswith("got 4000; the nearest is 3653")


# --- names AWS must accept ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cluster_name", ["a", "learninglab-prod", "a" * 80])
def test_secrets_key_alias_is_valid_for_any_valid_cluster_name(cluster_name):
    assert parsed(with_cluster(name=cluster_name)).settings.cluster.name == cluster_name
    alias = secrets_key_alias(cluster_name)
    # AWS KMS: 1-256 characters of letters, digits, '/', '_' and '-', starting alias/, never alias/aws/.
    assert re.fullmatch(r"alias/[A-Za-z0-9/_-]+", alias) and len(alias) <= 256
    assert not alias.startswith("alias/aws/")
    assert cluster_name in alias


def test_control_plane_log_group_is_the_one_eks_writes_to():
    assert log_group_name("learninglab-prod") == "/aws/eks/learninglab-prod/cluster"


# --- what reaches pulumi-eks and AWS ------------------------------------------------------------------------------


def test_the_log_group_precedes_the_cluster_with_its_retention(base_run):
    group = base_run.one(LOG_GROUP, "cluster-control-plane-logs")
    assert group.inputs == {"name": "/aws/eks/lab-test/cluster", "retentionInDays": 365}
    eks = base_run.one(EKS, "cluster-eks")
    assert eks.inputs["enabledClusterLogTypes"]
    assert f"{LOG_GROUP}::cluster-control-plane-logs" in eks.dependencies


def test_log_retention_reaches_the_log_group():
    run = run_values(with_cluster(logRetentionDays=30))
    assert run.one(LOG_GROUP, "cluster-control-plane-logs").inputs["retentionInDays"] == 30


def test_secrets_key_has_an_alias_named_after_the_cluster(base_run):
    alias = base_run.one("aws:kms/alias:Alias", "cluster-secrets").inputs
    assert alias["name"] == "alias/lab-test-eks-secrets"
    # The alias points at the key whose ARN encrypts the cluster's secrets.
    assert base_run.one(EKS, "cluster-eks").inputs["encryptionConfigKeyArn"].endswith(f":key/{alias['targetKeyId']}")


def test_default_endpoint_is_public_private_settings_explicit(base_run):
    eks = base_run.one(EKS, "cluster-eks").inputs
    assert (eks["endpointPublicAccess"], eks["publicAccessCidrs"], eks["endpointPrivateAccess"]) == (
        True,
        ["0.0.0.0/0"],
        True,
    )
    assert eks["deletionProtection"] is False
    assert eks["upgradePolicy"] == {"supportType": "STANDARD"}


def test_a_restricted_endpoint_passes_exactly_its_blocks():
    eks = run_values(with_cluster(publicAccessCidrs=["1.2.3.4/32", "52.0.0.0/8"])).one(EKS, "cluster-eks").inputs
    assert (eks["endpointPublicAccess"], eks["publicAccessCidrs"]) == (True, ["1.2.3.4/32", "52.0.0.0/8"])


def test_a_private_endpoint_turns_public_off_sends_no_blocks():
    # pulumi-eks refuses publicAccessCidrs when endpointPublicAccess is false.
    eks = run_values(with_cluster(publicAccessCidrs=[])).one(EKS, "cluster-eks").inputs
    assert (eks["endpointPublicAccess"], eks["endpointPrivateAccess"]) == (False, True)
    assert "publicAccessCidrs" not in eks


def test_deletion_protection_and_support_reach_the_cluster():
    eks = run_values(with_cluster(deletionProtection=True, supportType="EXTENDED")).one(EKS, "cluster-eks").inputs
    assert eks["deletionProtection"] is True
    assert eks["upgradePolicy"] == {"supportType": "EXTENDED"}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {},
            ("public to 0.0.0.0/0 and private in the VPC", "kept 365 days", "off", "STANDARD"),
        ),
        (
            {"publicAccessCidrs": [], "logRetentionDays": 90, "deletionProtection": True, "supportType": "EXTENDED"},
            ("private in the VPC", "kept 90 days", "on", "EXTENDED"),
        ),
        (
            {"publicAccessCidrs": ["1.2.3.4/32", "52.0.0.0/8"], "privateEndpoint": False},
            ("public to 1.2.3.4/32, 52.0.0.0/8", "kept 365 days", "off", "STANDARD"),
        ),
    ],
    ids=["defaults", "private-only", "public-only"],
)
def test_summary_says_who_reaches_the_api_and_how_it_is_kept(changes, expected):
    rows = tables.cluster(summary(run_values(with_cluster(**changes))))
    assert tuple(rows[label] for label in ("API endpoint", "control plane logs", "deletion protection", "support")) == (
        expected
    )
