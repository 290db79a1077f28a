"""A structural diff of two JSON documents, as JSON pointers; volatile fields ignored.

Hand-written rather than ``jsonpatch.make_patch``: a patch says how to turn one document into the other
(moves, copies, array shifts), which reads badly as a report; this lists each place that differs, with both
values. Numbers compare by value (``1`` equals ``1.0``, as in JSON); ``true`` never equals ``1``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from replaykit.pointer import json_pointer
from replaykit.redact.shapes import mask

__all__ = ["MAX_VALUE_CHARS", "Change", "Pattern", "brief", "change_text", "compile_patterns", "diff"]

MAX_VALUE_CHARS = 200
Pattern = tuple[str, ...]

Change = dict[str, Any]  # one place that differs: {pointer, change, received?, recorded?}


def compile_patterns(pointers: Iterable[str]) -> tuple[Pattern, ...]:
    """JSON pointers to ignore; a ``*`` token matches any one key or index (``/messages/*/cache_control``)."""
    out: list[Pattern] = []
    for pointer in pointers:
        if pointer and not pointer.startswith("/"):
            raise ValueError(f"volatile field {pointer!r} must be a JSON pointer starting with '/'")
        out.append(tuple(part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]))
    return tuple(out)


def _ignored(path: list[str], patterns: tuple[Pattern, ...]) -> bool:
    return any(
        len(p) == len(path) and all(a in ("*", b) for a, b in zip(p, path, strict=True)) for p in patterns
    )


def _shown(value: object) -> object:
    """``value`` as a report shows it: a key in it masked (a value holding one becomes its masked JSON
    text), cut to :data:`MAX_VALUE_CHARS` of JSON."""
    if isinstance(value, str):
        value = mask(value)
    text = json.dumps(value, ensure_ascii=False)
    masked = text if isinstance(value, str) else mask(text)
    if masked != text:
        value, text = masked, masked
    return value if len(text) <= MAX_VALUE_CHARS else f"{text[:MAX_VALUE_CHARS]}…({len(text)} chars)"


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True)


def _same_scalar(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


class _Differ:
    def __init__(self, patterns: tuple[Pattern, ...], limit: int) -> None:
        self.patterns = patterns
        self.limit = limit
        self.found: list[Change] = []

    def add(self, path: list[str], change: str, received: object, recorded: object) -> None:
        entry: Change = {"pointer": json_pointer(path), "change": change}
        if change != "removed":
            entry["received"] = _shown(received)
        if change != "added":
            entry["recorded"] = _shown(recorded)
        self.found.append(entry)

    def walk(self, a: object, b: object, path: list[str]) -> None:
        if len(self.found) >= self.limit or (self.patterns and _ignored(path, self.patterns)):
            return
        if type(a) is type(b) and a == b and (not isinstance(a, dict | list) or _dumps(a) == _dumps(b)):
            return  # equal (the serialized check tells true from 1 inside containers)
        if isinstance(a, dict) and isinstance(b, dict):
            self.walk_dict(a, b, path)
        elif isinstance(a, list) and isinstance(b, list):
            self.walk_list(a, b, path)
        elif isinstance(a, dict | list) or isinstance(b, dict | list) or not _same_scalar(a, b):
            self.add(path, "changed", a, b)

    def walk_dict(self, a: dict[str, object], b: dict[str, object], path: list[str]) -> None:
        for key in [*a, *(k for k in b if k not in a)]:
            child = [*path, key]
            if key not in b:
                self.leaf(child, "added", a[key], None)
            elif key not in a:
                self.leaf(child, "removed", None, b[key])
            else:
                self.walk(a[key], b[key], child)

    def walk_list(self, a: list[object], b: list[object], path: list[str]) -> None:
        for index in range(max(len(a), len(b))):
            child = [*path, str(index)]
            if index >= len(b):
                self.leaf(child, "added", a[index], None)
            elif index >= len(a):
                self.leaf(child, "removed", None, b[index])
            else:
                self.walk(a[index], b[index], child)

    def leaf(self, path: list[str], change: str, received: object, recorded: object) -> None:
        if len(self.found) < self.limit and not (self.patterns and _ignored(path, self.patterns)):
            self.add(path, change, received, recorded)


def diff(
    received: object, recorded: object, ignore: tuple[Pattern, ...] = (), limit: int = 50
) -> list[Change]:
    """Places where ``received`` differs from ``recorded``: ``{pointer, change, received?, recorded?}``.

    ``change`` is ``changed``, ``added`` (only in the received document) or ``removed`` (only recorded).
    At most ``limit`` differences are listed; values longer than ``MAX_VALUE_CHARS`` are abbreviated.
    """
    differ = _Differ(ignore, limit)
    differ.walk(received, recorded, [])
    return differ.found


def _clipped(value: object, width: int | None) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if width is None or len(text) <= width else f"{text[: width - 1]}…"


def change_text(change: Mapping[str, object], width: int | None = None) -> str:
    """One difference of :func:`diff` in words (``/max_tokens: sent 99, recorded 64``); each value's JSON cut
    to ``width`` characters (``None``: as :func:`diff` keeps it, keys already masked)."""
    pointer = change["pointer"] or "/"
    if change["change"] == "added":
        return f"{pointer}: only in the request sent: {_clipped(change['received'], width)}"
    if change["change"] == "removed":
        return f"{pointer}: only in the recording: {_clipped(change['recorded'], width)}"
    received, recorded = _clipped(change["received"], width), _clipped(change["recorded"], width)
    return f"{pointer}: sent {received}, recorded {recorded}"


def brief(changes: Sequence[Mapping[str, object]], limit: int = 3, width: int = 40) -> str:
    """The first ``limit`` differences in words, on one line, values cut to ``width`` characters; how many
    more there are, if any. Bounded: what an error header or a log line can hold."""
    shown = "; ".join(change_text(change, width) for change in changes[:limit])
    more = len(changes) - limit
    return f"{shown}; and {more} more" if more > 0 else shown
