"""docs/node-capacity.md holds the code's own figures: its tables as devtools.node_capacity_tables prints them, and its
example refusal as the config check words it."""

import re

from devtools.node_capacity_tables import BEGIN, END, tables
from tests.conftest import ROOT
from tests.test_config import problems
from tests.test_daemonsets import with_intro

PAGE = ROOT / "docs" / "node-capacity.md"


def test_the_pages_tables_are_what_the_code_computes():
    text = PAGE.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end].splitlines() == tables(), (
        "run `python -m devtools.node_capacity_tables` and paste its output"
    )


def test_the_pages_example_refusal_is_the_config_checks_message():
    example = re.search(r"e\.g\.:\n\n```\n(.*?)\n```", PAGE.read_text(), re.S)
    assert example is not None
    assert " ".join(example.group(1).split()) in problems(with_intro(learnerPod={"cpu": "1237m"}))


def test_the_references_example_pod_is_its_example_labs_default(base_run):
    # docs/configuration.md shows intro's defaults: 3 learners on a g4dn.xlarge, as BASE's intro lab.
    requests = base_run.stack.settings.labs["intro"].learner_requests
    example = f"learnerPod: {{cpu: {requests['cpu']}, memory: {requests['memory']}}}"
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert example in text
    assert f"{requests['cpu']} for 3 learners on a g4dn.xlarge" in text
    assert f"{requests['memory']} for 3 learners on a g4dn.xlarge" in text
