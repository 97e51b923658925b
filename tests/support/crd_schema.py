"""Check rendered custom resources against the upstream Karpenter CRDs, as the API server would on create.

Two layers, mirroring the API server:
1. structure: the version's openAPIV3Schema, checked with jsonschema; objects with `properties` are closed, because
   strict field validation (what kubectl and Pulumi's server-side apply use) rejects unknown fields;
2. `x-kubernetes-validations`: CEL rules, evaluated with cel-python at the node that declares them, plus the
   Kubernetes CEL string/regex extensions Karpenter relies on (cel-python lacks them).

Defaults are deliberately not applied: a rendered object must be valid as written. A rule this module cannot compile
or evaluate is reported as a problem, never skipped, so a validator gap cannot pass for a valid object.
"""

from __future__ import annotations

import datetime
import functools
import json
import pathlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import jsonschema
import jsonschema.validators
import lark
import pytest
import re2
import yaml
from celpy import celtypes
from celpy.evaluation import base_functions
from jsonschema.protocols import Validator

from tests.support import upstream_data

UPSTREAM: pathlib.Path = upstream_data.KARPENTER / "crds"


def upstream_available() -> bool:
    return UPSTREAM.is_dir() and any(UPSTREAM.glob("*.yaml"))


requires_upstream = pytest.mark.skipif(
    not upstream_available(),
    reason=upstream_data.absent(UPSTREAM),
)


# ---------------------------------------------------------------------------------------------------------------------
# CRD index


@dataclass(frozen=True, eq=False)
class _CrdVersion:
    source: str
    served: bool
    schema: Mapping[str, Any]


# libyaml parses the 140 kB of CRDs ten times faster than the pure-Python loader.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _crd_versions() -> dict[tuple[str, str, str], _CrdVersion]:
    """(group, version, kind) -> that version's schema, over every CRD file in UPSTREAM."""
    if not upstream_available():
        raise FileNotFoundError(f"{UPSTREAM} holds no CRD files; guard the caller with requires_upstream")
    index: dict[tuple[str, str, str], _CrdVersion] = {}
    for path in sorted(UPSTREAM.glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=_YAML_LOADER):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                key = (spec["group"], version["name"], spec["names"]["kind"])
                index[key] = _CrdVersion(path.name, bool(version.get("served")), version["schema"]["openAPIV3Schema"])
    return index


def crd_kinds() -> list[tuple[str, str, str]]:
    """Every (group, version, kind) found in UPSTREAM, sorted."""
    return sorted(_crd_versions())


# ---------------------------------------------------------------------------------------------------------------------
# Paths


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _child(path: str, key: str | int) -> str:
    # Map keys such as label names hold dots and slashes; bracket them so the path stays unambiguous.
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENTIFIER.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def _join(path: str, parts: Iterable[str | int]) -> str:
    for part in parts:
        path = _child(path, part)
    return path


# ---------------------------------------------------------------------------------------------------------------------
# Structure: openAPIV3Schema -> JSON Schema


class SchemaGap(ValueError):
    """The CRD uses a schema keyword this module does not know how to check."""


