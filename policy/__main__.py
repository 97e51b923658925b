"""The gpulab policy pack: each rule of rules.py as a mandatory CrossGuard resource policy.

Run by the Pulumi CLI: `pulumi preview --policy-pack policy`. The CLI starts this folder as a program of its own
(`python -m pulumi.policy` runs it with the folder first on sys.path, hence the plain `import rules`).
"""

import os

import rules
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyPack,
    ReportViolation,
    ResourceValidation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

PACK_NAME = "gpulab"


def current_stack() -> str:
    """The stack the CLI runs the pack for, or "" (which rules.is_production treats as production) if unknown.

    The CLI hands it to the pack's process as PULUMI_STACK, as it does the project and organization. It is read here
    rather than through pulumi.get_stack(), which answers "stack" when the variable is missing: a name that would
    pass for a non-production stack.
    """
    return os.environ.get("PULUMI_STACK", "")


def validation(rule: rules.Rule) -> ResourceValidation:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rule(args.resource_type, args.props, current_stack()):
            report_violation(message, None)

    return validate


def policies() -> list[Policy]:
    """One mandatory resource policy per rule, in the order of rules.RULES."""
    return [
        ResourceValidationPolicy(
            name=name,
            description=rules.summary(rule),
            validate=validation(rule),
            enforcement_level=EnforcementLevel.MANDATORY,
        )
        for name, rule in rules.RULES.items()
    ]


# PolicyPack() starts the analyzer's gRPC server and blocks for good, so tests import this module under another name
# and build only the list of policies.
if __name__ == "__main__":
    PolicyPack(name=PACK_NAME, policies=policies())
