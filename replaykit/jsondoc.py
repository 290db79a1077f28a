"""JSON from untrusted input (cassette bodies, stream events, request bodies): parsed with a depth limit.

A recording may hold a JSON document nested far deeper than any API sends; walked recursively, such a
document would exhaust Python's stack wherever it goes (contracts, converters, the estimator, the secret
scanner). :func:`loads` parses like :func:`json.loads` and refuses, with a ``ValueError`` like any other
non-JSON text, a document nested deeper than :data:`MAX_DEPTH`: every consumer then treats it as text, and
every walk of a parsed document is bounded.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "TooDeep", "depth_within", "loads"]

MAX_DEPTH = 128  # provider documents nest 10-20 levels; this leaves room and keeps walks shallow


class TooDeep(ValueError):
    """A JSON document nested deeper than :data:`MAX_DEPTH`."""


def depth_within(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """True when ``doc`` nests at most ``limit`` arrays and objects (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        containers = [(child, depth + 1) for child in children if isinstance(child, dict | list)]
        if containers and depth + 1 > limit:
            return False
        stack.extend(containers)
    return True


def loads(text: str | bytes) -> Any:
    """``text`` parsed as JSON; ``ValueError`` when it is not JSON or nests deeper than :data:`MAX_DEPTH`."""
    try:
        doc = json.loads(text)
    except RecursionError as exc:  # deeper than the parser recurses: far past MAX_DEPTH
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels") from exc
    raw = text.encode("utf-8") if isinstance(text, str) else text
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and not depth_within(doc):  # else it cannot nest deeper
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels")
    return doc
