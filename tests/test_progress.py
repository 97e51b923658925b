"""Every step that can take more than ten seconds says what it does, how far along it is and for how long: a line
redrawn on a terminal, and in a CI log one line when it starts and one when it ends (devtools/progress.py, .ci/venv,
tests/support/suite_progress.py; the Go builds in tests/test_go_build.py)."""

import io
import json
import os
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import render.run
from devtools import progress
from tests.conftest import BASE, ROOT
from tests.support.suite_progress import SuiteProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_step_is_one_line_redrawn_then_erased(monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.01)
    monkeypatch.delenv("CI", raising=False)
    terminal = Terminal()
    with progress.Progress("chart", terminal) as step:
        step.update("2 of 4 done")
        time.sleep(0.1)
    drawn = terminal.getvalue().split(progress.CLEAR)
    assert drawn[0] == "" and drawn[-1] == ""
    # The drawer may redraw once before the step's first update reaches it (a loaded machine runs the thread first);
    # after the update, every redraw says how far along the step is.
    lines = drawn[1:-1]
    updated = lines.index("chart: 2 of 4 done, 0 s")
    assert set(lines[:updated]) <= {"chart, 0 s"} and set(lines[updated:]) == {"chart: 2 of 4 done, 0 s"}


def test_in_ci_or_a_pipe_a_step_draws_nothing(monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.01)
    for stream, ci in ((Terminal(), "true"), (io.StringIO(), "")):
        monkeypatch.setenv("CI", ci)
        with progress.Progress("chart", stream) as step:
            step.update("2 of 4 done")
            time.sleep(0.05)
        assert stream.getvalue() == ""


def test_elapsed_reads_in_minutes_past_one():
    assert [progress.elapsed_text(s) for s in (0.4, 59.9, 60, 432.5)] == ["0 s", "59 s", "1 min 0 s", "7 min 12 s"]


def test_a_quiet_suite_names_its_longest_test_and_how_far_it_is():
    suite = SuiteProgress(SimpleNamespace())  # type: ignore[arg-type]
    suite.session = SimpleNamespace(testscollected=1800)  # type: ignore[assignment]
    suite.start = 0.0
    suite.done = 1234
    suite.running = {"tests/test_planner.py::test_full_lab": 100.0, "tests/test_render.py::test_x": 300.0}
    assert suite.line(312.0) == (
        "tests: tests/test_planner.py::test_full_lab running for 3 min 32 s and 1 more; 1234 of 1800 tests done, "
        "5 min 12 s"
    )
    suite.running = {}
    assert suite.line(40.0) == "tests: 1234 of 1800 tests done, none running (collecting or starting), 40 s"


def _venv(tmp_path, seconds: float) -> None:
    """A virtualenv that is there, with a uv that only takes its time: the lines are .ci/venv's own."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    uv = tmp_path / "venv" / "bin" / "uv"
    uv.write_text(f'#!/bin/sh\ncase "$1" in --version) echo "uv 0.13.9";; *) sleep {seconds};; esac\n')
    uv.chmod(0o755)


def test_on_a_terminal_the_virtualenv_step_counts_seconds_and_succeeds(tmp_path):
    _venv(tmp_path, 3)
    terminal, stderr = os.openpty()  # the step's stderr is a terminal
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    done = subprocess.run(
        [str(ROOT / ".ci/venv"), str(tmp_path / "venv"), "requirements.txt"], cwd=ROOT, stderr=stderr, env=env
    )
    os.close(stderr)
    drawn = b""
    while True:
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # the terminal's other end is closed: all is read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(terminal)
    assert done.returncode == 0
    # The seconds counted (how many depends on the machine's load), each over the last.
    step = re.escape(f"\r\x1b[Kvenv: {tmp_path / 'venv'} from requirements.txt: ".encode())
    assert re.search(step + rb"\d+ s", drawn)


def test_the_virtualenv_step_says_what_it_does_then_how_long_it_took(tmp_path):
    _venv(tmp_path, 0.2)
    done = subprocess.run(
        [str(ROOT / ".ci/venv"), str(tmp_path / "venv"), "requirements.txt"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "CI": "true"},
        check=True,
    )
    step = f"venv: {tmp_path / 'venv'} from requirements.txt"
    first, last = done.stderr.splitlines()
    assert first.startswith(f"{step}: uv 0.13.9 installs the pinned packages and compiles their bytecode (")
    assert re.fullmatch(rf"{re.escape(step)}: ready in \d+ s", last)


def test_on_a_terminal_the_render_names_the_phase_it_is_in(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.01)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("GPULAB_HELM", str(tmp_path / "no-helm"))  # no charts: the phases before them
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    path = tmp_path / "Pulumi.base.yaml"
    path.write_text(json.dumps({"config": BASE}))
    assert render.run.main([str(path), "--out", str(tmp_path / "out")]) == 0
    drawn = {line.rsplit(", ", 1)[0] for line in terminal.getvalue().split(progress.CLEAR) if ", " in line}
    assert "render: the program under mocks" in drawn  # without helm the charts' phase ends before a redraw
