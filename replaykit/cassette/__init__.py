"""Cassettes: vcrpy version-1 YAML, read in every layout users have, written atomically.

A cassette file is vcrpy's format plus a top-level ``replaykit:`` mapping (which vcrpy ignores). :func:`load`
reads it safely (rapidyaml, else libyaml with the line of each error), caches it by the SHA-256 of its bytes
(in memory, and on disk as JSON: :mod:`~replaykit.cassette.parsed`) and returns a fresh :class:`Cassette`:
bodies decoded, JSON parsed, SSE as :mod:`replaykit.sse` events, a canonical :meth:`Cassette.fingerprint`.
:func:`save` writes atomically. Every layer reads cassettes through here; the layouts read, the memory
bounds and the modules are in docs/architecture/cassette.md.
"""


from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replaykit.cassette.build import MAX_BODY, MAX_EXPANSION
    from replaykit.cassette.model import (
        ORIGINS,
        Cassette,
        Headers,
        Interaction,
        Meta,
        Origin,
        Request,
        Response,
        body_json,
        canonical_parts,
        header,
    )
    from replaykit.cassette.paths import iter_paths, named_paths
    from replaykit.cassette.read import clear_cache, load, loads, read_yaml, yaml_line
    from replaykit.cassette.write import dumps, save, stale_temporaries, write_atomic

# Each name -> its module, imported on first use: a header lookup or an atomic write (what a target run by a
# scenario needs) loads neither rapidyaml, the YAML reader nor the parse cache.
_HOMES = {
    **dict.fromkeys(("MAX_BODY", "MAX_EXPANSION"), "build"),
    **dict.fromkeys(("ORIGINS", "Cassette", "Headers", "Interaction", "Meta", "Origin", "Request", "Response",
                     "body_json", "canonical_parts", "header"), "model"),
    **dict.fromkeys(("iter_paths", "named_paths"), "paths"),
    **dict.fromkeys(("clear_cache", "load", "loads", "read_yaml", "yaml_line"), "read"),
    **dict.fromkeys(("dumps", "save", "stale_temporaries", "write_atomic"), "write"),
}

__all__ = [
    "MAX_BODY",
    "MAX_EXPANSION",
    "ORIGINS",
    "Cassette",
    "Headers",
    "Interaction",
    "Meta",
    "Origin",
    "Request",
    "Response",
    "body_json",
    "canonical_parts",
    "clear_cache",
    "dumps",
    "header",
    "iter_paths",
    "load",
    "loads",
    "named_paths",
    "read_yaml",
    "save",
    "stale_temporaries",
    "write_atomic",
    "yaml_line",
]


if not TYPE_CHECKING:  # a type checker reads the imports above: a misspelt name stays an error

    def __getattr__(name: str) -> object:
        if name not in _HOMES:
            raise AttributeError(f"module 'replaykit.cassette' has no attribute {name!r}")
        return getattr(importlib.import_module(f"replaykit.cassette.{_HOMES[name]}"), name)
