"""What each Helm release of the stack installs: `helm template` of the pinned chart, written as charts/<release>.yaml.

Pulumi's Release installs a chart with the values, name and namespace the program passes; `helm template` with the same
inputs and the cluster's Kubernetes version shows every object that install creates (the chart's CRDs too, unless the
release skips them), in Helm's install order, the same bytes on every run.

Where the charts come from, the first that has the release's chart at the release's version (its Chart.yaml says so):
`$GPULAB_CHARTS/<chart>/`, else the upstream reference data (`$GPULAB_UPSTREAM`, else `.upstream/` once `make upstream`
has fetched it, else ../shared/upstream beside the repository: `*/charts/<chart>/`). Nothing is downloaded: a chart
that is not there is named with the command that fetches it (`make upstream`, domain/upstream/fetch.py), at once; a
`helm pull` the render once fell back to was silent for up to 300 s per chart without a network (issue 50).
helm is `$GPULAB_HELM`, else the one beside the Python interpreter (.ci/install-helm puts it in .venv/bin), else on
PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from domain.upstream import fetch
from render import harness, helm_cache, object_size

ROOT = Path(__file__).resolve().parent.parent
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


class Unavailable(Exception):
    """helm or a chart is not on this machine: the charts are not rendered, everything else is."""


class TemplateError(Exception):
    """helm refused the chart with the program's values, or the API server would refuse an object it makes
    (render/object_size.py): a real problem, reported as one line."""


class Oversized(TemplateError):
    """The API server would refuse an object of the chart for its size: the stack is bad input, its lines name the
    key (render/object_size.py)."""


@dataclass(frozen=True)
class Release:
    """One Helm release of the stack, with the inputs the program passed to its kubernetes:helm.sh/v3:Release."""

    name: str
    chart: str  # as the program names it: oci://<registry>/<path>/<chart>, or <chart> with `repository`
    repository: str | None
    version: str
    namespace: str
    values: Mapping[str, Any]
    skip_crds: bool

    @property
    def chart_name(self) -> str:
        return self.chart.rstrip("/").rsplit("/", 1)[-1]

    @classmethod
    def of(cls, registration: harness.Registration) -> Release:
        inputs = registration.inputs
        return cls(
            name=inputs["name"],
            chart=inputs["chart"],
            repository=(inputs.get("repositoryOpts") or {}).get("repo"),
            version=inputs["version"],
            namespace=inputs["namespace"],
            values=inputs.get("values") or {},
            skip_crds=bool(inputs.get("skipCrds")),
        )


def releases(run: harness.Run) -> list[Release]:
    return [Release.of(r) for r in run.of_type(HELM_RELEASE)]


# Where `make upstream` puts the upstream reference data (the Makefile's UPSTREAM), inside the clone.
FETCHED_UPSTREAM = ROOT / ".upstream"


def upstream_folder() -> Path:
    """The upstream reference data: $GPULAB_UPSTREAM, else .upstream once `make upstream` has fetched it, else
    ../shared/upstream beside the repository."""
    configured = os.environ.get("GPULAB_UPSTREAM")
    if configured:
        return Path(configured).expanduser().resolve()
    # Not resolved: the lines that name it say ../shared/upstream, as the user sees it, even where it is a link.
    return FETCHED_UPSTREAM if FETCHED_UPSTREAM.is_dir() else ROOT.parent / "shared" / "upstream"


def upstream_place() -> str | None:
    """The upstream folder named as the user set it ($GPULAB_UPSTREAM) or relative to the clone, never by an absolute
    path that is not the user's; None when there is none here."""
    if os.environ.get("GPULAB_UPSTREAM"):
        return "$GPULAB_UPSTREAM"
    folder = upstream_folder()
    return os.path.relpath(folder, ROOT) if folder.is_dir() else None


def upstream_absent(what: str) -> str:
    """One line saying that `what` is not in the upstream reference data, and how to get it."""
    if (place := upstream_place()) is None:
        return f"no {what}: no upstream reference data here (`make upstream` fetches it into .upstream/)"
    return f"no {what} in {place}, the upstream reference data (`make upstream` fetches the pinned versions')"


