"""What a lab's checks need of the stack it sits in, passed to them as pydantic's validation context.

A lab's checks depend on stack-wide settings that pydantic validates after the labs: the device plugin's requests
(nvidiaDevicePlugin.resources; its pods run on every lab node), whether the stack installs JupyterHub (its EBS CSI
driver runs a node pod on every lab node) and gpulab:metrics (dcgm-exporter runs on the lab nodes with a DCGM host
engine), and gpulab:timeZone (the zone of the classes that name none). domain/stack/load.py reads them from the stack
file's values before validating (domain.stack.model.stack_context) and passes them:

    Settings.model_validate(values, context=stack_context(values))

Every check that needs one reads it with of(info.context), and a Lab or LabClass keeps what it was validated with
(model_post_init receives the same context). A lab validated alone (Lab.model_validate(values), no context) is
checked as in a stack of the defaults: ALONE.
"""

from dataclasses import dataclass, field
from typing import Any

from domain.capacity.daemonsets import DEVICE_PLUGIN_DEFAULTS, ContainerResources


@dataclass(frozen=True)
class StackContext:
    """The stack-wide settings a lab's checks count with."""

    # nvidiaDevicePlugin.resources; None while that setting is itself invalid (reported on its own), and then the
    # checks that need the requests are skipped and those that count pods count the defaults'.
    device_plugin: ContainerResources | None = DEVICE_PLUGIN_DEFAULTS
    runs_ebs_csi: bool = False  # the stack installs JupyterHub (gpulab:jupyterhub)
    runs_metrics: bool = False  # the stack runs gpulab:metrics
    time_zone: str | None = None  # gpulab:timeZone; None when unset or invalid (reported at gpulab:timeZone itself)
    # The labs that passed their own checks when some lab did not, filled as gpulab:labs is validated (pydantic then
    # leaves gpulab:labs out of what the checks of later keys read: they read these, fields.labs_checked). Never
    # filled in ALONE.
    valid_labs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


# A lab or class validated outside a stack.
ALONE = StackContext()


def of(context: Any) -> StackContext:
    """The StackContext of a validation (ValidationInfo.context, or model_post_init's context): ALONE without one."""
    return context if isinstance(context, StackContext) else ALONE
