"""Offline render: runs the real program for one stack under Pulumi mocks and writes what it would create.

    python -m tools.render <stack name or stack file> --out <dir> [--today YYYY-MM-DD]

Writes <dir>/resources.json, <dir>/invokes.json, <dir>/outputs.json, <dir>/manifests/<kind>-[<namespace>-]<name>.yaml
and <dir>/helm/<release>.yaml (with gpulab:metrics, <dir>/grafana-dashboard.json too), and prints a summary (the
classes' next occurrences count from --today). A stack file with problems, or a lab whose AMI release does not exist,
exits with status 2, prints one `gpulab:` line per problem and writes nothing; so does a stack whose chart objects the
API server would refuse for their size (a hub Secret that its labs overflow).
<dir>/charts/<release>.yaml holds what each release installs (render/charts.py); without helm or the charts, one short
line per cause says so and the rest is written.
With the charts, and a Go toolchain to build the planner (planner/, planner/plan.py), it also writes <dir>/plan.json,
what Karpenter 1.14.1 would launch for each lab, and the summary shows its full-lab and class-start rows; outputs.json
then carries Karpenter's full lab as each lab's one "at most" figure (labs.<lab>.cost.atMostPerHour); without them,
one line says why not. `--plan` (`make plan`) prints every scenario of the plan too, and exits with status 1
when there is no plan.
Either way it first removes what an earlier render wrote into <dir>, so that <dir> never shows a render but the
current one. On a terminal, each phase (the program under mocks, the charts, the walls, the planner) is a line redrawn
every second while it runs (devtools/progress.py): staging's render was 30 s of silence at a load of 27 (issue 50).
"""

import argparse
import datetime
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import pulumi
    import yaml

    import domain.stack
    import program
    from components.metrics.dashboard import dashboard_model
    from devtools.progress import Progress
    from domain.stack.warmups import timing_warnings
    from domain.time import utc
    from domain.upstream.ami_releases import ami_warnings
    from planner import gate, plan
    from rehearsal import report
    from render import addons, charts, harness, walls
    from reports import cost_report
    from reports.summary import summary
except ModuleNotFoundError as missing:  # an interpreter without the project's requirements, e.g. the system python3
    sys.exit(
        f"gpulab: {missing.name} is not installed for {sys.executable}; run `make render`, or "
        "`.venv/bin/python -m tools.render ...` once `make render` or `make test` has created .venv"
    )

ROOT = Path(__file__).resolve().parent.parent
# The stack's Grafana dashboard (components/metrics/dashboard.py), with gpulab:metrics.
DASHBOARD = "grafana-dashboard.json"
# Every file and folder the render writes into its output directory. It removes them before it runs, so that a failed
# render leaves no earlier render behind: anything new the render writes belongs in this list. So does the
# rehearsal.json a rehearsal puts beside it (.ci/run): it played the earlier render.
OWNED = (
    *("resources.json", "invokes.json", "outputs.json", "manifests", "helm", "charts"),
    *(plan.INSTANCE_TYPES, plan.PLAN, addons.FILE, DASHBOARD, walls.FILE, report.REHEARSAL),
)
MERGE_TAG = "tag:yaml.org,2002:merge"