# Keywords with the same meaning in OpenAPI v3 (as Kubernetes restricts it) and JSON Schema 2020-12.
_PLAIN_KEYWORDS = frozenset(
    {
        "type",
        "required",
        "enum",
        "pattern",
        "format",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "minimum",
        "maximum",
        "multipleOf",
    }
)
_SUBSCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf"})
# Documentation, defaulting and Kubernetes hints: none of them constrains what a create may contain.
_IGNORED_KEYWORDS = frozenset({"description", "title", "default", "example", "externalDocs"})
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def _to_json_schema(node: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _to_json_schema(sub, f"{where}.{name}") for name, sub in value.items()}
        elif key in ("items", "not") or (key == "additionalProperties" and isinstance(value, Mapping)):
            out[key] = _to_json_schema(value, f"{where}.{key}")
        elif key == "additionalProperties":
            out[key] = bool(value)
        elif key in _SUBSCHEMA_LISTS:
            out[key] = [_to_json_schema(sub, f"{where}.{key}[{i}]") for i, sub in enumerate(value)]
            if any("x-kubernetes-validations" in sub for sub in value):
                # The CEL walk follows properties/items/additionalProperties only; say so rather than skip the rules.
                raise SchemaGap(
                    f"{where}.{key}: CEL rules inside {key} are not evaluated by tests/support/crd_schema.py"
                )
        elif key in _PLAIN_KEYWORDS:
            out[key] = value
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            # OpenAPI v3.0 makes these booleans that modify minimum/maximum; JSON Schema makes them the bound.
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value is True and bound in node:
                out[key] = node[bound]
            elif not isinstance(value, bool):
                out[key] = value
        elif key == "nullable" or key.startswith("x-kubernetes-") or key in _IGNORED_KEYWORDS:
            continue
        else:
            raise SchemaGap(f"{where}: schema keyword {key!r} is not understood by tests/support/crd_schema.py")

    if node.get("x-kubernetes-int-or-string") or node.get("format") == "int-or-string":
        if out.get("anyOf") == _INT_OR_STRING_ANY_OF:
            del out["anyOf"]  # the type below says the same with a clearer error message
        out["type"] = ["integer", "string"]
        out.pop("format", None)
    if node.get("nullable"):
        types = out.get("type")
        if types is not None:
            out["type"] = [*(types if isinstance(types, list) else [types]), "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _re2_pattern(
    validator: Validator, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    # The API server matches with Go's RE2: `$` is end of text only, unlike Python's re, which also allows a final \n.
    if isinstance(instance, str) and _regex(pattern).search(instance) is None:
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_FORMATS = jsonschema.FormatChecker(formats=())
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


@_FORMATS.checks("int32")
def _is_int32(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _is_int64(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**63) <= value < 2**63


@_FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _RFC3339.fullmatch(value):
        raise ValueError("not an RFC 3339 date-time")
    datetime.datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    return True


_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _re2_pattern})


def _structure_validator(schema: Mapping[str, Any], where: str) -> Validator:
    return _Validator(_to_json_schema(schema, where), format_checker=_FORMATS)


@functools.cache
def _crd_structure_validator(key: tuple[str, str, str]) -> Validator:
    return _structure_validator(_crd_versions()[key].schema["properties"]["spec"], "spec")


