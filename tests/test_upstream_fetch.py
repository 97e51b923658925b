"""`make upstream` (domain/upstream/fetch.py) against small git repositories made here, one per source, at the pinned
tag.

Each fake repository has the files of the real one at the same paths (a few lines each, with the lines the release
pipelines rewrite), one file the sparse checkout must leave out, and a tag; the test asserts the folder it produces.
"""

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from domain.upstream import fetch
from domain.upstream.versions import (
    JUPYTERHUB_CHART_VERSION,
    KARPENTER_CHART_VERSION,
    NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
)

CRDS = ("karpenter.sh_nodepools.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml")
CLOUDFORMATION = "website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml"
KARPENTER_VALUES = (
    "controller:\n  image:\n    repository: public.ecr.aws/karpenter/controller\n"
    "    tag: 1.13.0\n    digest: sha256:ea731b\nreplicas: 2\n"
)
CHART = "apiVersion: v2\nname: {name}\nversion: 1.13.0\nappVersion: 1.13.0\n"
JUPYTERHUB_VALUES = "".join(f'{key}:\n  image:\n    tag: "set-by-chartpress"\n' for key in "abcde")
# A stand-in for the upstream generator (tools/generate-json-schema.py): values.schema.yaml as JSON, beside it.
SCHEMA_SCRIPT = """import json, os, yaml
chart = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "jupyterhub")
schema = yaml.safe_load(open(os.path.join(chart, "values.schema.yaml")))
json.dump(schema, open(os.path.join(chart, "values.schema.json"), "w"))
"""
FILES = {
    "karpenter": {
        **{f"pkg/apis/crds/{crd}": f"kind: CustomResourceDefinition # {crd}\n" for crd in CRDS},
        **{f"charts/karpenter/crds/{crd}": f"../../../pkg/apis/crds/{crd}" for crd in CRDS},  # symlinks, as upstream
        "charts/karpenter/Chart.yaml": CHART.format(name="karpenter"),
        "charts/karpenter/values.yaml": KARPENTER_VALUES,
        "charts/karpenter/templates/deployment.yaml": "kind: Deployment\n",
        "charts/karpenter-crd/Chart.yaml": CHART.format(name="karpenter-crd"),
        "charts/karpenter-crd/templates/karpenter.sh_nodepools.yaml": "kind: CustomResourceDefinition\n",
        CLOUDFORMATION: "AWSTemplateFormatVersion: '2010-09-09'\n",
        "pkg/providers/pricing/zz_generated.pricing_aws.go": "package pricing\n",
        "website/content/en/v1.13/cloudformation.yaml": "not fetched\n",
    },
    "nvidia-device-plugin": {
        "deployments/helm/nvidia-device-plugin/Chart.yaml": "name: nvidia-device-plugin\nversion: 0.20.0\n",
        "deployments/helm/nvidia-device-plugin/values.yaml": "config: {}\n",
        "deployments/helm/nvidia-device-plugin/charts/node-feature-discovery-0.19.0.tgz": "a vendored chart\n",
        "deployments/helm/gpu-feature-discovery/Chart.yaml": "not fetched\n",
    },
    "jupyterhub": {
        "jupyterhub/Chart.yaml": "apiVersion: v2\nname: jupyterhub\nversion: 0.0.1-set.by.chartpress\n",
        "jupyterhub/values.yaml": JUPYTERHUB_VALUES,
        "jupyterhub/values.schema.yaml": "type: object\nadditionalProperties: false\n",
        "jupyterhub/files/hub/z2jh.py": "# hub helpers\n",
        "tools/generate-json-schema.py": SCHEMA_SCRIPT,
        "images/hub/requirements.txt": "not fetched\n",
    },
    "dcgm-exporter": {
        "deployment/Chart.yaml": "name: dcgm-exporter\nversion: 4.8.2\n",
        "deployment/templates/daemonset.yaml": "kind: DaemonSet\n",
        "docker/Dockerfile": "not fetched\n",
    },
    "amazon-vpc-cni-k8s": {
        fetch.VPC_CNI_MANIFEST: "kind: DaemonSet\n",
        "config/master/cni-metrics-helper.yaml": "not fetched\n",
    },
    "eks-node-monitoring-agent": {
        f"{fetch.NODE_MONITORING_AGENT_CHART}/Chart.yaml": "name: eks-node-monitoring-agent\n",
        f"{fetch.NODE_MONITORING_AGENT_CHART}/templates/dcgm-daemonset.yaml": "kind: DaemonSet\n",
        "charts/configuration.schema.json": "not fetched\n",
    },
    "eks-pod-identity-agent": {
        f"{fetch.POD_IDENTITY_AGENT_CHART}/Chart.yaml": "name: eks-pod-identity-agent\n",
        "hack/dev/ds.yaml": "not fetched\n",
    },
    "eksctl": {
        fetch.KUBE_PROXY_SAMPLE: '{"items": []}\n',
        "pkg/addons/default/assets/aws-node.yaml": "not fetched\n",
    },
}
# The sources copied as they are: only the paths the sparse checkout takes.
AS_IS = ("amazon-vpc-cni-k8s", "eks-node-monitoring-agent", "eks-pod-identity-agent", "eksctl")
SYMLINKS = {f"charts/karpenter/crds/{crd}" for crd in CRDS}


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _fake_repository(root: Path, files: dict[str, str], tag: str) -> str:
    """A repository with `files` committed and tagged; returns the commit."""
    root.mkdir(parents=True)
    _git("init", "--quiet", cwd=root)
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path in SYMLINKS:
            target.symlink_to(content)
        else:
            target.write_text(content)
    _git("add", ".", cwd=root)
    identity = ["-c", "user.name=test", "-c", "user.email=test@example.com"]
    _git(*identity, "commit", "--quiet", "-m", "upstream", cwd=root)
    _git(*identity, "tag", "-a", tag, "-m", tag, cwd=root)  # annotated, as upstream's release tags are
    # A later commit: the clone must take the tag's, not the branch's.
    (root / "later.txt").write_text("after the tag\n")
    _git("add", ".", cwd=root)
    _git(*identity, "commit", "--quiet", "-m", "later", cwd=root)
    return _git("rev-parse", f"{tag}^{{commit}}", cwd=root)


