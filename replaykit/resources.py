"""Where the bundled data lives: ``contracts/``, ``cassettes/`` and ``scenarios/``; and how a cassette name
is found among them.

In a source checkout they sit at the repository root, in an installed wheel under ``replaykit/_data/``; both
are found. :func:`find_cassette` is the one lookup of a cassette named by a user (the command line, the pytest
marker): the path as given (a relative one under ``base``), else the same path among the bundled cassettes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from replaykit.errors import UsageError, located

__all__ = ["FIND_FIX", "cassette_candidates", "data_dir", "find_cassette"]

DataKind = Literal["contracts", "cassettes", "scenarios"]

FIND_FIX = "name a cassette file or folder, or a bundled one (`replaykit cassettes` lists them)"

_PACKAGE = Path(__file__).resolve().parent


def data_dir(kind: DataKind) -> Path:
    """Return the directory holding the bundled ``kind`` files."""
    for candidate in (_PACKAGE / "_data" / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"replaykit's bundled {kind}/ directory is missing; reinstall replaykit")


def cassette_candidates(name: str | os.PathLike[str], base: Path | None = None) -> list[Path]:
    """Where a cassette ``name`` (a file or a folder) is looked for, in order: an absolute path as it is;
    a relative one under ``base`` (default: as given, i.e. the current folder), then among the bundled
    cassettes, with a leading ``cassettes/`` also taken to mean the bundled folder itself."""
    given = Path(name)
    if given.is_absolute():
        return [given]
    bundled = data_dir("cassettes")
    found = [base / given if base is not None else given, bundled / given]
    if given.parts[:1] == ("cassettes",):
        found.append(bundled.joinpath(*given.parts[1:]))
    return found


def find_cassette(name: str | os.PathLike[str], base: Path | None = None, fix: str = FIND_FIX) -> Path:
    """The first of :func:`cassette_candidates` that exists; none: a :class:`~replaykit.errors.UsageError`
    naming every place looked in, and ``fix``."""
    tried = cassette_candidates(name, base)
    for path in tried:
        if path.exists():
            return path
    looked = ", ".join(map(str, tried))
    raise UsageError(located(os.fspath(name), None, f"no such cassette file or folder (looked in: {looked})",
                             fix))

