"""Reads the stack configuration, the only place in gpulab that touches pulumi.Config, and reports every problem.

Problems come back as one line each, `gpulab:<key path>: <message>`, so a user can fix a stack file in one pass.
"""

import difflib
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pydantic import BaseModel, ValidationError

from domain.problems import FieldProblem, Problems
from domain.stack.jupyterhub import (
    AUTH_TYPES,
    CLIENT_SECRET_KEY,
    NEEDS_CLIENT_SECRET,
    LoadBalancer,
    certificate_region_problem,
)
from domain.stack.keys import NAMESPACE, key_problems
from domain.stack.model import Settings, stack_context

_SET_SECRET = f"set it with `pulumi config set --secret {NAMESPACE}:{CLIENT_SECRET_KEY} <secret>`"


class ConfigError(Exception):
    """The stack file has problems; `lines` holds one `gpulab:<key path>: <message>` line per problem."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass(frozen=True)
class StackConfig:
    """What the program needs from a stack file: gpulab's settings and the AWS region the stack deploys to."""

    settings: Settings
    region: str
    # The OAuth client secret of gpulab:jupyterhub's sign-in, from the Pulumi secret gpulab:jupyterhubClientSecret;
    # the program passes it on only as a Pulumi secret.
    jupyterhub_client_secret: str | None = field(default=None, repr=False)


def parse(values: Mapping[str, Any], region: str | None) -> StackConfig:
    """Validates the `gpulab:` keys (without their namespace prefix) and the region; raises ConfigError.

    `values` may hold the client secret (jupyterhubClientSecret), which is checked apart from the settings."""
    lines = []
    if not region:
        lines.append("aws:region: required; the AWS region this stack deploys to, e.g. eu-west-1")
    values = dict(values)
    client_secret = values.pop(CLIENT_SECRET_KEY, None)
    try:
        settings = Settings.model_validate(values, context=stack_context(values))
    except ValidationError as error:
        lines[:0] = [
            f"{NAMESPACE}:{_path(e, problem)}: {_message(e, problem)}"
            for e in _causes_first(error.errors())
            for problem in _problems(e)
        ]
        # The checks of the hub's secret and certificate need its auth type and load balancer only: a wrong key
        # elsewhere, in the hub included, hides neither.
        auth, load_balancer = _valid_hub_parts(values.get("jupyterhub"))
    else:
        hub = settings.jupyterhub
        auth, load_balancer = (hub.auth.type, hub.load_balancer) if hub else (None, None)
    lines += _client_secret_problems(auth, client_secret)
    if region and load_balancer and (problem := certificate_region_problem(load_balancer, region)):
        lines.append(f"{NAMESPACE}:jupyterhub.loadBalancer.certificateArn: {problem}")
    if lines:
        raise ConfigError(lines)
    assert region is not None
    return StackConfig(settings=settings, region=region, jupyterhub_client_secret=client_secret)


_UNKNOWN = "unknown"


def _valid_hub_parts(hub: Any) -> tuple[str | None, LoadBalancer | None]:
    """gpulab:jupyterhub's sign-in type (None without a hub, _UNKNOWN when it is wrong) and its load balancer (None
    when it is wrong), from the stack file's values when the settings failed their checks."""
    if hub is None:
        return None, None
    if not isinstance(hub, dict):
        return _UNKNOWN, None
    auth = hub.get("auth")
    kind = auth.get("type") if isinstance(auth, dict) else None
    try:
        load_balancer = LoadBalancer.model_validate(hub.get("loadBalancer"))
    except ValidationError:
        load_balancer = None
    return (kind if kind in AUTH_TYPES else _UNKNOWN), load_balancer


