"""The SSM parameters Karpenter resolves a lab's AMI alias through, and a preview-time check that they exist.

Karpenter 1.14.1 turns `al2023@<version>` into one SSM parameter per CPU architecture and AMI variant, and picks the
NVIDIA variant for GPU instance types (aws/karpenter-provider-aws v1.14.1, pkg/providers/amifamily/al2023.go,
resolvePath). A version that is not an amazon-eks-ami release has no parameter: the EC2NodeClass never becomes Ready and
the lab never gets a node. Looking the parameters up in the program makes `pulumi preview` fail instead.
"""

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from domain.stack.model import Lab

# The names amazon-eks-ami and Karpenter give each kubernetes.io/arch value.
_EC2_ARCHITECTURE = {"amd64": "x86_64", "arm64": "arm64"}
_VARIANT = "nvidia"


def ssm_parameters(lab: Lab, kubernetes_version: str) -> dict[str, str]:
    """The SSM parameter of the lab's AMI for each CPU architecture its instance types need, keyed by arch."""
    family, version = lab.ami.split("@")
    assert family == "al2023", "domain.stack.model only admits al2023 aliases"
    parameters: dict[str, str] = {}
    for arch in lab.architectures:
        ec2_arch = _EC2_ARCHITECTURE[arch]
        name = (
            "recommended"
            if version == "latest"
            else f"amazon-eks-node-al2023-{ec2_arch}-{_VARIANT}-{kubernetes_version}-{version}"
        )
        parameters[arch] = (
            f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/{ec2_arch}/{_VARIANT}/{name}/image_id"
        )
    return parameters


def check_ami_releases(labs: Mapping[str, Lab], kubernetes_version: str) -> pulumi.Output[None]:
    """Looks up each distinct SSM parameter the labs' nodes need, once and without blocking the program.

    The result resolves when every parameter exists, and otherwise fails with one gpulab line per lab and architecture
    whose parameter is missing: a lab's resources that wait for it are then never registered, and the program ends
    with those lines (pulumi.RunError: no traceback). The labs of a stack nearly always share one release, so a stack
    of any size makes one or two look-ups; in a real preview each is an AWS call, and a blocking one would also run
    the event loop over everything registered before it.
    """
    needs = {
        (lab_name, arch): parameter
        for lab_name, lab in labs.items()
        for arch, parameter in ssm_parameters(lab, kubernetes_version).items()
    }
    lookups = {parameter: aws.ssm.get_parameter_output(name=parameter) for parameter in sorted(set(needs.values()))}

    async def found() -> None:
        failed: dict[str, Exception] = {}
        for parameter, lookup in lookups.items():
            try:
                await lookup.future()
            except Exception as error:
                failed[parameter] = error
        problems = [
            # The provider reports a missing parameter as a failed invoke, and so it does missing permissions or
            # throttling: say both, with the provider's own words.
            f"gpulab:labs.{lab_name}.ami: no NVIDIA AMI for {arch} nodes of Kubernetes {kubernetes_version} in release "
            f"{labs[lab_name].ami}: looking up SSM parameter {parameter} failed ({failed[parameter]}). Releases are "
            "the tags of awslabs/amazon-eks-ami; if this one is, check that the preview's credentials may read SSM."
            for (lab_name, arch), parameter in needs.items()
            if parameter in failed
        ]
        if problems:
            raise pulumi.RunError("\n".join(problems))

    return pulumi.Output.from_input(found())
