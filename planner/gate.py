"""The render's gate: a lab whose promises Karpenter would not keep fails the render (docs/planner.md, "The gate").

Each check holds what gpulab promises of a lab (its `labs.<lab>` stack output) to what Karpenter decided in the
planner's scenarios (plan.json), and a broken promise is one `gpulab:labs.<lab>.<key>` line naming the key to change,
with Karpenter's figure beside gpulab's.
"""

from collections.abc import Mapping
from typing import Any

from domain.stack.model import Lab
from planner import plan


def problems(labs: Mapping[str, Lab], planned: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(the lines of the labs whose promises Karpenter breaks, the lines of what it could not check)."""
    karpenter = f"Karpenter {planned['karpenter'].removeprefix('v')}"
    broken: list[str] = []
    unchecked: list[str] = []
    for name, lab in sorted(labs.items()):
        key = f"gpulab:labs.{name}"
        scenarios = plan.scenarios(planned, name)
        if lab.capacity_types == ["reserved"]:
            unchecked.append(
                f"{karpenter} did not check lab {name}: it may use only capacity reservations, which only EC2 knows"
            )
            continue
        seats, smoke = lab.learner_seats, scenarios["full"]["smokePods"]
        promised = seats - smoke
        promise = f"gpulab promises {promised}" + (
            f" ({seats} less the smoke workload's {smoke} pods)" if smoke else ""
        )
        for scenario, how in (("full", "all at once"), ("full-trickle", "one by one")):
            s = scenarios[scenario]
            if s["stopped"]:
                unchecked.append(
                    f"{karpenter} did not check lab {name}'s learners arriving {how} to the end: {s['stopped']}"
                )
            elif s["undecided"] and plan.placed(s) + s["undecided"] >= promised:
                # Not a refusal: in a cluster the next provisioning pass takes the learners the solve did not reach.
                unchecked.append(
                    f"{karpenter} did not decide {s['undecided']} of lab {name}'s learners arriving {how}: its solve "
                    "stopped at its one-minute timeout (the planner's machine too busy, or the lab too large)"
                )
            elif plan.placed(s) < promised:
                broken.append(
                    f"{key}.maxGpus: {karpenter} seats {plan.placed(s)} learners when they arrive {how}, {promise} "
                    f"(maxGpus {lab.max_gpus} x slicesPerGpu {lab.slices_per_gpu}): {s['reason']}"
                )
        one_gpu = scenarios["one-gpu"]
        nodes = sum(1 for claim in one_gpu["nodeClaims"] if claim["pods"])
        if not smoke and nodes > 1:
            broken.append(
                f"{key}.slicesPerGpu: {karpenter} needs {nodes} nodes for {lab.slices_per_gpu} learners, gpulab "
                "promises they share one GPU; lower learnerPod's requests or slicesPerGpu"
            )
        over = scenarios["over"]
        if plan.placed(over) > promised:
            broken.append(
                f"{key}.maxGpus: {karpenter} seats learner {seats + 1}, gpulab promises at most {seats}: the "
                "NodePool's limit lets the lab run more GPUs than maxGpus"
            )
        for i, lab_class in enumerate(lab.classes):
            buffer, arrival = scenarios[f"class-{i}-buffer"], scenarios[f"class-{i}-arrival"]
            warm, where = lab.warm_seats(lab_class), f"{key}.classes[{i}].warmSeats"
            if plan.placed(buffer) < warm:
                broken.append(f"{where}: {karpenter} warms {plan.placed(buffer)} seats, gpulab promises {warm}")
            if new := sum(1 for claim in arrival["nodeClaims"] if claim.get("new")):
                broken.append(
                    f"{where}: the class's {warm} learners need {new} new node{'s' if new > 1 else ''} at its start "
                    f"({karpenter}), gpulab "
                    "promises them warm seats"
                )
    return broken, unchecked