def _fake_sources(tmp_path: Path) -> dict[str, fetch.Source]:
    """Each source from a fake repository, by kind (karpenter, nvidia-device-plugin, jupyterhub)."""
    sources = {}
    for source in fetch.SOURCES:
        kind = source.name.rsplit("-", 1)[0]
        commit = _fake_repository(tmp_path / "repos" / kind, FILES[kind], source.tag)
        sources[kind] = replace(source, url=(tmp_path / "repos" / kind).as_uri(), commit=commit)
    return sources


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_fetch_lays_out_every_source_as_the_shared_folder(tmp_path):
    folder = tmp_path / "upstream"
    sources = list(_fake_sources(tmp_path).values())
    written = fetch.fetch(folder, sources)

    assert written == [folder / s.name for s in fetch.SOURCES]
    karpenter = _files(folder / f"karpenter-{KARPENTER_CHART_VERSION}")
    published = CHART.replace("1.13.0", KARPENTER_CHART_VERSION)
    assert karpenter == {
        **{f"crds/{crd}": f"kind: CustomResourceDefinition # {crd}\n" for crd in CRDS},
        "chart-values.yaml": KARPENTER_VALUES,  # unmodified, as at the tag
        "cloudformation.yaml": "AWSTemplateFormatVersion: '2010-09-09'\n",
        "zz_generated.pricing_aws.go": "package pricing\n",
        # the chart's crds/ symlinks resolved to the files they point at
        **{f"charts/karpenter/crds/{crd}": f"kind: CustomResourceDefinition # {crd}\n" for crd in CRDS},
        "charts/karpenter/Chart.yaml": published.format(name="karpenter"),
        "charts/karpenter/values.yaml": KARPENTER_VALUES.replace("1.13.0", KARPENTER_CHART_VERSION).replace(
            "sha256:ea731b", fetch.KARPENTER_CONTROLLER_DIGEST
        ),
        "charts/karpenter/templates/deployment.yaml": "kind: Deployment\n",
        "charts/karpenter-crd/Chart.yaml": published.format(name="karpenter-crd"),
        "charts/karpenter-crd/templates/karpenter.sh_nodepools.yaml": "kind: CustomResourceDefinition\n",
    }
    assert not any(p.is_symlink() for p in (folder / f"karpenter-{KARPENTER_CHART_VERSION}").rglob("*"))

    assert _files(folder / f"nvidia-device-plugin-{NVIDIA_DEVICE_PLUGIN_CHART_VERSION}") == {
        "chart-values.yaml": "config: {}\n",
        "charts/nvidia-device-plugin/Chart.yaml": "name: nvidia-device-plugin\nversion: 0.20.0\n",
        "charts/nvidia-device-plugin/values.yaml": "config: {}\n",
        "charts/nvidia-device-plugin/charts/node-feature-discovery-0.19.0.tgz": "a vendored chart\n",
    }

    jupyterhub = _files(folder / f"jupyterhub-{JUPYTERHUB_CHART_VERSION}")
    released = JUPYTERHUB_VALUES.replace("set-by-chartpress", JUPYTERHUB_CHART_VERSION)
    assert jupyterhub == {
        "chart-values.yaml": released,
        "charts/jupyterhub/Chart.yaml": f"apiVersion: v2\nname: jupyterhub\nversion: {JUPYTERHUB_CHART_VERSION}\n",
        "charts/jupyterhub/values.yaml": released,
        "charts/jupyterhub/values.schema.json": jupyterhub["charts/jupyterhub/values.schema.json"],
        "charts/jupyterhub/files/hub/z2jh.py": "# hub helpers\n",
    }
    schema = json.loads(jupyterhub["charts/jupyterhub/values.schema.json"])
    assert schema == {"type": "object", "additionalProperties": False}

    (dcgm,) = [s for s in sources if s.name.startswith("dcgm-exporter-")]
    assert _files(folder / dcgm.name) == {
        "charts/dcgm-exporter/Chart.yaml": "name: dcgm-exporter\nversion: 4.8.2\n",
        "charts/dcgm-exporter/templates/daemonset.yaml": "kind: DaemonSet\n",
    }

    for kind in AS_IS:
        (source,) = [s for s in sources if s.name.rsplit("-", 1)[0] == kind]
        assert _files(folder / source.name) == {k: v for k, v in FILES[kind].items() if v != "not fetched\n"}, kind

    readme = (folder / "README.md").read_text()
    assert [line for line in readme.splitlines() if line.startswith("- ")] == [
        f"- `{s.name}/`: {s.url}, tag {s.tag}, commit {s.commit}" for s in sources
    ]


