"""The labs' node boot and learner-image times as the rehearsal's clock plays them: gpulab's timing table
(domain/capacity/boot_timings.py), each lab's `timings`, and the rehearse command line's `--timing KEY=VALUE`, which
wins over both. Written for the stepper (its -timings file, rehearsal/stepper/boot.go) and into rehearsal.json
(`timings`, with its `images`; docs/rehearsal.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from domain.capacity.boot_timings import REGISTRATION_TIMEOUT, Overrides
from domain.stack.model import LabTimings, Settings

FLAG = "--timing"
_FLOATS = {"learnerImageGb", "pullSecondsPerGb"}


class BadTiming(ValueError):
    """A --timing the rehearsal cannot take; the message is one line naming it."""


def command_line(pairs: Sequence[str]) -> Overrides | None:
    """The --timing KEY=VALUE pairs as overrides of every lab's timings (None without any): the keys and checks of
    `gpulab:labs.<lab>.timings` (a duration such as 90s, or a number of GB and of seconds per GB)."""
    if not pairs:
        return None
    keys = {field.alias or name for name, field in LabTimings.model_fields.items()}
    values: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or key not in keys:
            raise BadTiming(f"{FLAG} {pair}: want KEY=VALUE with KEY one of {', '.join(sorted(keys))}")
        if key in _FLOATS:
            try:
                values[key] = float(value)
            except ValueError:
                raise BadTiming(f"{FLAG} {key}: must be a number, got {value!r}") from None
        else:
            values[key] = value
    try:
        timings = LabTimings.model_validate(values)
    except ValidationError as error:
        raise BadTiming(
            "; ".join(
                f"{FLAG} {'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                for e in error.errors()
            )
        ) from None
    return timings.overrides(FLAG)


def for_stepper(settings: Settings, given: Overrides | None) -> dict[str, Any]:
    """The stepper's -timings: per lab and instance type, seconds from a node's launch to its Node Ready, to its slices
    advertised, and to its learner image pre-pulled; Karpenter's registration timeout."""
    labs: dict[str, dict[str, Any]] = {}
    for name, lab in sorted(settings.labs.items()):
        boot = lab.node_boot(name, given)
        labs[name] = {}
        for instance_type in lab.instance_types:
            pull = lab.learner_pull(name, instance_type, given)
            labs[name][instance_type] = {
                "readySeconds": boot.ready,
                "slicesSeconds": boot.slices,
                "learnerImage": lab.learner_image or "",
                "imageSeconds": boot.registered + (pull.seconds if pull else 0),
            }
    return {"labs": labs, "registrationTimeoutSeconds": REGISTRATION_TIMEOUT.value}


def for_report(settings: Settings, given: Overrides | None) -> dict[str, Any]:
    """rehearsal.json's `timings` (issue #48's shape): per instance type, a node's launch to Ready and Ready to its
    slices advertised, with their sources; within it `images`, per learner image, its pull (seconds on the slowest type
    of a lab's, its mode, their sources). Each entry names the `labs` it times; where labs time one type or image
    differently (a lab's own `timings`), the entry is `byLab` instead, each lab's figures."""
    types: dict[str, dict[str, dict[str, Any]]] = {}
    images: dict[str, dict[str, dict[str, Any]]] = {}
    for name, lab in sorted(settings.labs.items()):
        boot = lab.node_boot(name, given)
        for instance_type in lab.instance_types:
            types.setdefault(instance_type, {})[name] = {
                "launchToReadySeconds": boot.ready,
                "devicePluginReadySeconds": boot.device_plugin_after_ready,
                "source": boot.source,
            }
        pulls = [p for t in lab.instance_types if (p := lab.learner_pull(name, t, given)) is not None]
        if lab.learner_image and pulls:
            slowest = max(pulls, key=lambda p: p.seconds)
            images.setdefault(lab.learner_image, {})[name] = {
                "pullSeconds": slowest.seconds,
                "mode": slowest.mode,
                "source": slowest.source,
            }
    return {
        "timings": {
            **{instance_type: _by_lab(labs) for instance_type, labs in sorted(types.items())},
            "images": {image: _by_lab(labs) for image, labs in sorted(images.items())},
        }
    }


def _by_lab(labs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One entry with the `labs` it is for where every lab has the same figures, else `byLab`."""
    first, *others = labs.values()
    if all(figures == first for figures in others):
        return {**first, "labs": sorted(labs)}
    return {"byLab": labs}
