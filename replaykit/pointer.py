"""JSON Pointers (RFC 6901, https://www.rfc-editor.org/rfc/rfc6901): the one way replaykit names a place in a
JSON document, in violations, findings, diffs and errors."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["json_pointer", "resolve"]


def json_pointer(parts: Iterable[object]) -> str:
    """The pointer of ``parts`` (in each token ``~`` becomes ``~0``, ``/`` becomes ``~1``); ``""`` is the
    root."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


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
