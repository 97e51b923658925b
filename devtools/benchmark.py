"""Benchmark of the offline render: how its time grows with the labs of a stack (a script to run by hand).

    python -m devtools.benchmark [--sizes 0 1 10 100 1000] [--repeats 3]

Writes synthetic stack files and times `python -m tools.render` on each as a user runs it, a whole process, charts
included, taking the fastest of a few runs so that noise from other processes does not blur the comparison. The
planner is left out (GPULAB_PLANNER=off): it simulates Karpenter, which `pulumi preview` does not, and its time grows
with the learners it places rather than with the program. Beside each render it times the Pulumi SDK alone registering
as many copies of a lab's resources (devtools/sdk_floor.py): no render can add less per lab than that. Prints a line per
run as it goes (stderr), then a table: per size, the fastest wall time, the resources registered, the resources and
seconds each lab adds, the time against the render of one lab, the SDK's own seconds (in all and per lab), and the
least time against one lab that a render could take, were the SDK's registrations all a lab cost.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from render.run import ROOT
from reports.table import Column, markdown

SIZES = (0, 1, 10, 100, 1000)
REPEATS = 3
LAB = {"instanceTypes": ["g4dn.xlarge", "g4dn.12xlarge"], "slicesPerGpu": 3, "maxGpus": 4, "ami": "al2023@v20260714"}
CLUSTER = {
    "name": "bench",
    "kubernetesVersion": "1.36",
    "vpcId": "vpc-0a1b2c3d4e5f60718",
    "privateSubnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"],
}


def write_stack(folder: Path, labs: int) -> Path:
    path = folder / f"Pulumi.bench-{labs}.yaml"
    labs_config = {f"lab-{i:04d}": LAB for i in range(labs)}
    config = {"aws:region": "eu-west-1", "gpulab:cluster": CLUSTER, "gpulab:labs": labs_config}
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def timed_render(stack: Path, out: Path) -> float:
    start = time.perf_counter()
    command = [sys.executable, "-m", "tools.render", str(stack), "--out", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, env={**os.environ, "GPULAB_PLANNER": "off"})
    return time.perf_counter() - start


def sdk_floor(one_lab: Path, labs: int) -> float:
    """Seconds the Pulumi SDK alone spends registering `labs` copies of a lab's resources (devtools/sdk_floor.py)."""
    command = [sys.executable, "-m", "devtools.sdk_floor", str(one_lab), str(labs)]
    return float(subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True).stdout)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devtools.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=SIZES, help="lab counts to render (default: %(default)s)"
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs per size; the fastest counts")
    args = parser.parse_args(argv)
    sizes = sorted(set(args.sizes) | {0, 1})  # the baselines every row is read against
    seconds: dict[int, float] = {}
    resources: dict[int, int] = {}
    floor: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        one_lab = write_stack(folder, 1)  # the lab sdk_floor copies
        for labs in sizes:
            stack, out = write_stack(folder, labs), folder / f"out-{labs}"
            runs, floors = [], []
            for run in range(1, args.repeats + 1):
                runs.append(timed_render(stack, out))
                floors.append(sdk_floor(one_lab, labs))
                print(
                    f"{labs} labs, run {run} of {args.repeats}: render {runs[-1]:.2f} s, SDK alone {floors[-1]:.2f} s",
                    file=sys.stderr,
                )
            seconds[labs], floor[labs] = min(runs), min(floors)
            resources[labs] = len(json.loads((out / "resources.json").read_text()))

    def per_lab(labs: int, figure: float, decimals: int) -> str:
        return f"{figure / labs:.{decimals}f}" if labs else "-"

    columns: tuple[Column[int], ...] = (
        Column("labs", str, numeric=True),
        Column(f"seconds (fastest of {args.repeats})", lambda n: f"{seconds[n]:.2f}", numeric=True),
        Column("resources", lambda n: str(resources[n]), numeric=True),
        Column("resources per lab", lambda n: per_lab(n, resources[n] - resources[0], 1), numeric=True),
        Column("seconds per lab", lambda n: per_lab(n, seconds[n] - seconds[0], 3), numeric=True),
        Column("x one lab", lambda n: f"{seconds[n] / seconds[1]:.2f}", numeric=True),
        Column("SDK alone, seconds", lambda n: f"{floor[n]:.2f}", numeric=True),
        Column("SDK alone, seconds per lab", lambda n: per_lab(n, floor[n], 4), numeric=True),
        # A render of n labs takes at least the 1-lab render and the SDK's own work for the n - 1 other labs.
        Column("x one lab at best", lambda n: f"{(seconds[1] + floor[n] - floor[1]) / seconds[1]:.2f}", numeric=True),
    )
    print("\n".join(markdown(columns, sizes)))


if __name__ == "__main__":
    main()
