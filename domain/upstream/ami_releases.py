"""The amazon-eks-ami releases gpulab knows, and for which Kubernetes versions and CPU architectures each has an AL2023
NVIDIA AMI: the alias al2023@<release> of a GPU lab resolves to one of them (components/karpenter/ami.py).

From the release notes in awslabs/amazon-eks-ami's CHANGELOG.md at tag v20260724 (commit 81fec2e8), whose newest
entry is v20260714 (a release's notes come with the next tag): each "AMI Release <tag>" section lists its AMI names,
amazon-eks-node-al2023-<arch>-nvidia-<k8s>-<tag>, and each tag here is a git tag of the repository. Some tags have no
notes (v20260707, v20260709 and v20260724 among them), and a release that is not here is not refused, as amazon-eks-ami
publishes one every week or two: the render warns about it, and `pulumi preview` looks its SSM parameters up
(components/karpenter/ami.py), which fails if AWS has no such AMI.

Releases after v20260724 are newer than the git snapshot fetched here, so no CHANGELOG entry lists their AMIs. Their
GitHub release pages (github.com/awslabs/amazon-eks-ami/releases/tag/<tag>, stored copies read only to their opening)
have a table of the source AMI of each AMI type per range of Kubernetes versions, whose AL2023_x86_64_NVIDIA and
AL2023_ARM_64_NVIDIA rows say that NVIDIA AMIs were built for those ranges, and then the AMI names of the newest
version. That is weaker than a CHANGELOG entry, gpulab's standard that a release has an NVIDIA AMI for a version: such
a release is known (_FROM_RELEASE_PAGES), but the render warns that `pulumi preview` is what confirms its AMI, and no
such release is the default (default_release).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

# Release tag: the Kubernetes minor versions of its x86_64 (amd64) and of its arm64 NVIDIA AMIs, first to last (every
# minor version between them has one); None where the release has no arm64 NVIDIA AMI (before v20250403).
_RELEASES: dict[str, tuple[str, str | None]] = {
    "v20260714": ("1.30-1.36", "1.30-1.36"),
    "v20260625": ("1.30-1.36", "1.30-1.36"),
    "v20260618": ("1.30-1.36", "1.30-1.36"),
    "v20260610": ("1.30-1.36", "1.30-1.36"),
    "v20260505": ("1.30-1.35", "1.30-1.35"),
    "v20260423": ("1.30-1.35", "1.30-1.35"),
    "v20260415": ("1.30-1.35", "1.30-1.35"),
    "v20260409": ("1.30-1.35", "1.30-1.35"),
    "v20260403": ("1.30-1.35", "1.30-1.35"),
    "v20260318": ("1.29-1.35", "1.29-1.35"),
    "v20260304": ("1.29-1.35", "1.29-1.35"),
    "v20260224": ("1.29-1.35", "1.29-1.35"),
    "v20260209": ("1.29-1.35", "1.29-1.35"),
    "v20260129": ("1.29-1.35", "1.29-1.35"),
    "v20260120": ("1.29-1.35", "1.29-1.35"),
    "v20260116": ("1.29-1.35", "1.29-1.35"),
    "v20260114": ("1.29-1.35", "1.29-1.35"),
    "v20260107": ("1.29-1.34", "1.29-1.34"),
    "v20251217": ("1.29-1.34", "1.29-1.34"),
    "v20251209": ("1.29-1.34", "1.29-1.34"),
    "v20251120": ("1.29-1.34", "1.29-1.34"),
    "v20251112": ("1.28-1.34", "1.28-1.34"),
    "v20251108": ("1.28-1.34", "1.28-1.34"),
    "v20251029": ("1.28-1.34", "1.28-1.34"),
    "v20251023": ("1.28-1.34", "1.28-1.34"),
    "v20251016": ("1.28-1.34", "1.28-1.34"),
    "v20251007": ("1.28-1.34", "1.28-1.34"),
    "v20251002": ("1.28-1.34", "1.28-1.34"),
    "v20250920": ("1.28-1.34", "1.28-1.34"),
    "v20250915": ("1.28-1.34", "1.28-1.34"),
    "v20250904": ("1.28-1.33", "1.28-1.33"),
    "v20250829": ("1.28-1.33", "1.28-1.33"),
    "v20250821": ("1.28-1.33", "1.28-1.33"),
    "v20250819": ("1.28-1.33", "1.28-1.33"),
    "v20250813": ("1.28-1.33", "1.28-1.33"),
    "v20250807": ("1.28-1.33", "1.28-1.33"),
    "v20250715": ("1.27-1.33", "1.27-1.33"),
    "v20250704": ("1.27-1.33", "1.27-1.33"),
    "v20250627": ("1.27-1.33", "1.27-1.33"),
    "v20250620": ("1.27-1.33", "1.27-1.33"),
    "v20250519": ("1.26-1.33", "1.26-1.33"),
    "v20250514": ("1.26-1.32", "1.26-1.32"),
    "v20250505": ("1.26-1.32", "1.26-1.32"),
    "v20250501": ("1.26-1.32", "1.26-1.32"),
    "v20250419": ("1.25-1.32", "1.25-1.32"),
    "v20250410": ("1.25-1.32", "1.25-1.32"),
    "v20250403": ("1.25-1.32", "1.25-1.32"),
    "v20250317": ("1.25-1.32", None),
    "v20250304": ("1.25-1.32", None),
    "v20250228": ("1.25-1.32", None),
    "v20250224": ("1.25-1.32", None),
    "v20250212": ("1.25-1.32", None),
    "v20250203": ("1.25-1.32", None),
    "v20250123": ("1.24-1.32", None),
    "v20250116": ("1.24-1.32", None),
    "v20250103": ("1.24-1.32", None),
    "v20241225": ("1.24-1.32", None),
    "v20241213": ("1.24-1.31", None),
    "v20241205": ("1.24-1.31", None),
    "v20241121": ("1.24-1.31", None),
    "v20241115": ("1.24-1.31", None),
    "v20241109": ("1.24-1.31", None),
    "v20241106": ("1.24-1.31", None),
    "v20241024": ("1.24-1.31", None),
}
# Release tag: as _RELEASES, from the release page's source-AMI table. The ranges are its columns' ("Source AMI Name
# (K8s 1.36)", "(K8s 1.33 - 1.35)", "(K8s 1.31 - 1.32)"; from v20261003 "(K8s 1.36 - 1.37)"; the page writes an en
# dash), each with both NVIDIA rows. AMI names seen on the page: amazon-eks-node-al2023-x86_64-nvidia-1.36-<tag> for
# v20260728 to v20260903, -1.37-v20261023 for v20261023. v20260801, v20260827, v20260930 and v20261019 are named only
# as the previous release of a page, their own pages were not found; no release after v20261023 was found.
_FROM_RELEASE_PAGES: dict[str, tuple[str, str | None]] = {
    "v20261023": ("1.31-1.37", "1.31-1.37"),
    "v20261012": ("1.31-1.37", "1.31-1.37"),
    "v20261003": ("1.31-1.37", "1.31-1.37"),
    "v20260903": ("1.31-1.36", "1.31-1.36"),
    "v20260818": ("1.31-1.36", "1.31-1.36"),
    "v20260810": ("1.31-1.36", "1.31-1.36"),
    "v20260728": ("1.31-1.36", "1.31-1.36"),
}
# kubernetes.io/arch: the index of that architecture in _RELEASES' pairs.
_ARCH = {"amd64": 0, "arm64": 1}


@dataclass(frozen=True)
class Defect:
    """A defect that breaks the nodes of an amazon-eks-ami release: what it does, where it is said, the release that
    fixes it."""

    what: str
    source: str
    fixed_in: str


# The releases gpulab refuses by name (domain/stack/fields.py ami_alias), whatever their AMIs.
# The kernel panic: the notes of release v20261012 (github.com/awslabs/amazon-eks-ami/releases/tag/v20261012, 14 Oct
# 2026; the git snapshot fetched here ends at v20260724, so the release page is the source): "fixes a kernel panic
# during memory reclaim (#2845) that caused nodes to unexpectedly reboot on releases v20260930 and v20261003". The
# notes of v20261003 scope it to kernel 6.12.110, "kubernetes versions 1.31 to 1.35" (their AMI table gives 1.36 and
# 1.37 kernel 6.18); refused for every version all the same, as v20261012's notes name no exception and fix it for all.
_KERNEL_PANIC = Defect(
    "its kernel 6.12 panics during memory reclaim and nodes reboot unexpectedly (amazon-eks-ami #2845)",
    "the release notes of amazon-eks-ami v20261003 and v20261012",
    "v20261012",
)
REFUSED: Mapping[str, Defect] = MappingProxyType({"v20260930": _KERNEL_PANIC, "v20261003": _KERNEL_PANIC})


def _minors(span: str | None) -> frozenset[str]:
    if span is None:
        return frozenset()
    first, last = (int(version.split(".")[1]) for version in span.split("-"))
    return frozenset(f"1.{minor}" for minor in range(first, last + 1))


def _by_arch(releases: Mapping[str, tuple[str, str | None]]) -> Mapping[str, Mapping[str, frozenset[str]]]:
    return MappingProxyType(
        {tag: {arch: _minors(spans[i]) for arch, i in _ARCH.items()} for tag, spans in releases.items()}
    )


# Release tag -> kubernetes.io/arch -> the Kubernetes minor versions it has an NVIDIA AMI for: in its CHANGELOG entry
# (LISTED), or only in its release page's table (PAGE_ONLY).
LISTED = _by_arch(_RELEASES)
PAGE_ONLY = _by_arch(_FROM_RELEASE_PAGES)
NVIDIA_AMIS: Mapping[str, Mapping[str, frozenset[str]]] = MappingProxyType({**LISTED, **PAGE_ONLY})
NEWEST_KNOWN = max(NVIDIA_AMIS)


def default_release(kubernetes_version: str) -> str | None:
    """The release gpulab names for a version: the newest whose CHANGELOG entry lists NVIDIA AMIs for it on both
    architectures and that is not refused; None when no listed release has them."""
    fit = [
        tag
        for tag, arches in LISTED.items()
        if tag not in REFUSED and all(kubernetes_version in arches[arch] for arch in _ARCH)
    ]
    return max(fit, default=None)


def release_warning(release: str, kubernetes_version: str, architectures: list[str]) -> str | None:
    """What gpulab cannot vouch for in an AMI release for nodes of these architectures and Kubernetes version, or None
    when it knows their NVIDIA AMIs exist (or the release is `latest`, which Karpenter resolves itself)."""
    if release == "latest":
        return None
    if release not in NVIDIA_AMIS:
        return (
            f"release {release} is not one gpulab knows (domain/upstream/ami_releases.py lists amazon-eks-ami's "
            f"releases to {NEWEST_KNOWN}); `pulumi preview` checks that it has an NVIDIA AMI for Kubernetes "
            f"{kubernetes_version}"
        )
    missing = [arch for arch in architectures if kubernetes_version not in NVIDIA_AMIS[release][arch]]
    default = default_release(kubernetes_version)
    choose = f"; choose another release, such as {default}" if default else "; choose another release"
    if missing:
        return (
            f"release {release} has no NVIDIA AMI for {' or '.join(missing)} nodes of Kubernetes {kubernetes_version} "
            f"in amazon-eks-ami's release notes, and `pulumi preview` will fail looking it up{choose}"
        )
    if release in PAGE_ONLY:
        return (
            f"release {release} is newer than the amazon-eks-ami notes gpulab has read: only its release page's "
            f"source-AMI table says it built NVIDIA AMIs for Kubernetes {kubernetes_version}, and `pulumi preview` "
            f"checks that they exist; {default or 'no release'} is the newest whose notes list them"
        )
    return None


class _Lab(Protocol):
    """What the warnings read of a lab: domain.stack.model's Lab."""

    @property
    def ami(self) -> str: ...

    @property
    def architectures(self) -> list[str]: ...


def ami_warnings(labs: Mapping[str, _Lab], kubernetes_version: str) -> list[str]:
    """One `gpulab:labs.<lab>.ami: warning: ...` line for each lab whose AMI release gpulab cannot vouch for."""
    warnings = {
        name: release_warning(lab.ami.partition("@")[2], kubernetes_version, lab.architectures)
        for name, lab in labs.items()
    }
    return [f"gpulab:labs.{name}.ami: warning: {warning}" for name, warning in warnings.items() if warning]
