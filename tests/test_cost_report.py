"""The cost table in the render's summary (and the PR comment), and the stack outputs the render writes."""

import json
from pathlib import Path

import pulumi
import pytest

import program
import render.run
from domain.cost.prices import DISK_PRICE_SOURCE, PRICE_SOURCE
from render import harness
from reports import cost_report
from reports.summary import summary
from tests.conftest import BASE, STACK_FILES, as_cli_config, run_values, stack_values
from tests.support import tables
from tests.support.synthetic import lab

TWO_LABS = stack_values(
    **{
        "gpulab:labs": {
            # Both types have NVMe, so each node's root volume is 20 GiB at gp3's included performance:
            # 20 x 0.08 USD per GB-month / 730 hours = 0.00219178 per node-hour, shown 0.0022.
            # g6.xlarge: 0.8048 + 0.00219178 = 0.80699178 per GPU-hour: 2 GPUs x = 1.61398356, rounded up 1.6140;
            # seats / 2 = 0.40349589 -> 0.4035
            "a": lab(["g6.xlarge"], 2, max_gpus=2),
            # g6e.12xlarge: (10.49264 + 0.00219178) / 4 = 2.62370795 per GPU-hour: 4 x = 10.49483178, rounded up
            # 10.4949; seats / 1 = 2.6237
            "b": lab(["g6e.12xlarge"], 1, max_gpus=4, maxHourlyCost=11),
        }
    }
)


def rows(lines: list[str]) -> dict[str, list[str]]:
    """The cost table's body rows by their first cell."""
    return {row["lab"]: list(row.values())[1:] for row in tables.table(lines, "cost of the labs' GPU nodes")}


def per_learner(lines: list[str]) -> dict[str, list[str]]:
    """The per-learner table's rows by lab."""
    return {row["lab"]: list(row.values())[1:] for row in tables.table(lines, "per learner (docs/cost.md)")}


def test_summary_shows_at_most_per_learner_cap_and_total():
    lines = summary(run_values(TWO_LABS))
    assert rows(lines) == {
        "a": ["4", "1.6140", "0.0022", "-"],
        "b": ["4", "10.4949", "0.0022", "11.0000"],
        "all labs": ["8", "12.1089", "", ""],
    }
    # Always on: 0.1 + 0.206 = 0.306 per hour, 4 of the 8 seats each: 0.153. Per learner-hour: 1.614 / 4 = 0.4035;
    # 10.4949 / 4 = 2.623725, rounded up 2.6238. A 730-hour month: (730 x 1.614 + 730 x 0.153) / 4 = 322.4775;
    # (730 x 10.4949 + 730 x 0.153) / 4 = 1943.241750, rounded up 1943.2418.
    assert per_learner(lines) == {
        "a": ["0.4035", "322.4775", "0.1530"],
        "b": ["2.6238", "1943.2418", "0.1530"],
    }
    assert "| lab | per learner-hour | per learner, month | empty lab per hour |" in [
        " ".join(line.split()) for line in lines
    ]
    # Nothing unpriced, no classes: no tables for them.
    assert not [line for line in lines if line in (cost_report.UNPRICED_LEAD_IN, cost_report.WARMUP_LEAD_IN)]


def test_summary_labels_the_figures_with_the_price_sources():
    (title,) = tables.lead_ins(summary(run_values(TWO_LABS)), ("cost of the labs' GPU nodes",))
    assert PRICE_SOURCE in title and DISK_PRICE_SOURCE in title
    assert "list prices of one region (stack in eu-west-1; `pulumi preview` prices eu-west-1), not a bill" in title


def test_an_unpriced_lab_says_so_the_total_counts_priced_only():
    values = stack_values(
        **{"gpulab:labs": {"new": lab(["p5e.48xlarge"], 2, 8), "mixed": lab(["g4dn.xlarge", "p5e.48xlarge"], 3, 8)}}
    )
    lines = summary(run_values(values))
    assert rows(lines) == {
        # The disk has a price where the instance has none: p5e.48xlarge keeps its images on its NVMe, and its 20 GiB
        # root volume is priced.
        "new": ["16", "no price", "0.0022", "-"],
        # 8 GPUs x 0.52819178 = 4.22553425, rounded up; no price for the lab, as Karpenter may launch p5e.48xlarge
        "mixed": ["24", "no price", "0.0022", "-"],
        "all labs": ["40", "0.0000", "", ""],
    }
    unpriced = tables.table(lines, cost_report.UNPRICED_LEAD_IN)
    assert {r["lab"]: r["instance types without a price"] for r in unpriced} == {
        "new": "p5e.48xlarge",
        "mixed": "p5e.48xlarge",
    }