def helm_binary() -> Path:
    """The helm this machine renders with; raises Unavailable when there is none."""
    configured = os.environ.get("GPULAB_HELM")
    candidates = [Path(configured)] if configured else [Path(sys.executable).parent / "helm"]
    if not configured and (on_path := shutil.which("helm")):
        candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    where = f"$GPULAB_HELM={configured}" if configured else f"{candidates[0]} or PATH"
    raise Unavailable(f"no helm at {where} (.ci/install-helm installs it)")


def _chart_identity(folder: Path) -> tuple[str, str] | None:
    try:
        chart = yaml.safe_load((folder / "Chart.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None
    return (str(chart.get("name")), str(chart.get("version"))) if isinstance(chart, dict) else None


def _local_candidates(chart_name: str) -> list[Path]:
    if configured := os.environ.get("GPULAB_CHARTS"):
        return [Path(configured).expanduser() / chart_name]
    return sorted(upstream_folder().glob(f"*/charts/{chart_name}"))


def _local_place() -> str:
    """Where the local charts are looked for, as the line about a missing chart names it."""
    configured = os.environ.get("GPULAB_CHARTS")
    if configured:
        return f"$GPULAB_CHARTS={configured}"
    place = upstream_place()
    return f"{place} (the upstream data)" if place else "the upstream data (there is none here)"


def cache_home() -> Path:
    """gpulab's folder in the user's cache: the tests' helm results (render/helm_cache.py)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "gpulab"


def fetch_command() -> str:
    """The command that fetches the upstream reference data where the render looks for it."""
    if os.environ.get("GPULAB_UPSTREAM"):
        return '`make upstream UPSTREAM="$GPULAB_UPSTREAM"`'
    return "`make upstream`"


def not_here(chart: str, version: str) -> str:
    """Why chart `chart` at `version` is not on this machine, and the command that brings it: `make upstream` for
    the versions it fetches, else where to put it."""
    source = fetch.chart_source(chart, version)
    if source is not None and os.environ.get("GPULAB_CHARTS"):
        return f"not in {_local_place()}: put it there, or unset GPULAB_CHARTS and run {fetch_command()}"
    if source is not None:
        return f"not in {_local_place()}: {fetch_command()} fetches it ({source.name}, with the other pinned sources)"
    pinned = ", ".join(s.version for s in fetch.SOURCES if chart in s.charts) or "none"
    return (
        f"not in {_local_place()}, and `make upstream` fetches only the pinned version ({pinned}): put the chart at "
        f"{version} in $GPULAB_CHARTS/{chart}/ (`helm pull --untar` of it)"
    )


def local_chart(chart: str, version: str) -> Path | None:
    """Chart `chart` at `version` on this machine, or None."""
    return next((f for f in _local_candidates(chart) if _chart_identity(f) == (chart, version)), None)


def chart_folder(release: Release) -> Path:
    """The release's chart at its version on this machine; raises Unavailable, naming what fetches it."""
    if (folder := local_chart(release.chart_name, release.version)) is None:
        raise Unavailable(not_here(release.chart_name, release.version))
    return folder


# Values a chart makes up at random when its `lookup` of its own earlier Secret finds no cluster, as in helm template:
# on a cluster it finds them and keeps them. Stand-ins make charts/ the same on every render (jupyterhub 4.4.0,
# templates/hub/_helpers-passwords.tpl: the cookie secret, the proxy's token and the auth-state key).
RENDER_STAND_INS: dict[str, dict[str, Any]] = {
    "jupyterhub": {
        "hub": {"cookieSecret": "0" * 64, "config": {"CryptKeeper": {"keys": ["0" * 64]}}},
        "proxy": {"secretToken": "0" * 64},
    }
}


def _service_tokens(release: Release, values: Mapping[str, Any]) -> dict[str, Any]:
    """A stand-in API token for each of the hub's services, which the jupyterhub chart makes up like its own secrets
    (templates/hub/_helpers-passwords.tpl, jupyterhub.hub.services.get_api_token)."""
    services = (values.get("hub") or {}).get("services") or {} if release.chart_name == "jupyterhub" else {}
    return {"hub": {"services": {key: {"apiToken": "0" * 64} for key in services}}} if services else {}


def _merged(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` over `base`, maps merged key by key as Helm merges values files."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def template(
    release: Release, kubernetes_version: str, helm: Path, chart: Path, values: Mapping[str, Any] | None = None
) -> str:
    """What `helm install` of the release would create, as helm template prints it; `values` replaces the release's.

    Raises TemplateError when helm refuses (a chart's `required` or `fail`, unparsable output).
    """
    return _output(release, helm_cache.template(helm, _call(release, kubernetes_version, chart, values)))


def template_each(
    release: Release, kubernetes_version: str, helm: Path, chart: Path, values: Sequence[Mapping[str, Any]]
) -> list[str | TemplateError]:
    """template() of the release with each of `values`, all at once (helm_cache.template_all): what it returns, or
    the TemplateError it raises."""
    calls = [_call(release, kubernetes_version, chart, v) for v in values]
    outputs: list[str | TemplateError] = []
    for done in helm_cache.template_all(helm, calls):
        try:
            outputs.append(_output(release, done))
        except TemplateError as error:
            outputs.append(error)
    return outputs


def _call(release: Release, kubernetes_version: str, chart: Path, values: Mapping[str, Any] | None) -> helm_cache.Call:
    arguments = ["template", release.name, str(chart), "--namespace", release.namespace]
    # The cluster's minor version ("1.34") as the full version charts see in .Capabilities.KubeVersion (helm keeps what
    # it is given, and a control plane reports a patch release).
    arguments += ["--kube-version", f"v{kubernetes_version}.0", "--values", "-", "--skip-tests"]
    if not release.skip_crds:
        arguments.append("--include-crds")
    chosen = release.values if values is None else values
    stand_ins = _merged(RENDER_STAND_INS.get(release.chart_name, {}), _service_tokens(release, chosen))
    payload = json.dumps(_merged(stand_ins, chosen))  # JSON is YAML
    return helm_cache.Call(chart, arguments, payload)


def _output(release: Release, done: helm_cache.Result) -> str:
    if done.returncode != 0:
        # helm's reason, without its advice to rerun with --debug.
        reason = " ".join(line for line in done.stderr.splitlines() if not line.startswith("Use --debug"))
        raise TemplateError(f"helm template {release.name}: {' '.join(reason.split()).removeprefix('Error: ')}")
    if too_large := object_size.oversized(release.name, done.stdout):
        raise Oversized("\n".join(too_large))
    return done.stdout


def write(run: harness.Run, out: Path) -> list[str]:
    """Writes <out>/charts/<release>.yaml for every release; returns one line per cause of what it could not render."""
    folder = out / "charts"
    shutil.rmtree(folder, ignore_errors=True)
    stack_releases = releases(run)
    if not stack_releases:
        return []
    try:
        helm = helm_binary()
    except Unavailable as missing:
        return [f"charts/ not rendered: {missing}"]
    # The charts each cause keeps out, e.g. both Karpenter charts when their source is not fetched.
    skipped: dict[str, list[str]] = {}
    kubernetes_version = run.stack.settings.cluster.kubernetes_version
    found: list[tuple[Release, helm_cache.Call]] = []
    for release in stack_releases:
        try:
            found.append((release, _call(release, kubernetes_version, chart_folder(release), None)))
        except Unavailable as missing:
            skipped.setdefault(str(missing), []).append(f"{release.chart_name} {release.version}")
    # All at once: two helm processes at a time, or for the tests two helm-batch processes (render/helm_cache.py).
    answers = helm_cache.template_all(helm, [call for _, call in found])
    for (release, _), done in zip(found, answers, strict=True):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{release.name}.yaml").write_text(_output(release, done))
    return [f"charts/ not rendered for {', '.join(names)}: {cause}" for cause, names in skipped.items()]
