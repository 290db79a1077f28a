"""JSON Pointers (RFC 6901, https://www.rfc-editor.org/rfc/rfc6901): the one way replaykit names a place in a
JSON document, in violations, findings, diffs and errors."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["WILDCARD", "json_pointer", "matches", "pointer_parts", "resolve"]

WILDCARD = "*"
"""In a pointer given to :func:`matches`, a token that stands for every index of an array."""


def json_pointer(parts: Iterable[object]) -> str:
    """The pointer of ``parts`` (in each token ``~`` becomes ``~0``, ``/`` becomes ``~1``); ``""`` is the
    root."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def pointer_parts(pointer: str) -> list[str | int]:
    """The tokens of a JSON pointer, digits as ints (list indexes, as a YAML path names them)."""
    parts = [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]
    return [int(part) if part.isdigit() else part for part in parts]


def resolve(document: object, pointer: str) -> object:
    """The value at ``pointer`` in ``document``, or None where there is none."""
    node = document
    for part in pointer.split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            node = node[int(key)] if key.isdigit() and int(key) < len(node) else None
        else:
            node = node.get(key) if isinstance(node, dict) else None
    return node


def _tokens(pointer: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]


def _children(node: object, key: str) -> list[tuple[str | int, object]]:
    if isinstance(node, list):
        if key == WILDCARD:
            return list(enumerate(node))
        return [(int(key), node[int(key)])] if key.isdigit() and int(key) < len(node) else []
    return [(key, node[key])] if isinstance(node, dict) and key in node else []


def matches(document: object, pointer: str) -> list[tuple[str, object]]:
    """Every value ``pointer`` reaches in ``document``, with its own pointer, in document order: ``*``
    (:data:`WILDCARD`) stands for every index of an array. Unlike :func:`resolve`, a place that does not
    exist is left out (an empty list), never confused with a JSON ``null``."""
    found: list[tuple[list[str | int], object]] = [([], document)]
    for key in _tokens(pointer):
        found = [([*path, child_key], child) for path, node in found
                 for child_key, child in _children(node, key)]
    return [(json_pointer(path), value) for path, value in found]
