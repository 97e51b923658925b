"""The suite's progress where pytest's own goes quiet: on a terminal (not CI), after SILENCE seconds without a test
finishing, one line naming the test that has run longest, how many are running, how many of the collected tests are
done and how long the suite has run; again every SILENCE seconds while it stays quiet. A first `make test` was silent
for 3 to 4 minutes at a time (issue 50) while a test built a Go helper or played a rehearsal. In a CI log it says
nothing: pytest's own lines are the suite's.

conftest.py registers it; with pytest-xdist it runs in the controller, which hears each test start and end.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from devtools.progress import elapsed_text, live

# Seconds without a finished test before a line says what is running.
SILENCE = 15.0


class SuiteProgress:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.running: dict[str, float] = {}
        self.done = 0
        self.start = self.quiet_since = time.monotonic()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.session: pytest.Session | None = None

    def line(self, now: float) -> str:
        """What the suite is doing: the longest-running test, how many run, how many are done, for how long."""
        total = self.session.testscollected if self.session else 0
        done = f"{self.done} of {total} tests done" if total else f"{self.done} tests done"
        if not self.running:
            return f"tests: {done}, none running (collecting or starting), {elapsed_text(now - self.start)}"
        longest, since = min(self.running.items(), key=lambda item: item[1])
        others = f" and {len(self.running) - 1} more" if len(self.running) > 1 else ""
        return (
            f"tests: {longest} running for {elapsed_text(now - since)}{others}; {done}, "
            f"{elapsed_text(now - self.start)}"
        )

    def _watch(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        while not self.stop.wait(1):
            now = time.monotonic()
            if now - self.quiet_since >= SILENCE and reporter is not None:
                reporter.write_line(self.line(now))
                self.quiet_since = now

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        if live(sys.stdout):
            self.thread = threading.Thread(target=self._watch, daemon=True)
            self.thread.start()

    @pytest.hookimpl
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.running[nodeid] = time.monotonic()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.running.pop(report.nodeid, None)
            self.done += 1
            self.quiet_since = time.monotonic()

    @pytest.hookimpl
    def pytest_sessionfinish(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
