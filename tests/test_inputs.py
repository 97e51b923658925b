"""`make plan` and `make rehearse` check their inputs first (render/inputs.py): a missing chart is named, with the
command that fetches it, in under a second and before anything is built or downloaded."""

import os
import socket
import subprocess
import time

import pytest
import yaml

from domain.upstream import fetch
from domain.upstream.versions import KARPENTER_CHART_VERSION, NVIDIA_DEVICE_PLUGIN_CHART_VERSION
from render import charts, inputs
from tests.conftest import BASE, ROOT, run_values, stack_values
from tests.support.rendered import STACKS, rendered

JUPYTERHUB, KARPENTER = fetch.FOLDERS["jupyterhub"], fetch.FOLDERS["karpenter"]


@pytest.mark.parametrize("stack", STACKS)
def test_the_charts_checked_are_those_the_program_installs(stack):
    run = rendered(stack).run
    installed = sorted((r.chart_name, r.version) for r in charts.releases(run))
    assert sorted(inputs.stack_charts(run.stack.settings)) == installed


def test_a_stack_with_other_chart_versions_is_checked_for_those():
    run = run_values(stack_values(**{"gpulab:karpenter": {"chartVersion": "1.15.2"}}))
    assert (
        set(inputs.stack_charts(run.stack.settings))
        == {(r.chart_name, r.version) for r in charts.releases(run)}
        == {("karpenter", "1.15.2"), ("karpenter-crd", "1.15.2"), ("nvidia-device-plugin", "0.20.0")}
    )


