"""Where the bundled data lives: ``contracts/``, ``cassettes/`` and ``scenarios/``.

In a source checkout they sit at the repository root; in an installed wheel they are package data
under ``replaykit/_data/``. Both layouts are found, so a non-editable install works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

__all__ = ["data_dir"]

DataKind = Literal["contracts", "cassettes", "scenarios"]

_PACKAGE = Path(__file__).resolve().parent


def data_dir(kind: DataKind) -> Path:
    """Return the directory holding the bundled ``kind`` files."""
    for candidate in (_PACKAGE / "_data" / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"replaykit's bundled {kind}/ directory is missing; reinstall replaykit")