# On libyaml's parser (PyYAML's wheels include it): a 4 MB stack file takes seconds, not most of a minute.
class _UniqueKeyLoader(yaml.CSafeLoader):
    """A YAML loader that rejects duplicate keys, which PyYAML would otherwise merge silently (last one wins).

    Merge keys (`<<: *defaults`) may bring in keys that the mapping's own keys then override; `<<` itself, like any
    key, appears once. So does go-yaml v3 (decode.go: `mapping` checks unique keys, `merge` skips keys already set).
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for i, (key_node, value_node) in enumerate(node.value):
            key = "<<" if key_node.tag == MERGE_TAG else self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag in _NOT_STRINGS:
                marked = yaml.ScalarNode(_NOT_A_STRING, f"{key_node.tag} {key_node.value}", key_node.start_mark)
                node.value[i] = (marked, value_node)
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True)
class NotAString:
    """A mapping key that YAML reads as something other than a string (`1:`, `2027-01-11:`, `on:`, `~:`).

    The Pulumi CLI hands structured values to the program as JSON, whose keys are strings: `1` and `"1"` would become
    one key, the last silently winning, and a key YAML reads as a date or a number is rarely the name that was meant.
    The render refuses them all, each at its key, and says how to quote it.
    """

    kind: str
    text: str


_YAML = "tag:yaml.org,2002:"
_NOT_STRINGS = {
    f"{_YAML}int": "a number",
    f"{_YAML}float": "a number",
    f"{_YAML}bool": "true or false",
    f"{_YAML}null": "null",
    f"{_YAML}timestamp": "a date",
}
_NOT_A_STRING = "tag:gpulab,2026:not-a-string"


def _not_a_string(loader: yaml.CSafeLoader, node: yaml.Node) -> NotAString:
    assert isinstance(node, yaml.ScalarNode)
    tag, _, text = node.value.partition(" ")
    return NotAString(_NOT_STRINGS[tag], text)


_UniqueKeyLoader.add_constructor(_NOT_A_STRING, _not_a_string)


def stack_file(stack: str) -> tuple[str, Path]:
    """A stack name (Pulumi.<stack>.yaml beside Pulumi.yaml) or the path of a stack file, with its stack name."""
    path = Path(stack)
    if path.suffix in (".yaml", ".yml") or path.exists():
        name = path.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
        return name, path
    path = ROOT / f"Pulumi.{stack}.yaml"
    if not path.exists():
        stacks = ", ".join(
            sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml"))
        )
        raise domain.stack.ConfigError(
            [f"gpulab: no stack {stack!r}: there is no {path.name} beside Pulumi.yaml; stacks: {stacks}"]
        )
    return stack, path


def add_stack_argument(parser: argparse.ArgumentParser) -> None:
    """The stack every command takes first: a name or a path (stack_file resolves it)."""
    parser.add_argument("stack", help="stack name (Pulumi.<stack>.yaml beside Pulumi.yaml) or path of a stack file")


def checked_stack(stack: str) -> tuple[str, domain.stack.StackConfig]:
    """A stack's name and its configuration, checked as the render checks it before it registers anything (without
    running the program); raises domain.stack.ConfigError. For the commands that read a stack without rendering it
    (render/inputs.py, reports/preflight.py)."""
    name, path = stack_file(stack)
    return name, harness.validated(read_stack_file(path))


# The Pulumi CLI reads a stack file with gopkg.in/yaml.v2 (pulumi/pulumi sdk/go/common/encoding/marshal.go), which
# gives the program an unquoted date (`start: 2027-01-11`) as the text written; PyYAML would make it a date object.
def _as_written(loader: yaml.CSafeLoader, node: yaml.Node) -> Any:
    assert isinstance(node, yaml.ScalarNode)
    return loader.construct_scalar(node)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp", _as_written)


# PyYAML reads YAML 1.1's base-60 numbers (`1:30` is 90, `1:30.5` is 90.5); gopkg.in/yaml.v2 has none (resolve.go
# tries decimal, hex, octal and binary only) and gives the Pulumi program the text written.
def _number(loader: yaml.CSafeLoader, node: yaml.Node) -> Any:
    assert isinstance(node, yaml.ScalarNode)
    if ":" in node.value:
        return loader.construct_scalar(node)
    if node.tag == f"{_YAML}int":
        return loader.construct_yaml_int(node)
    return loader.construct_yaml_float(node)


_UniqueKeyLoader.add_constructor(f"{_YAML}int", _number)
_UniqueKeyLoader.add_constructor(f"{_YAML}float", _number)


# What a stack file that is not UTF-8 most likely is, by its first bytes.
_SIGNATURES = {b"\xff\xfe": "like UTF-16 text", b"\xfe\xff": "like UTF-16 text", b"\x1f\x8b": "gzip-compressed"}


def read_stack_file(path: Path) -> dict[str, str]:
    """The stack file's config as the Pulumi CLI passes it; raises domain.stack.ConfigError for an unreadable file."""
    try:
        raw = path.read_bytes()
        document = yaml.load(raw.decode("utf-8"), Loader=_UniqueKeyLoader)
    except OSError as error:
        raise domain.stack.ConfigError([f"gpulab: cannot read {path}: {error.strerror}"]) from None
    except UnicodeDecodeError as error:
        looks = next((f"; it looks {kind}" for sig, kind in _SIGNATURES.items() if raw.startswith(sig)), "")
        where = f"byte {raw[error.start]:#04x} at offset {error.start}"
        raise domain.stack.ConfigError(
            [f"gpulab: {path.name} is not UTF-8 ({where}){looks}; save it as UTF-8"]
        ) from None
    except yaml.YAMLError as error:
        raise domain.stack.ConfigError([f"gpulab: {path.name} is not valid YAML: {_yaml_problem(error)}"]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict) or not isinstance(document.get("config", {}), dict):
        raise domain.stack.ConfigError([f"gpulab: {path.name} must be a mapping with a `config:` mapping in it"])
    if lines := _keys_not_strings(document.get("config") or {}, ""):
        raise domain.stack.ConfigError(lines)
    return harness.config_from_stack_file(document)


