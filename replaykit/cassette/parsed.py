"""Parsed cassettes kept on disk as JSON, keyed by the SHA-256 of the file's bytes: a cassette read once
loads again, in a new process too, without YAML.

It keeps the YAML document as the safe loader gave it (only one JSON gives back unchanged, and only one that
built a cassette); a load from it still goes through :func:`~replaykit.cassette.build.build_cassette`. The
folder is ``$REPLAYKIT_CASSETTE_CACHE`` or ``replaykit-cache/cassettes`` in the virtual environment, bounded
by :data:`MAX_ENTRIES` and :data:`MAX_BYTES`; writes wait for :func:`flush`. Called by
:mod:`replaykit.cassette.read`; the rules are in docs/architecture/cassette.md.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import functools
import json
import math
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replaykit.cassette.write import write_atomic

__all__ = ["ENV", "FLUSH_BYTES", "LONG", "MAX_BYTES", "MAX_DOCUMENT", "MAX_ENTRIES", "flush", "folder",
           "forget", "get", "has", "put", "stored_form"]

ENV = "REPLAYKIT_CASSETTE_CACHE"
MAX_ENTRIES = 512
MAX_BYTES = 1 << 30
FLUSH_BYTES = 16 << 20  # waiting documents are written once they were parsed from this many bytes
_WAITING: list[tuple[Path, Callable[[], list[bytes] | None], list[int | None], int]] = []  # put's arguments
_LOCK = threading.Lock()
_FORMAT = 2  # the stored form's version: a file of another version is a miss
LONG = 1 << 12  # a string longer than this is kept as its UTF-8 after the JSON (no JSON to decode)
MAX_DOCUMENT = 256 << 20  # a document parsed from more bytes is not kept
_Place = list[str | int]


def folder() -> Path | None:
    """Where parsed cassettes are kept, or None when they are not."""
    return _folder(os.environ.get(ENV), sys.prefix, sys.base_prefix)


@functools.lru_cache(maxsize=8)  # a load asks up to three times: a Path is slow to make
def _folder(chosen: str | None, prefix: str, base_prefix: str) -> Path | None:
    if chosen is not None:
        return Path(chosen) if chosen.strip() not in ("", "off") else None
    if prefix == base_prefix:
        return None  # not in a virtual environment: nowhere that is replaykit's own to write
    return Path(prefix) / "replaykit-cache" / "cassettes"


def _file(key: bytes) -> Path | None:
    root = folder()
    return root.joinpath(f"{key.hex()}.json") if root is not None else None


def stored_form(doc: object) -> list[bytes] | None:
    """``doc`` as it is kept on disk (without the lines), in pieces, or None when JSON would not give it
    back: the places of its bytes, the places and sizes of its long strings, the JSON of the rest (a long
    string written ``""`` there), then each long string's UTF-8 as it is."""
    binary: list[_Place] = []
    texts: list[_Place] = []
    try:
        if not _plain(doc, [], binary, texts):
            return None
        blobs = [_at(doc, place).encode("utf-8") for place in texts]
        shown = json.dumps(_blanked(doc, texts), ensure_ascii=False, separators=(",", ":"), default=_base64)
    except (ValueError, UnicodeEncodeError, RecursionError):  # a lone surrogate, a very deep document
        return None
    sizes = [[place, len(blob)] for place, blob in zip(texts, blobs, strict=True)]
    return [json.dumps(binary).encode() + b"\n" + json.dumps(sizes).encode() + b"\n" + shown.encode("utf-8")
            + b"\n", *blobs]


def _base64(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)  # pragma: no cover - _plain let only bytes through


def _plain(value: Any, place: _Place, binary: list[_Place], texts: list[_Place]) -> bool:
    """Whether JSON gives ``value`` back as it is (the places of bytes are noted in ``binary``, of strings
    longer than :data:`LONG` in ``texts``)."""
    kind = type(value)
    if kind is str:
        if len(value) > LONG:
            texts.append(list(place))
        return True
    if kind in (int, bool) or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is bytes:
        binary.append(list(place))
        return True
    if kind is list:
        return all(_plain(item, [*place, index], binary, texts) for index, item in enumerate(value))
    if kind is dict:
        return all(type(key) is str and _plain(item, [*place, key], binary, texts)
                   for key, item in value.items())
    return False


