"""Pure builder of the hub values that run gpulab's spend gate (components/jupyterhub/spend_gate.py) for the labs with
a budget: its source file beside the hub's configuration, and the configuration lines that make it the spawner's
pre_spawn_hook (zero-to-jupyterhub 4.4.0: hub.extraFiles, and hub.extraConfig, which files/hub/jupyterhub_config.py
execs after its own settings, lines 539-542; it sets no pre_spawn_hook of its own, nor does KubeSpawner 7.0.0). It
reads the workspace through the SigV4 proxy the hub's pod runs (culling.py querying)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.jupyterhub.notices import FILES
from components.jupyterhub.spawn_profiles import profile_list
from domain.stack.budgets import TERM, LabBudget
from domain.stack.model import Lab

GATE_SOURCE = Path(__file__).with_name("spend_gate.py")
CONFIG_NAME = "gpulab-spend-gate"


def gate_budgets(budgets: Mapping[str, LabBudget]) -> dict[str, dict[str, Any]]:
    """The budgets as the gate takes them (spend_gate.py SpendGate): amount in USD, and for a term its start, from
    which the gate adds the spend up, and its end, from which it refuses (spend_gate.py term_over), Unix times (a
    month's start is the gate's own to find)."""
    return {
        lab: {"amount": b.amount, "period": b.period}
        | (
            {"since": int(b.start.timestamp()), "until": int(b.end.timestamp())}
            if b.period == TERM and b.start is not None and b.end is not None
            else {}
        )
        for lab, b in budgets.items()
    }


def config(budgets: Mapping[str, LabBudget], default_lab: str, url: str) -> str:
    """The lines of jupyterhub_config.py that install the gate."""
    return "\n".join(
        [
            "import sys",
            f"sys.path.insert(0, {FILES!r})",
            "import spend_gate",
            f"c.Spawner.pre_spawn_hook = spend_gate.SpendGate({url!r}, {gate_budgets(budgets)!r}, {default_lab!r})",
        ]
    )


def hub_values(budgets: Mapping[str, LabBudget], labs: Mapping[str, Lab], url: str) -> dict[str, Any]:
    """The chart's `hub` values that run the gate, for the labs of `budgets`, reading the workspace at `url`."""
    (first, *_) = profile_list(labs)
    return {
        "extraFiles": {"spend-gate": {"mountPath": f"{FILES}/spend_gate.py", "stringData": GATE_SOURCE.read_text()}},
        "extraConfig": {CONFIG_NAME: config(budgets, first["slug"], url)},
    }