def _structure_problems(validator: Validator, value: Any, path: str) -> list[str]:
    problems: list[str] = []
    for error in validator.iter_errors(value):
        where = _join(path, error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = error.schema.get("properties", {})
            problems += [f"{_child(where, name)}: unknown field" for name in error.instance if name not in known]
        elif error.validator == "required" and isinstance(error.instance, dict):
            missing = [name for name in error.validator_value if name not in error.instance]
            problems += [f"{_child(where, name)}: required field is missing" for name in missing]
        else:
            problems.append(f"{where}: {error.message}")
    return problems


# ---------------------------------------------------------------------------------------------------------------------
# CEL: Kubernetes extensions that cel-python lacks


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> Any:
    return re2.compile(pattern)


def _string(value: Any, what: str) -> str:
    # cel-python turns a TypeError from an extension into a CEL "no such overload" error, as cel-go would.
    if not isinstance(value, str):
        raise TypeError(f"{what} expects a string, got {type(value).__name__}")
    return value


def _limit(count: Any) -> int:
    if not isinstance(count, int) or isinstance(count, bool):
        raise TypeError(f"limit must be an int, got {type(count).__name__}")
    return int(count)


def _cel_find(text: Any, pattern: Any) -> celtypes.StringType:
    """`s.find(re)`: the first match of re in s (the whole match, not a group), or '' when there is none."""
    match = _regex(_string(pattern, "find")).search(_string(text, "find"))
    return celtypes.StringType(match.group(0) if match else "")


def _cel_find_all(text: Any, pattern: Any, count: Any = -1) -> celtypes.ListType:
    """`s.findAll(re[, n])`: every (or the first n; n < 0 means all) non-overlapping whole match."""
    limit = _limit(count)
    matches = (m.group(0) for m in _regex(_string(pattern, "findAll")).finditer(_string(text, "findAll")))
    found = list(matches) if limit < 0 else [m for _, m in zip(range(limit), matches, strict=False)]
    return celtypes.ListType(celtypes.StringType(m) for m in found)


def _cel_split(text: Any, separator: Any, count: Any = -1) -> celtypes.ListType:
    """`s.split(sep[, n])` with Go's strings.SplitN semantics: n < 0 all parts, n == 0 none, n > 0 at most n parts;
    an empty separator splits into characters."""
    text, separator, limit = _string(text, "split"), _string(separator, "split"), _limit(count)
    if limit == 0:
        parts: list[str] = []
    elif separator == "":
        parts = list(text) if limit < 0 or limit >= len(text) else [*text[: limit - 1], text[limit - 1 :]]
    else:
        parts = text.split(separator, -1 if limit < 0 else limit - 1)
    return celtypes.ListType(celtypes.StringType(p) for p in parts)


def _cel_join(items: Any, separator: Any = "") -> celtypes.StringType:
    if not isinstance(items, list):
        raise TypeError(f"join expects a list, got {type(items).__name__}")
    return celtypes.StringType(_string(separator, "join").join(_string(item, "join") for item in items))


def _cel_lower_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.lower() if c.isascii() else c for c in _string(text, "lowerAscii")))


def _cel_upper_ascii(text: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.upper() if c.isascii() else c for c in _string(text, "upperAscii")))


def _cel_trim(text: Any) -> celtypes.StringType:
    return celtypes.StringType(_string(text, "trim").strip())


def _cel_replace(text: Any, old: Any, new: Any, count: Any = -1) -> celtypes.StringType:
    replaced = _string(text, "replace").replace(_string(old, "replace"), _string(new, "replace"), _limit(count))
    return celtypes.StringType(replaced)


# cel-python dispatches both `f(x, ...)` and `x.f(...)` to functions[f](x, ...), so registering by name covers the
# method-call style Kubernetes rules use; no rewriting of the rule text is needed.
_EXTENSIONS: dict[str, Callable[..., Any]] = {
    "find": _cel_find,
    "findAll": _cel_find_all,
    "split": _cel_split,
    "join": _cel_join,
    "lowerAscii": _cel_lower_ascii,
    "upperAscii": _cel_upper_ascii,
    "trim": _cel_trim,
    "replace": _cel_replace,
}
# Standard CEL macros, plus dyn() which cel-python handles as one (it also parses `reduce` and `min` as macros, but
# Kubernetes has neither, so a rule using them is a gap).
_MACROS = frozenset({"has", "dyn", "all", "exists", "exists_one", "map", "filter"})
_KNOWN_FUNCTIONS = frozenset(base_functions) | frozenset(_EXTENSIONS) | _MACROS


@dataclass(frozen=True, eq=False)
class _CompiledRule:
    runner: celpy.Runner | None
    error: str | None
    transition: bool
    constants: Mapping[str, Any]


class _Runner(celpy.InterpretedRunner):
    """InterpretedRunner that builds its base activation once instead of on every evaluation (a tenth of the cost of
    a short rule); each evaluation still works on its own clone of it."""

    @functools.cached_property
    def _base_activation(self) -> celpy.Activation:
        return self.new_activation()

    def evaluate(self, context: celpy.Context) -> celtypes.Value:
        return celpy.Evaluator(ast=self.ast, activation=self._base_activation).evaluate(context)


