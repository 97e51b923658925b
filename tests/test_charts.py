"""The render's charts/: one file per Helm release with every object it installs, or one line saying why not."""

import sys
import time

import pytest
import yaml

import render.run
from components.karpenter.controller import RELEASE as KARPENTER
from components.nvidia.device_plugin import RELEASE as DEVICE_PLUGIN
from domain.upstream.versions import KARPENTER_CHART_VERSION, NVIDIA_DEVICE_PLUGIN_CHART_VERSION
from planner import plan
from render import charts
from tests.conftest import BASE, stack_values
from tests.support.k8s_schema import is_built_in
from tests.support.rendered import BASE_STACK, STACKS, load_objects, rendered

# The suite's slowest part, on its own: `make test-charts` (pytest -m charts).
pytestmark = pytest.mark.charts

CRD = "CustomResourceDefinition"
# What the render says when the charts are not rendered: the planner reads them.
NO_PLANNER = f"planner not run: it reads the charts, and charts/ is not rendered (above); {plan.UNCHECKED}"


@pytest.mark.parametrize("stack", STACKS)
def test_charts_holds_each_releases_objects_in_its_own_file(stack):
    r = rendered(stack)
    r.require_charts()
    releases = charts.releases(r.run)
    assert sorted(p.name for p in (r.out / "charts").iterdir()) == sorted(f"{x.name}.yaml" for x in releases)
    for release in releases:
        objects = r.chart(release.name)
        assert objects and all({"apiVersion", "kind", "metadata"} <= set(o) for o in objects), release.name


@pytest.mark.parametrize("stack", STACKS)
def test_the_crd_release_has_every_crd_the_controller_none(stack):
    r = rendered(stack)
    by_release = {release.name: r.chart(release.name) for release in charts.releases(r.run)}
    defined = {
        (o["spec"]["group"], v["name"], o["spec"]["names"]["kind"])
        for objects in by_release.values()
        for o in objects
        if o["kind"] == CRD
        for v in o["spec"]["versions"]
        if v["served"]
    }
    version = r.run.stack.settings.cluster.kubernetes_version
    custom = {
        tuple([*m["apiVersion"].split("/"), m["kind"]])
        for m in r.manifests()
        if not is_built_in(m["apiVersion"], m["kind"], version)
    }
    assert custom <= defined
    # Helm never upgrades CRDs it installed from a chart's crds/ folder, so the controller release must skip them.
    skipping = [release.name for release in charts.releases(r.run) if release.skip_crds]
    assert skipping == [KARPENTER]
    assert not [o for o in by_release[KARPENTER] if o["kind"] == CRD]


def _base_stack_file(tmp_path):
    path = tmp_path / "Pulumi.base.yaml"
    path.write_text(yaml.safe_dump({"config": BASE}))
    return str(path)


