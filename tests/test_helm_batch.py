"""helm-batch (devtools/helmbatch) answers each helm template as the pinned helm binary does: the tests' templates go
through it where `make test` built it (tests/conftest.py)."""

import itertools
import re
from pathlib import Path

import pytest

from render import charts
from tests.conftest import HELM_BATCH, ROOT
from tests.support.chart_values import changed, leaves, with_leaf
from tests.support.rendered import HUB_STACKS, rendered

pytestmark = pytest.mark.charts


def test_helm_batch_is_built_on_the_helm_the_render_runs():
    go_mod = (ROOT / "devtools" / "helmbatch" / "go.mod").read_text()
    (module_version,) = re.findall(r"^\s*helm\.sh/helm/v4 (\S+)$", go_mod, re.MULTILINE)
    (binary_version,) = re.findall(r"^version=(\S+)$", (ROOT / ".ci" / "install-helm").read_text(), re.MULTILINE)
    assert module_version == binary_version


def _answers(release: charts.Release, kubernetes_version: str, values: list, batch: Path | None, monkeypatch):
    """What helm gives each of `values`, through helm-batch or through the helm binary: each from the cache only where
    that binary gave it before (render/helm_cache.py keys a result by the binary's digest)."""
    if batch:
        monkeypatch.setenv("GPULAB_HELM_BATCH", str(batch))
    else:
        monkeypatch.delenv("GPULAB_HELM_BATCH", raising=False)
    helm = charts.helm_binary()
    chart = charts.chart_folder(release)
    return [str(a) for a in charts.template_each(release, kubernetes_version, helm, chart, values)]


def test_every_answer_is_the_helm_binarys_output_or_refusal(monkeypatch):
    if not HELM_BATCH.exists():
        pytest.skip("helm-batch is not built (`make helm-batch`, with Go 1.26): the tests run the helm binary instead")
    r = rendered(HUB_STACKS[0])
    r.require_charts()
    for release in charts.releases(r.run):
        # The program's values, the chart's own defaults (jupyterhub's: a template with CRLF line ends among them), the
        # first leaf changed as the chart-values check changes each; for jupyterhub also a value its schema refuses.
        values = [release.values, {}]
        for path, value in itertools.islice(leaves(release.values), 1):
            values.append(with_leaf(release.values, path, changed(value)))
        if release.chart_name == "jupyterhub":
            values.append(with_leaf(release.values, ("hub", "db", "type"), "no-such-database"))
        through_batch = _answers(release, r.kubernetes_version, values, HELM_BATCH, monkeypatch)
        assert through_batch == _answers(release, r.kubernetes_version, values, None, monkeypatch), release.name
        if release.chart_name == "jupyterhub":
            assert "helm template jupyterhub: values don't meet the specifications" in through_batch[-1]
            assert "continuous-image-puller" in through_batch[1] and "\r" not in through_batch[1]
