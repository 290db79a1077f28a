"""Cassettes: vcrpy version-1 YAML, read in every layout users have, written atomically.

A cassette file is vcrpy's format plus a top-level ``replaykit:`` mapping (which vcrpy ignores)::

    version: 1
    replaykit: {origin: recorded|synthesized, provider: anthropic, recorded_with: ..., fingerprint: sha256:…,
                description: what it shows, in a sentence or two}
    interactions:
    - request:  {method, uri, headers: {name: [values]}, body: str|null}
      response: {status: {code, message}, headers: {name: [values]}, body: {string: str}}
      replaykit: {event_offsets_ms: [...]}        # optional: when each SSE event was sent, in ms

Read as well: ``!!binary`` bodies, gzip / deflate / br bodies with ``content-encoding`` (decoded on load),
pydantic-ai's ``parsed_body`` layout (serialised back to JSON the way its own replay does), vcrpy's
pre-4 httpx layout (``status_code`` / ``content``), vcrpy's harmless ``!!python/str|unicode|tuple`` tags
and any other top-level key (kept in :attr:`Cassette.extra`, written back). Loading is safe (no Python
objects): rapidyaml parses (:mod:`~replaykit.cassette.fastyaml`: the values ``yaml.safe_load`` gives, YAML
1.1 types included, several times faster), and libyaml's C loader whatever rapidyaml is not sure to read the
same way (aliases, tags other than ``!!binary``, control characters, ...) and every error, with its line.

Bodies are held decoded (``bytes``); JSON bodies are exposed parsed (:meth:`Request.json`,
:meth:`Response.json`), SSE bodies as :mod:`replaykit.sse` events with their byte boundaries
(:attr:`Response.events`, or one at a time: :meth:`Response.iter_events`). :meth:`Cassette.fingerprint` is a
SHA-256 of the traffic in a canonical form (see :func:`canonical_parts`) that is the same before and after a
save; a long JSON body's canonical form is hashed a piece at a time. :func:`save` writes atomically.

:func:`load` keeps parsed cassettes in a cache keyed by the SHA-256 of the file's bytes, so a changed
file is always parsed again; every call returns a fresh copy that the caller may change freely. The YAML
document of a file up to 256 MiB is also kept on disk as JSON under the same key, a long string as its
UTF-8 after the JSON (:mod:`~replaykit.cassette.parsed`, beside the virtual environment's packages): a new
process loads it without YAML, and every shape check and body limit still applies (the JSON is made when it
is written: at exit, when the memory cache is cleared, or once more documents wait; until then the document
stays in memory beside the cassette).

Memory: a file up to 8 MiB (:data:`~replaykit.cassette.read.WHOLE`) is read whole and hashed once. A bigger
one is read whole into one buffer that rapidyaml parses in place (hashed meanwhile, in a thread; a file
loaded before is hashed first as it streams, to look in the cache); the buffer is freed before the bodies'
bytes are made (or, when the disk keeps its document, before that is read), so a load holds the file's
bytes and its bodies' text, then the text and the bytes: a cassette with one 100 MB body peaks at about
2.3x the file's size, the interpreter included (``scripts/bench_cassette --big``). A big file rapidyaml
refuses is parsed as libyaml reads it in small pieces (checked as UTF-8, hashed and scanned for interaction
lines on the way), never holding its bytes or text whole; each body's text is dropped once its bytes are
made. A problem is explained by parsing the file again in memory, the way that names its line.

The package, one concern a module: :mod:`~replaykit.cassette.model` (the model and its canonical form),
:mod:`~replaykit.cassette.fastyaml` (rapidyaml's parse), :mod:`~replaykit.cassette.yamlio` (libyaml's loader
and interaction lines), :mod:`~replaykit.cassette.build`
(document to model, bodies decoded within bounds), :mod:`~replaykit.cassette.read` (files, cache, errors
with lines), :mod:`~replaykit.cassette.parsed` (parsed documents on disk), :mod:`~replaykit.cassette.write`
(atomic YAML) and :mod:`~replaykit.cassette.paths`.
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
