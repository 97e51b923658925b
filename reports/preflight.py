"""`make preflight STACK=<name>`: what a first `pulumi up` of a stack would run into in its AWS account, checked with
the user's credentials and read-only calls, each problem printed with the stack key it concerns and what to fix.

    python -m tools.preflight <stack name or stack file> [--aws-answers FILE]

The checks, in the stack's region (`aws:region`):
- the EC2 vCPU quotas of the labs' GPU instances (Service Quotas, service `ec2`): each quota against the vCPUs the labs
  that may use it can launch at their `maxGpus` (on-demand and spot apart; a lab that allows both counts against
  both). New accounts often have 0 for G and VT instances. The quota codes are REPORTED (several public repositories
  use them the same way; no AWS page read here lists them): L-DB2E81BA "Running On-Demand G and VT instances",
  L-3819A6DF "All G and VT Spot Instance Requests", L-417A185B "Running On-Demand P instances", L-7212CCBC "All P Spot
  Instance Requests". Each line prints the name AWS returns with the code, so a code that names another quota shows.
- the EC2 vCPU quota of the system node group's instances, L-1216C47A "Running On-Demand Standard (A, C, D, H, I, M,
  R, T, Z) instances" (CONFIRMED: AWS CLI User Guide, Service Quotas examples, docs.aws.amazon.com/cli/latest/
  userguide/cli_service-quotas_code_examples.md, whose example answer gives that name and a default of 5 vCPUs),
  against the most nodes the group runs at once, during an EKS update of it, on its type of most vCPUs
  (domain/capacity/system_nodes.py). The group is the stack's only non-GPU capacity: Karpenter launches GPU nodes only.
- `gpulab:cluster.vpcId`: the VPC exists, with DNS hostnames and DNS support on (the private endpoint needs both);
- `gpulab:cluster.privateSubnetIds`: each subnet exists and is in that VPC, and they span two availability zones;
- `gpulab:jupyterhub.loadBalancer.certificateArn`: the certificate is ISSUED and covers the hub's host;
- each lab's `ami`: the SSM parameters Karpenter resolves the alias through exist (components/karpenter/ami.py names
  them, as `pulumi preview` looks them up).

The calls, all read-only: sts:GetCallerIdentity, servicequotas:GetServiceQuota, ec2:DescribeVpcs,
ec2:DescribeVpcAttribute, ec2:DescribeSubnets, acm:DescribeCertificate, ssm:GetParameter. `--aws-answers FILE` answers
them from a JSON file instead, keyed by call and argument, each answer as AWS returns it or `{"Error": {"Code": ...,
"Message": ...}}`; the tests use it, and boto3 is imported only without it. Exit status 0 when every check passes,
1 when one fails (or AWS cannot be asked), 2 for a stack file with problems.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import domain.stack
from components.karpenter.ami import ssm_parameters
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.system_nodes import SYSTEM_INSTANCE_VCPUS, most_nodes
from render import run
from reports.aws_answers import Aws, AwsError, Boto3, Call, Recorded

NAMESPACE = "gpulab"
# (instance family group, capacity type) -> Service Quotas code of service ec2 (REPORTED, above).
QUOTAS = {
    ("G and VT", "on-demand"): "L-DB2E81BA",
    ("G and VT", "spot"): "L-3819A6DF",
    ("P", "on-demand"): "L-417A185B",
    ("P", "spot"): "L-7212CCBC",
}
# The quota of the system node group's instances (CONFIRMED, above).
STANDARD_ON_DEMAND = "L-1216C47A"
# The certificate status ACM gives a certificate it can serve (ACM API reference, CertificateDetail.Status).
ISSUED = "ISSUED"


# Each call: (boto3 client, its method, the parameters from the call's key).
CALLS: dict[str, Call] = {
    "sts:GetCallerIdentity": ("sts", "get_caller_identity", lambda key: {}),
    "servicequotas:GetServiceQuota": (
        "service-quotas",
        "get_service_quota",
        lambda key: {"ServiceCode": "ec2", "QuotaCode": key},
    ),
    "ec2:DescribeVpcs": ("ec2", "describe_vpcs", lambda key: {"VpcIds": [key]}),
    "ec2:DescribeVpcAttribute": (
        "ec2",
        "describe_vpc_attribute",
        lambda key: dict(zip(("VpcId", "Attribute"), key.split(" "), strict=True)),
    ),
    "ec2:DescribeSubnets": ("ec2", "describe_subnets", lambda key: {"SubnetIds": [key]}),
    "acm:DescribeCertificate": ("acm", "describe_certificate", lambda key: {"CertificateArn": key}),
    "ssm:GetParameter": ("ssm", "get_parameter", lambda key: {"Name": key}),
}


@dataclass(frozen=True)
class Finding:
    ok: bool
    text: str

    def line(self) -> str:
        return f"preflight: {'ok ' if self.ok else 'FIX'} {self.text}"


def _family(instance_type: str) -> str:
    return "P" if instance_type.startswith("p") else "G and VT"


def quota_needs(settings: domain.stack.Settings) -> dict[str, dict[str, int]]:
    """Per quota code, the vCPUs each lab that may use it can launch at its maxGpus: the lab's GPUs times the most
    vCPUs per GPU among its instance types of that family."""
    needs: dict[str, dict[str, int]] = {}
    for name, lab in settings.labs.items():
        for capacity in lab.capacity_types:
            for family in sorted({_family(t) for t in lab.instance_types}):
                if (code := QUOTAS.get((family, capacity))) is None:  # reserved capacity has no such quota
                    continue
                types = [GPU_INSTANCE_TYPES[t] for t in lab.instance_types if _family(t) == family]
                per_gpu = max(t.vcpus // t.gpus for t in types)
                needs.setdefault(code, {})[name] = lab.max_gpus * per_gpu
    return needs


def _quota(code: str, region: str, aws: Aws) -> tuple[int, str]:
    """The quota's value in vCPUs, and how a finding names it: with the name AWS returns, so a code that names another
    quota shows."""
    quota = aws.call("servicequotas:GetServiceQuota", code)["Quota"]
    value = int(quota["Value"])
    return value, f'quota {code} "{quota.get("QuotaName", "?")}" in {region}: {value} vCPUs'


def _quotas(settings: domain.stack.Settings, region: str, aws: Aws) -> Iterator[Finding]:
    for code, labs in sorted(quota_needs(settings).items()):
        need = sum(labs.values())
        each = ", ".join(f"{name} {vcpus}" for name, vcpus in sorted(labs.items()))
        try:
            value, what = _quota(code, region, aws)
        except AwsError as error:
            yield Finding(False, f"quota {code} in {region}: not read ({error}); the labs need {need} vCPUs ({each})")
            continue
        if value >= need:
            yield Finding(True, f"{what}, the labs need at most {need} ({each})")
        elif value == 0:
            yield Finding(
                False,
                f"{what}: no instance of these types can start; the labs need {need} ({each}): request {need} in "
                f"Service Quotas (service ec2, quota {code}, region {region})",
            )
        else:
            yield Finding(
                False,
                f"{what}, less than the {need} the labs can launch ({each}): request {need} in Service Quotas "
                f"(service ec2, quota {code}, region {region}), or lower the labs' maxGpus",
            )


def _system_quota(cluster: Any, region: str, aws: Aws) -> Iterator[Finding]:
    system, code, key = cluster.system_nodes, STANDARD_ON_DEMAND, f"{NAMESPACE}:cluster.systemNodes"
    # The group's subnets are in at most one zone each, and an update launches up to two nodes per zone.
    zones = len(cluster.private_subnet_ids)
    nodes = most_nodes(system.size, zones)
    if unknown := [t for t in system.instance_types if t not in SYSTEM_INSTANCE_VCPUS]:
        yield Finding(
            False,
            f"{key}.instanceTypes: gpulab does not know the vCPUs of {', '.join(unknown)} (domain/capacity/"
            f"system_nodes.py), so quota {code} in {region} is not checked: it must hold {nodes} nodes of the type of "
            "most vCPUs; name listed types to have it checked",
        )
        return
    largest = max(system.instance_types, key=SYSTEM_INSTANCE_VCPUS.__getitem__)
    vcpus = SYSTEM_INSTANCE_VCPUS[largest]
    need = nodes * vcpus
    each = (
        f"{key}: size {system.size} + 2 per zone of its {zones} subnets while EKS updates it = {nodes} nodes of "
        f"{largest}, {vcpus} vCPUs each"
    )
    try:
        value, what = _quota(code, region, aws)
    except AwsError as error:
        yield Finding(False, f"quota {code} in {region}: not read ({error}); the system nodes need {need} ({each})")
        return
    request = f"request {need} in Service Quotas (service ec2, quota {code}, region {region})"
    if value >= need:
        yield Finding(True, f"{what}, the system nodes need at most {need} ({each})")
    elif value < system.size * vcpus:
        yield Finding(
            False,
            f"{what}: not even the {system.size} system nodes can start, nor Karpenter and the hub on them; they need "
            f"{need} ({each}): {request}",
        )
    else:
        yield Finding(
            False,
            f"{what}, less than the {need} the system nodes need, so an EKS update of them fails ({each}): {request}",
        )


def _network(cluster: Any, region: str, aws: Aws) -> Iterator[Finding]:
    key = f"{NAMESPACE}:cluster"
    try:
        aws.call("ec2:DescribeVpcs", cluster.vpc_id)
    except AwsError as error:
        yield Finding(False, f"{key}.vpcId: {cluster.vpc_id} not found in {region} ({error}): name a VPC of {region}")
        return
    for attribute in ("enableDnsHostnames", "enableDnsSupport"):
        try:
            answer = aws.call("ec2:DescribeVpcAttribute", f"{cluster.vpc_id} {attribute}")
        except AwsError as error:
            yield Finding(False, f"{key}.vpcId: {attribute} of {cluster.vpc_id} not read ({error})")
            continue
        on = answer[attribute[0].upper() + attribute[1:]]["Value"]
        yield Finding(
            on,
            f"{key}.vpcId: {cluster.vpc_id} has {attribute} {'on' if on else 'off'}"
            + ("" if on else f" (the cluster's private endpoint needs it): aws ec2 modify-vpc-attribute --{attribute}"),
        )
    zones = set()
    for i, subnet_id in enumerate(cluster.private_subnet_ids):
        where = f"{key}.privateSubnetIds[{i}]"
        try:
            (subnet,) = aws.call("ec2:DescribeSubnets", subnet_id)["Subnets"]
        except AwsError as error:
            yield Finding(False, f"{where}: {subnet_id} not found in {region} ({error})")
            continue
        if subnet["VpcId"] != cluster.vpc_id:
            yield Finding(False, f"{where}: {subnet_id} is in {subnet['VpcId']}, not in {cluster.vpc_id}")
            continue
        zones.add(subnet["AvailabilityZone"])
        yield Finding(True, f"{where}: {subnet_id} in {cluster.vpc_id}, {subnet['AvailabilityZone']}")
    if len(zones) == 1:
        (zone,) = zones
        yield Finding(False, f"{key}.privateSubnetIds: all in {zone}: EKS needs subnets in two availability zones")


def _covers(name: str, host: str) -> bool:
    """Whether a certificate name covers the host: the same name, or a wildcard over one label."""
    if name.startswith("*."):
        return host.split(".", 1)[-1] == name[2:] and "." in host
    return name == host


def _certificate(hub: Any, aws: Aws) -> Iterator[Finding]:
    load_balancer = hub.load_balancer if hub else None
    if load_balancer is None:
        return
    key, arn = f"{NAMESPACE}:jupyterhub.loadBalancer.certificateArn", load_balancer.certificate_arn
    try:
        certificate = aws.call("acm:DescribeCertificate", arn)["Certificate"]
    except AwsError as error:
        yield Finding(False, f"{key}: {arn} not found ({error})")
        return
    status = certificate["Status"]
    if status != ISSUED:
        yield Finding(False, f"{key}: the certificate is {status}, not {ISSUED}: complete its validation in ACM")
    names = [certificate.get("DomainName", ""), *certificate.get("SubjectAlternativeNames", [])]
    if not any(_covers(name, hub.host) for name in names):
        yield Finding(False, f"{key}: the certificate names {', '.join(sorted(set(names)))}, not {hub.host}")
    elif status == ISSUED:
        yield Finding(True, f"{key}: {ISSUED}, covers {hub.host}")


def _amis(settings: domain.stack.Settings, aws: Aws) -> Iterator[Finding]:
    version = settings.cluster.kubernetes_version
    for name, lab in settings.labs.items():
        for arch, parameter in ssm_parameters(lab, version).items():
            key = f"{NAMESPACE}:labs.{name}.ami"
            try:
                aws.call("ssm:GetParameter", parameter)
            except AwsError as error:
                yield Finding(
                    False,
                    f"{key}: {lab.ami} has no {arch} NVIDIA AMI for Kubernetes {version} ({parameter}: {error.code}): "
                    "name an amazon-eks-ami release that exists (docs/configuration.md)",
                )
            else:
                yield Finding(True, f"{key}: {lab.ami} ({arch}) exists for Kubernetes {version}")


def checks(stack: domain.stack.StackConfig, aws: Aws) -> list[Finding]:
    settings = stack.settings
    return [
        *_quotas(settings, stack.region, aws),
        *_system_quota(settings.cluster, stack.region, aws),
        *_network(settings.cluster, stack.region, aws),
        *_certificate(settings.jupyterhub, aws),
        *_amis(settings, aws),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.preflight", description=__doc__.split("\n\n")[0])
    run.add_stack_argument(parser)
    parser.add_argument("--aws-answers", type=Path, help="answer the AWS calls from this JSON file (the tests do)")
    args = parser.parse_args(argv)
    try:
        name, stack = run.checked_stack(args.stack)
    except domain.stack.ConfigError as error:
        print("\n".join(error.lines), file=sys.stderr)
        return 2
    try:
        aws: Aws = (
            Recorded(json.loads(args.aws_answers.read_text()), str(args.aws_answers))
            if args.aws_answers
            else Boto3(stack.region, CALLS)
        )
        identity = aws.call("sts:GetCallerIdentity", "")
        print(f"preflight: {name} in {stack.region}, account {identity['Account']}, as {identity['Arn']}")
        found = checks(stack, aws)
    except AwsError as error:
        hint = "the checks run with your AWS credentials: `aws sts get-caller-identity` shows whose"
        print(f"preflight: AWS cannot be asked: {error} ({hint})", file=sys.stderr)
        return 1
    for finding in found:
        print(finding.line())
    if failed := [f for f in found if not f.ok]:
        print(f"preflight: {len(failed)} to fix before `pulumi up` (the FIX lines)")
        return 1
    print("preflight: nothing to fix")
    return 0


if __name__ == "__main__":
    sys.exit(main())
