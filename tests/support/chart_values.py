"""Which Helm values a chart never reads: keys Helm would accept and silently ignore.

Helm merges any key into .Values, so a misspelled key (`settings.featureGates.nodeOverlays`) installs without a word
and leaves the chart's default in force. A static search of the templates cannot tell a key the chart reads from one it
only passes through a map, so the check asks the chart itself: for every leaf of the values the program sets (a scalar,
a list, or an empty map), render once with that leaf changed; if nothing the release installs changes, and helm does
not fail, the chart never looked at it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

Path = tuple[str, ...]
PROBE = "gpulab-probe"


def leaves(values: Mapping[str, Any], path: Path = ()) -> Iterator[tuple[Path, Any]]:
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            yield from leaves(value, (*path, key))
        else:
            yield (*path, key), value


def changed(value: Any) -> Any:
    """A different value of the same shape, so that a template that reads it renders something else."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return f"{value}-{PROBE}"
    if isinstance(value, list):
        return [*value, copy.deepcopy(value[-1]) if value else PROBE]
    if isinstance(value, Mapping):
        return {PROBE: PROBE}
    return PROBE  # null


def with_leaf(values: Mapping[str, Any], path: Path, value: Any) -> dict[str, Any]:
    result = copy.deepcopy(dict(values))
    target = result
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return result


def unread(
    values: Mapping[str, Any], template_each: Callable[[list[Mapping[str, Any]]], Sequence[str | Exception]]
) -> list[str]:
    """The dotted paths of the leaves of `values` that change nothing `template_each` renders (it renders each set of
    values it is given, or gives the error helm failed with: then the chart did read the leaf)."""
    paths = [path for path, _ in leaves(values)]
    variants = [with_leaf(values, path, changed(value)) for path, value in leaves(values)]
    baseline, *outputs = template_each([values, *variants])
    assert isinstance(baseline, str), f"the values as the program sets them must render: {baseline}"
    return [".".join(path) for path, output in zip(paths, outputs, strict=True) if output == baseline]
