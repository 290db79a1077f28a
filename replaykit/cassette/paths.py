"""Which cassette files a command line names."""


import os
from collections.abc import Iterable
from pathlib import Path

from replaykit.errors import UsageError, located


def named_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The cassette files named on a command line (files, or folders of ``*.yaml`` / ``*.yml``); a path that
    does not exist, a folder with no cassettes, something not a regular file (a FIFO would block a read
    forever) or no path at all is a :class:`~replaykit.errors.UsageError`."""
    found: list[Path] = []
    for entry in map(Path, paths):
        if not entry.exists():
            raise UsageError(located(entry, None, "no such file or directory",
                                     "name a cassette file or a folder of cassettes"))
        if not entry.is_dir() and not entry.is_file():
            raise UsageError(located(entry, None, "not a regular file (a FIFO, a device or a socket)",
                                     "name a cassette file or a folder of cassettes"))
        files = iter_paths([entry])
        if not files:
            raise UsageError(located(entry, None, "no cassettes (*.yaml, *.yml) in this directory",
                                     "point at a folder that holds cassettes"))
        found += files
    if not found:
        raise UsageError("no paths given; name cassette files or folders")
    return found


def iter_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Cassette files named by ``paths`` (files as given; folders searched for ``*.yaml`` / ``*.yml``)."""
    found: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            found.extend(sorted(p for p in entry.rglob("*") if p.suffix in {".yaml", ".yml"} and p.is_file()))
        else:
            found.append(entry)
    return found
