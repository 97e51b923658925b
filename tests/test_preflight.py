"""`python -m tools.preflight <stack> --aws-answers FILE` (reports/preflight.py) from recorded AWS answers, one test per
thing it catches: what the user reads is a FIX line naming the stack key and what to do. No test calls AWS: boto3 is
made unimportable while they run."""

import json
import sys

import pytest
import yaml

from domain.capacity.system_nodes import SYSTEM_INSTANCE_VCPUS
from domain.cost.prices import SYSTEM_NODE_USD_PER_HOUR
from render import harness
from reports import preflight
from tests.conftest import BASE, stack_values
from tests.support.synthetic import HUB as SYNTHETIC_HUB
from tests.support.synthetic import NOTEBOOK_IMAGE

VPC, (SUBNET_A, SUBNET_B) = BASE["gpulab:cluster"]["vpcId"], BASE["gpulab:cluster"]["privateSubnetIds"]
ON_DEMAND_G = "L-DB2E81BA"
STANDARD = preflight.STANDARD_ON_DEMAND
KUBERNETES, AMI = BASE["gpulab:cluster"]["kubernetesVersion"], BASE["gpulab:labs"]["intro"]["ami"]
# A hub whose sign-in needs no client secret (LTI 1.3), behind a load balancer with its certificate.
LTI = {
    "type": "lti13",
    "clientIds": ["10000000000001"],
    "issuer": "https://canvas.instructure.com",
    "authorizeUrl": "https://sso.canvaslms.com/api/lti/authorize_redirect",
    "jwksEndpoint": "https://sso.canvaslms.com/api/lti/security/jwks",
}
HUB = {**SYNTHETIC_HUB, "auth": LTI, "notebookImage": NOTEBOOK_IMAGE}
CERTIFICATE = HUB["loadBalancer"]["certificateArn"]


def settings_of(values: dict):
    return harness.validated(harness.config_from_stack_file({"config": values})).settings


def _quota(code: str, name: str, value: float) -> dict:
    # The shape of GetServiceQuota's answer (AWS CLI User Guide, Service Quotas examples, for L-1216C47A).
    return {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "QuotaName": name, "Value": value, "Unit": "None"}}


def _subnet(subnet_id: str, zone: str, vpc: str = VPC) -> dict:
    return {"Subnets": [{"SubnetId": subnet_id, "VpcId": vpc, "AvailabilityZone": zone}]}


def answers(values: dict, **changes: dict) -> dict:
    """What AWS answers for a stack whose account is ready: each call's answer by its key, `changes` replacing some."""
    settings = settings_of(values)
    parameters = {
        p: {"Parameter": {"Name": p, "Value": "ami-0123456789abcdef0"}}
        for lab in settings.labs.values()
        for p in preflight.ssm_parameters(lab, settings.cluster.kubernetes_version).values()
    }
    recorded = {
        "sts:GetCallerIdentity": {"": {"Account": "123456789012", "Arn": "arn:aws:iam::123456789012:role/ops"}},
        "servicequotas:GetServiceQuota": {
            code: _quota(code, f"quota {code}", 1024) for code in [*preflight.quota_needs(settings), STANDARD]
        },
        "ec2:DescribeVpcs": {VPC: {"Vpcs": [{"VpcId": VPC}]}},
        "ec2:DescribeVpcAttribute": {
            f"{VPC} enableDnsHostnames": {"EnableDnsHostnames": {"Value": True}},
            f"{VPC} enableDnsSupport": {"EnableDnsSupport": {"Value": True}},
        },
        "ec2:DescribeSubnets": {SUBNET_A: _subnet(SUBNET_A, "eu-west-1a"), SUBNET_B: _subnet(SUBNET_B, "eu-west-1b")},
        "acm:DescribeCertificate": {
            CERTIFICATE: {"Certificate": {"Status": "ISSUED", "DomainName": "*.example.edu"}},
        },
        "ssm:GetParameter": parameters,
    }
    for call, replaced in changes.items():
        recorded[call.replace("_", ":", 1)] = {**recorded[call.replace("_", ":", 1)], **replaced}
    return recorded


