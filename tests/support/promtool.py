"""Prometheus's own promtool, built from github.com/prometheus/prometheus at the version devtools/promtool/go.mod pins
(`make promtool`; .ci/run builds it), for the tests of the rules, the scraper's configuration and the dashboard's
queries. Without it they skip, in one line."""

import os
import subprocess
from pathlib import Path

import pytest

from devtools import go_build
from tests.conftest import ROOT

PROMTOOL = go_build.HELPERS["promtool"]
BINARY = Path(os.environ.get("GPULAB_PROMTOOL") or PROMTOOL.binary)


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Runs promtool; skips the test when it is not built."""
    if not BINARY.is_file():
        where = "$GPULAB_PROMTOOL" if os.environ.get("GPULAB_PROMTOOL") else BINARY.relative_to(ROOT)
        first = PROMTOOL.first_build
        pytest.skip(f"no promtool at {where}: `make promtool` builds it (Go 1.26; a first build compiles {first})")
    return subprocess.run([str(BINARY), *args], cwd=cwd, capture_output=True, text=True, timeout=120)
