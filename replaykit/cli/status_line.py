"""A status line on a terminal, rewritten in place while ``properties`` and ``qualify`` run.

Only on a terminal, never when ``CI`` is set; cleared before each report line.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

__all__ = ["StatusLine"]

_BAR = 20  # cells of the progress bar at most


class StatusLine:
    """A status line on ``stream`` while a property runs: only on a terminal, never when ``CI`` is set (where
    a line rewritten with ``\\r`` would pile up in the log). A dependency-free line is enough for one name
    and a count; the bar has a cell per item up to 20 items, then stays 20 cells wide."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.live = self.stream.isatty() and not os.environ.get("CI")

    def running(self, number: int, name: str) -> None:
        """Say that property ``number`` (from 1) of ``total``, ``name``, is running."""
        cells = min(self.total, _BAR)
        filled = (number - 1) * cells // self.total
        done = "#" * filled + "." * (cells - filled)
        self._write(f"\r\x1b[K[{done}] [{number}/{self.total}] {name}")

    def clear(self) -> None:
        """Wipe the status line (before a report line is printed, and at the end)."""
        self._write("\r\x1b[K")

    def _write(self, text: str) -> None:
        if self.live:
            self.stream.write(text)
            self.stream.flush()
