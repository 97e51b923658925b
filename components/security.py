"""Container security contexts that several components' containers share."""

import copy
from typing import Any

# A container that needs no privilege: no escalation, no capabilities, a read-only root file system, run as nobody
# (65534), as kube-state-metrics' own example runs it (examples/standard/deployment.yaml at v2.20.0).
_UNPRIVILEGED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 65534,
}


def unprivileged() -> dict[str, Any]:
    return copy.deepcopy(_UNPRIVILEGED)
