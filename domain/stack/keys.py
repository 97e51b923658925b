"""Stack file keys outside gpulab's namespace: which pass, and which are refused because nothing would read them.

Pulumi hands a program every key of its stack file. Keys in other namespaces belong to Pulumi itself (`pulumi:`) or to
the package of that namespace, a provider (`aws:region`, `kubernetes:...`, `eks:...`, or any other package's); gpulab
leaves them to their readers. Two kinds of key would be read by nobody, and a lab in them would silently not exist:
a key without a namespace (the Pulumi CLI refuses it: "configuration keys should be of the form
`<namespace>:<name>`"), and a key in a namespace that is a slip of gpulab's own (`gpulb:labs`, `gpulabs:labs`).
"""

import re
from collections.abc import Iterable

from domain.stack.model import Settings

NAMESPACE = "gpulab"
# Where a key written without its namespace belongs, by its lowercase spelling (`Labs` and `labs` alike).
_HOMES = {
    (field.alias or name).lower(): f"{NAMESPACE}:{field.alias or name}" for name, field in Settings.model_fields.items()
}
_HOMES["region"] = "aws:region"


def key_problems(keys: Iterable[str]) -> list[str]:
    """One `<key>: <message>` line for each key that has no namespace, or a near miss of gpulab's."""
    lines = []
    for key in keys:
        namespace, colon, name = key.partition(":")
        if not (colon and namespace):
            home = _HOMES.get(key.lstrip(":").lower())
            hint = f"; did you mean {home}?" if home else ""
            lines.append(f"{key}: no namespace; Pulumi keys are <namespace>:<name>{hint}")
        elif namespace != NAMESPACE and _one_edit_apart(re.sub(r"[-_.]", "", namespace.lower()), NAMESPACE):
            lines.append(f"{key}: unknown namespace {namespace!r}; did you mean {NAMESPACE}:{name}?")
    return lines


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether `a` is `b`, or `b` with one character added, removed, replaced, or swapped with its neighbour.

    One edit catches the slips (gpulb, gpulabs, gpu-lab, GPULab, gpulba) without catching real packages such as gitlab,
    two edits away.
    """
    if len(a) == len(b):
        differ = [i for i in range(len(a)) if a[i] != b[i]]
        swapped = len(differ) == 2 and differ[1] == differ[0] + 1 and a[differ[0]] == b[differ[1]]
        return len(differ) <= 1 or (swapped and a[differ[1]] == b[differ[0]])
    shorter, longer = sorted((a, b), key=len)
    return len(longer) == len(shorter) + 1 and any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))
