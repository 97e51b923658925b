"""The progress of a step that can take more than ten seconds: on a terminal, one line redrawn every second with what
the step is doing, how far along it is and how long it has run; anywhere else (a CI log, a pipe) nothing, so that a log
holds only the lines the step itself prints when it starts and ends. Issue 50 found a first `make test` silent for 3-4
minutes at a time and a first `make render` silent for 72 s; devtools/go_build.py and the tests' progress
(tests/support/progress.py) use it.

    with Progress("planner") as progress:
        progress.update("412 of about 1,000 packages compiled")
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType
from typing import TextIO

# Redraw this often on a terminal: the elapsed time ticks in whole seconds.
INTERVAL = 1.0
# Erase the terminal's line (carriage return, then ANSI "erase in line").
CLEAR = "\r\x1b[K"


def elapsed_text(seconds: float) -> str:
    """`7 min 12 s`, or `42 s` under a minute."""
    return f"{int(seconds // 60)} min {int(seconds % 60)} s" if seconds >= 60 else f"{int(seconds)} s"


def live(stream: TextIO) -> bool:
    """Whether a redrawn line belongs on `stream`: a terminal, and not CI (GitHub Actions sets CI=true; its log is not
    a terminal either, and a redrawn line there would be one line per second)."""
    return stream.isatty() and not os.environ.get("CI")


class Progress:
    """A redrawn line `<what>: <status>, <elapsed>` (`<what>, <elapsed>` before any status) while the `with` block
    runs, erased when it ends."""

    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        self.what = what
        self.stream = stream or sys.stderr
        self.status = ""  # how far along, where the step can say
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, status: str) -> None:
        self.status = status

    def elapsed(self) -> str:
        return elapsed_text(time.monotonic() - self.start)

    def line(self) -> str:
        return f"{self.what}{': ' if self.status else ''}{self.status}, {self.elapsed()}"

    def _draw(self) -> None:
        while not self._stop.wait(INTERVAL):
            self.stream.write(f"{CLEAR}{self.line()}")
            self.stream.flush()

    def __enter__(self) -> Progress:
        self.start = time.monotonic()
        if live(self.stream):
            self._thread = threading.Thread(target=self._draw, daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.stream.write(CLEAR)
            self.stream.flush()
