"""CI's check of skipped tests (tests/support/allowed_skips.py): a skip that `.ci/allowed-skips` does not list, with
its reason, fails the session; a listed one does not. The sessions here are pytest's own, in a subprocess, on a file
of two tests that skip."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import allowed_skips

ROOT = Path(__file__).resolve().parent.parent

SKIPPING = """
import pytest

def test_without_go():
    pytest.skip("Go is not installed")

@pytest.mark.parametrize("stack", ["prod"])
def test_without_upstream(stack):
    pytest.skip("no upstream data in ../shared/upstream")
"""


def session(tmp_path: Path, allowed: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(allowed_skips.ALLOWED_SKIPS, None)
    if allowed is not None:
        (tmp_path / "allowed-skips").write_text(allowed)
        env[allowed_skips.ALLOWED_SKIPS] = str(tmp_path / "allowed-skips")
    command = [sys.executable, "-m", "pytest", "-p", "tests.support.allowed_skips", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)


BOTH = """# Go is missing on purpose here.
test_skipping.py::test_without_go Go is not installed
test_skipping.py::test_without_upstream[*] no upstream data
"""


def test_listed_skips_pass_the_session(tmp_path: Path) -> None:
    result = session(tmp_path, BOTH, "-n", "0")
    assert result.returncode == 0, result.stdout
    assert "2 skipped" in result.stdout


def test_an_unlisted_skip_fails_the_session_by_name(tmp_path: Path) -> None:
    result = session(tmp_path, BOTH.splitlines()[1] + "\n", "-n", "0")
    assert result.returncode == 1, result.stdout
    assert "skips that" in result.stdout
    assert "test_skipping.py::test_without_upstream[prod]: no upstream data in ../shared/upstream" in result.stdout
    assert "test_skipping.py::test_without_go:" not in result.stdout


def test_an_unlisted_skip_fails_under_xdist_too(tmp_path: Path) -> None:
    result = session(tmp_path, "", "-n", "1")
    assert result.returncode == 1, result.stdout
    assert "test_skipping.py::test_without_go: Go is not installed" in result.stdout


def test_without_the_list_no_skip_is_checked(tmp_path: Path) -> None:
    assert session(tmp_path, None, "-n", "0").returncode == 0


def test_a_skip_listed_for_another_reason_fails() -> None:
    allowed = allowed_skips.read("tests/test_x.py::test_y Go is not installed\n")
    skips = [("tests/test_x.py::test_y", "no upstream data")]
    assert allowed_skips.unlisted(skips, allowed) == skips


def test_only_a_star_is_special_in_a_listed_id() -> None:
    allowed = allowed_skips.read("tests/test_x.py::test_y[a*] why\n")
    assert allowed_skips.unlisted([("tests/test_x.py::test_y[ab]", "why")], allowed) == []
    assert allowed_skips.unlisted([("tests/test_x.py::test_ya", "why")], allowed) != []
    assert allowed_skips.unlisted([("tests/test_x.py::test_y[ab]x", "why")], allowed) != []


def test_a_listed_skip_without_its_reason_is_refused() -> None:
    with pytest.raises(ValueError, match=r"line 2 .* tests/test_x\.py::test_y without its reason"):
        allowed_skips.read("# comment\ntests/test_x.py::test_y\n")


def test_the_ci_list_gives_every_skip_a_reason() -> None:
    assert allowed_skips.read((ROOT / ".ci" / "allowed-skips").read_text())
