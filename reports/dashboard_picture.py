"""A picture of the Grafana dashboard over a day, for docs/metrics.md: the dashboard's own panel queries
(components/metrics/dashboard.py PANELS), with every lab picked, evaluated by Prometheus's engine after gpulab's rules
ran over a synthetic day of series (devtools/promtool/dayeval, `make promtool` builds it), drawn as an SVG. It is a
rendering of the panel queries' answers, not a Grafana screenshot; the day is written here, not recorded from a
cluster.

    python -m reports.dashboard_picture [OUT]     (default docs/metrics-day.svg)

The day: two labs of 3 and 2 learners per GPU (their maxGpus 2). intro, with gpuIdleTimeout 30m, has a class from
09:00 to 11:00: six learners, one of whom goes idle at 09:50 and whose server the culler stops (played as the pod
ending 2 minutes after the rules first call the seat idle), and one whose exporter series lack the pod's UID (the
exporter without its token or role), so unmeasured; vision, without a timeout (idleAfter 30m), runs from 13:00 to
17:00 with four learners, one of them idle from 15:00 on, which stays idle and is not stopped.
"""

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.metrics import dashboard, recording_rules
from components.metrics.kube_state_metrics import NAME as KUBE_STATE_METRICS
from devtools import go_build
from domain.cost.price_book import LIST
from domain.stack.load import parse
from domain.stack.metrics import Metrics

ROOT = Path(__file__).resolve().parent.parent
SVG = ROOT / "docs" / "metrics-day.svg"
DAYEVAL = go_build.HELPERS["dayeval"]
BINARY = Path(os.environ.get("GPULAB_DAYEVAL") or DAYEVAL.binary)
# The span drawn, in hours of the day (the rules run from 00:00), and a point every 5 minutes.
FIRST, LAST = 7, 19
STEP_SECONDS = 300
NAMESPACE = "jupyterhub"
# The panels drawn, by title: what issue 47 asks the dashboard to show per lab.
PICTURED = (
    "Seats in use",
    "Idle seats",
    "Unmeasured seats",
    "Culled seats, last hour",
    "GPU memory per seat",
)
# One colour per lab (the Okabe-Ito palette).
COLOURS = {"intro": "#0072B2", "vision": "#E69F00"}
TITLE = "The dashboard's panel queries over a synthetic day, by Prometheus 3.16's engine: not a Grafana screenshot"
WIDTH, PANEL, PLOT, LEFT, RIGHT = 760, 120, 78, 56, 24

_LAB = {"instanceTypes": ["g4dn.xlarge"], "maxGpus": 2, "ami": "al2023@v20260714", "notebookImage": "jupyter/x:1"}
STACK = {
    "cluster": {
        "name": "lab-day",
        "kubernetesVersion": "1.36",
        "vpcId": "vpc-0a1b2c3d4e5f60718",
        "privateSubnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"],
    },
    "labs": {
        "intro": {**_LAB, "slicesPerGpu": 3, "gpuIdleTimeout": "30m"},
        "vision": {**_LAB, "slicesPerGpu": 2},
    },
    "jupyterhub": {
        "host": "hub.example.edu",
        "loadBalancer": {
            "subnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"],
            "certificateArn": "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
        },
        "auth": {"type": "github", "clientId": "Iv1.0123456789abcdef", "allowedOrganizations": ["example-org"]},
        "homes": "perLearner",
    },
    "metrics": {},
    "jupyterhubClientSecret": "not-a-secret",  # parse wants one with GitHub sign-in; nothing here uses it
}


