"""Kubernetes quantities (500m, 1.5Gi, 4e9) as the API server reads them, for every request gpulab reads or writes."""

import functools
import math
import re
from fractions import Fraction

# A Kubernetes quantity, as k8s.io/apimachinery pkg/api/resource/quantity.go reads one (kubernetes-1.34.1): the
# grammar in Quantity's comment (a sign, digits with an optional point, then a binary suffix, a decimal exponent or a
# decimal suffix) with the decimal suffixes its parser knows (quantitySuffixer: n and u too); the exponent is a whole
# number (parseQuantityString reads digits only). `1.`, `.5`, `4e9`, `1E` (exa) and `+1` are quantities; `1K`, `1e`,
# `1e1.5`, `1Mi1` and `` are not. (ParseQuantity itself reads `.` and `e3`, which have no digits, as 0; the grammar
# does not allow them, and neither does gpulab.)
QUANTITY = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[eE][+-]?[0-9]+|[numkMGTPE])?"
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>[KMGTPE]i)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]))?"
)
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {suffix: 10 * (i + 1) for i, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))}
# ParseQuantity rounds a value up (away from zero) to whole nanos and caps binary ones at 2^63 - 1.
_NANO = 10**9
_MAX_BINARY = 2**63 - 1


# Cached: every lab parses the same few requests of every DaemonSet for each of its instance types.
@functools.cache
def quantity(text: str) -> Fraction:
    """The value Kubernetes gives a quantity (e.g. 500m, 0.5, 4e9, 1.5Gi), as an exact number."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    value = Fraction(match["number"])
    if match["binary"]:
        value = min(value * 2 ** _BINARY[match["binary"]], Fraction(_MAX_BINARY))
    elif match["exponent"]:
        value *= Fraction(10) ** int(match["exponent"])
    elif match["decimal"]:
        value *= Fraction(10) ** _DECIMAL[match["decimal"]]
    nanos = math.ceil(abs(value) * _NANO)
    return Fraction(nanos if value >= 0 else -nanos, _NANO)