@functools.cache
def _environment() -> celpy.Environment:
    # The parser is built per environment and is the slowest part of cel-python's start-up; build it once.
    return celpy.Environment(runner_class=_Runner)


def _called_functions(tree: lark.Tree) -> set[str]:
    names: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg":
            names.add(str(node.children[1]))
        elif node.data in ("ident_arg", "dot_ident_arg"):
            names.add(str(node.children[0]))
    return names


def _identifiers(tree: lark.Tree) -> set[str]:
    return {str(node.children[0]) for node in tree.iter_subtrees() if node.data == "ident"}


# Grammar nodes that only wrap or collect their children: a list or map literal made of nothing else is a constant.
_CONSTANT_NODES = frozenset(
    {"list_lit", "map_lit", "exprlist", "mapinits", "expr", "conditionalor", "conditionaland", "relation"}
    | {"addition", "multiplication", "unary", "member", "primary", "paren_expr", "literal"}
)
_CONSTANT_PREFIX = "_gpulab_constant_"


def _fold_constant_lists(tree: lark.Tree) -> dict[str, Any]:
    """Replace each literal list/map in tree by a variable; returns the variables' values.

    cel-python re-interprets a literal on every use, element by element, and Karpenter's label rules test membership
    in 30-string lists, inside `all()` loops; folding them makes those rules roughly ten times faster.
    """
    constants: dict[str, Any] = {}
    for node in list(tree.iter_subtrees_topdown()):
        if node.data != "primary" or not isinstance(node.children[0], lark.Tree):
            continue
        literal = node.children[0]
        if literal.data not in ("list_lit", "map_lit") or not literal.children:
            continue
        if any(sub.data not in _CONSTANT_NODES for sub in literal.iter_subtrees()):
            continue
        try:
            value = celpy.InterpretedRunner(_environment(), lark.Tree("primary", [literal])).evaluate({})
        except celpy.CELEvalError:
            continue  # leave it for evaluation to report, in context
        name = f"{_CONSTANT_PREFIX}{len(constants)}"
        constants[name] = value
        node.children = [lark.Tree("ident", [lark.Token("IDENT", name)])]
    return constants


@functools.cache
def _compile_rule(rule: str) -> _CompiledRule:
    try:
        tree = _environment().compile(rule)
    except celpy.CELParseError as exc:
        return _CompiledRule(None, f"parse error: {exc}", False, {})
    # cel-python resolves functions only when a call is reached, so an unsupported one would surface only for some
    # inputs; check every call up front instead.
    unknown = sorted(_called_functions(tree) - _KNOWN_FUNCTIONS)
    if unknown:
        return _CompiledRule(None, f"unsupported function(s) {', '.join(unknown)}", False, {})
    transition = "oldSelf" in _identifiers(tree)
    constants = _fold_constant_lists(tree)
    return _CompiledRule(_environment().program(tree, functions=_EXTENSIONS), None, transition, constants)


def _evaluate(rule: str, value: Any) -> Any:
    """Result of the compiled rule with `self` bound to value; a CELEvalError result is raised."""
    compiled = _compile_rule(rule)
    if compiled.runner is None:
        raise SchemaGap(f"CEL rule {rule!r} cannot be compiled: {compiled.error}")
    result = compiled.runner.evaluate({**compiled.constants, "self": celpy.json_to_cel(value)})
    if isinstance(result, celpy.CELEvalError):
        raise result
    return result


# ---------------------------------------------------------------------------------------------------------------------
# CEL: walking the schema and the value together

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _has_schema_type(schema: Mapping[str, Any], value: Any) -> bool:
    """False where the structure check already reports a wrong type; rules there would only fail confusingly."""
    if schema.get("x-kubernetes-int-or-string") or schema.get("format") == "int-or-string":
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    expected = schema.get("type")
    if expected is None:
        return True
    if isinstance(value, bool) and expected != "boolean":
        return False
    return isinstance(value, _PYTHON_TYPES.get(expected, (object,)))


