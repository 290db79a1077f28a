"""The recorded third-party cassettes every test reads: the copies bundled in ``cassettes/recorded/``.

One definition, so a fresh clone runs every test. Each copy is its source file byte for byte below an
inserted ``replaykit:`` mapping (``origin: recorded``, attribution, ``original_sha256``); tests that need the
source bytes split them off with ``test_bundled_cassettes.original_bytes``.
"""

from __future__ import annotations

from pathlib import Path

from replaykit import cassette
from replaykit.resources import data_dir

RECORDED = data_dir("cassettes") / "recorded"
RECORDINGS = cassette.iter_paths([RECORDED])


def recorded(name: str) -> Path:
    """The bundled recording ``name`` (a file name under ``cassettes/recorded/``)."""
    path = RECORDED / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not a bundled recording; see cassettes/recorded/SOURCES.md")
    return path