def test_without_helm_render_says_so_in_a_line_writes_the_rest(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPULAB_HELM", str(tmp_path / "no-helm"))
    assert render.run.main([_base_stack_file(tmp_path), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"charts/ not rendered: no helm at $GPULAB_HELM={tmp_path / 'no-helm'} (.ci/install-helm installs it)",
        NO_PLANNER,
    ]
    assert (tmp_path / "out" / "resources.json").is_file()
    assert any((tmp_path / "out" / "manifests").iterdir())
    assert not (tmp_path / "out" / "charts").exists()


def test_make_plan_without_charts_fails_saying_why_no_plan(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPULAB_HELM", str(tmp_path / "no-helm"))
    assert render.run.main([_base_stack_file(tmp_path), "--out", str(tmp_path / "out"), "--plan"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == NO_PLANNER
    assert not (tmp_path / "out" / "plan.json").exists()


def test_no_charts_leaves_helm_out_and_writes_the_rest(tmp_path, monkeypatch, capsys):
    # A helm that would fail if it ran: --no-charts must not run it.
    monkeypatch.setenv("GPULAB_HELM", "/bin/false")
    assert render.run.main([_base_stack_file(tmp_path), "--out", str(tmp_path / "out"), "--no-charts"]) == 0
    assert capsys.readouterr().err == ""
    assert (tmp_path / "out" / "outputs.json").is_file()
    assert not (tmp_path / "out" / "charts").exists()


def test_without_charts_the_render_says_why_at_once_and_pulls_nothing(tmp_path, monkeypatch, capsys):
    run = rendered(BASE_STACK).run  # rendered (and kept) with the charts there are, before they are taken away
    # A helm that logs what it is asked: the render must not ask it to pull.
    log = tmp_path / "helm.log"
    helm = tmp_path / "helm"
    helm.write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    helm.chmod(0o755)
    monkeypatch.setenv("GPULAB_HELM", str(helm))
    monkeypatch.setenv("GPULAB_CHARTS", str(tmp_path / "empty"))
    monkeypatch.delenv("GPULAB_UPSTREAM", raising=False)
    (tmp_path / "out" / "charts").mkdir(parents=True)
    (tmp_path / "out" / "charts" / "stale.yaml").write_text("stale")
    start = time.monotonic()
    assert charts.write(run, tmp_path / "out") == [
        f"charts/ not rendered for karpenter {KARPENTER_CHART_VERSION}, karpenter-crd {KARPENTER_CHART_VERSION}, "
        f"nvidia-device-plugin {NVIDIA_DEVICE_PLUGIN_CHART_VERSION}: not in $GPULAB_CHARTS={tmp_path / 'empty'}: put "
        "it there, or unset GPULAB_CHARTS and run `make upstream`"
    ]
    assert time.monotonic() - start < 1
    assert not log.exists()
    assert not (tmp_path / "out" / "charts").exists()
    # The whole render says the same, and writes the rest.
    assert render.run.main([_base_stack_file(tmp_path), "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines == [*charts.write(run, tmp_path / "out"), NO_PLANNER]
    assert (tmp_path / "out" / "resources.json").is_file()


def test_a_local_chart_of_another_version_is_not_used(tmp_path, monkeypatch):
    r = rendered(BASE_STACK)
    chart = tmp_path / "charts" / "nvidia-device-plugin"
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: nvidia-device-plugin\nversion: 0.19.0\n")
    monkeypatch.setenv("GPULAB_CHARTS", str(tmp_path / "charts"))
    with pytest.raises(charts.Unavailable, match=r"^not in \$GPULAB_CHARTS=.*: put it there, or unset GPULAB_CHARTS"):
        charts.chart_folder(r.release(DEVICE_PLUGIN))


def test_a_value_the_chart_refuses_fails_with_helms_reason():
    r = rendered(BASE_STACK)
    values = dict(r.release(KARPENTER).values)
    values["settings"] = {k: v for k, v in values["settings"].items() if k != "clusterName"}
    with pytest.raises(charts.TemplateError, match=r"Chart cannot be installed without a valid settings\.clusterName"):
        r.template(KARPENTER, values)


def _executable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_helm_is_gpulab_helm_else_beside_python_else_on_path(monkeypatch, tmp_path):
    configured = _executable(tmp_path / "configured" / "helm")
    beside = _executable(tmp_path / "venv" / "bin" / "helm")
    on_path = _executable(tmp_path / "path" / "helm")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "bin" / "python"))
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setenv("GPULAB_HELM", str(configured))
    assert charts.helm_binary() == configured
    monkeypatch.delenv("GPULAB_HELM")
    assert charts.helm_binary() == beside
    beside.unlink()
    assert charts.helm_binary() == on_path
    on_path.chmod(0o644)
    with pytest.raises(charts.Unavailable, match=r"no helm at .*venv/bin/helm or PATH"):
        charts.helm_binary()


def _karpenter_chart(charts_folder, template):
    """A one-template chart named and versioned as the karpenter release's, for $GPULAB_CHARTS."""
    chart = charts_folder / "karpenter"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: karpenter\nversion: 1.14.1\n")
    (chart / "templates" / "only.yaml").write_text(template)


def test_a_chart_refusing_a_release_fails_render_in_one_line(tmp_path, monkeypatch, capsys):
    rendered(BASE_STACK).require_charts()
    _karpenter_chart(tmp_path / "charts", '{{ fail "this chart refuses every install" }}\n')
    monkeypatch.setenv("GPULAB_CHARTS", str(tmp_path / "charts"))
    assert render.run.main([_base_stack_file(tmp_path), "--out", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("gpulab: helm template karpenter: ")
    assert line.endswith("this chart refuses every install")
    assert captured.out == ""


def test_charts_template_for_the_clusters_kubernetes_version(tmp_path, monkeypatch):
    rendered(BASE_STACK).require_charts()
    kube = "{{ .Capabilities.KubeVersion.Version }}"
    _karpenter_chart(
        tmp_path / "charts", f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: v}}\ndata: {{kube: {kube}}}\n"
    )
    monkeypatch.setenv("GPULAB_CHARTS", str(tmp_path / "charts"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # the other releases' charts: not needed here
    cluster = {**BASE["gpulab:cluster"], "kubernetesVersion": "1.35"}
    stack = tmp_path / "Pulumi.older.yaml"
    stack.write_text(yaml.safe_dump({"config": stack_values(**{"gpulab:cluster": cluster})}))
    assert render.run.main([str(stack), "--out", str(tmp_path / "out")]) == 0
    (config_map,) = load_objects((tmp_path / "out" / "charts" / "karpenter.yaml").read_text())
    assert config_map["data"] == {"kube": "v1.35.0"}
