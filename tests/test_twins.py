"""The twin of each Kubernetes minor version (rehearsal/twins.py): its Go module, rehearsal/controlplane/<minor>,
requires k8s.io/kubernetes at the release gpulab's user-scheduler runs on that minor, and what that release's own go.mod
says a build of it needs; a stack is rehearsed on the twin of its gpulab:cluster.kubernetesVersion, and a minor without
one is named. None of these tests builds a twin (tests/test_rehearsal.py runs them where `make twin` built them)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import rehearsal.run
from devtools import go_build
from domain.upstream.versions import KUBE_PROXY_ADDON_VERSIONS, KUBE_SCHEDULER_VERSIONS
from rehearsal import twins
from tests.conftest import BASE, stack_values
from tests.support.go_mod import directives, requires


def _go_mod(minor: str) -> Path:
    return twins.module(minor) / "go.mod"


def _release_go_mod(version: str) -> str:
    """The go.mod of k8s.io/kubernetes at `version`, from the module proxy (or Go's module cache, where it is)."""
    if shutil.which("go") is None:
        pytest.skip("no Go on PATH to read k8s.io/kubernetes's own go.mod with")
    found = subprocess.run(
        ["go", "list", "-m", "-json", f"k8s.io/kubernetes@{version}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,  # outside every Go module: no replace applies
    )
    return Path(json.loads(found.stdout)["GoMod"]).read_text()


def differences(go_mod: Path, release: str) -> list[str]:
    """What the twin's go.mod says otherwise than the go.mod of the k8s.io/kubernetes release it requires (`release`,
    that go.mod's text): its go and godebug lines, its etcd server, and a replace of each staging module (the
    release's `=> ./staging/...` lines) by its published version of the same release; and the replace by which it
    builds gpulab's CronJob controller with that release."""
    version = requires(go_mod)["k8s.io/kubernetes"]
    staging = dict.fromkeys(re.findall(r"^\t(k8s\.io/\S+) => \./staging/", release, re.M), "v0" + version[2:])
    replaced = {line.split()[0]: line.split()[-1] for line in directives(go_mod, "replace")}
    found = [
        f"{verb}: {ours} where {version} has {theirs}"
        for verb in ("go", "godebug")
        if (ours := directives(go_mod, verb)) != (theirs := re.findall(rf"^{verb} (\S+)", release, re.M))
    ]
    etcd = re.findall(r"^\tgo\.etcd\.io/etcd/server/v3 (\S+)", release, re.M)
    if (ours := requires(go_mod).get("go.etcd.io/etcd/server/v3")) not in etcd:
        found.append(f"go.etcd.io/etcd/server/v3 {ours} where {version} has {etcd}")
    found += [f"replace {m}: {replaced.get(m, 'missing')}, not {v}" for m, v in staging.items() if replaced.get(m) != v]
    ours = go_build.CRONJOB_CONTROLLER_MODULE
    if replaced.get(ours) != go_build.CRONJOB_CONTROLLER_FOLDER:
        found.append(f"replace {ours}: {replaced.get(ours, 'missing')}, not {go_build.CRONJOB_CONTROLLER_FOLDER}")
    found += [f"replace {m}: not a staging module of {version}" for m in replaced.keys() - staging.keys() - {ours}]
    return found


@pytest.mark.parametrize("minor", twins.minors())
def test_each_twin_runs_the_user_schedulers_release(minor: str) -> None:
    """The release the hub's user-scheduler runs on that minor (its image tag), so that the twin's kube-scheduler is
    the one the cluster runs."""
    assert requires(_go_mod(minor))["k8s.io/kubernetes"] == KUBE_SCHEDULER_VERSIONS[minor]
    assert directives(_go_mod(minor), "module") == [f"github.com/gpulab/rehearsal/controlplane/{minor}"]


@pytest.mark.parametrize("minor", twins.minors())
def test_each_twin_builds_as_its_releases_go_mod_says(minor: str) -> None:
    go_mod = _go_mod(minor)
    assert differences(go_mod, _release_go_mod(requires(go_mod)["k8s.io/kubernetes"])) == []


def test_a_staging_module_left_out_or_moved_is_found(tmp_path: Path) -> None:
    go_mod = _go_mod(twins.minors()[-1])
    version = requires(go_mod)["k8s.io/kubernetes"]
    staging = "v0" + version[2:]
    *_, last = [r for r in directives(go_mod, "replace") if r.startswith("k8s.io/")]
    planted = tmp_path / "go.mod"
    planted.write_text(
        go_mod.read_text()
        .replace(f"\t{last}\n", "")
        .replace(f"k8s.io/api => k8s.io/api {staging}", "k8s.io/api => k8s.io/api v0.30.0")
    )
    assert differences(planted, _release_go_mod(version)) == [
        f"replace k8s.io/api: v0.30.0, not {staging}",
        f"replace {last.split()[0]}: missing, not {staging}",
    ]


def test_every_stack_file_is_rehearsed_on_a_twin() -> None:
    assert set(twins.stack_minors()) <= set(twins.minors())


def _stack_file(tmp_path: Path, minor: str) -> Path:
    path = tmp_path / "Pulumi.twin.yaml"
    # EXTENDED: a minor without a twin is an older one, past standard support on the tests' day (RUN_DAY), which a
    # stack names only with extended support (domain/stack/support.py).
    cluster = {**BASE["gpulab:cluster"], "kubernetesVersion": minor, "supportType": "EXTENDED"}
    path.write_text(yaml.safe_dump({"config": stack_values(**{"gpulab:cluster": cluster})}))
    return path


def test_a_stack_on_1_35_is_rehearsed_on_the_1_35_twin(tmp_path, monkeypatch, capsys) -> None:
    """Its twin is built (here by a go that records its arguments and fails) in rehearsal/controlplane/1.35, stamped
    with that twin's k8s.io/kubernetes release; before the render, which does not run."""
    go = tmp_path / "go"
    go.write_text('#!/bin/sh\npwd > "$0.dir"\necho "$@" > "$0.args"\necho "go: stopped here" >&2\nexit 1\n')
    go.chmod(0o755)
    monkeypatch.setenv("GPULAB_GO", str(go))
    out = tmp_path / "out"
    assert rehearsal.run.main([str(_stack_file(tmp_path, "1.35")), "--out", str(out)]) == 1
    assert Path(f"{go}.dir").read_text().strip() == str(go_build.ROOT / "rehearsal" / "controlplane" / "1.35")
    assert (
        f"-X k8s.io/component-base/version.gitVersion={KUBE_SCHEDULER_VERSIONS['1.35']} "
        in Path(f"{go}.args").read_text()
    )
    assert capsys.readouterr().err.splitlines()[-1] == (
        "rehearsal not run: go build of rehearsal/controlplane/1.35 failed: go: stopped here"
    )
    assert not (out / rehearsal.run.RENDER).exists()


def test_a_stack_on_a_minor_without_a_twin_is_told_which_have_one(tmp_path, capsys) -> None:
    """The newest minor a stack may name (a kube-proxy add-on is pinned for it) that no twin serves."""
    minor = max(KUBE_PROXY_ADDON_VERSIONS.keys() - twins.minors(), key=lambda m: tuple(map(int, m.split("."))))
    assert rehearsal.run.main([str(_stack_file(tmp_path, minor)), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"gpulab:cluster.kubernetesVersion: the rehearsal has no twin of Kubernetes {minor} (twins: "
        f"{', '.join(twins.minors())}, each a Go module in rehearsal/controlplane/<minor>; "
        "docs/developers/rehearsal.md says how to add one)"
    ]