def _client_secret_problems(auth: str | None, client_secret: Any) -> list[str]:
    key = f"{NAMESPACE}:{CLIENT_SECRET_KEY}"
    if auth == _UNKNOWN:  # a wrong gpulab:jupyterhub.auth.type, which its own line names
        return []
    if auth in NEEDS_CLIENT_SECRET:
        if client_secret is None:
            return [
                f"{key}: required with gpulab:jupyterhub.auth.type {auth}: the OAuth app's client secret; {_SET_SECRET}"
            ]
        if not isinstance(client_secret, str) or not client_secret.strip():
            # An empty secret (`pulumi config set --secret` of an empty string, or of a shell variable that was not
            # set) would reach the provider as the app's secret and every sign-in would fail there, not here.
            if not isinstance(client_secret, str):
                what = f"a {type(client_secret).__name__}, not text"
            else:
                what = "only blanks" if client_secret else "empty"
            return [
                f"{key}: is {what}; it must be the OAuth app's client secret, which gpulab:jupyterhub.auth.type "
                f"{auth} needs; {_SET_SECRET}"
            ]
        return []
    if client_secret is not None:
        return [f"{key}: only used with gpulab:jupyterhub.auth.type github or oidc; remove it"]
    return []


def from_cli(everything: Mapping[str, Any]) -> StackConfig:
    """The `gpulab:` keys and `aws:region` of a stack's configuration as the Pulumi CLI hands it to a program (and as
    render/run.py read_stack_file reads a stack file), validated; raises ConfigError."""
    prefix = f"{NAMESPACE}:"
    # The client secret is text as it was set: decoded as JSON, a secret of digits would become a number.
    values = {
        key[len(prefix) :]: raw if key == f"{prefix}{CLIENT_SECRET_KEY}" else _decode(raw)
        for key, raw in everything.items()
        if key.startswith(prefix)
    }
    return parse(values, everything.get("aws:region"))


def load() -> StackConfig:
    """Reads this stack's configuration from the Pulumi runtime; raises ConfigError."""
    # pulumi.Config reads one key at a time and cannot list keys; unknown keys must be errors, so list them here.
    everything = _all_config()
    lines = key_problems(everything)
    secret_key = f"{NAMESPACE}:{CLIENT_SECRET_KEY}"
    if secret_key in everything and not pulumi.runtime.config.is_config_secret(secret_key):
        lines.append(f"{secret_key}: must be a Pulumi secret, not plain text in the stack file; {_SET_SECRET}")
    try:
        stack = from_cli(everything)
    except ConfigError as error:
        lines += error.lines
    if lines:
        raise ConfigError(lines)
    return stack


def _all_config() -> dict[str, Any]:
    return {**pulumi.runtime.config.get_config_env(), **pulumi.runtime.config.CONFIG.get()}


def _decode(raw: Any) -> Any:
    # The engine hands structured values over as JSON text and plain strings as they are.
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _causes_first(errors: list[Any]) -> list[Any]:
    """The errors with each unknown key moved before the first other error of its model: the key it misspells is
    left to its default, and the checks that default fails are its consequences (a misspelt slicesPerGpu fails
    sharing: mps for one slice)."""
    ordered: list[Any] = []
    for error in errors:
        if error["type"] == "extra_forbidden":
            model = error["loc"][:-1]
            first = next((i for i, e in enumerate(ordered) if e["loc"][: len(model)] == model), len(ordered))
            ordered.insert(first, error)
        else:
            ordered.append(error)
    return ordered


def _problems(error: Mapping[str, Any]) -> list[Any]:
    """What one error reports: each problem of a check that found several (domain.problems.Problems), else its own."""
    problem = error.get("ctx", {}).get("error")
    return problem.problems if isinstance(problem, Problems) else [problem]


def _path(error: Mapping[str, Any], problem: Any) -> str:
    loc = error["loc"]
    if isinstance(problem, FieldProblem):  # found by the check of another key of the same model: report it at its key
        loc = loc[:-1]
    path = ""
    for part in _walk(loc)[0]:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    if isinstance(problem, FieldProblem):
        path += f".{problem.key}" if path else problem.key
    return path


_KINDS = {
    "int_type": "a whole number",
    "string_type": "a string",
    "list_type": "a list",
    "bool_type": "true or false",
    "float_type": "a number",
}
_MAPPING = "a mapping of keys to values"


def _message(error: Mapping[str, Any], problem: Any) -> str:
    kind, ctx, value = error["type"], error.get("ctx", {}), error.get("input")
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return _unknown_key(error["loc"], value)
    if kind == "value_error":
        return str(problem)
    if kind in _KINDS:
        return f"must be {_KINDS[kind]}, got {_describe(value)}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be {_MAPPING}, got {_describe(value)}"
    if kind == "literal_error":
        return f"must be one of {ctx['expected']}, got {_describe(value)}"
    if kind == "too_short":
        return "must not be empty"
    if kind == "union_tag_invalid":
        return f"type must be one of {ctx['expected_tags']}, got {ctx['tag']!r}"
    if kind == "union_tag_not_found":
        return f"needs the key {ctx['discriminator']}, which says which kind it is"
    return error["msg"]