@dataclass(frozen=True)
class Learner:
    name: str
    lab: str
    start: int  # minute of the day the pod starts
    end: int  # minute it is gone
    utilisation: int  # GPU percent while busy
    memory: int  # MiB
    idle_from: int | None = None  # minute from which its GPU reads 0
    uid: bool = True  # whether the exporter's series carry the pod's UID

    def series(self) -> list[tuple[str, str]]:
        """Its series, one sample a minute, in promtool's notation: blank before the pod, a staleness marker when it
        goes, as kube-state-metrics' and dcgm-exporter's next scrapes give."""

        def present(value: float | str) -> str:
            return f"_x{self.start} {value}x{self.end - self.start - 1} stale"

        idle = self.idle_from if self.idle_from is not None else self.end
        utilisation = f"_x{self.start} {self.utilisation}x{idle - self.start - 1}" + (
            f" 0x{self.end - idle - 1} stale" if idle < self.end else " stale"
        )
        where = f'namespace="{NAMESPACE}", pod="jupyter-{self.name}"'
        gpu = f'{where}, container="notebook", gpu="0", vgpu="0", instance="10.0.1.1:9400"'
        gpu += f', pod_uid="uid-{self.name}"' if self.uid else ""
        return [
            (f'kube_pod_nodeselectors{{{where}, nodeselector_gpulab_dev_lab="{self.lab}"}}', present(1)),
            (f'kube_pod_status_phase{{{where}, phase="Running"}}', present(1)),
            (f"kube_pod_start_time{{{where}}}", present(self.start * 60)),
            (f'kube_pod_info{{{where}, node="{self.lab}-1"}}', present(1)),
            (f'kube_pod_annotations{{{where}, annotation_hub_jupyter_org_username="{self.name}"}}', present(1)),
            (f"DCGM_FI_DEV_GPU_UTIL{{{gpu}}}", utilisation),
            (f"DCGM_FI_DEV_FB_USED{{{gpu}}}", present(self.memory)),
        ]


CLASS, AFTERNOON = 9 * 60, 13 * 60
# intro's idle learner: idle from 09:50, called idle 30 minutes later, stopped 2 minutes after that.
IDLE_AT = CLASS + 50
DAY = (
    *(
        Learner(name, "intro", CLASS + i, 11 * 60, 40 + 10 * i, 2000 + 700 * i)
        for i, name in enumerate(("ada", "grace", "alan", "edsger"))
    ),
    Learner("hedy", "intro", CLASS + 4, IDLE_AT + 32, 55, 3100, idle_from=IDLE_AT),
    Learner("linus", "intro", CLASS + 5, 11 * 60, 60, 2600, uid=False),
    *(
        Learner(name, "vision", AFTERNOON + i, 17 * 60, 70, 6000 + 1500 * i)
        for i, name in enumerate(("barbara", "ken", "dennis"))
    ),
    Learner("niklaus", "vision", AFTERNOON + 3, 17 * 60, 80, 4200, idle_from=15 * 60),
)


def panels() -> list[dashboard.Panel]:
    by_title = {p.title: p for p in dashboard.PANELS}
    return [by_title[title] for title in PICTURED]


def query(panel: dashboard.Panel) -> str:
    """The panel's query with the lab variable at every lab, as Grafana writes "All" of a multi-value variable."""
    return panel.query.replace("$lab", "|".join(COLOURS))


def request(rule_file: Path, queries: Sequence[str]) -> dict[str, Any]:
    return {
        "interval": recording_rules.EVALUATION_INTERVAL,
        "series": [
            [f'up{{job="{KUBE_STATE_METRICS}"}}', f"1x{LAST * 60}"],
            *([name, values] for learner in DAY for name, values in learner.series()),
        ],
        "ruleFile": str(rule_file),
        "end": LAST * 3600,
        "from": FIRST * 3600,
        "step": STEP_SECONDS,
        "queries": list(queries),
    }


