"""`make upstream`: the upstream reference data of the pinned versions, in a folder laid out as ../shared/upstream.

    python -m domain.upstream.fetch <folder> [--url <source>=<git URL> ...]

It is for a clone without ../shared beside it: `make upstream` fetches into `.upstream/` (git ignores it), and
`GPULAB_UPSTREAM=.upstream make test` then runs every test. Each source is a git repository fetched at its tag
(shallow, and a sparse checkout of the paths it needs); the tag must point at the pinned commit, so that a moved tag
fails instead of passing. The layout and the release-pipeline rewrites are those ../shared/upstream/README.md
describes. The pins here (tag, commit, image digest) are the only ones: the pull-request workflow fetches through this
module too.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from domain.upstream.versions import (
    DCGM_EXPORTER_VERSION,
    JUPYTERHUB_CHART_VERSION,
    KARPENTER_CHART_VERSION,
    NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
    one_release,
)

# The controller image the karpenter chart 1.14.1 names, which the release pipeline writes into values.yaml when it
# publishes (hack/release/common.sh, build()). Source: aws/karpenter-provider-aws commit 1d927085d ("docs: update for
# patch release v1.14.1") on main, charts/karpenter/values.yaml, as ../shared/upstream has it. Not confirmed against
# the published chart (no registry access here), and it is the digest commit 692ccdd06 set for 1.14.0.
KARPENTER_CONTROLLER_DIGEST = "sha256:723130949e4cab989461ff07d1be4cd781d63515432494641b33c235f300ae23"


class UpstreamError(Exception):
    """A source could not be fetched or arranged; the message says which and why."""


@dataclass(frozen=True)
class Source:
    """One upstream repository at a pinned tag, and how its files become `<folder>/<name>/`."""

    name: str  # the folder in the reference data, e.g. karpenter-1.14.1
    url: str
    tag: str
    commit: str
    paths: tuple[str, ...]  # what the sparse checkout needs (git's non-cone patterns)
    arrange: Callable[[Path, Path], None]  # (checkout, destination folder)
    # The Helm charts it lays out in charts/, at the version its name ends with: the render finds them there.
    charts: tuple[str, ...] = ()

    @property
    def version(self) -> str:
        return self.name.rsplit("-", 1)[1]


def _copy(src: Path, dst: Path) -> None:
    """Copies a file or a tree, symlinks resolved (the karpenter chart's crds/ link to pkg/apis/crds/)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=False)
    else:
        shutil.copyfile(src, dst)


def _rewrite(path: Path, pattern: str, replacement: str, count: int = 1) -> None:
    """Replaces what a release pipeline replaces, and fails when the file no longer has it exactly `count` times."""
    text = path.read_text()
    new, found = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    if found != count:
        where = f"{path.parent.name}/{path.name}"
        raise UpstreamError(f"{where}: expected {count} match(es) of {pattern!r}, found {found}; review the rewrite")
    path.write_text(new)


def _karpenter(checkout: Path, dst: Path) -> None:
    for crd in sorted((checkout / "pkg/apis/crds").glob("*.yaml")):
        _copy(crd, dst / "crds" / crd.name)
    _copy(checkout / "charts/karpenter/values.yaml", dst / "chart-values.yaml")
    # The CloudFormation template of the docs at the tag (website/content/en/docs/ is the current version's).
    template = checkout / "website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml"
    _copy(template, dst / "cloudformation.yaml")
    _copy(checkout / "pkg/providers/pricing/zz_generated.pricing_aws.go", dst / "zz_generated.pricing_aws.go")
    for chart in ("karpenter", "karpenter-crd"):
        _copy(checkout / "charts" / chart, dst / "charts" / chart)
        # hack/release/common.sh, publishHelmChart(): yq sets both to the released version.
        for key in ("version", "appVersion"):
            _rewrite(dst / "charts" / chart / "Chart.yaml", rf"^{key}: .*$", f"{key}: {KARPENTER_CHART_VERSION}")
    # hack/release/common.sh, build(): the image it has just published.
    values = dst / "charts/karpenter/values.yaml"
    _rewrite(values, r"^(    tag: ).*$", rf"\g<1>{KARPENTER_CHART_VERSION}")
    _rewrite(values, r"^(    digest: ).*$", rf"\g<1>{KARPENTER_CONTROLLER_DIGEST}")


def _nvidia_device_plugin(checkout: Path, dst: Path) -> None:
    chart = checkout / "deployments/helm/nvidia-device-plugin"
    _copy(chart, dst / "charts/nvidia-device-plugin")
    _copy(chart / "values.yaml", dst / "chart-values.yaml")


def _jupyterhub(checkout: Path, dst: Path) -> None:
    # What chartpress (chartpress.yaml) writes on release: the chart's version, and the tag of the five images it
    # builds (the only "set-by-chartpress" tags in values.yaml).
    chart = checkout / "jupyterhub"
    _rewrite(chart / "Chart.yaml", r"^version: 0\.0\.1-set\.by\.chartpress$", f"version: {JUPYTERHUB_CHART_VERSION}")
    _rewrite(chart / "values.yaml", r'tag: "set-by-chartpress"', f'tag: "{JUPYTERHUB_CHART_VERSION}"', count=5)
    # values.schema.json is generated by the upstream script at the tag, which reads values.schema.yaml beside it;
    # the chart's .helmignore leaves values.schema.yaml out of the published package.
    script = checkout / "tools/generate-json-schema.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        raise UpstreamError(f"{script.name}: {_reason(done)}")
    (chart / "values.schema.yaml").unlink()
    _copy(chart, dst / "charts/jupyterhub")
    _copy(chart / "values.yaml", dst / "chart-values.yaml")


def _dcgm_exporter(checkout: Path, dst: Path) -> None:
    # The chart lives in deployment/ at the tag, already carrying the release's version and image tag.
    _copy(checkout / "deployment", dst / "charts/dcgm-exporter")


def _as_is(*paths: str) -> Callable[[Path, Path], None]:
    """Copies the paths unmodified, where they are in the repository."""

    def arrange(checkout: Path, dst: Path) -> None:
        for path in paths:
            _copy(checkout / path, dst / path)

    return arrange


# The release each add-on's builds are made from, at every Kubernetes version (an EKS add-on version is the upstream
# tag and an EKS build: v1.21.1-eksbuild.8 is built from v1.21.1).
VPC_CNI_TAG = one_release("vpc-cni")
NODE_MONITORING_AGENT_TAG = one_release("eks-node-monitoring-agent")
# The EKS add-ons' DaemonSets as their sources publish them (domain/capacity/daemonsets.py cites each, and
# tests/test_addon_sources.py checks them). The Pod Identity agent's tags are agent versions, not add-on versions;
# eksctl's test data holds the kube-proxy DaemonSet EKS installed for Kubernetes 1.25, the only public copy of its
# requests.
VPC_CNI_MANIFEST = "config/master/aws-k8s-cni.yaml"
NODE_MONITORING_AGENT_CHART = "charts/eks-node-monitoring-agent"
POD_IDENTITY_AGENT_CHART = "charts/eks-pod-identity-agent"
KUBE_PROXY_SAMPLE = "pkg/addons/default/testdata/sample-1.25.json"

SOURCES = (
    Source(
        name=f"karpenter-{KARPENTER_CHART_VERSION}",
        url="https://github.com/aws/karpenter-provider-aws.git",
        tag=f"v{KARPENTER_CHART_VERSION}",
        commit="bde00654cd316fddb3dccfba3f5ac07039865429",
        paths=(
            "/pkg/apis/crds/",
            "/charts/karpenter/",
            "/charts/karpenter-crd/",
            "/website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml",
            "/pkg/providers/pricing/zz_generated.pricing_aws.go",
        ),
        arrange=_karpenter,
        charts=("karpenter", "karpenter-crd"),
    ),
    Source(
        name=f"nvidia-device-plugin-{NVIDIA_DEVICE_PLUGIN_CHART_VERSION}",
        url="https://github.com/NVIDIA/k8s-device-plugin.git",
        tag=f"v{NVIDIA_DEVICE_PLUGIN_CHART_VERSION}",
        commit="1b826acc6af3079d8923bac395c3124b8861a9a6",
        paths=("/deployments/helm/nvidia-device-plugin/",),
        arrange=_nvidia_device_plugin,
        charts=("nvidia-device-plugin",),
    ),
    Source(
        name=f"jupyterhub-{JUPYTERHUB_CHART_VERSION}",
        url="https://github.com/jupyterhub/zero-to-jupyterhub-k8s.git",
        tag=JUPYTERHUB_CHART_VERSION,
        commit="5c5f5df751588a68a7781ead01d0f62e88e2e72f",
        paths=("/jupyterhub/", "/tools/generate-json-schema.py"),
        arrange=_jupyterhub,
        charts=("jupyterhub",),
    ),
    # The chart components/metrics/dcgm_exporter.py writes the objects of (tests/test_dcgm_exporter_chart.py compares);
    # its folder is named after the chart's version, 4.8.2, of release 4.5.3-4.8.2.
    Source(
        name=f"dcgm-exporter-{DCGM_EXPORTER_VERSION.rsplit('-', 1)[1]}",
        url="https://github.com/NVIDIA/dcgm-exporter.git",
        tag=DCGM_EXPORTER_VERSION,
        commit="691c92762eb551313c825f6efe4ceeee20982801",
        paths=("/deployment/",),
        arrange=_dcgm_exporter,
        charts=("dcgm-exporter",),
    ),
    Source(
        name=f"amazon-vpc-cni-k8s-{VPC_CNI_TAG}",
        url="https://github.com/aws/amazon-vpc-cni-k8s.git",
        tag=VPC_CNI_TAG,
        commit="e082bae7c03ddc28357b01595f3746b117ac08c7",
        paths=(f"/{VPC_CNI_MANIFEST}",),
        arrange=_as_is(VPC_CNI_MANIFEST),
    ),
    Source(
        name=f"eks-node-monitoring-agent-{NODE_MONITORING_AGENT_TAG}",
        url="https://github.com/aws/eks-node-monitoring-agent.git",
        tag=NODE_MONITORING_AGENT_TAG,
        commit="1690a1e9d27d8d49ed672e1d4931319697ff0ef0",
        paths=(f"/{NODE_MONITORING_AGENT_CHART}/",),
        arrange=_as_is(NODE_MONITORING_AGENT_CHART),
    ),
    Source(
        name="eks-pod-identity-agent-v0.1.37",
        url="https://github.com/aws/eks-pod-identity-agent.git",
        tag="v0.1.37",
        commit="d4dc0f3fedd795b26ac88755238867a2110c7460",
        paths=(f"/{POD_IDENTITY_AGENT_CHART}/",),
        arrange=_as_is(POD_IDENTITY_AGENT_CHART),
    ),
    Source(
        name="eksctl-v0.230.0",
        url="https://github.com/eksctl-io/eksctl.git",
        tag="v0.230.0",
        commit="6ee3b761771c4ae78c76c82bbf2ea168afd61a9e",
        paths=(f"/{KUBE_PROXY_SAMPLE}",),
        arrange=_as_is(KUBE_PROXY_SAMPLE),
    ),
)
# The folders of the reference data, for the tests and the render that read them.
FOLDERS = {source.name.rsplit("-", 1)[0]: source.name for source in SOURCES}


def chart_source(chart: str, version: str) -> Source | None:
    """The source whose folder holds chart `chart` at `version`, which `make upstream` fetches; None for another
    version."""
    return next((s for s in SOURCES if chart in s.charts and s.version == version), None)


def _reason(done: subprocess.CompletedProcess[str]) -> str:
    """The last line a failed command wrote, which is where git and Python say why."""
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise UpstreamError(f"git {args[0]}: {_reason(done)}")
    return done.stdout.strip()


def checkout(source: Source, into: Path) -> None:
    """A sparse, shallow checkout of the source's paths at its tag, which must be its pinned commit."""
    shallow = ["--quiet", "--depth=1", "--filter=blob:none", "--no-checkout"]
    _git("clone", *shallow, "--branch", source.tag, source.url, str(into))
    head = _git("rev-parse", "HEAD^{commit}", cwd=into)
    if head != source.commit:
        raise UpstreamError(f"tag {source.tag} is commit {head}, not the pinned {source.commit}")
    _git("sparse-checkout", "set", "--no-cone", *source.paths, cwd=into)
    _git("checkout", "--quiet", cwd=into)


def size(path: Path) -> int:
    """Bytes of the files under `path`."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def amount(count: int) -> str:
    """Bytes as a person reads them: kB under a megabyte, MB with one decimal above."""
    return f"{count / 1e3:.0f} kB" if count < 1e6 else f"{count / 1e6:.1f} MB"


def fetch(folder: Path, sources: Sequence[Source] = SOURCES, say: Callable[[str], None] = print) -> list[Path]:
    """Fetches each source into `folder/<name>/`, replacing what is there, and writes the folder's README.md. Says
    through `say` what it fetches before each source, and after it how much git downloaded (the clone's .git) and
    how long it took: one line each, so that a CI log shows every step too."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    start = time.monotonic()
    downloaded = 0
    for i, source in enumerate(sources, 1):
        step = f"upstream: [{i}/{len(sources)}] {source.name}"
        say(f"{step}: {source.url} at {source.tag}, only {', '.join(p.strip('/') for p in source.paths)}")
        began = time.monotonic()
        with tempfile.TemporaryDirectory() as scratch:
            work = Path(scratch)
            try:
                checkout(source, work / "src")
                source.arrange(work / "src", work / "out")
            except UpstreamError as error:
                raise UpstreamError(f"{source.name} ({source.url} at {source.tag}): {error}") from None
            fetched = size(work / "src" / ".git")
            dst = folder / source.name
            shutil.rmtree(dst, ignore_errors=True)
            shutil.move(work / "out", dst)
        downloaded += fetched
        kept = amount(size(dst))
        say(f"{step}: {amount(fetched)} downloaded, {kept} kept, {time.monotonic() - began:.0f} s")
        written.append(dst)
    say(f"upstream: {len(sources)} sources, {amount(downloaded)} downloaded in {time.monotonic() - start:.0f} s")
    # Where each folder came from; ../shared/upstream/README.md says what each file in it is.
    lines = [f"- `{s.name}/`: {s.url}, tag {s.tag}, commit {s.commit}\n" for s in sources]
    (folder / "README.md").write_text("# Upstream reference data (domain/upstream/fetch.py)\n\n" + "".join(lines))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m domain.upstream.fetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where the reference data goes (then GPULAB_UPSTREAM=<folder>)")
    parser.add_argument(
        "--url",
        action="append",
        default=[],
        metavar="SOURCE=URL",
        help=f"fetch a source from another git URL (a mirror); sources: {', '.join(s.name for s in SOURCES)}",
    )
    args = parser.parse_args(argv)
    urls = dict(item.partition("=")[::2] for item in args.url)
    names = [source.name for source in SOURCES]
    if unknown := sorted(set(urls) - set(names)):
        parser.error(f"--url: no source named {', '.join(unknown)}; sources: {', '.join(names)}")
    sources = [replace(source, url=urls.get(source.name, source.url)) for source in SOURCES]
    print(f"upstream: fetching {len(sources)} sources from git into {args.folder} (a shallow, sparse clone each)")
    try:
        fetch(args.folder, sources)
    except UpstreamError as error:
        print(f"upstream: {error}", file=sys.stderr)
        return 1
    print(f"then: GPULAB_UPSTREAM={args.folder.resolve()} make test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
