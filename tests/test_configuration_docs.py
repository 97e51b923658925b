"""docs/configuration.md documents every key a stack file can hold under `gpulab:`, and no key that does not exist.

The keys come from the config models themselves, walked from the top-level Settings model by their camelCase aliases,
through nested models, lists of models (`[]`) and the labs mapping (`<lab>`). The reference documents each key as one
table row whose first cell is the key's full path in backticks, e.g. | `gpulab:labs.<lab>.classes[].warmSeats` | ...,
and whose second cell says "required" exactly when the model requires the key.
"""

import re
import types
import typing
from pathlib import Path

from pydantic import BaseModel, Field

from domain.stack import Lab, Settings

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
ROW = re.compile(r"^\|\s*`(gpulab:[^`]+)`\s*\|\s*([^|]*?)\s*\|", re.MULTILINE)
# How the reference writes the key of a mapping whose keys the user chooses.
MAPPING_KEYS = {"gpulab:labs": "<lab>"}


def _unwrap(annotation: typing.Any) -> typing.Any:
    """The type under Annotated[...] and `X | None`; a union of several models (gpulab:jupyterhub.auth) stays whole."""
    while True:
        origin = typing.get_origin(annotation)
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (types.UnionType, typing.Union) and len(members) == 1:
            annotation = members[0]
        else:
            return annotation


def _union_keys(node: typing.Any, prefix: str) -> dict[str, bool]:
    """The keys of a union of models, each told apart by its `type`: every member's keys, required when every member
    that has the key requires it."""
    found: dict[str, list[bool]] = {}
    for member in typing.get_args(node):
        for key, required in model_keys(member, prefix).items():
            found.setdefault(key, []).append(required)
    return {key: all(required) for key, required in found.items()}


def model_keys(model: type[BaseModel], prefix: str) -> dict[str, bool]:
    """Every key under `model`, by its documented path, and whether it is required."""
    keys = {}
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        keys[path] = field.is_required()
        node = _unwrap(field.annotation)
        while True:
            origin, args = typing.get_origin(node), typing.get_args(node)
            if origin is list:
                path, node = f"{path}[]", _unwrap(args[0])
            elif origin is dict:
                assert path in MAPPING_KEYS, f"{path}: a mapping; say in MAPPING_KEYS how the reference writes its keys"
                path, node = f"{path}.{MAPPING_KEYS[path]}", _unwrap(args[1])
                keys[path] = False
            else:
                break
        if isinstance(node, type) and issubclass(node, BaseModel):
            keys.update(model_keys(node, f"{path}."))
        elif typing.get_origin(node) in (types.UnionType, typing.Union) and any(
            isinstance(member, type) and issubclass(member, BaseModel) for member in typing.get_args(node)
        ):  # a union of models has their keys; one of values (a number or a text) has none
            keys.update(_union_keys(node, f"{path}."))
    return keys


def documented(text: str) -> dict[str, str]:
    rows = ROW.findall(text)
    repeated = sorted({key for key, _ in rows if [k for k, _ in rows].count(key) > 1})
    assert not repeated, f"{DOC.name} documents these keys more than once: {repeated}"
    return dict(rows)


def problems(keys: dict[str, bool], rows: dict[str, str]) -> list[str]:
    lines = [f"{key}: not documented in {DOC.name}; add a table row for it" for key in keys if key not in rows]
    lines += [f"{key}: documented in {DOC.name}, but no such key exists" for key in rows if key not in keys]
    for key, required in keys.items():
        if key in rows and (rows[key] == "required") != required:
            verb = "requires" if required else "does not require"
            lines.append(f"{key}: the model {verb} it; the row says {rows[key]!r}")
    return lines


def stack_keys() -> dict[str, bool]:
    return model_keys(Settings, "gpulab:")


def test_every_key_is_documented_and_every_documented_one_is():
    assert problems(stack_keys(), documented(DOC.read_text())) == []


def test_the_walk_reaches_every_kind_of_key():
    # One key of each shape the walk must find: top level, nested model, list of models, the labs mapping.
    keys = stack_keys()
    assert keys["gpulab:cluster"] is True
    assert keys["gpulab:cluster.systemNodes.size"] is False
    assert keys["gpulab:labs.<lab>.instanceTypes"] is True
    assert keys["gpulab:labs.<lab>.classes[].schedule"] is True
    assert keys["gpulab:labs.<lab>.disruption.budgets[].nodes"] is True
    assert keys["gpulab:nvidiaDevicePlugin.resources.memory"] is False
    # A union of models: every member's keys (GitHub's and OIDC's here).
    assert keys["gpulab:jupyterhub.auth.allowedOrganizations"] is False
    assert keys["gpulab:jupyterhub.auth.tokenUrl"] is True


def test_an_undocumented_field_fails():
    # A lab model with one more field, as a change to domain/stack/ would add it (camelCase alias from the model's
    # config).
    class LabWithWarmPool(Lab):
        warm_pool: int = Field(default=0, description="A key nobody documented.")

    keys = {**stack_keys(), **model_keys(LabWithWarmPool, "gpulab:labs.<lab>.")}

    assert problems(keys, documented(DOC.read_text())) == [
        f"gpulab:labs.<lab>.warmPool: not documented in {DOC.name}; add a table row for it"
    ]


def test_a_documented_key_that_does_not_exist_fails():
    text = DOC.read_text() + "\n| `gpulab:labs.<lab>.warmPool` | 0 | a key no model has |\n"

    assert problems(stack_keys(), documented(text)) == [
        f"gpulab:labs.<lab>.warmPool: documented in {DOC.name}, but no such key exists"
    ]


def test_a_required_key_documented_as_optional_fails():
    rows = {**documented(DOC.read_text()), "gpulab:labs.<lab>.ami": "al2023@latest"}

    assert problems(stack_keys(), rows) == [
        "gpulab:labs.<lab>.ami: the model requires it; the row says 'al2023@latest'"
    ]
