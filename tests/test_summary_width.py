"""The render's summary fits a terminal of 120 columns (reports/table.py WIDTH): its tables are split by concern, and
every lead-in is wrapped. Checked on stacks built here, whose content is known: the width of a table grows with what
a user writes into its cells (a lab's name, its instance types, a hub's host)."""

import datetime

import pytest

import render.run
from render import harness
from reports.summary import summary
from reports.table import WIDTH
from tests.conftest import STACK_FILES, run_values, stack_values
from tests.support.synthetic import SYNTHETIC, TIME_ZONE_STACK, lab

DAY = datetime.date(2027, 3, 25)
# Every table the summary has: MPS beside time-slicing, a type without a price, classes in several zones, a hub.
STACKS = {
    "mps-beside-time-slicing": SYNTHETIC["mps-beside-time-slicing"],
    "mixed": SYNTHETIC["mixed"],
    "jupyterhub": SYNTHETIC["jupyterhub"],
    "time-zones": TIME_ZONE_STACK,
    "unpriced-and-classes": stack_values(
        **{
            "gpulab:labs": {
                "new-types": lab(["p5e.48xlarge", "g4dn.xlarge"], 2, max_gpus=8),
                "workshop": lab(
                    ["g4dn.xlarge", "g4dn.12xlarge"],
                    3,
                    max_gpus=8,
                    classes=[
                        {"schedule": "0 9 * * mon-fri", "duration": "1h30m", "warmSeats": 6, "warmup": "30m"},
                        {"schedule": "30 14 * * tue,thu", "duration": "2h", "timeZone": "America/Argentina/Cordoba"},
                    ],
                    disruption={"budgets": [{"nodes": "10%", "reasons": ["Drifted", "Underutilized"]}]},
                ),
            }
        }
    ),
}


@pytest.mark.parametrize("name", STACKS)
def test_every_line_of_the_summary_fits_120_columns(name):
    lines = summary(run_values(STACKS[name]), DAY)
    assert [line for line in lines if len(line) > WIDTH] == []


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_summaries_fit_120_columns_while_lab_names_are_short(path):
    """Any valid content of the stack files: the labs' names and instance types are the cells that grow with a user's
    stack, and the summary fits while they stay as short as the examples'."""
    name, stack_file = render.run.stack_file(str(path))
    run = harness.run(name, render.run.read_stack_file(stack_file))
    labs = run.stack.settings.labs
    if any(len(n) > 16 or len(", ".join(lab.instance_types)) > 40 for n, lab in labs.items()):
        pytest.skip("a lab's name or instance types are longer than the examples': its tables may be wider")
    assert [line for line in summary(run, DAY) if len(line) > WIDTH] == []
