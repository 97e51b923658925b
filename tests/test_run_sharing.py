"""The test session's run sharing (tests/conftest.py): a worker reads the run another worker made instead of its own."""

import json

from render import harness
from tests import conftest


def test_a_worker_reads_anothers_run_leaving_no_partial_file(tmp_path, monkeypatch):
    made = []
    real = harness.run
    monkeypatch.setattr(harness, "run", lambda stack, config: made.append(stack) or real(stack, config))
    key = ("shared", json.dumps(conftest.as_cli_config(conftest.BASE), sort_keys=True))
    first = conftest._shared_run(tmp_path, key)
    second = conftest._shared_run(tmp_path, key)
    assert made == ["shared"]
    assert second is not first
    assert (second.resources, second.outputs, second.invokes) == (first.resources, first.outputs, first.invokes)
    assert [path.suffix for path in tmp_path.iterdir()] == [".pickle"]
