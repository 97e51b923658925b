"""CI's check of skipped tests: a test that skips in CI must be listed, with its reason, in `.ci/allowed-skips`.

Most skips are meant for a clone without helm, Go, the upstream data or the twin, all of which CI has: a skip there
hides a test that CI ought to run. `.ci/run` sets GPULAB_ALLOWED_SKIPS to the list for `make test`; then, at the end of
the session, every skip that no line of the list allows is named with its reason, and pytest exits with 1 even when
every test passed. Without the variable (a developer's `make test`) nothing is checked.

The list: one skip a line, `<test id or pattern> <reason>`. The id is pytest's node id (`tests/test_x.py::test_y[z]`,
or the file alone for a file that skips as a whole); `*` in it stands for any characters (and nothing else is special,
so a parametrized id's brackets are literal). The reason, the rest of the line, must appear in the skip's own reason as
pytest reports it, so that a test listed for one reason still fails CI when it skips for another. `#` starts a comment
line (say there why CI cannot run the test).

conftest.py registers this module as a plugin; `pytest -p tests.support.allowed_skips` does too.
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ALLOWED_SKIPS = "GPULAB_ALLOWED_SKIPS"


@dataclass(frozen=True)
class Allowed:
    pattern: str
    reason: str

    def allows(self, nodeid: str, reason: str) -> bool:
        id_pattern = ".*".join(re.escape(part) for part in self.pattern.split("*"))
        return re.fullmatch(id_pattern, nodeid) is not None and self.reason in reason


def read(text: str) -> list[Allowed]:
    """The list's lines; a line without a reason is an error (each skip is listed with its reason)."""
    allowed = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition(" ")
        if not reason.strip():
            raise ValueError(f"line {number} of the allowed skips lists {pattern} without its reason")
        allowed.append(Allowed(pattern, reason.strip()))
    return allowed


def unlisted(skips: list[tuple[str, str]], allowed: list[Allowed]) -> list[tuple[str, str]]:
    """The (node id, reason) of each skip that no line allows."""
    return [(nodeid, reason) for nodeid, reason in skips if not any(a.allows(nodeid, reason) for a in allowed)]


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    # A skip's longrepr is (path, line, "Skipped: <reason>").
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


_UNLISTED = pytest.StashKey[list[tuple[str, str]]]()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    path = os.environ.get(ALLOWED_SKIPS)
    if not path or hasattr(config, "workerinput"):  # the controller sees every worker's reports
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    found = unlisted([(r.nodeid, skip_reason(r)) for r in skipped], read(Path(path).read_text()))
    config.stash[_UNLISTED] = found
    if found and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(trylast=True)  # after conftest.py's skips by reason: the last lines before pytest's own
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    found = config.stash.get(_UNLISTED, [])
    if not found:
        return
    path = os.environ[ALLOWED_SKIPS]
    terminalreporter.section(f"skips that {path} does not allow", sep="-", red=True, bold=True)
    for nodeid, reason in sorted(found):
        terminalreporter.write_line(f"{nodeid}: {reason.splitlines()[0] if reason else ''}")
    terminalreporter.write_line(
        f"{len(found)} test(s) skipped that CI must run: make them run, or list each in {path} with its reason"
    )