def _verdict(rule: str, value: Any) -> str | None:
    """None when the rule holds for value, "" when it is false, else why it could not be evaluated."""
    try:
        result = _evaluate(rule, value)
    except celpy.CELEvalError as exc:
        # The API server rejects an object whose rule errors out, so this is a real problem, not a validator gap.
        return f"failed to evaluate: {_describe(exc)}"
    except Exception as exc:
        # Whatever breaks inside cel-python must surface as a problem rather than let the object pass.
        return f"crashed the validator: {type(exc).__name__}: {exc}"
    if not isinstance(result, celtypes.BoolType):
        return f"returned {result!r}, not a bool"
    return None if result else ""


@functools.lru_cache(maxsize=16384)
def _verdict_for_json(rule: str, value_json: str) -> str | None:
    return _verdict(rule, json.loads(value_json))


def _memoised_verdict(rule: str, value: Any) -> str | None:
    # cel-python interprets a rule in about a millisecond, and rendered objects repeat values (label keys, requirement
    # terms) under the same rules; CEL is pure, so one verdict per (rule, value) suffices.
    try:
        value_json = json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return _verdict(rule, value)
    return _verdict_for_json(rule, value_json)


def _rule_problem(rule: Mapping[str, Any], value: Any, path: str) -> str | None:
    text = rule["rule"]
    compiled = _compile_rule(text)
    where = path + rule.get("fieldPath", "")
    if compiled.error is not None:
        return f"{where}: CEL rule {text!r} cannot be checked (validator gap: {compiled.error})"
    if compiled.transition:
        return None  # a create has no old object; the API server skips these rules too
    verdict = _memoised_verdict(text, value)
    if verdict is None:
        return None
    if verdict:
        return f"{where}: CEL rule {text!r} {verdict}"
    return f"{where}: {rule.get('message') or f'failed rule: {text}'}"


def _describe(error: celpy.CELEvalError) -> str:
    # cel-python's args are (summary, Python exception class, that exception's args); the summary alone can mislead
    # ("return error for overflow" for any ValueError), so add the cause.
    summary, *rest = error.args or (str(error),)
    cause = rest[1] if len(rest) > 1 else None
    return f"{summary}: {cause[0]}" if isinstance(cause, tuple) and cause else str(summary)


def _list_type_problems(schema: Mapping[str, Any], items: list[Any], path: str) -> Iterator[str]:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type not in ("set", "map"):
        return
    map_keys = schema.get("x-kubernetes-list-map-keys", [])
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        identity = item if list_type == "set" or not isinstance(item, dict) else [item.get(k) for k in map_keys]
        fingerprint = json.dumps(identity, sort_keys=True)
        if fingerprint in seen:
            yield f"{path}[{index}]: duplicate of {path}[{seen[fingerprint]}] (x-kubernetes-list-type: {list_type})"
        else:
            seen[fingerprint] = index


def _rule_problems(schema: Mapping[str, Any], value: Any, path: str) -> Iterator[str]:
    if value is None or not _has_schema_type(schema, value):
        return
    for rule in schema.get("x-kubernetes-validations", ()):
        problem = _rule_problem(rule, value, path)
        if problem is not None:
            yield problem
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            child_schema = properties.get(key, extra if isinstance(extra, Mapping) else None)
            if child_schema is not None:
                yield from _rule_problems(child_schema, child, _child(path, key))
    elif isinstance(value, list):
        yield from _list_type_problems(schema, value, path)
        if isinstance(schema.get("items"), Mapping):
            for index, item in enumerate(value):
                yield from _rule_problems(schema["items"], item, _child(path, index))


# ---------------------------------------------------------------------------------------------------------------------
# Public entry points


