"""render/helm_cache.py answers a `helm template` from its cache only for exactly the inputs helm was given before."""

import gzip
import sys

import pytest

from render import helm_cache

# A stand-in for helm: prints its arguments and stdin, and counts its runs.
FAKE_HELM = """#!/bin/sh
echo run >> "$(dirname "$0")/runs"
echo "$@"
cat
"""


@pytest.fixture
def setup(tmp_path, monkeypatch):
    helm = tmp_path / "bin" / "helm"
    helm.parent.mkdir()
    helm.write_text(FAKE_HELM)
    helm.chmod(0o755)
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("name: c\nversion: 1.0.0\n")
    (chart / "templates" / "a.yaml").write_text("kind: A\n")
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPULAB_HELM_CACHE", str(cache))
    monkeypatch.delenv("GPULAB_HELM_BATCH", raising=False)  # the tests of helm-batch add their stand-in for it
    helm_cache._file_digest.cache_clear()
    helm_cache._folder_digest.cache_clear()
    return helm, chart, cache


def _runs(helm):
    runs = helm.parent / "runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def _template(helm, chart, values="x: 1"):
    return helm_cache.template(helm, helm_cache.Call(chart, ["template", "r", str(chart), "--values", "-"], values))


def test_the_same_inputs_get_helms_own_result_from_the_cache(setup):
    helm, chart, _ = setup
    first = _template(helm, chart)
    assert first == (0, f"template r {chart} --values -\nx: 1", "")
    assert _template(helm, chart) == first
    assert _runs(helm) == 1


def test_other_values_or_chart_files_or_binary_run_helm_again(setup):
    helm, chart, _ = setup
    _template(helm, chart)
    _template(helm, chart, "x: 2")
    assert _runs(helm) == 2
    (chart / "templates" / "a.yaml").write_text("kind: B\n")
    helm_cache._folder_digest.cache_clear()  # a new process sees the chart's new content
    _template(helm, chart)
    assert _runs(helm) == 3
    helm.write_text(FAKE_HELM + "# another build\n")
    helm_cache._file_digest.cache_clear()
    _template(helm, chart)
    assert _runs(helm) == 4


def test_a_failure_is_kept_as_helm_gave_it(setup, tmp_path):
    helm, chart, _ = setup
    failing = tmp_path / "bin" / "failing-helm"
    failing.write_text('#!/bin/sh\necho run >> "$(dirname "$0")/runs"\necho "Error: nope" >&2\nexit 1\n')
    failing.chmod(0o755)
    assert _template(failing, chart) == (1, "", "Error: nope\n")
    assert _template(failing, chart) == (1, "", "Error: nope\n")
    assert _runs(helm) == 1


@pytest.mark.parametrize("cut", [lambda e: gzip.compress(b'[0, "trunc'), lambda e: e[:12]], ids=["json", "gzip"])
def test_an_entry_cut_short_is_run_again_and_rewritten(setup, cut):
    helm, chart, cache = setup
    expected = _template(helm, chart)
    (entry,) = cache.iterdir()
    entry.write_bytes(cut(entry.read_bytes()))
    assert _template(helm, chart) == expected
    assert _runs(helm) == 2
    assert _template(helm, chart) == expected
    assert _runs(helm) == 2


def test_without_the_setting_every_call_runs_helm(setup, monkeypatch):
    helm, chart, cache = setup
    monkeypatch.delenv("GPULAB_HELM_CACHE")
    _template(helm, chart)
    _template(helm, chart)
    assert _runs(helm) == 2
    assert not cache.exists()


# A stand-in for helm-batch: answers each call as FAKE_HELM would, with CRLF line ends, and counts its runs.
FAKE_BATCH = """#!{python}
import json, pathlib, sys
pathlib.Path(sys.argv[0]).with_name("batch-runs").open("a").write("run\\n")
calls = json.load(sys.stdin)
answer = lambda call: {{"returncode": 0, "stdout": " ".join(call["args"]) + "\\r\\n" + call["stdin"], "stderr": ""}}
print(json.dumps([answer(call) for call in calls]))
"""


@pytest.fixture
def batch(setup, tmp_path, monkeypatch):
    path = tmp_path / "bin" / "helm-batch"
    path.write_text(FAKE_BATCH.format(python=sys.executable))
    path.chmod(0o755)
    monkeypatch.setenv("GPULAB_HELM_BATCH", str(path))
    return path


def _batch_runs(batch):
    runs = batch.with_name("batch-runs")
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_helm_batch_runs_cache_misses_in_two_processes_as_helm(setup, batch):
    helm, chart, _ = setup
    _template(helm, chart, "x: 0")
    assert _batch_runs(batch) == 1
    calls = [helm_cache.Call(chart, ["template", "r", str(chart), "--values", "-"], f"x: {i}") for i in range(5)]
    results = helm_cache.template_all(helm, calls)
    # Line ends as a helm process's stdout reads in text mode; x: 0 came from the cache.
    assert results == [(0, f"template r {chart} --values -\nx: {i}", "") for i in range(5)]
    assert _batch_runs(batch) == 1 + 2
    assert _runs(helm) == 0
    assert helm_cache.template_all(helm, calls) == results
    assert _batch_runs(batch) == 3


def test_helm_batch_results_are_kept_apart_from_helms(setup, batch, monkeypatch):
    helm, chart, _ = setup
    _template(helm, chart)
    monkeypatch.delenv("GPULAB_HELM_BATCH")
    _template(helm, chart)
    assert (_batch_runs(batch), _runs(helm)) == (1, 1)


def test_a_helm_batch_that_fails_says_so(setup, batch):
    helm, chart, _ = setup
    batch.write_text("#!/bin/sh\necho 'helm-batch: unexpected end of JSON input' >&2\nexit 2\n")
    with pytest.raises(RuntimeError, match="helm-batch failed: helm-batch: unexpected end of JSON input"):
        _template(helm, chart)
