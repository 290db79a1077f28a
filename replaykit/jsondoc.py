"""JSON from untrusted input (cassette bodies, stream events, request bodies): parsed with a depth limit.

:func:`loads` parses like :func:`json.loads` and refuses, with a ``ValueError``, a document nested deeper
than :data:`MAX_DEPTH`, so every walk of a parsed document is bounded; a body over 16 MiB is parsed with its
long strings decoded a piece at a time. The package's JSON types live here too: :data:`JSONValue` and
:data:`JSON`; every module imports them from here. The reasoning is in docs/architecture/modules.md.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from typing import Any, TypeAlias

__all__ = ["JSON", "MAX_DEPTH", "JSONValue", "TooDeep", "depth_within", "loads"]

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
"""Any JSON value, checked all the way down: what a format built by replaykit holds."""
JSON: TypeAlias = dict[str, Any]
"""A JSON object read by key (a parsed document whose shape a contract checks): the package's one alias."""

MAX_DEPTH = 128  # provider documents nest 10-20 levels; this leaves room and keeps walks shallow
_LEAN = 16 << 20  # bytes of a body parsed the lean way
_PIECE = 1 << 20  # bytes of a long string decoded at a time (and the shortest string cut out)
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.S)  # every string of a JSON text, found in order
_KEY = re.compile(rb"[ \t\n\r]*:")  # after a string: it is an object's key
_CUT = re.compile(rb'[^\\"/0-9A-Fa-fbnrtu\x80-\xbf]')  # a byte no escape holds, that starts a character
_DECODER = json.JSONDecoder()
_NOT_JSON = frozenset(b"ABCDEFGHJKLMOPQRSTUVWXYZabcdeghijklmopqrsuvwxyz")  # no JSON text starts so


class TooDeep(ValueError):
    """A JSON document nested deeper than :data:`MAX_DEPTH`."""


def depth_within(doc: object, limit: int = MAX_DEPTH) -> bool:
    """True when ``doc`` nests at most ``limit`` arrays and objects (checked without recursion)."""
    stack: list[tuple[object, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        containers = [(child, depth + 1) for child in children if isinstance(child, dict | list)]
        if containers and depth + 1 > limit:
            return False
        stack.extend(containers)
    return True


def loads(text: str | bytes) -> Any:
    """``text`` parsed as JSON; ``ValueError`` when it is not JSON or nests deeper than :data:`MAX_DEPTH`.

    A text that starts with a letter no JSON text starts with (an event stream, say) is refused at once.
    """
    if text[:1] and ord(text[:1]) in _NOT_JSON:
        raise ValueError("not JSON: it starts with a letter")
    try:
        doc = _lean(text) if isinstance(text, bytes) and len(text) > _LEAN else json.loads(text)
    except RecursionError as exc:  # deeper than the parser recurses: far past MAX_DEPTH
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels") from exc
    if _opened(text) > MAX_DEPTH and not depth_within(doc):  # else it cannot nest deeper
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels")
    return doc


def _opened(text: str | bytes) -> int:
    """How many arrays and objects ``text`` may open (counted without a copy of it)."""
    if isinstance(text, bytes):
        return text.count(b"[") + text.count(b"{")
    return text.count("[") + text.count("{")


def _lean(body: bytes) -> Any:
    """``json.loads(body)``, each string value of more than 1 MiB decoded apart (see the module docstring)."""
    if json.detect_encoding(body) != "utf-8":
        return json.loads(body)
    spans = [match.span() for match in _STRING.finditer(body)
             if match.end() - match.start() > _PIECE and not _KEY.match(body, match.end())]
    if not spans:
        return json.loads(body)
    nonce = secrets.token_hex(16)  # a mark no text holds by chance
    marks = {f"\0{nonce}{index}": _string(body, *span) for index, span in enumerate(spans)}
    skeleton, last = bytearray(), 0
    for mark, (start, end) in zip(marks, spans, strict=True):
        skeleton += body[last:start] + json.dumps(mark).encode()
        last = end
    skeleton += body[last:]
    doc = json.loads(bytes(skeleton))
    if isinstance(doc, str):  # the document is one long string
        return marks.get(doc, doc)
    _put_back(doc, marks)
    return doc


def _string(body: bytes, start: int, end: int) -> str:
    """The JSON string ``body[start:end]``, decoded a piece at a time into one text, which CPython grows in
    place (``text += piece`` as a loop's last statement)."""
    text = ""
    for piece in _pieces(body, start + 1, end - 1):
        text += piece
    return text


def _pieces(body: bytes, start: int, end: int) -> Iterator[str]:
    """The content ``body[start:end]`` of a JSON string, decoded a MiB at a time (cut before a byte no escape
    holds, that starts a character)."""
    view = memoryview(body)
    while start < end:
        found = _CUT.search(body, min(start + _PIECE, end), end)
        cut = found.start() if found else end
        yield _DECODER.raw_decode('"' + str(view[start:cut], "utf-8", "surrogatepass") + '"')[0]
        start = cut


def _put_back(doc: Any, marks: dict[str, str]) -> None:
    """Replace each mark among the values of ``doc`` by the string it stands for."""
    stack = [doc]
    while stack:
        node = stack.pop()
        pairs = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in list(pairs):
            if isinstance(value, str) and value in marks:
                node[key] = marks[value]
            elif isinstance(value, dict | list):
                stack.append(value)
