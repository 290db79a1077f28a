"""Parsed cassettes kept on disk as JSON, keyed by the SHA-256 of the file's bytes: a cassette read once
loads again, in a new process too, without YAML.

What is kept is the YAML document exactly as the safe loader gave it, with the interactions' lines; a load
from it still goes through :func:`~replaykit.cassette.build.build_cassette` (every shape check, every body
limit). Only a document JSON gives back unchanged is kept: text keys, strings, numbers, booleans, null,
lists, mappings and ``!!binary`` bytes (stored as base64, their places listed); a document with YAML aliases,
timestamps or other keys is parsed every time. Only a document that built a cassette is kept, so a broken
file is always explained from its own text.

The folder: ``$REPLAYKIT_CASSETTE_CACHE`` (``off`` or empty: none), else ``replaykit-cache/cassettes`` inside
the virtual environment replaykit runs in (none outside one). At most :data:`MAX_ENTRIES` files and
:data:`MAX_BYTES` bytes are kept (the oldest go first). Writing waits (a first load pays neither the JSON
nor the write): the documents are made into JSON and written, atomically, when the process exits, when the
memory cache is cleared or once documents parsed from :data:`FLUSH_BYTES` bytes wait (:func:`flush`). An
unreadable or foreign file is a miss, never an error.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import json
import math
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replaykit.cassette.write import write_atomic

__all__ = ["ENV", "FLUSH_BYTES", "MAX_BYTES", "MAX_ENTRIES", "flush", "folder", "get", "put", "stored_form"]

ENV = "REPLAYKIT_CASSETTE_CACHE"
MAX_ENTRIES = 512
MAX_BYTES = 1 << 30
FLUSH_BYTES = 16 << 20  # waiting documents are written once they were parsed from this many bytes
_WAITING: list[tuple[Path, Callable[[], bytes | None], list[int | None], int]] = []  # (put's arguments)
_LOCK = threading.Lock()
_FORMAT = 1  # the stored form's version: a file of another version is a miss
_Place = list[str | int]


def folder() -> Path | None:
    """Where parsed cassettes are kept, or None when they are not."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return Path(chosen) if chosen.strip() not in ("", "off") else None
    if sys.prefix == sys.base_prefix:
        return None  # not in a virtual environment: nowhere that is replaykit's own to write
    return Path(sys.prefix) / "replaykit-cache" / "cassettes"


def _file(key: bytes) -> Path | None:
    root = folder()
    return root / f"{key.hex()}.json" if root is not None else None


def stored_form(doc: Any) -> bytes | None:
    """``doc`` as the JSON kept on disk (without the lines), or None when JSON would not give it back."""
    binary: list[_Place] = []
    try:
        if not _plain(doc, [], binary):
            return None
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=_base64)
        return json.dumps(binary).encode() + b"\n" + text.encode("utf-8")
    except (ValueError, UnicodeEncodeError, RecursionError):  # a lone surrogate, a very deep document
        return None


def _base64(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)  # pragma: no cover - _plain let only bytes through


def _plain(value: Any, place: _Place, binary: list[_Place]) -> bool:
    """Whether JSON gives ``value`` back as it is (bytes: their place is noted in ``binary``)."""
    kind = type(value)
    if kind in (str, int, bool) or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is bytes:
        binary.append(list(place))
        return True
    if kind is list:
        return all(_plain(item, [*place, index], binary) for index, item in enumerate(value))
    if kind is dict:
        return all(type(key) is str and _plain(item, [*place, key], binary) for key, item in value.items())
    return False


def put(key: bytes, form: Callable[[], bytes | None], lines: list[int | None], size: int) -> None:
    """Keep a document parsed from ``size`` bytes under ``key``, with its interactions' lines: ``form``
    gives its :func:`stored_form` when :func:`flush` writes it (a load pays neither)."""
    path = _file(key)
    if path is None:
        return
    with _LOCK:
        _WAITING.append((path, form, lines, size))
        full = sum(waiting[3] for waiting in _WAITING) > FLUSH_BYTES
    if full:
        flush()


@atexit.register
def flush() -> None:
    """Write the documents waiting to be kept; a failure to write is ignored (the cache is only ever a
    shortcut, and a lost entry is a miss)."""
    with _LOCK:
        waiting = _WAITING[:]
        _WAITING.clear()
    for path, form, lines, _ in waiting:
        stored = form()
        if stored is None:
            continue
        head = json.dumps({"format": _FORMAT, "lines": lines}).encode()
        try:
            write_atomic(path, head + b"\n" + stored, durable=False)
        except OSError:
            continue
    for root in {path.parent for path, *_ in waiting}:
        try:
            _prune(root)
        except OSError:
            continue


def get(key: bytes) -> tuple[Any, list[int | None]] | None:
    """The document and lines kept under ``key``, or None (a miss: nothing kept, or not readable)."""
    path = _file(key)
    if path is None:
        return None
    try:
        head, places, text = path.read_bytes().split(b"\n", 2)
        meta, binary, doc = json.loads(head), json.loads(places), json.loads(text)
        if meta.get("format") != _FORMAT:
            return None
        for place in binary:
            _decode_at(doc, place)
        lines = meta["lines"]
        if not all(line is None or type(line) is int for line in lines):
            return None
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError,
            binascii.Error):
        return None
    return doc, lines


def _decode_at(doc: Any, place: _Place) -> None:
    *parents, last = place
    for part in parents:
        doc = doc[part]
    doc[last] = base64.b64decode(doc[last], validate=True)


def _prune(root: Path) -> None:
    """Drop the oldest files past :data:`MAX_ENTRIES` or :data:`MAX_BYTES`."""
    entries = sorted(((each.stat().st_mtime_ns, each.stat().st_size, Path(each.path))
                      for each in os.scandir(root) if each.name.endswith(".json")), reverse=True)
    total = 0
    for count, (_, size, path) in enumerate(entries, start=1):
        total += size
        if count > MAX_ENTRIES or total > MAX_BYTES:
            path.unlink(missing_ok=True)