def schema_problems(schema: Mapping[str, Any], value: Any, path: str = "spec") -> list[str]:
    """Problems of value against one openAPIV3Schema node (structure, then CEL rules); [] when valid.

    Uncached: for ad-hoc schemas. crd_problems reuses a cached validator per CRD version.
    """
    structure = _structure_problems(_structure_validator(schema, path), value, path)
    return _unique([*structure, *_rule_problems(schema, value, path)])


def _unique(problems: list[str]) -> list[str]:
    return list(dict.fromkeys(problems))


# DNS-1123 subdomain, what the API server requires of a custom resource's name.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _metadata_problems(metadata: Any) -> list[str]:
    if not isinstance(metadata, Mapping):
        return ["metadata: required object is missing"]
    name = metadata.get("name")
    if not name:
        return ["metadata.name: required field is missing"]
    if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        return [f"metadata.name: {name!r} is not a lowercase RFC 1123 subdomain"]
    return []


def crd_problems(manifest: Mapping[str, Any]) -> list[str]:
    """Why the API server would reject creating this custom resource, one line per problem naming its JSON path.

    An empty list means valid. Covers the CRD's spec structure (closed objects, types, enums, patterns, bounds,
    required fields), its CEL rules (transition rules skipped), metadata.name and unknown top-level fields.
    """
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    group, _, version = str(api_version).rpartition("/")
    key = (group, version, str(kind))
    crd = _crd_versions().get(key)
    if crd is None:
        known = ", ".join(f"{g}/{v} {k}" for g, v, k in crd_kinds())
        return [f"apiVersion/kind: no CRD in {UPSTREAM} defines {api_version} {kind} (known: {known})"]

    problems = [] if crd.served else [f"apiVersion: {api_version} {kind} is not served ({crd.source})"]
    problems += _metadata_problems(manifest.get("metadata"))
    root_properties = crd.schema.get("properties", {})
    problems += [f"{_child('', field)}: unknown field" for field in manifest if field not in root_properties]

    # Root rules see the whole object; none of Karpenter's CRDs has any, but skipping them would hide a gap.
    for rule in crd.schema.get("x-kubernetes-validations", ()):
        problem = _rule_problem(rule, dict(manifest), "(object)")
        if problem is not None:
            problems.append(problem)

    spec_schema = root_properties["spec"]
    spec = manifest.get("spec")
    if spec is None:
        if "spec" in crd.schema.get("required", ()):
            problems.append("spec: required field is missing")
        return problems
    problems += _structure_problems(_crd_structure_validator(key), spec, "spec")
    problems += _rule_problems(spec_schema, spec, "spec")
    return _unique(problems)


def _declared_rules(schema: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for rule in schema.get("x-kubernetes-validations", ()):
        yield path, rule
    for name, sub in schema.get("properties", {}).items():
        yield from _declared_rules(sub, _child(path, name))
    for keyword, suffix in (("items", "[*]"), ("additionalProperties", "[*]")):
        if isinstance(schema.get(keyword), Mapping):
            yield from _declared_rules(schema[keyword], path + suffix)


def declared_rules() -> list[tuple[str, str, str]]:
    """(CRD file, JSON path, rule text) for every x-kubernetes-validations rule in UPSTREAM."""
    return [
        (crd.source, f"{group}/{version} {kind} {path}", rule["rule"])
        for (group, version, kind), crd in sorted(_crd_versions().items())
        for path, rule in _declared_rules(crd.schema, "")
    ]


def validator_gaps() -> list[str]:
    """What in the upstream CRDs this module cannot check: CEL rules that do not compile, unknown schema keywords."""
    gaps: list[str] = []
    for source, where, rule in declared_rules():
        error = _compile_rule(rule).error
        if error is not None:
            gaps.append(f"{source}: {where}: {rule!r}: {error}")
    for key in crd_kinds():
        try:
            _crd_structure_validator(key)
        except SchemaGap as exc:
            gaps.append(f"{_crd_versions()[key].source}: {exc}")
    return gaps
