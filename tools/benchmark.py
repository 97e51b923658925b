"""Benchmark of the offline render with 1, 10 and 50 labs (a script to run by hand, not a timed test).

    python -m tools.benchmark

Writes synthetic stack files and times `python -m tools.render` on each as a user runs it, a whole process, taking
the fastest of a few runs so that noise from other processes does not blur the comparison. Prints the wall time, the
resources registered and the resources each lab adds.
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tools.render import ROOT

SIZES = (0, 1, 10, 50)
REPEATS = 3
LAB = {"instanceTypes": ["g4dn.xlarge", "g4dn.12xlarge"], "slicesPerGpu": 3, "maxGpus": 4, "ami": "al2023@v20260714"}
CLUSTER = {
    "name": "bench",
    "kubernetesVersion": "1.34",
    "vpcId": "vpc-0a1b2c3d4e5f60718",
    "privateSubnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"],
}


def write_stack(folder: Path, labs: int) -> Path:
    path = folder / f"Pulumi.bench-{labs}.yaml"
    labs_config = {f"lab-{i:03d}": LAB for i in range(labs)}
    config = {"aws:region": "eu-west-1", "gpulab:cluster": CLUSTER, "gpulab:labs": labs_config}
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def timed_render(stack: Path, out: Path) -> float:
    start = time.perf_counter()
    command = [sys.executable, "-m", "tools.render", str(stack), "--out", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    seconds, resources = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for labs in SIZES:
            stack = write_stack(folder, labs)
            seconds[labs] = min(timed_render(stack, folder / f"out-{labs}") for _ in range(REPEATS))
            resources[labs] = len(json.loads((folder / f"out-{labs}" / "resources.json").read_text()))
    print(f"{'labs':>5} {'seconds':>8} {'resources':>10} {'per lab':>8}")
    for labs in SIZES:
        per_lab = f"{(resources[labs] - resources[0]) / labs:.1f}" if labs else "-"
        print(f"{labs:>5} {seconds[labs]:>8.2f} {resources[labs]:>10} {per_lab:>8}")
    print(f"{SIZES[-1]} labs cost {seconds[SIZES[-1]] / seconds[1]:.2f}x one lab")


if __name__ == "__main__":
    main()
