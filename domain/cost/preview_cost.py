"""The cost figures a `pulumi preview` resolved at the prices of the stack's region, in a file for the pull-request
comment (reports/preview_comment.py): the workflow's preview step names the file in GPULAB_PREVIEW_COST, the program
writes it once AWS has answered its price look-ups (program.py), and the comment's lab cost table reads it instead of
the offline render's figures at the us-east-1 list (docs/cost.md, "At which prices").

Only figures made from price look-ups, which a preview resolves (the Price List and spot look-ups are invokes, answered
at preview): never a resource's id or name, which a preview may not know, and an apply over an unknown value does not
run at preview (pulumi 3.272.0, the version requirements.txt pins, sdk/python/lib/pulumi/output.py `Output.apply`:
"Only perform the apply if the engine was able to give us an actual value", CONFIRMED in the installed package). The
file has the render's outputs.json shape for these keys (`cost`, `labs.<lab>.cost`), beside the `region` priced.
"""

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV = "GPULAB_PREVIEW_COST"


def write(path: Path, region: str, found: tuple[Mapping[str, Mapping[str, Any]], Mapping[str, Any]]) -> None:
    """Writes `found` (each lab's `cost` output and the stack's, program.py figures) priced in `region` to `path`, its
    directory made if need be: a preview whose render failed must not fail for want of it."""
    labs, stack = found
    path.parent.mkdir(parents=True, exist_ok=True)
    figures = {"region": region, "cost": stack, "labs": {name: {"cost": cost} for name, cost in labs.items()}}
    path.write_text(json.dumps(figures, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def read(path: Path | None) -> dict[str, Any] | None:
    """The figures at `path`; None without a path or without the file (the preview did not run, failed before its
    prices were known, or ran from a fork without credentials)."""
    if path is None or not path.is_file():
        return None
    figures: dict[str, Any] = json.loads(path.read_text())
    return figures