def test_at_most_says_once_what_it_is_and_per_lab_its_basis():
    values = stack_values(**{"gpulab:labs": {"mix": lab(["g5.12xlarge", "g4dn.xlarge"], 2, 4)}})
    lines = cost_report.table(run_values(values).outputs["labs"])
    start = lines.index(cost_report.lead_in(cost_report.AT_MOST_LEAD_IN)[0])
    # g5.12xlarge: (5.672 + 0.00219178) / 4 GPUs = 1.41854795 per GPU-hour, the dearer; 4 GPUs of it 5.6742.
    assert lines[start + 2] == (
        "- mix: the arithmetic bound, maxGpus 4 x 1.418548 USD per GPU-hour of g5.12xlarge, its root volume included"
    )
    assert rows(lines)["mix"][1] == "5.6742"
    assert sum("Karpenter's full lab where the planner ran" in line for line in lines) == 1


def test_a_stack_without_labs_has_an_empty_table_zero_total():
    assert rows(summary(run_values(stack_values(**{"gpulab:labs": {}})))) == {"all labs": ["0", "0.0000", "", ""]}


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_render_writes_outputs_sorted_with_secrets_hidden(path: Path, tmp_path: Path):
    assert render.run.main([str(path), "--out", str(tmp_path)]) == 0
    text = (tmp_path / "outputs.json").read_text()
    outputs = json.loads(text)
    assert text == json.dumps(outputs, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    assert outputs["kubeconfig"] == harness.SECRET
    name, stack_file = render.run.stack_file(str(path))
    assert outputs == harness.run(name, render.run.read_stack_file(stack_file)).outputs


def test_an_export_is_read_whole_and_hidden_if_any_is_secret(monkeypatch):
    def build(stack, live_prices=False):
        pulumi.export("plain", {"name": pulumi.Output.from_input("a"), "list": [1, pulumi.Output.from_input("b")]})
        pulumi.export("nested", {"open": "x", "deep": [{"key": pulumi.Output.secret("s")}]})
        pulumi.export("apply", pulumi.Output.from_input("c").apply(lambda c: {"c": pulumi.Output.from_input(c * 2)}))

    monkeypatch.setattr(program, "build", build)
    outputs = harness.run("test", as_cli_config(BASE)).outputs
    assert outputs == {"plain": {"name": "a", "list": [1, "b"]}, "nested": harness.SECRET, "apply": {"c": "cc"}}


def test_the_table_shows_each_class_warming_cost_by_its_lab():
    classes = [
        {"schedule": "0 9 * * mon", "duration": "1h"},
        {"schedule": "0 14 * * fri", "duration": "2h", "warmSeats": 4, "warmup": "1h"},
    ]
    values = stack_values(
        **{"gpulab:labs": {"c": lab(["g4dn.xlarge", "g4dn.12xlarge"], 3, max_gpus=4, classes=classes)}}
    )
    # Each node with its 20 GiB root volume (1.60 / 730 = 0.00219178 per hour). 12 seats: 4 g4dn.xlarge x 0.52819178 x
    # 20m = 0.7043 or 1 g4dn.12xlarge x 3.91419178 / 3 = 1.3047; 4 seats for 1 h: 2 x 0.52819178 or 1 x 3.91419178
    lines = cost_report.table(run_values(values).outputs["labs"])
    assert [list(row.values()) for row in tables.table(lines, cost_report.WARMUP_LEAD_IN)] == [
        ["c", "0 9 * * mon", "12", "20m", "0.7043 to 1.3047"],
        ["c", "0 14 * * fri", "4", "1h", "1.0564 to 3.9142"],
    ]
