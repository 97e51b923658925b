"""Karpenter's duration strings as numbers, for arithmetic on them: its general durations (30s, 1h30m, 720h) and the
hours-and-minutes durations of its disruption budgets (2h, 45m, 1h30m)."""

import re

_PART = re.compile(r"([0-9]+)(s|m|h)")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def seconds(duration: str) -> int:
    """Seconds in a duration such as 1h30m; the config models have checked its grammar."""
    return sum(int(count) * _UNIT_SECONDS[unit] for count, unit in _PART.findall(duration))


_HOURS_MINUTES = re.compile(r"(?:([0-9]+)h)?(?:([0-9]+)m)?")


def duration_minutes(text: str) -> int:
    """Minutes in a duration of hours and minutes, as Karpenter's budget durations write them (2h, 45m, 1h30m)."""
    match = _HOURS_MINUTES.fullmatch(text)
    if not text or match is None:
        raise ValueError(f"{text!r} is not a duration of hours and minutes")
    return 60 * int(match.group(1) or 0) + int(match.group(2) or 0)


def format_duration(minutes: int) -> str:
    """The budget duration Karpenter's CRD pattern accepts for a whole number of minutes: 2h, 45m or 1h30m."""
    hours, rest = divmod(minutes, 60)
    return f"{hours}h{rest}m" if hours and rest else f"{hours}h" if hours else f"{rest}m"


def unit_needed(value: object) -> object:
    """A duration written as a bare number (`duration: 120`), which YAML reads as a number and gpulab cannot read as
    minutes or seconds without guessing: refused, with what was likely meant. Anything else passes unchanged."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int) and value > 0:
        other = format_duration(value) if value >= 60 else f"{value}h"
        raise ValueError(f"a duration needs a unit, e.g. {value}m or {other}; got the number {value}")
    raise ValueError(f"a duration needs a unit, e.g. 90m or 1h30m; got the number {value}")
