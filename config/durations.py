"""Karpenter's duration strings (e.g. 30m, 1h30m, 720h) as numbers, for arithmetic on them."""

import re

_PART = re.compile(r"([0-9]+)(s|m|h)")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def seconds(duration: str) -> int:
    """Seconds in a duration such as 1h30m; the config models have checked its grammar."""
    return sum(int(count) * _UNIT_SECONDS[unit] for count, unit in _PART.findall(duration))