@pytest.fixture(autouse=True)
def no_aws(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # an import of boto3 would fail the test


def preflight_of(tmp_path, capsys, values: dict, recorded: dict) -> tuple[int, list[str]]:
    """The exit status and the lines on stdout; stderr is left for the test to read."""
    stack = tmp_path / "Pulumi.lab.yaml"
    stack.write_text(yaml.safe_dump({"config": values}))
    (tmp_path / "answers.json").write_text(json.dumps(recorded))
    status = preflight.main([str(stack), "--aws-answers", str(tmp_path / "answers.json")])
    out, err = capsys.readouterr()
    sys.stderr.write(err)
    return status, out.splitlines()


def fixes(lines: list[str]) -> list[str]:
    return [line.removeprefix("preflight: FIX ") for line in lines if line.startswith("preflight: FIX ")]


def test_a_ready_account_has_nothing_to_fix(tmp_path, capsys):
    values = stack_values(**{"gpulab:jupyterhub": HUB})
    status, lines = preflight_of(tmp_path, capsys, values, answers(values))
    assert status == 0
    assert lines[0] == "preflight: lab in eu-west-1, account 123456789012, as arn:aws:iam::123456789012:role/ops"
    assert lines[-1] == "preflight: nothing to fix"
    assert (
        f'preflight: ok  quota {ON_DEMAND_G} "quota {ON_DEMAND_G}" in eu-west-1: 1024 vCPUs, the labs need at most '
        "16 (intro 16)" in lines
    )
    assert "preflight: ok  gpulab:jupyterhub.loadBalancer.certificateArn: ISSUED, covers hub.example.edu" in lines


QUOTA_NAME = f'quota {ON_DEMAND_G} "Running On-Demand G and VT instances" in eu-west-1'
REQUEST = f"request 16 in Service Quotas (service ec2, quota {ON_DEMAND_G}, region eu-west-1)"


# intro: 4 GPUs of g4dn.xlarge, 4 vCPUs each: 16.
@pytest.mark.parametrize(
    ("vcpus", "fix"),
    [
        (0.0, f"{QUOTA_NAME}: 0 vCPUs: no instance of these types can start; the labs need 16 (intro 16): {REQUEST}"),
        (
            8.0,
            f"{QUOTA_NAME}: 8 vCPUs, less than the 16 the labs can launch (intro 16): {REQUEST}, or lower the labs' "
            "maxGpus",
        ),
    ],
)
def test_a_gpu_quota_below_what_the_labs_launch_says_what_to_request(vcpus, fix, tmp_path, capsys):
    values = stack_values()
    quota = {ON_DEMAND_G: _quota(ON_DEMAND_G, "Running On-Demand G and VT instances", vcpus)}
    status, lines = preflight_of(tmp_path, capsys, values, answers(values, servicequotas_GetServiceQuota=quota))
    assert status == 1
    assert fixes(lines) == [fix]
    assert lines[-1] == "preflight: 1 to fix before `pulumi up` (the FIX lines)"


def test_spot_labs_are_held_to_the_spot_quota(tmp_path, capsys):
    labs = {"intro": {**BASE["gpulab:labs"]["intro"], "capacityTypes": ["spot"]}}
    values = stack_values(**{"gpulab:labs": labs})
    spot = "L-3819A6DF"
    zero = {spot: _quota(spot, "All G and VT Spot Instance Requests", 0.0)}
    _, lines = preflight_of(tmp_path, capsys, values, answers(values, servicequotas_GetServiceQuota=zero))
    assert [line.split(":")[0] for line in fixes(lines)] == [
        f'quota {spot} "All G and VT Spot Instance Requests" in eu-west-1'
    ]


# Two system nodes of at most 4 vCPUs (m7i.xlarge, Karpenter's instance-type reference) in two subnets: while EKS
# updates the group it runs 2 + 2 x 2 = 6 nodes, 24 vCPUs.
SYSTEM_NODES = {"instanceTypes": ["m7i.large", "m7i.xlarge"], "size": 2}
STANDARD_NAME = "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"
SYSTEM_QUOTA = f'quota {STANDARD} "{STANDARD_NAME}" in eu-west-1'
SYSTEM_NEED = (
    "gpulab:cluster.systemNodes: size 2 + 2 per zone of its 2 subnets while EKS updates it = 6 nodes of m7i.xlarge, "
    "4 vCPUs each"
)
SYSTEM_REQUEST = f"request 24 in Service Quotas (service ec2, quota {STANDARD}, region eu-west-1)"


def system_preflight(tmp_path, capsys, answer: dict, system_nodes: dict = SYSTEM_NODES) -> tuple[int, list[str]]:
    values = stack_values(**{"gpulab:cluster": {**BASE["gpulab:cluster"], "systemNodes": system_nodes}})
    return preflight_of(tmp_path, capsys, values, answers(values, servicequotas_GetServiceQuota={STANDARD: answer}))


def test_a_standard_quota_that_holds_the_system_nodes_updating_is_ok(tmp_path, capsys):
    status, lines = system_preflight(tmp_path, capsys, _quota(STANDARD, STANDARD_NAME, 24))
    assert status == 0
    assert f"preflight: ok  {SYSTEM_QUOTA}: 24 vCPUs, the system nodes need at most 24 ({SYSTEM_NEED})" in lines


@pytest.mark.parametrize(
    ("vcpus", "fix"),
    [
        # 0, and AWS's default of 5 (the CLI User Guide's example answer for this quota), hold not even 2 x 4 vCPUs.
        *(
            (
                value,
                f"{SYSTEM_QUOTA}: {value} vCPUs: not even the 2 system nodes can start, nor Karpenter and the hub on "
                f"them; they need 24 ({SYSTEM_NEED}): {SYSTEM_REQUEST}",
            )
            for value in (0, 5)
        ),
        (
            23,
            f"{SYSTEM_QUOTA}: 23 vCPUs, less than the 24 the system nodes need, so an EKS update of them fails "
            f"({SYSTEM_NEED}): {SYSTEM_REQUEST}",
        ),
    ],
)
def test_a_standard_quota_below_the_system_nodes_says_what_to_request(vcpus, fix, tmp_path, capsys):
    status, lines = system_preflight(tmp_path, capsys, _quota(STANDARD, STANDARD_NAME, vcpus))
    assert status == 1
    assert fixes(lines) == [fix]


def test_a_standard_quota_not_read_says_what_the_system_nodes_need(tmp_path, capsys):
    denied = {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}
    status, lines = system_preflight(tmp_path, capsys, denied)
    assert status == 1
    assert fixes(lines) == [
        f"quota {STANDARD} in eu-west-1: not read (AccessDeniedException: not authorized); the system nodes need 24 "
        f"({SYSTEM_NEED})"
    ]


def test_a_system_type_of_unknown_vcpus_is_named_not_guessed(tmp_path, capsys):
    status, lines = system_preflight(
        tmp_path, capsys, _quota(STANDARD, STANDARD_NAME, 1024), {"instanceTypes": ["m7i.large", "r6i.large"]}
    )
    assert status == 1
    assert fixes(lines) == [
        "gpulab:cluster.systemNodes.instanceTypes: gpulab does not know the vCPUs of r6i.large (domain/capacity/"
        f"system_nodes.py), so quota {STANDARD} in eu-west-1 is not checked: it must hold 6 nodes of the type of most "
        "vCPUs; name listed types to have it checked"
    ]


def test_a_vpc_that_is_not_there_is_named_by_its_key(tmp_path, capsys):
    values = stack_values()
    missing = {VPC: {"Error": {"Code": "InvalidVpcID.NotFound", "Message": f"The vpc ID '{VPC}' does not exist"}}}
    status, lines = preflight_of(tmp_path, capsys, values, answers(values, ec2_DescribeVpcs=missing))
    assert status == 1
    assert fixes(lines) == [
        f"gpulab:cluster.vpcId: {VPC} not found in eu-west-1 (InvalidVpcID.NotFound: The vpc ID '{VPC}' does not "
        "exist): name a VPC of eu-west-1"
    ]


def test_dns_hostnames_off_says_the_command_that_turns_it_on(tmp_path, capsys):
    values = stack_values()
    off = {f"{VPC} enableDnsHostnames": {"EnableDnsHostnames": {"Value": False}}}
    _, lines = preflight_of(tmp_path, capsys, values, answers(values, ec2_DescribeVpcAttribute=off))
    assert fixes(lines) == [
        f"gpulab:cluster.vpcId: {VPC} has enableDnsHostnames off (the cluster's private endpoint needs it): aws ec2 "
        "modify-vpc-attribute --enableDnsHostnames"
    ]


def test_a_subnet_of_another_vpc_and_a_missing_one_are_named_by_index(tmp_path, capsys):
    values = stack_values()
    subnets = {
        SUBNET_A: _subnet(SUBNET_A, "eu-west-1a", vpc="vpc-0ffffffffffffffff"),
        SUBNET_B: {
            "Error": {"Code": "InvalidSubnetID.NotFound", "Message": f"The subnet ID '{SUBNET_B}' does not exist"}
        },
    }
    status, lines = preflight_of(tmp_path, capsys, values, answers(values, ec2_DescribeSubnets=subnets))
    assert status == 1
    assert fixes(lines) == [
        f"gpulab:cluster.privateSubnetIds[0]: {SUBNET_A} is in vpc-0ffffffffffffffff, not in {VPC}",
        f"gpulab:cluster.privateSubnetIds[1]: {SUBNET_B} not found in eu-west-1 (InvalidSubnetID.NotFound: The "
        f"subnet ID '{SUBNET_B}' does not exist)",
    ]


def test_subnets_in_one_zone_are_refused(tmp_path, capsys):
    values = stack_values()
    subnets = {SUBNET_B: _subnet(SUBNET_B, "eu-west-1a")}
    _, lines = preflight_of(tmp_path, capsys, values, answers(values, ec2_DescribeSubnets=subnets))
    assert fixes(lines) == [
        "gpulab:cluster.privateSubnetIds: all in eu-west-1a: EKS needs subnets in two availability zones"
    ]


def test_a_certificate_not_issued_or_for_another_host_is_named(tmp_path, capsys):
    values = stack_values(**{"gpulab:jupyterhub": HUB})
    pending = {CERTIFICATE: {"Certificate": {"Status": "PENDING_VALIDATION", "DomainName": "lab.example.com"}}}
    status, lines = preflight_of(tmp_path, capsys, values, answers(values, acm_DescribeCertificate=pending))
    assert status == 1
    key = "gpulab:jupyterhub.loadBalancer.certificateArn"
    assert fixes(lines) == [
        f"{key}: the certificate is PENDING_VALIDATION, not ISSUED: complete its validation in ACM",
        f"{key}: the certificate names lab.example.com, not hub.example.edu",
    ]


def test_an_ami_release_without_its_parameter_is_named_by_the_labs_key(tmp_path, capsys):
    values = stack_values()
    recorded = answers(values)
    (parameter,) = recorded["ssm:GetParameter"]
    recorded["ssm:GetParameter"][parameter] = {"Error": {"Code": "ParameterNotFound", "Message": ""}}
    status, lines = preflight_of(tmp_path, capsys, values, recorded)
    assert status == 1
    assert fixes(lines) == [
        f"gpulab:labs.intro.ami: {AMI} has no amd64 NVIDIA AMI for Kubernetes {KUBERNETES} ({parameter}: "
        "ParameterNotFound): name an amazon-eks-ami release that exists (docs/configuration.md)"
    ]


def test_no_credentials_say_aws_cannot_be_asked(tmp_path, capsys):
    values = stack_values()
    recorded = answers(values)
    refused = {"Error": {"Code": "NoCredentialsError", "Message": "Unable to locate credentials"}}
    recorded["sts:GetCallerIdentity"] = {"": refused}
    status, lines = preflight_of(tmp_path, capsys, values, recorded)
    assert (status, lines) == (1, [])
    assert capsys.readouterr().err == (
        "preflight: AWS cannot be asked: NoCredentialsError: Unable to locate credentials (the checks run with your "
        "AWS credentials: `aws sts get-caller-identity` shows whose)\n"
    )


def test_a_stack_with_problems_fails_as_the_render_does(tmp_path, capsys):
    values = stack_values(**{"gpulab:labs": {"intro": {**BASE["gpulab:labs"]["intro"], "maxGpus": 0}}})
    status, lines = preflight_of(tmp_path, capsys, values, {})
    assert (status, lines) == (2, [])
    assert capsys.readouterr().err.startswith("gpulab:labs.intro.maxGpus: ")


def test_a_lab_needs_the_vcpus_of_its_largest_share_per_gpu_in_each_family():
    labs = {"intro": {**BASE["gpulab:labs"]["intro"], "instanceTypes": ["g4dn.xlarge", "g4dn.2xlarge"], "maxGpus": 4}}
    values = stack_values(**{"gpulab:labs": labs})
    settings = settings_of(values)
    # g4dn.2xlarge: 8 vCPUs for its one GPU, against g4dn.xlarge's 4: at maxGpus 4, up to 32 vCPUs.
    assert preflight.quota_needs(settings) == {ON_DEMAND_G: {"intro": 32}}


def test_every_system_type_gpulab_prices_has_its_quota_checked():
    assert set(SYSTEM_INSTANCE_VCPUS) == set(SYSTEM_NODE_USD_PER_HOUR)
