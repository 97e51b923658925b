"""The cost table in the render's summary (and the PR comment), and the stack outputs the render writes."""

import json
from pathlib import Path

import pytest

from config.prices import PRICE_SOURCE
from tests import tables
from tests.conftest import STACK_FILES, run_values, stack_values
from tests.synthetic import lab
from tools import cost_report, harness, render
from tools.summary import summary

TWO_LABS = stack_values(
    **{
        "gpulab:labs": {
            # 0.8048 per GPU-hour: 2 GPUs x 0.8048 = 1.6096; seats 0.8048 / 2 = 0.4024
            "a": lab(["g6.xlarge"], 2, max_gpus=2),
            # 10.49264 / 4 = 2.62316 per GPU-hour: 4 x 2.62316 = 10.49264, rounded up 10.4927; seats / 1 = 2.6232
            "b": lab(["g6e.12xlarge"], 1, max_gpus=4, maxHourlyCost=11),
        }
    }
)


def rows(lines: list[str]) -> dict[str, list[str]]:
    """The cost table's body rows by their first cell."""
    return {row["lab"]: list(row.values())[1:] for row in tables.table(lines, "cost of the labs' GPU nodes")}


def test_summary_shows_each_labs_seat_hour_price_ceiling_and_cap_and_the_total_of_the_stack():
    lines = summary(run_values(TWO_LABS))
    assert rows(lines) == {
        "a": ["4", "0.4024", "1.6096", "-", "-", "-"],
        "b": ["4", "2.6232", "10.4927", "11.0000", "-", "-"],
        "all labs": ["8", "", "12.1023", "", "", ""],
    }


def test_summary_labels_the_figures_with_the_price_source():
    (title,) = [line for line in summary(run_values(TWO_LABS)) if PRICE_SOURCE in line]
    assert "list prices of one region, not a bill" in title


def test_a_lab_without_prices_says_so_and_the_total_covers_priced_types_only():
    values = stack_values(
        **{"gpulab:labs": {"new": lab(["g7.2xlarge"], 2), "mixed": lab(["g4dn.xlarge", "p5e.48xlarge"], 3, 8)}}
    )
    assert rows(summary(run_values(values))) == {
        "new": ["4", "no price", "no price", "-", "g7.2xlarge", "-"],
        "mixed": ["24", "0.1753", "4.2080", "-", "p5e.48xlarge", "-"],
        "all labs": ["28", "", "4.2080 (priced types only)", "", "", ""],
    }


def test_a_range_of_seat_hour_prices_is_shown_cheapest_first():
    values = stack_values(**{"gpulab:labs": {"mix": lab(["g5.12xlarge", "g4dn.xlarge"], 2, 4)}})
    assert rows(cost_report.table(run_values(values).outputs["labs"]))["mix"][1] == "0.2630 to 0.7090"


def test_a_stack_without_labs_has_an_empty_table_with_a_zero_total():
    assert rows(summary(run_values(stack_values(**{"gpulab:labs": {}})))) == {
        "all labs": ["0", "", "0.0000", "", "", ""]
    }


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_render_writes_the_stack_outputs_sorted_with_secrets_hidden(path: Path, tmp_path: Path):
    assert render.main([str(path), "--out", str(tmp_path)]) == 0
    text = (tmp_path / "outputs.json").read_text()
    outputs = json.loads(text)
    assert text == json.dumps(outputs, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    assert outputs["kubeconfig"] == harness.SECRET
    name, stack_file = render.stack_file(str(path))
    assert outputs == harness.run(name, render.read_stack_file(stack_file)).outputs


def test_the_table_shows_what_warming_each_class_costs_beside_the_labs_figures():
    classes = [
        {"schedule": "0 9 * * mon", "duration": "1h"},
        {"schedule": "0 14 * * fri", "duration": "2h", "warmSeats": 4, "warmup": "1h"},
    ]
    values = stack_values(
        **{"gpulab:labs": {"c": lab(["g4dn.xlarge", "g4dn.12xlarge"], 3, max_gpus=4, classes=classes)}}
    )
    # 12 seats: 4 g4dn.xlarge x 0.526 x 20m = 0.7013 or 1 g4dn.12xlarge x 3.912 / 3 = 1.304; 4 seats for 1 h: 2 x 0.526
    # or 1 x 3.912
    assert rows(cost_report.table(run_values(values).outputs["labs"]))["c"][-1] == (
        "0.7013 to 1.3040 for 12 seats 20m before `0 9 * * mon`; 1.0520 to 3.9120 for 4 seats 1h before `0 14 * * fri`"
    )