def test_fetch_replaces_an_earlier_fetch(tmp_path):
    source = _fake_sources(tmp_path)["karpenter"]
    stale = tmp_path / "upstream" / source.name / "crds" / "removed-upstream.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an older fetch\n")

    fetch.fetch(tmp_path / "upstream", [source])

    assert not stale.exists()
    assert (stale.parent / CRDS[0]).is_file()


def test_a_tag_that_moved_from_the_pinned_commit_fails(tmp_path):
    source = replace(_fake_sources(tmp_path)["nvidia-device-plugin"], commit="0" * 40)
    where = rf"^{source.name} \(file://.* at {source.tag}\)"
    moved = rf"{where}: tag {source.tag} is commit [0-9a-f]{{40}}, not the pinned 0{{40}}$"

    with pytest.raises(fetch.UpstreamError, match=moved):
        fetch.fetch(tmp_path / "upstream", [source])
    assert not (tmp_path / "upstream" / source.name).exists()


def test_a_line_the_release_rewrite_no_longer_finds_fails(tmp_path):
    files = {**FILES["jupyterhub"], "jupyterhub/values.yaml": 'hub:\n  image:\n    tag: "set-by-chartpress"\n'}
    commit = _fake_repository(tmp_path / "repo", files, JUPYTERHUB_CHART_VERSION)
    (jupyterhub,) = [s for s in fetch.SOURCES if s.name.startswith("jupyterhub-")]
    source = replace(jupyterhub, url=(tmp_path / "repo").as_uri(), commit=commit)

    with pytest.raises(
        fetch.UpstreamError,
        match=r"^jupyterhub-.*: jupyterhub/values\.yaml: expected 5 match.* found 1; review the rewrite$",
    ):
        fetch.fetch(tmp_path / "upstream", [source])


def test_the_command_names_an_unknown_source(capsys):
    with pytest.raises(SystemExit, match="2"):
        fetch.main(["out", "--url", "karpenter=file:///x"])
    names = ", ".join(s.name for s in fetch.SOURCES)
    assert f"--url: no source named karpenter; sources: {names}\n" in capsys.readouterr().err


def test_fetch_says_what_it_fetches_and_how_much_each_step(tmp_path):
    sources = list(_fake_sources(tmp_path).values())[:2]
    lines: list[str] = []
    fetch.fetch(tmp_path / "upstream", sources, lines.append)
    first, second = sources
    assert lines[0] == (
        f"upstream: [1/2] {first.name}: {first.url} at {first.tag}, only {', '.join(p.strip('/') for p in first.paths)}"
    )
    assert re.fullmatch(rf"upstream: \[1/2\] {first.name}: \d+ kB downloaded, \d+ kB kept, \d+ s", lines[1])
    assert lines[2].startswith(f"upstream: [2/2] {second.name}: {second.url} at {second.tag}, only ")
    assert re.fullmatch(r"upstream: 2 sources, \d+ kB downloaded in \d+ s", lines[4])
    assert len(lines) == 5
