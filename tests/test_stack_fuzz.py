"""Mutated stack files: whatever a user writes, gpulab either takes it or refuses it with `gpulab:` lines, and no
exception escapes (a stack file is a user's input, so one that escapes is a defect).

A seeded loop, so that a failure is the same on every run: it starts from the repo's stack files and the synthetic
ones of tests/support/synthetic.py, which have every kind of key, and changes one to three values or keys at random,
into values of other types, near misses of their own, keys that are not strings, or nothing.
"""

import copy
import datetime
import random
import re
from typing import Any

import pytest
import yaml

import domain.stack
import program
import render.run
from render import harness
from tests.conftest import STACK_FILES
from tests.support.synthetic import PLANNER_STACK, SYNTHETIC, TIME_ZONE_STACK

SEED = 37
MUTANTS = 150
# Mutants that pass validation also run the program under mocks, which takes a second or so each.
RUNS = 3


def _values(rng: random.Random, old: Any) -> list[Any]:
    """Values a user might write instead of `old`."""
    text = str(old)
    return [
        None,
        True,
        0,
        -1,
        2**63,
        1.5,
        float("nan"),
        "",
        " ",
        "x" * 300,
        "ünïcode",
        "1:30",
        datetime.date(2027, 1, 11),
        [],
        {},
        [old],
        {"secure": "v1:AAAA"},
        {1: old},
        text + "x",
        text[:-1],
        text.upper(),
        text.replace("-", "_"),
        rng.randint(-10, 10**6),
    ]


def _paths(node: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*path, i))
    return found


def _mutate(rng: random.Random, document: dict) -> dict:
    mutant = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(mutant["config"]) if p and str(p[0]).startswith("gpulab:")]
        path = rng.choice(paths)
        parent = mutant["config"]
        for part in path[:-1]:
            parent = parent[part]
        key, old = path[-1], parent[path[-1]]
        choice = rng.random()
        if choice < 0.15 and isinstance(parent, dict):
            del parent[key]
        elif choice < 0.3 and isinstance(parent, dict):  # a near miss of the key, or a key that is not a string
            parent[rng.choice([str(key) + "s", str(key).lower(), str(key)[1:] or "x", 7, True])] = parent.pop(key)
        elif choice < 0.35 and isinstance(parent, list):
            parent.append(copy.deepcopy(old))
        else:
            parent[key] = rng.choice(_values(rng, old))
    return mutant


def _documents() -> list[dict]:
    files = [yaml.load(p.read_text(), Loader=render.run._UniqueKeyLoader) for p in STACK_FILES]
    return [*files, *({"config": v} for v in (*SYNTHETIC.values(), PLANNER_STACK, TIME_ZONE_STACK))]


def test_mutated_stacks_are_taken_or_refused_never_raising(tmp_path):
    rng = random.Random(SEED)
    documents = _documents()
    taken, refused, runs = 0, 0, 0
    for i in range(MUTANTS):
        mutant = _mutate(rng, rng.choice(documents))
        text = yaml.safe_dump(mutant, allow_unicode=True) if i % 2 else yaml.dump(mutant, allow_unicode=True)
        path = tmp_path / "Pulumi.fuzz.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            stack = domain.stack.from_cli(render.run.read_stack_file(path))
            if problems := program.problems(stack):
                raise domain.stack.ConfigError(problems)
        except domain.stack.ConfigError as error:
            refused += 1
            assert error.lines, text
            # One line per problem, each `<key>: <message>` (a gpulab key, or a top-level key YAML read as no string).
            assert all(re.match(r"\S+: \S", line) and "\n" not in line for line in error.lines), (error.lines, text)
            continue
        except Exception as escaped:  # any other exception is the defect this test looks for
            pytest.fail(f"{type(escaped).__name__}: {escaped} for the stack file\n{text}")
        taken += 1
        if runs < RUNS:
            runs += 1
            try:
                harness.run("fuzz", render.run.read_stack_file(path))
            except domain.stack.ConfigError as error:
                assert all(line.startswith("gpulab") for line in error.lines), (error.lines, text)
    # Both outcomes are exercised: most mutants are refused, some still valid.
    assert refused > MUTANTS // 2 and taken > 0, (taken, refused)
