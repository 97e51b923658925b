"""Spot interruptions in the rehearsal: the rate the rehearse command sets (`--spot-interruptions-per-node-hour`), at
which EC2 warns the spot instances of the labs that allow spot that it reclaims them (the stepper's
rehearsal/stepper/spot.go, read by Karpenter's own interruption controller), and rehearsal.json's `spot`
(docs/rehearsal.md, Spot interruptions)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rehearsal/report.py reads this module's names without the stack's model
    from domain.stack.model import Settings

FLAG = "--spot-interruptions-per-node-hour"
# The reason Karpenter's interruption controller gives a NodeClaim it deletes on a spot warning: the message kind
# (github.com/aws/karpenter-provider-aws v1.14.1 pkg/controllers/interruption/messages/types.go SpotInterruptionKind),
# which the stepper's events carry (rehearsal/stepper/journal.go reasonOf).
SPOT_INTERRUPTED = "spot_interrupted"


class BadRate(ValueError):
    """A rate the rehearsal cannot take; the message is one line naming the flag."""


def rate(value: str | None) -> float:
    """The command line's rate of spot warnings per hour a spot node runs: 0 without it (no warnings)."""
    if value is None:
        return 0.0
    try:
        number = float(value)
    except ValueError:
        raise BadRate(f"{FLAG}: must be a number of warnings per spot node-hour, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise BadRate(f"{FLAG}: must be a number at least 0 (warnings per spot node-hour), got {value!r}")
    return number


def section(settings: Settings, stepper: Mapping[str, Any], labs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """rehearsal.json's `spot`: how the stepper plays spot (its rate, EC2's warning, its seed, the price it bills a
    spot node at and that price's source), the labs that allow spot, and the warnings the day had per lab."""
    return {
        **stepper,
        "labs": sorted(n for n, lab in settings.labs.items() if "spot" in lab.capacity_types),
        "warnings": {n: sum(1 for e in lab["events"] if e["what"] == "spotWarning") for n, lab in sorted(labs.items())},
    }
