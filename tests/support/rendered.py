"""Renders of whole stacks, charts included, for the tests that read the objects a stack installs.

Each stack (the repository's stack files and the synthetic ones) renders once per test session, through the same
functions as `python -m tools.render`, into a temporary folder. A test that needs the charts skips with the render's
own one-line reason when helm or the pinned charts are not on this machine.
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import render.run
from render import charts, harness
from tests.conftest import BASE, STACK_FILES, as_cli_config, run_config
from tests.support.synthetic import SYNTHETIC

# Every stack the chart tests cover, by stack name: the repository's stack files, whatever they hold, and the
# synthetic stacks.
STACKS: dict[str, dict[str, str]] = {
    **{path.name.split(".")[1]: render.run.read_stack_file(path) for path in STACK_FILES},
    **{f"synthetic-{name}": as_cli_config(values) for name, values in SYNTHETIC.items()},
}

# The stacks that install JupyterHub, whatever the stack files say.
HUB_STACKS = [name for name, values in STACKS.items() if "gpulab:jupyterhub" in values]

# The small stack of tests/conftest.py (one lab, intro, sharing its GPU 3 ways): tests that plant a defect start from
# it, so that they hold whatever the repository's stack files say.
BASE_STACK = "base"
_CONFIGS = {**STACKS, BASE_STACK: as_cli_config(BASE)}

_FOLDER = tempfile.TemporaryDirectory(prefix="gpulab-rendered-")


def load_objects(text: str) -> list[dict[str, Any]]:
    # libyaml's safe loader: the same documents as yaml.safe_load_all, several times faster on the charts' output.
    return [doc for doc in yaml.load_all(text, Loader=yaml.CSafeLoader) if doc]


@dataclass(frozen=True)
class Rendered:
    stack: str
    run: harness.Run
    out: Path
    not_rendered: list[str]  # the render's lines about charts it could not render, one per cause

    @property
    def kubernetes_version(self) -> str:
        return self.run.stack.settings.cluster.kubernetes_version

    def manifests(self) -> list[dict[str, Any]]:
        return [doc for p in sorted((self.out / "manifests").glob("*.yaml")) for doc in load_objects(p.read_text())]

    def require_charts(self) -> None:
        if self.not_rendered:
            pytest.skip("; ".join(self.not_rendered))

    def chart(self, release: str) -> list[dict[str, Any]]:
        """The objects the release installs, as the render wrote them."""
        self.require_charts()
        return load_objects((self.out / "charts" / f"{release}.yaml").read_text())

    def files(self) -> dict[str, list[dict[str, Any]]]:
        """Every object the stack installs, by the render file it is in (manifests/<file>, charts/<file>)."""
        self.require_charts()
        return {
            str(p.relative_to(self.out)): load_objects(p.read_text())
            for folder in ("manifests", "charts")
            for p in sorted((self.out / folder).glob("*.yaml"))
        }

    def release(self, name: str) -> charts.Release:
        (release,) = [r for r in charts.releases(self.run) if r.name == name]
        return release

    def template(self, name: str, values: Mapping[str, Any]) -> str:
        """helm template of the release as the render runs it, with other values; raises charts.TemplateError."""
        (output,) = self.template_each(name, [values])
        if isinstance(output, charts.TemplateError):
            raise output
        return output

    def template_each(self, name: str, values: Sequence[Mapping[str, Any]]) -> list[str | charts.TemplateError]:
        """template() with each of `values`, all at once: its output, or the TemplateError it raises."""
        self.require_charts()
        release = self.release(name)
        # Everything helm is given (the chart's files are pinned by its version).
        r = release
        inputs = (r.name, r.chart, r.repository, r.version, r.namespace, r.skip_crds, self.kubernetes_version)
        keys = [(*inputs, json.dumps(v, sort_keys=True)) for v in values]
        missing = {key: v for key, v in zip(keys, values, strict=True) if key not in _TEMPLATES}
        if missing:
            helm = charts.helm_binary()
            chart = charts.chart_folder(release)
            outputs = charts.template_each(release, self.kubernetes_version, helm, chart, list(missing.values()))
            _TEMPLATES.update(zip(missing, outputs, strict=True))
        return [_TEMPLATES[key] for key in keys]


# helm template's output, once per release inputs in this test process: helm gives the same bytes for the same inputs,
# and the stacks share many (the chart-values check templates every stack's values with each leaf changed).
_TEMPLATES: dict[tuple, str | charts.TemplateError] = {}


@functools.cache
def rendered(stack: str) -> Rendered:
    run = run_config(stack, _CONFIGS[stack])
    out = Path(_FOLDER.name) / stack
    render.run.write(run, out)
    return Rendered(stack, run, out, charts.write(run, out))
