"""The render's warning, before any rehearsal, for a class whose warm-up is shorter than its warm seats need on the
timing table (domain/capacity/boot_timings.py, the one the rehearsal's clock plays), and for a lab whose nodes would
register after Karpenter has given up on them."""

import math
from collections.abc import Mapping

from domain.capacity.boot_timings import BATCH_MAX, REGISTRATION_TIMEOUT
from domain.stack.model import Lab
from domain.time import durations


def warmup_problem(name: str, lab: Lab, index: int) -> str | None:
    """Why class `index` of lab `name` has too short a warm-up, with the figure it needs; None when it has enough."""
    lab_class = lab.classes[index]
    least = lab.least_warmup_seconds(name)
    if durations.seconds(lab_class.warmup) >= least:
        return None
    boot = lab.node_boot(name)
    pulls = [p.seconds for t in lab.instance_types if (p := lab.learner_pull(name, t)) is not None]
    image = f", the learner image pre-pulled {max(pulls):g} s after the registration" if pulls else ""
    return (
        f"{lab_class.warmup} is shorter than the {least:g} s its warm seats need to be ready at its start "
        f"(Karpenter's batch {BATCH_MAX.value:g} s, then a node's launch to its GPU slices {boot.slices:g} s{image}; "
        f"domain/capacity/boot_timings.py, gpulab:labs.{name}.timings); set warmup to at least "
        f"{durations.format_duration(math.ceil(least / 60))}"
    )


def timing_warnings(labs: Mapping[str, Lab]) -> list[str]:
    """One `gpulab:labs.<lab>....: warning: ...` line per class whose warm-up is too short, and per lab whose nodes
    register after Karpenter's registration timeout."""
    lines = []
    for name, lab in labs.items():
        boot = lab.node_boot(name)
        if boot.registered >= REGISTRATION_TIMEOUT.value:
            lines.append(
                f"gpulab:labs.{name}.timings.nodeRegistered: warning: {boot.registered:g} s is not under Karpenter's "
                f"registration timeout of {REGISTRATION_TIMEOUT.value:g} s ({REGISTRATION_TIMEOUT.source}): it "
                "deletes every NodeClaim of the lab before its node registers"
            )
        for index in range(len(lab.classes)):
            if problem := warmup_problem(name, lab, index):
                lines.append(f"gpulab:labs.{name}.classes[{index}].warmup: warning: {problem}")
    return lines
