"""Prometheus's own promtool, built from github.com/prometheus/prometheus at the version tools/promtool/go.mod pins
(`make promtool`; .ci/run builds it), for the tests of the rules, the scraper's configuration and the dashboard's
queries. Without it they skip, in one line."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

BINARY = Path(os.environ.get("GPULAB_PROMTOOL") or ROOT / "tools" / "promtool" / "bin" / "promtool")


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Runs promtool; skips the test when it is not built."""
    if not BINARY.is_file():
        pytest.skip(f"no promtool at {BINARY}: `make promtool` builds it (Go 1.26, about 5 minutes cold)")
    return subprocess.run([str(BINARY), *args], cwd=cwd, capture_output=True, text=True, timeout=120)
