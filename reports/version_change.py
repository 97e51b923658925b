"""Whether a change moves the stack's Kubernetes version further than EKS moves a cluster, against the base branch's
render: the pull request's preview fails on it (reports/preview_comment.py), with the reason and the way there.

`pulumi up` changes a cluster's version in place, with one UpdateClusterVersion call (docs/upgrading.md says which
upstream code makes it so), and EKS takes only two kinds of change there:
- up one minor version: "Control plane version upgrades must be done for one minor version at a time" and "Upgrades of
  more than one Kubernetes version are not supported" (AWS, "Upgrade a cluster" in the eksctl guide,
  https://docs.aws.amazon.com/eks/latest/eksctl/cluster-upgrade.html; CONFIRMED in the stored page);
- never down: "Downgrades are not supported by EKS" (pulumi-aws 7.51.1, the `version` input of aws.eks.Cluster,
  pulumi_aws/eks/cluster.py). The one way back is an EKS version rollback to the previous minor version within 7 days
  of an in-place upgrade (https://docs.aws.amazon.com/eks/latest/userguide/rollback-cluster.html and
  https://docs.aws.amazon.com/eks/latest/best-practices/rollback-cluster-upgrades.html; CONFIRMED in the stored
  pages), started with `aws eks update-cluster-version`'s rollback option, outside Pulumi: whether pulumi-aws's
  UpdateClusterVersion call with a lower version would start one is not confirmed.
"""

import json
from pathlib import Path

# The render's record of the cluster: pulumi-eks's component, whose `version` goes unchanged to the aws.eks.Cluster it
# creates (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts, `version: args.version`).
CLUSTER_TYPE = "eks:index:Cluster"
RESOURCES = "resources.json"  # render/run.py writes it beside outputs.json
KEY = "gpulab:cluster.kubernetesVersion"
GUIDE = "docs/upgrading.md"
ONE_AT_A_TIME = "https://docs.aws.amazon.com/eks/latest/eksctl/cluster-upgrade.html"
ROLLBACK = "https://docs.aws.amazon.com/eks/latest/userguide/rollback-cluster.html"


def rendered_version(render_dir: Path) -> str | None:
    """The Kubernetes version a render's cluster asks for; None for no render (a stack the base branch has not, or
    could not render) or a render without one."""
    path = render_dir / RESOURCES
    if not path.is_file():
        return None
    clusters = [r for r in json.loads(path.read_text()) if r["type"] == CLUSTER_TYPE]
    return clusters[0]["inputs"].get("version") if clusters else None


def minor(version: str) -> int:
    """The minor version of a stack's Kubernetes version, 1.<minor> (domain/stack/fields.py KubernetesVersion)."""
    return int(version.split(".")[1])


def refusal(base: str | None, head: str | None) -> str | None:
    """Why EKS would refuse to move the cluster from the base's version to the head's; None when it would not, or
    when either side has no version (a new stack)."""
    if base is None or head is None or minor(head) - minor(base) in (0, 1):
        return None
    if minor(head) < minor(base):
        return (
            f"{KEY}: this change moves the cluster back from Kubernetes {base} to {head}, which `pulumi up` would ask "
            'of EKS as a version update, and EKS does not downgrade a cluster ("Downgrades are not supported by EKS", '
            "pulumi-aws's aws.eks.Cluster version). The one way back is an EKS version rollback to the previous minor "
            f"version within 7 days of the upgrade, an EKS operation made outside Pulumi ({ROLLBACK}); {GUIDE} says "
            "how the stack follows one."
        )
    return (
        f"{KEY}: this change moves the cluster from Kubernetes {base} to {head} at once, and EKS upgrades a control "
        f'plane one minor version at a time ("Upgrades of more than one Kubernetes version are not supported", '
        f"{ONE_AT_A_TIME}). Move it to 1.{minor(base) + 1} in this change, and on to {head} one minor version per "
        f"change once each is applied ({GUIDE})."
    )