def evaluate(queries: Sequence[str]) -> list[list[dict[str, Any]]]:
    """Each query's answer over the day, by Prometheus's engine after gpulab's rules ran over it."""
    if not BINARY.is_file():
        raise FileNotFoundError(f"no dayeval at {BINARY}: `make promtool` builds it (Go 1.26)")
    settings = parse(STACK, "eu-west-1").settings
    rules = recording_rules.rule_groups(settings.labs, settings.metrics or Metrics(), LIST)
    with tempfile.TemporaryDirectory() as folder:
        rule_file = Path(folder) / "rules.yaml"
        rule_file.write_text(yaml.safe_dump(rules, sort_keys=False))
        done = subprocess.run(
            [str(BINARY)],
            input=json.dumps(request(rule_file, queries)),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    if done.returncode:
        raise RuntimeError(done.stderr.strip())
    answers: list[list[dict[str, Any]]] = json.loads(done.stdout)
    return answers


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 3600:02d}:{int(seconds) % 3600 // 60:02d}"


def _runs(values: Sequence[Sequence[float]]) -> list[list[tuple[float, float]]]:
    """The points of one series, cut where a step is missing (a gap is not drawn across)."""
    runs: list[list[tuple[float, float]]] = []
    for t, v in values:
        if runs and t - runs[-1][-1][0] <= STEP_SECONDS:
            runs[-1].append((t, v))
        else:
            runs.append([(t, v)])
    return runs


def svg(titled: Sequence[tuple[dashboard.Panel, list[dict[str, Any]]]]) -> str:
    """The panels one under the other, each series a line in its lab's colour over the day, its y axis from 0 to the
    panel's largest value."""
    height = 40 + PANEL * len(titled)
    root = ET.Element("svg", xmlns="http://www.w3.org/2000/svg", width=str(WIDTH), height=str(height))
    root.set("font-family", "sans-serif")
    root.set("font-size", "11")
    ET.SubElement(root, "rect", width=str(WIDTH), height=str(height), fill="white")
    head = ET.SubElement(root, "text", x=str(LEFT), y="16", attrib={"font-size": "12"})
    head.text = (
        "The dashboard's panel queries over a synthetic day, by Prometheus 3.16's engine: not a Grafana screenshot"
    )
    for i, lab in enumerate(COLOURS):
        x = LEFT + 80 * i
        ET.SubElement(root, "rect", x=str(x), y="24", width="10", height="10", fill=COLOURS[lab])
        ET.SubElement(root, "text", x=str(x + 14), y="33").text = lab
    span = LEFT, WIDTH - RIGHT
    for row, (panel, answer) in enumerate(titled):
        top = 40 + PANEL * row + 28
        bottom = top + PLOT
        highest = max([v for series in answer for _, v in series["values"]] + [1.0])
        ET.SubElement(root, "text", x=str(LEFT), y=str(top - 8), attrib={"font-weight": "bold"}).text = panel.title
        ET.SubElement(root, "text", x=str(LEFT + 210), y=str(top - 8), fill="#555").text = panel.query
        ET.SubElement(root, "line", x1=str(span[0]), y1=str(bottom), x2=str(span[1]), y2=str(bottom), stroke="#999")
        for value, y in ((0.0, bottom), (highest, top)):
            ET.SubElement(
                root, "text", x=str(LEFT - 6), y=str(y + 4), attrib={"text-anchor": "end"}
            ).text = f"{value:g}"
        for hour in range(FIRST, LAST + 1, 2):
            tick = f"{span[0] + (span[1] - span[0]) * (hour - FIRST) / (LAST - FIRST):.1f}"
            ET.SubElement(root, "line", x1=tick, y1=str(bottom), x2=tick, y2=str(bottom + 3), stroke="#999")
            label = ET.SubElement(root, "text", x=tick, y=str(bottom + 13), attrib={"text-anchor": "middle"})
            label.text = f"{hour:02d}:00"
        for series in answer:
            metric = series["metric"]
            name = metric.get("lab", "") + (f" {metric['pod']}" if "pod" in metric else "")
            for run in _runs(series["values"]):
                points = " ".join(
                    f"{span[0] + (span[1] - span[0]) * (t / 3600 - FIRST) / (LAST - FIRST):.1f},"
                    f"{bottom - PLOT * v / highest:.1f}"
                    for t, v in run
                )
                line = ET.SubElement(
                    root,
                    "polyline",
                    points=points,
                    fill="none",
                    stroke=COLOURS.get(metric.get("lab", ""), "#000"),
                    attrib={"stroke-width": "1.5", "data-panel": panel.title, "data-series": name},
                )
                ET.SubElement(
                    line, "title"
                ).text = f"{name}: {_clock(run[0][0])} to {_clock(run[-1][0])}, at most {max(v for _, v in run):g}"
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def picture() -> str:
    shown = panels()
    return svg(list(zip(shown, evaluate([query(p) for p in shown]), strict=True)))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0]) if args else SVG
    try:
        drawn = picture()
    except (FileNotFoundError, RuntimeError) as error:
        print(f"dashboard_picture: {error}", file=sys.stderr)
        return 1
    out.write_text(drawn)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