def _describe(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return repr(value)


# Keys renamed since a release, by old name: what to write instead, given the old key's value. Refused rather than read
# as aliases: a stack keeps one spelling of each setting.
RENAMED = {
    # Issue #49: a lab's budget may be over its term; the old key was always a month.
    "monthlyBudget": lambda value: (
        f"renamed to budget, which is per term for a lab whose classes have one: for the same monthly budget write "
        f"budget: {{amount: {value!r}, period: month}}"
        if isinstance(value, int | float) and not isinstance(value, bool)
        else "renamed to budget: write budget: {amount: <US dollars>, period: month} for a monthly budget"
    ),
}


def _unknown_key(loc: tuple, value: Any) -> str:
    allowed = _allowed_keys(loc[:-1])
    key = str(loc[-1])
    if key in RENAMED:
        return RENAMED[key](value)
    # The OAuth client secret is a Pulumi secret of its own, never a key of the settings: a key that names a secret,
    # under gpulab:jupyterhub.auth or at the top, means it.
    secret = f"{NAMESPACE}:{CLIENT_SECRET_KEY}"
    if "secret" in key.lower() and (len(loc) == 1 or _walk(loc)[0][:2] == ["jupyterhub", "auth"]):
        return f"unknown key; did you mean {secret}? The OAuth client secret is not in the settings: {_SET_SECRET}"
    # Compared as lowercase, as a user mistypes them: maxGPUs is maxGpus, not maxPods.
    by_lowercase = {key.lower(): key for key in allowed}
    close = difflib.get_close_matches(key.lower(), by_lowercase, n=1)
    hint = f"did you mean {by_lowercase[close[0]]}? " if close else ""
    return f"unknown key; {hint}allowed keys: {', '.join(allowed)}"


def _allowed_keys(loc: tuple) -> list[str]:
    """The camelCase keys the model at `loc` accepts."""
    node = _walk(loc)[1]
    assert isinstance(node, type) and issubclass(node, BaseModel)
    return sorted(f.alias or name for name, f in node.model_fields.items())


def _walk(loc: tuple) -> tuple[list[str | int], Any]:
    """`loc` as the stack file spells it, and the type at its end: the models walked as pydantic walked the input.

    Pydantic names a field by its camelCase key when the stack file has the key, but by its Python name when a check
    fails on its default; and it marks a failing dict key with a trailing "[key]", where the key itself is the path.
    """
    node: Any = Settings
    keys: list[str | int] = []
    for part in loc:
        if part == "[key]":
            continue
        if part in (choices := _tagged_choices(node)):  # pydantic names the member of a tagged union it chose
            node = choices[part]
            continue
        if isinstance(node, type) and issubclass(node, BaseModel):
            field = next(((n, f) for n, f in node.model_fields.items() if part in (n, f.alias)), None)
            keys.append(field[1].alias or field[0] if field else part)
            node = _unwrap(field[1].annotation) if field else None
        else:  # an entry of a dict (a lab) or of a list (a budget): the values' type
            keys.append(part)
            node = _unwrap(typing.get_args(node)[-1]) if typing.get_args(node) else None
    return keys, node


def _unwrap(annotation: Any) -> Any:
    """The type a key holds: `X` of `Annotated[X, ...]` and of `X | None`; a union of several models stays whole."""
    while True:
        origin = typing.get_origin(annotation)
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if origin is typing.Annotated or (origin is types.UnionType and len(members) == 1):
            annotation = typing.get_args(annotation)[0]
        else:
            return annotation


def _tagged_choices(node: Any) -> dict[str, Any]:
    """A union of models told apart by their `type` key (e.g. gpulab:jupyterhub.auth): each model by its tag."""
    if typing.get_origin(node) is not types.UnionType:
        return {}
    members = [m for m in typing.get_args(node) if isinstance(m, type) and issubclass(m, BaseModel)]
    return {typing.get_args(m.model_fields["type"].annotation)[0]: m for m in members if "type" in m.model_fields}