def _stack_file(tmp_path, values=BASE):
    path = tmp_path / "Pulumi.base.yaml"
    path.write_text(yaml.safe_dump({"config": values}))
    return str(path)


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """No chart here, a Go that only says its version (and logs what it is asked), helm that logs every call, and no
    socket that can connect: whatever the check tried would show."""
    log = tmp_path / "calls.log"
    for name, answer in (("go", "go1.26.8"), ("helm", "")):
        tool = tmp_path / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\necho {answer}\n')
        tool.chmod(0o755)
    monkeypatch.setenv("GPULAB_GO", str(tmp_path / "go"))
    monkeypatch.setenv("GPULAB_HELM", str(tmp_path / "helm"))
    monkeypatch.setenv("GPULAB_UPSTREAM", str(tmp_path / "no-upstream"))
    monkeypatch.delenv("GPULAB_CHARTS", raising=False)
    monkeypatch.delenv("GPULAB_PLANNER", raising=False)

    def no_network(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    return log


def test_a_missing_chart_is_named_with_make_upstream_at_once(tmp_path, offline, capsys):
    start = time.monotonic()
    assert inputs.main([_stack_file(tmp_path), "--for", "rehearse"]) == 1
    assert time.monotonic() - start < 1
    fetch_it = '`make upstream UPSTREAM="$GPULAB_UPSTREAM"` fetches it'
    karpenter, plugin = KARPENTER_CHART_VERSION, NVIDIA_DEVICE_PLUGIN_CHART_VERSION
    assert capsys.readouterr().err.splitlines() == [
        f"rehearse: chart karpenter-crd {karpenter}: not in $GPULAB_UPSTREAM (the upstream data): {fetch_it} "
        f"({KARPENTER}, with the other pinned sources)",
        f"rehearse: chart karpenter {karpenter}: not in $GPULAB_UPSTREAM (the upstream data): {fetch_it} "
        f"({KARPENTER}, with the other pinned sources)",
        f"rehearse: chart nvidia-device-plugin {plugin}: not in $GPULAB_UPSTREAM (the upstream data): {fetch_it} "
        f"({fetch.FOLDERS['nvidia-device-plugin']}, with the other pinned sources)",
        "rehearse: nothing built or run; fix the line(s) above first",
    ]
    # Go asked its version, helm nothing: no pull, no build.
    assert offline.read_text().splitlines() == ["go env GOVERSION"]


def test_make_upstream_is_named_where_the_render_looks_by_default(tmp_path, offline, monkeypatch, capsys):
    monkeypatch.delenv("GPULAB_UPSTREAM")
    monkeypatch.setattr(charts, "ROOT", tmp_path)  # a clone with neither .upstream nor ../shared/upstream
    monkeypatch.setattr(charts, "FETCHED_UPSTREAM", tmp_path / ".upstream")
    assert inputs.main([_stack_file(tmp_path), "--for", "plan"]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert first == (
        f"plan: chart karpenter-crd {KARPENTER_CHART_VERSION}: not in the upstream data (there is none here): "
        f"`make upstream` fetches it ({KARPENTER}, with the other pinned sources)"
    )


def test_an_unpinned_chart_version_says_where_to_put_it(tmp_path, offline, capsys):
    values = stack_values(**{"gpulab:karpenter": {"chartVersion": "1.15.2"}})
    assert inputs.main([_stack_file(tmp_path, values), "--for", "plan"]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "plan: chart karpenter-crd 1.15.2: not in $GPULAB_UPSTREAM (the upstream data), and `make upstream` fetches "
        f"only the pinned version ({KARPENTER_CHART_VERSION}): put the chart at 1.15.2 in "
        "$GPULAB_CHARTS/karpenter-crd/ (`helm pull --untar` of it)"
    )


def test_with_every_input_here_one_line_names_them(tmp_path, offline, monkeypatch, capsys):
    upstream = tmp_path / "upstream"
    for chart, version in inputs.stack_charts(run_values(BASE).stack.settings):
        folder = upstream / f"{chart}-{version}" / "charts" / chart
        folder.mkdir(parents=True)
        (folder / "Chart.yaml").write_text(yaml.safe_dump({"name": chart, "version": version}))
    monkeypatch.setenv("GPULAB_UPSTREAM", str(upstream))
    assert inputs.main([_stack_file(tmp_path), "--for", "plan"]) == 0
    assert capsys.readouterr().out == (
        f"plan: base's inputs are here: helm {tmp_path / 'helm'}, karpenter-crd {KARPENTER_CHART_VERSION}, "
        f"karpenter {KARPENTER_CHART_VERSION}, nvidia-device-plugin {NVIDIA_DEVICE_PLUGIN_CHART_VERSION}, Go 1.26.8\n"
    )


def test_no_go_and_an_old_go_are_named(tmp_path, offline, monkeypatch, capsys):
    monkeypatch.setenv("GPULAB_GO", "")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert inputs.main([_stack_file(tmp_path), "--for", "plan"]) == 1
    assert (
        "plan: no Go (go on PATH, or $GPULAB_GO): make plan builds the planner with Go 1.26 (go.dev/dl)"
        in capsys.readouterr().err.splitlines()
    )
    old = tmp_path / "old-go"
    old.write_text("#!/bin/sh\necho go1.25.3\n")
    old.chmod(0o755)
    monkeypatch.setenv("GPULAB_GO", str(old))
    assert inputs.main([_stack_file(tmp_path), "--for", "rehearse"]) == 1
    assert (
        "rehearse: Go 1.25.3 here, and rehearsal/stepper/go.mod needs Go 1.26.6 or later: install it"
        in capsys.readouterr().err.splitlines()
    )


def test_a_stack_with_problems_fails_as_the_render_does(tmp_path, offline, capsys):
    values = stack_values(**{"gpulab:labs": {"intro": {**BASE["gpulab:labs"]["intro"], "maxGpus": 0}}})
    assert inputs.main([_stack_file(tmp_path, values), "--for", "plan"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gpulab:labs.intro.maxGpus: ")


@pytest.mark.parametrize("target", ["plan", "rehearse"])
def test_make_checks_the_inputs_before_it_builds(target, tmp_path, offline):
    # The virtualenv and helm as they are (-o): only the target's own commands run.
    command = ["make", "--no-print-directory", "-o", ".venv/.installed", "-o", ".venv/bin/helm", target]
    command += [f"STACK={_stack_file(tmp_path)}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=os.environ, check=False)
    assert done.returncode != 0
    assert f"{target}: nothing built or run; fix the line(s) above first" in done.stderr
    assert "building" not in done.stdout + done.stderr
    assert offline.read_text().splitlines() == ["go env GOVERSION"]
