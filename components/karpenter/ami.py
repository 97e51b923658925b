"""The SSM parameters Karpenter resolves a lab's AMI alias through, and a preview-time check that they exist.

Karpenter 1.14.1 turns `al2023@<version>` into one SSM parameter per CPU architecture and AMI variant, and picks the
NVIDIA variant for GPU instance types (aws/karpenter-provider-aws v1.14.1, pkg/providers/amifamily/al2023.go,
resolvePath). A version that is not an amazon-eks-ami release has no parameter: the EC2NodeClass never becomes Ready and
the lab never gets a node. Looking the parameters up in the program makes `pulumi preview` fail instead.
"""

import pulumi
import pulumi_aws as aws

from config.model import Lab

# The names amazon-eks-ami and Karpenter give each kubernetes.io/arch value.
_EC2_ARCHITECTURE = {"amd64": "x86_64", "arm64": "arm64"}
_VARIANT = "nvidia"


def ssm_parameters(lab: Lab, kubernetes_version: str) -> dict[str, str]:
    """The SSM parameter of the lab's AMI for each CPU architecture its instance types need, keyed by arch."""
    family, version = lab.ami.split("@")
    assert family == "al2023", "config.model only admits al2023 aliases"
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


def check_ami_release(lab_name: str, lab: Lab, kubernetes_version: str, parent: pulumi.Resource) -> None:
    """Looks up each SSM parameter the lab's nodes need; ends the program with a gpulab message if one is missing."""
    for arch, parameter in ssm_parameters(lab, kubernetes_version).items():
        try:
            aws.ssm.get_parameter(name=parameter, opts=pulumi.InvokeOptions(parent=parent))
        except Exception as error:
            # The provider reports a missing parameter as a failed invoke, and so it does missing permissions or
            # throttling: say both, with the provider's own words.
            raise pulumi.RunError(
                f"gpulab:labs.{lab_name}.ami: no NVIDIA AMI for {arch} nodes of Kubernetes {kubernetes_version} in "
                f"release {lab.ami}: looking up SSM parameter {parameter} failed ({error}). Releases are the tags "
                "of awslabs/amazon-eks-ami; if this one is, check that the preview's credentials may read SSM."
            ) from None
