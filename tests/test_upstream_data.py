"""Where a clone finds the upstream reference data, and how a test or the render says it is not there: one line that
names the folder as the user set it or relative to the clone, never an absolute path outside it."""

from pathlib import Path

import pytest

from render import charts


@pytest.fixture
def clone(tmp_path: Path, monkeypatch) -> Path:
    """A clone in a folder with nothing beside it."""
    root = tmp_path / "lonely" / "gpulab"
    root.mkdir(parents=True)
    monkeypatch.setattr(charts, "ROOT", root)
    monkeypatch.setattr(charts, "FETCHED_UPSTREAM", root / ".upstream")
    monkeypatch.delenv("GPULAB_UPSTREAM", raising=False)
    monkeypatch.delenv("GPULAB_CHARTS", raising=False)
    return root


def said(line: str, clone: Path) -> str:
    assert "\n" not in line
    assert str(clone.parent) not in line, "an absolute path the user does not have"
    return line


def test_a_lone_clone_is_told_to_run_make_upstream(clone: Path):
    line = said(charts.upstream_absent("karpenter-1.14.1/crds"), clone)
    assert line == (
        "no karpenter-1.14.1/crds: no upstream reference data here (`make upstream` fetches it into .upstream/)"
    )
    assert "shared" not in said(charts._local_place(), clone)


def test_after_make_upstream_the_data_is_read_from_dot_upstream(clone: Path):
    (clone / ".upstream").mkdir()
    assert charts.upstream_folder() == clone / ".upstream"
    assert said(charts.upstream_absent("dcgm-exporter-4.8.2/charts/dcgm-exporter"), clone).startswith(
        "no dcgm-exporter-4.8.2/charts/dcgm-exporter in .upstream, the upstream reference data"
    )
    assert said(charts._local_place(), clone) == ".upstream (the upstream data)"


def test_a_folder_beside_the_clone_is_named_relative_to_it(clone: Path):
    (clone.parent / "shared" / "upstream").mkdir(parents=True)
    assert said(charts.upstream_absent("x"), clone).startswith("no x in ../shared/upstream,")


def test_a_folder_the_user_names_is_named_by_its_variable(clone: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GPULAB_UPSTREAM", str(tmp_path / "elsewhere"))
    (clone / ".upstream").mkdir()  # the variable wins over make upstream's folder
    assert charts.upstream_folder() == tmp_path / "elsewhere"
    assert said(charts.upstream_absent("x"), clone).startswith("no x in $GPULAB_UPSTREAM,")
    assert str(tmp_path) not in charts._local_place()
