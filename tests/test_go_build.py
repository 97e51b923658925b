"""A build of a Go helper says what it builds and how long a first build takes before it starts, then its progress,
and hands Go's errors back as Go wrote them (devtools/go_build.py): a first build is minutes of silence otherwise."""

import io
import re
import threading
from pathlib import Path

import pytest

from devtools import go_build, progress
from planner import plan

# A stand-in for go build -v: two modules downloaded, three packages compiled, then what its last line says.
FAKE_GO = """#!/bin/sh
echo "go: downloading k8s.io/api v0.34.1" >&2
echo "go: downloading sigs.k8s.io/karpenter v1.14.1" >&2
echo "k8s.io/api/core/v1" >&2
echo "sigs.k8s.io/karpenter/pkg/scheduling" >&2
echo "gpulab/planner" >&2
{last}
"""


def fake_go(tmp_path: Path, last: str) -> str:
    go = tmp_path / "go"
    go.write_text(FAKE_GO.format(last=last))
    go.chmod(0o755)
    return str(go)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_build_says_what_and_how_long_then_its_progress(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.01)
    monkeypatch.delenv("CI", raising=False)
    lines: list[str] = []
    terminal = Terminal()
    assert go_build.build("planner", fake_go(tmp_path, "sleep 0.3"), lines.append, stream=terminal) == ""
    first, done = lines
    assert first.startswith("planner: building planner/bin/planner, Karpenter 1.14.1's scheduler (Go: a first build")
    assert go_build.HELPERS["planner"].first_build in first
    assert done.startswith("  planner: built in ") and done.endswith("(2 modules, 3 packages)")
    # On a terminal, one line redrawn: how far along, of how many a first build compiles, and for how long.
    drawn = terminal.getvalue().split(progress.CLEAR)
    assert re.fullmatch(r"  planner: 3 of about 1,000 packages compiled, 2 modules downloaded, \d+ s", drawn[-2])
    assert drawn[-1] == ""  # erased when the build ends, before its last line


def test_in_a_ci_log_a_build_prints_its_first_and_last_line_only(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.01)
    monkeypatch.setenv("CI", "true")
    terminal = Terminal()
    lines: list[str] = []
    assert go_build.build("planner", fake_go(tmp_path, "sleep 0.3"), lines.append, stream=terminal) == ""
    assert terminal.getvalue() == ""
    assert len(lines) == 2


def test_a_failed_build_returns_gos_own_lines(tmp_path):
    error = "echo '# gpulab/planner' >&2; echo './plan.go:1:1: expected package' >&2; exit 1"
    lines: list[str] = []
    assert go_build.build("helm-batch", fake_go(tmp_path, error), lines.append) == (
        "# gpulab/planner\n./plan.go:1:1: expected package"
    )
    assert lines[0].startswith("helm-batch: building devtools/helmbatch/bin/helm-batch")


def test_every_helper_the_makefile_builds_is_one_go_build_knows():
    """Each by its name, and the twins (one per rehearsal/controlplane/<minor>) through rehearsal/twins.py."""
    makefile = (go_build.ROOT / "Makefile").read_text()
    named = {name for name in go_build.HELPERS if f"devtools.go_build {name}" in makefile}
    assert named == {name for name in go_build.HELPERS if not name.startswith(go_build.TWIN)}
    assert "rehearsal.twins $(TWINS)" in makefile
    assert all((go_build.ROOT / h.module / "go.mod").is_file() for h in go_build.HELPERS.values())


def test_twin_builds_in_one_go_build_stamped_etcd_named_etcd(tmp_path, monkeypatch):
    """The API server and kubectl report the k8s.io/kubernetes version of the twin's go.mod (a go.mod moved to another
    release moves the stamp with it), and etcd's command, which go build names "server", is bin/etcd."""
    twin = next(name for name in go_build.HELPERS if name.startswith(go_build.TWIN))
    module = tmp_path / go_build.HELPERS[twin].module
    module.mkdir(parents=True)
    go_mod = (go_build.ROOT / go_build.HELPERS[twin].module / "go.mod").read_text()
    (module / "go.mod").write_text(re.sub(r"k8s\.io/kubernetes v\S+", "k8s.io/kubernetes v1.35.4", go_mod))
    monkeypatch.setattr(go_build, "ROOT", tmp_path)
    go = tmp_path / "go"
    go.write_text('#!/bin/sh\necho "$@" > args\nmkdir -p bin && touch bin/server bin/kube-apiserver\n')
    go.chmod(0o755)
    assert go_build.build(twin, str(go), lambda line: None) == ""
    args = (module / "args").read_text()
    assert "-X k8s.io/component-base/version.gitVersion=v1.35.4" in args
    assert "-X k8s.io/client-go/pkg/version.gitMinor=35" in args
    assert args.count("k8s.io/kubernetes/cmd/") == 4 and "go.etcd.io/etcd/server/v3" in args
    assert sorted(p.name for p in (module / "bin").iterdir()) == ["etcd", "kube-apiserver"]


def test_the_renders_planner_build_downloads_nothing(tmp_path, monkeypatch):
    # Go as it answers with GOPROXY=off and a module not in its cache; anything else would fail the test.
    go = fake_go(
        tmp_path,
        'test "$GOPROXY" = off || exit 9; echo "plan.go:3:2: module lookup disabled by GOPROXY=off" >&2; exit 1',
    )
    monkeypatch.setenv("GPULAB_GO", go)
    with pytest.raises(plan.Unavailable) as refused:
        plan.build()
    assert str(refused.value) == (
        "planner not run: planner/'s Go modules are not downloaded here, and the render downloads nothing: "
        f"`make planner` downloads and builds them; {plan.UNCHECKED}"
    )


def test_two_builds_of_one_module_take_turns(tmp_path):
    """.ci/run rehearses the stacks at once, and each builds its twin: the second waits for the first's renames."""
    entered = threading.Event()

    def second() -> None:
        with go_build._one_build_at_a_time(tmp_path / "bin"):
            entered.set()

    with go_build._one_build_at_a_time(tmp_path / "bin"):
        waiting = threading.Thread(target=second)
        waiting.start()
        assert not entered.wait(0.5)
    assert entered.wait(5)
    waiting.join()
