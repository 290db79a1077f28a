"""Snapshots of the transcript a target persisted: normalized, serialized by syrupy, stored beside the
scenario.

The snapshot of ``scenarios/x.yaml`` named ``NAME`` is ``scenarios/__snapshots__/NAME.json``.
:func:`normalize` replaces every ``timestamp`` by ``"<timestamp>"`` and every id by ``"<id:N>"`` (N in order
of first appearance, so a tool result still points at its call); the text is syrupy's JSON snapshot
serializer. Read by the ``persistedSnapshot`` expectation (:mod:`replaykit.scenario.expect`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from syrupy.extensions.json import JSONSnapshotExtension

from replaykit.cassette import write_atomic

__all__ = ["SnapshotResult", "check_snapshot", "normalize", "serialize", "snapshot_path"]

TIMESTAMP = "<timestamp>"
_EXTENSION = JSONSnapshotExtension()


def _is_id(key: str) -> bool:
    return key == "id" or key.endswith(("Id", "_id"))


def normalize(document: object) -> object:
    """``document`` with timestamps and ids replaced (see the module docstring); the input is not changed."""
    ids: dict[str, str] = {}

    def walk(node: object, key: str = "") -> object:
        if isinstance(node, dict):
            return {name: walk(value, str(name)) for name, value in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        if key == "timestamp":
            return TIMESTAMP
        if _is_id(key) and isinstance(node, str | int) and not isinstance(node, bool):
            return ids.setdefault(str(node), f"<id:{len(ids) + 1}>")
        return node

    return walk(document)


def serialize(document: object) -> str:
    """The snapshot text of ``document`` (normalized first)."""
    return str(_EXTENSION.serialize(normalize(document)))


def snapshot_path(scenario_file: Path, name: str) -> Path:
    """Where the snapshot ``name`` of ``scenario_file`` is stored."""
    return scenario_file.parent / "__snapshots__" / f"{name}.json"


@dataclass(frozen=True)
class SnapshotResult:
    """The comparison: ``ok``, and why not (``why``); ``written`` when ``update`` wrote the file."""

    ok: bool
    why: str = ""
    written: bool = False


def _first_difference(stored: str, actual: object) -> str:
    """Where the persisted document first differs from the stored snapshot, by JSON pointer (both values
    shortened), and how many places differ; by line when the stored file is not JSON."""
    from replaykit.server.diff import diff

    try:
        before = json.loads(stored)
    except ValueError:
        return "a stored snapshot that is not JSON"
    found = diff(normalize(actual), before, limit=50)
    if not found:  # the same document written another way (key order, spacing)
        return "its formatting"
    first, more = found[0], f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    shown = {side: json.dumps(first.get(side), ensure_ascii=False)[:120] for side in ("received", "recorded")}
    what = {"added": f"only persisted: {shown['received']}", "removed": f"only stored: {shown['recorded']}",
            "changed": f"stored {shown['recorded']}, persisted {shown['received']}"}[first["change"]]
    return f"{first['pointer'] or '/'}: {what}{more}"


def check_snapshot(path: Path, document: object, update: bool = False) -> SnapshotResult:
    """Compare ``document`` with the snapshot at ``path``; with ``update``, write it when it differs or is
    missing (as ``pytest --snapshot-update`` does)."""
    actual = serialize(document)
    stored = path.read_text(encoding="utf-8") if path.is_file() else None
    if stored == actual:
        return SnapshotResult(True)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, actual.encode("utf-8"))
        return SnapshotResult(True, written=True)
    if stored is None:
        return SnapshotResult(False, f"no snapshot {path}; run with --snapshot-update to write it")
    return SnapshotResult(
        False, f"differs from {path} at {_first_difference(stored, document)} (--snapshot-update rewrites it)"
    )