def _at(doc: Any, place: _Place) -> Any:
    for part in place:
        doc = doc[part]
    return doc


def _blanked(doc: Any, places: list[_Place]) -> object:
    """``doc`` with the value at each place written ``""`` (the lists and mappings on the way copied)."""
    if not places:
        return doc
    copy: Any = list(doc) if isinstance(doc, list) else dict(doc)
    firsts = {place[0] for place in places}
    for first in firsts:
        rest = [place[1:] for place in places if place[0] == first]
        copy[first] = "" if rest == [[]] else _blanked(doc[first], rest)
    return copy


def put(key: bytes, form: Callable[[], list[bytes] | None], lines: list[int | None], size: int) -> None:
    """Keep a document parsed from ``size`` bytes under ``key``, with its interactions' lines: ``form``
    gives its :func:`stored_form` when :func:`flush` writes it. A load pays neither: when documents from
    more than :data:`FLUSH_BYTES` would wait, the ones waiting before are written, and this one waits."""
    path = _file(key)
    if path is None:
        return
    with _LOCK:
        full = bool(_WAITING) and sum(waiting[3] for waiting in _WAITING) + size > FLUSH_BYTES
    if full:
        flush()
    with _LOCK:
        _WAITING.append((path, form, lines, size))


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
            write_atomic(path, [head + b"\n", *stored], durable=False)
        except OSError:
            continue
    for root in {path.parent for path, *_ in waiting}:
        try:
            _prune(root)
        except OSError:
            continue


def has(key: bytes) -> bool:
    """Whether a document is kept under ``key`` (:func:`get` may still miss: a damaged file)."""
    path = _file(key)
    return path is not None and path.is_file()


def forget(key: bytes) -> None:
    """Drop what is kept under ``key`` (a file :func:`get` cannot read: the next parse keeps it again)."""
    path = _file(key)
    if path is not None:
        path.unlink(missing_ok=True)


def get(key: bytes) -> tuple[object, list[int | None]] | None:
    """The document and lines kept under ``key``, or None (a miss: nothing kept, or not readable)."""
    path = _file(key)
    if path is None:
        return None
    try:
        data = path.read_bytes()
        cuts = [data.index(b"\n")]
        for _ in range(3):
            cuts.append(data.index(b"\n", cuts[-1] + 1))
        meta = json.loads(data[: cuts[0]])
        if meta.get("format") != _FORMAT:
            return None
        binary, texts = json.loads(data[cuts[0] : cuts[1]]), json.loads(data[cuts[1] : cuts[2]])
        doc = json.loads(data[cuts[2] : cuts[3]])
        for place in binary:
            _decode_at(doc, place)
        _texts_at(doc, texts, data, cuts[3] + 1)
        lines = meta["lines"]
        if not all(line is None or type(line) is int for line in lines):
            return None
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError,
            binascii.Error):
        return None
    return doc, lines


def _texts_at(doc: object, texts: list[tuple[_Place, int]], data: bytes, start: int) -> None:
    """Put each long string back at its place, from the UTF-8 that follows the JSON."""
    with memoryview(data) as view:
        for place, size in texts:
            *parents, last = place
            _at(doc, parents)[last] = str(view[start : start + size], "utf-8")
            start += size
    if start != len(data):
        raise ValueError("the long strings do not end the file")


def _decode_at(doc: object, place: _Place) -> None:
    *parents, last = place
    parent = _at(doc, parents)
    parent[last] = base64.b64decode(parent[last], validate=True)


def _prune(root: Path) -> None:
    """Drop the oldest files past :data:`MAX_ENTRIES` or :data:`MAX_BYTES`."""
    entries = sorted(((each.stat().st_mtime_ns, each.stat().st_size, Path(each.path))
                      for each in os.scandir(root) if each.name.endswith(".json")), reverse=True)
    total = 0
    for count, (_, size, path) in enumerate(entries, start=1):
        total += size
        if count > MAX_ENTRIES or total > MAX_BYTES:
            path.unlink(missing_ok=True)
