"""The product's imports run downward: no module reaches back to one that imports it (an import circle), and no floor
imports one above it. domain/ never imports the program (components/) nor what runs it (render/, reports/, planner/,
rehearsal/, devtools/, tools/), nor components/ those; inside domain/ its floors, lowest first: problems < upstream <
time < capacity < cost < stack. tools/ holds only the commands' entry points: nothing imports it. Every import
statement counts, those under TYPE_CHECKING and inside functions too: each is a dependency a reader has to follow."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("domain", "components", "render", "reports", "planner", "rehearsal", "devtools", "tools", "policy")
# What runs the program, above it: the render, the reports, the planner's driver, the rehearsal, developers' tools and
# the commands' entry points.
RUNNERS = ("render", "reports", "planner", "rehearsal", "devtools", "tools")
# domain/'s floors, lowest first: a module of one may import its own floor's and those below.
DOMAIN = ("domain.problems", "domain.upstream", "domain.time", "domain.capacity", "domain.cost", "domain.stack")
# What each floor (a package, or a floor of domain/) may not import: the floors above it.
ABOVE = {
    **{floor: (*DOMAIN[i + 1 :], "components", *RUNNERS) for i, floor in enumerate(DOMAIN)},
    "components": RUNNERS,
}


def _in(name: str, floor: str) -> bool:
    return name == floor or name.startswith(f"{floor}.")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module(path): path
    for path in [*(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")), ROOT / "program.py"]
}


def _imported(name: str, node: ast.ImportFrom | ast.Import) -> set[str]:
    """The product's modules an import statement in module `name` names: `from a import b` names a.b when that is a
    module, else a. The packages a module sits in are not counted: every import of a submodule runs them."""
    if isinstance(node, ast.Import):
        targets = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:  # a relative import, from the module's own package
            package = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
            base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
        targets = {f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names}
    return {t for t in targets if t in MODULES and t != name}


GRAPH = {
    name: {
        t
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for t in _imported(name, node)
    }
    for name, path in MODULES.items()
}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected set of two or more modules (Tarjan's algorithm), as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_module_of_the_product_imports_one_that_imports_it():
    assert circles(GRAPH) == []


@pytest.mark.parametrize("floor", sorted(ABOVE))
def test_a_floor_never_imports_the_floors_above_it(floor):
    upward = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if _in(name, floor)
        for target in targets
        if any(_in(target, above) for above in ABOVE[floor])
    )
    assert upward == []


def test_nothing_imports_the_commands_entry_points():
    assert sorted(f"{name} imports {t}" for name, ts in GRAPH.items() for t in ts if _in(t, "tools")) == []


def test_a_planted_circle_is_found_type_checking_imports_too():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from domain.stack.model import Lab\n"
    (node,) = [
        n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom) and n.module == "domain.stack.model"
    ]
    assert _imported("domain.stack.classes", node) == {"domain.stack.model"}
    assert "domain.capacity.node_capacity" in GRAPH["domain.stack.limits"]  # the graph holds the real imports