def _keys_not_strings(value: Any, path: str) -> list[str]:
    """One line for each key under `path` that YAML reads as something other than a string (NotAString)."""
    lines = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(key, NotAString):
                where = f"{path}.{key.text}" if path else key.text
                lines.append(
                    f"{where}: a key must be a string, and YAML reads {key.text} as {key.kind}; quote it "
                    f"('{key.text}') if that is the name meant"
                )
            else:
                lines += _keys_not_strings(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            lines += _keys_not_strings(inner, f"{path}[{i}]")
    return lines


def _yaml_problem(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark else problem


def clean(out: Path) -> None:
    """Removes what an earlier render wrote into `out`, and nothing else."""
    for owned in OWNED:
        target = out / owned
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()


def write_outputs(outputs: dict[str, Any], out: Path) -> None:
    (out / "outputs.json").write_text(json.dumps(outputs, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def planned_outputs(run: harness.Run, planned: dict[str, Any]) -> dict[str, Any]:
    """The stack outputs with each lab's "at most" figure and what follows from it made Karpenter's where the planner
    ran (planner/plan.py with_plan), and the stack's `cost` with them: outputs.json then holds the one figure every
    report shows (docs/cost.md, "One figure at most")."""
    labs = plan.with_plan(run.outputs["labs"], planned)
    # On the day of the run, as the program's own `cost` output (program.py).
    cost = cost_report.whole_stack(run.stack, labs, utc.today(), planned=True)
    return {**run.outputs, "labs": labs, "cost": cost.as_output()}


def write(run: harness.Run, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    resources = [r.as_json() for r in run.resources]
    (out / "resources.json").write_text(json.dumps(resources, indent=2, ensure_ascii=False) + "\n")
    invokes = [i.as_json() for i in run.invokes]
    (out / "invokes.json").write_text(json.dumps(invokes, indent=2, ensure_ascii=False) + "\n")
    write_outputs(run.outputs, out)
    (out / addons.FILE).write_text(json.dumps(addons.daemonsets(run), indent=2) + "\n")
    if metrics := run.stack.settings.metrics:
        model = dashboard_model(run.stack.settings.cluster.name, metrics)
        (out / DASHBOARD).write_text(json.dumps(model, indent=2, sort_keys=True) + "\n")
    for r in run.resources:
        if r.type == charts.HELM_RELEASE:
            release = {
                k: r.inputs.get(k) for k in ("name", "chart", "repositoryOpts", "version", "namespace", "values")
            }
            _write_yaml(out / "helm" / f"{r.inputs['name']}.yaml", release)
        elif r.type.startswith("kubernetes:"):  # an object the stack creates directly
            metadata = r.inputs["metadata"]
            # Each lab's class objects share names in their own namespaces: the namespace keeps the files apart.
            scope = f"{metadata['namespace']}-" if metadata.get("namespace") else ""
            _write_yaml(out / "manifests" / f"{r.inputs['kind'].lower()}-{scope}{metadata['name']}.yaml", r.inputs)


# On libyaml's emitter, as the loader above: the same bytes as PyYAML's own, several times faster on a large stack.
class _Dumper(yaml.CSafeDumper):
    """Writes multi-line strings (user data, device plugin profiles) as literal blocks a reviewer can read."""


def _string(dumper: yaml.CSafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def _write_yaml(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False))


def stack_run(stack: str) -> tuple[str, harness.Run] | None:
    """The stack's name and its program run under mocks, or None once the reason it is refused is printed (a stack
    file with problems, or one of the program's own refusals, e.g. an AMI release that does not exist)."""
    try:
        name, path = stack_file(stack)
        with Progress("render: the program under mocks"):
            return name, harness.run(name, read_stack_file(path))
    except domain.stack.ConfigError as error:
        print("\n".join(error.lines), file=sys.stderr)
    except pulumi.RunError as error:
        print(error, file=sys.stderr)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.render", description=__doc__.splitlines()[0])
    add_stack_argument(parser)
    parser.add_argument("--out", required=True, type=Path, help="directory to write the render into")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--no-charts", action="store_true", help="skip charts/ (helm), e.g. when only outputs matter")
    only.add_argument(
        "--plan",
        action="store_true",
        help="print every scenario of plan.json too, and fail when the planner cannot run",
    )
    parser.add_argument(
        "--today",
        type=datetime.date.fromisoformat,
        help="the day (YYYY-MM-DD) the summary counts the classes' next occurrences from and judges the Kubernetes "
        "version's support on; the current day in UTC by default. Nothing the render writes depends on it: the "
        "checks and the cost output use the current day",
    )
    args = parser.parse_args(argv)
    # The render, like the program, builds what it writes and keeps it to the end (program.collect_rarely).
    program.collect_rarely()
    clean(args.out)
    if (loaded := stack_run(args.stack)) is None:
        return 2
    _, run = loaded
    # As `pulumi preview` warns, before it looks the release up.
    for warning in ami_warnings(run.stack.settings.labs, run.stack.settings.cluster.kubernetes_version):
        print(warning, file=sys.stderr)
    for warning in timing_warnings(run.stack.settings.labs):
        print(warning, file=sys.stderr)
    write(run, args.out)
    try:
        with Progress("render: helm template of the charts"):
            not_rendered = [] if args.no_charts else charts.write(run, args.out)
    except charts.Oversized as error:  # bad input, as a key out of range is: its lines, and nothing written
        print(error, file=sys.stderr)
        clean(args.out)
        return 2
    except charts.TemplateError as error:
        print(f"gpulab: {error}", file=sys.stderr)
        return 1
    for line in not_rendered:
        print(line, file=sys.stderr)
    if not_rendered and run.stack.settings.jupyterhub is not None:
        print("walls not checked: they read the charts, and charts/ is not rendered (above)", file=sys.stderr)
    # A learner who reaches what it must not is the program's defect, as a chart helm refuses is.
    elif not not_rendered and not args.no_charts:
        with Progress("render: the walls around learners"):
            breaches = walls.check(run, args.out)
        if breaches:
            print("\n".join(f"gpulab: walls: {line}" for line in breaches), file=sys.stderr)
            return 1
    planned = None
    if not_rendered:  # the planner reads the charts' DaemonSets and Karpenter's settings
        print(
            f"planner not run: it reads the charts, and charts/ is not rendered (above); {plan.UNCHECKED}",
            file=sys.stderr,
        )
    elif not args.no_charts:
        try:
            binary = plan.binary()  # a build says what it does itself (devtools/go_build.py)
            with Progress("render: Karpenter's scheduler (the planner)"):
                planned = plan.plan(args.out, run.stack.region, binary)
        except plan.Unavailable as why:
            print(why, file=sys.stderr)
        except plan.Failed as error:
            print("\n".join(summary(run, args.today)))
            print(f"gpulab: {error}", file=sys.stderr)
            return 1
    if planned is not None:
        # A lab whose promises Karpenter would break is bad input, as a key out of range is.
        broken, unchecked = gate.problems(run.stack.settings.labs, planned)
        for line in unchecked:
            print(line, file=sys.stderr)
        if broken:
            print("\n".join(broken), file=sys.stderr)
            clean(args.out)
            return 2
    outputs = run.outputs if planned is None else planned_outputs(run, planned)
    if planned is not None:
        write_outputs(outputs, args.out)
    for warning in cost_report.budget_warnings(outputs["labs"]):
        print(warning, file=sys.stderr)
    lines = summary(run, args.today, planned)
    if planned is not None:
        lines += ["", *plan.summary_table(planned)]
    # The render plays no class day: the rehearsal does, and prints its tables (rehearsal/run.py).
    lines += ["", *report.table(None)]
    print("\n".join(lines))
    if args.plan:
        if planned is None:  # the line above the summary says why
            return 1
        print("\n".join(["", *plan.table(planned)]))
    return 0


def walls_main(argv: list[str] | None = None) -> int:
    """`python -m tools.walls <stack> --out <dir>`: the render with its charts and walls.json (render/walls.py)."""
    parser = argparse.ArgumentParser(prog="python -m tools.walls", description=walls.__doc__.splitlines()[0])
    add_stack_argument(parser)
    parser.add_argument("--out", required=True, type=Path, help="directory to write the render and walls.json into")
    args = parser.parse_args(argv)
    program.collect_rarely()
    clean(args.out)
    if (loaded := stack_run(args.stack)) is None:
        return 2
    name, run = loaded
    if run.stack.settings.jupyterhub is None:
        print(
            f"gpulab: the stack {name} runs no JupyterHub (gpulab:jupyterhub): it has no learners to wall off",
            file=sys.stderr,
        )
        return 2
    write(run, args.out)
    try:
        not_rendered = charts.write(run, args.out)
    except (charts.Oversized, charts.TemplateError) as error:
        print(f"gpulab: {error}", file=sys.stderr)
        return 1
    if not_rendered:
        print("\n".join([*not_rendered, "walls not checked: they read the charts"]), file=sys.stderr)
        return 1
    breaches = walls.check(run, args.out)
    print("\n".join(f"gpulab: walls: {line}" for line in breaches), file=sys.stderr)
    print(f"{args.out / walls.FILE}: {len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
