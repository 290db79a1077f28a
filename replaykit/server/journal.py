"""The journal (provider wing): one :class:`Entry` per request the fake provider received, with what it
did about it; ``Entry.to_json()`` is valid against ``contracts/replaykit/journal-entry.schema.json``.

:class:`Journal` is thread-safe (the server thread appends, any thread reads), holds the last ``window``
entries in memory and may write every entry to an append-only JSON Lines file as its outcome is known.
Bodies, verdicts and the file's guarantees: docs/architecture/server.md.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import threading
from collections import deque
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from replaykit.cassette import body_json, stale_temporaries, write_atomic
from replaykit.errors import UsageError, located
from replaykit.server.diff import Change, brief
from replaykit.server.matching import near_text

__all__ = ["BODY_HEAD", "EMPTY_SHA256", "JOURNAL_BODIES", "SCHEMA_ID", "WINDOW", "Entry", "Journal",
           "body_fields"]

SCHEMA_ID = "https://replaykit.dev/contracts/replaykit/journal-entry.schema.json"
BODY_HEAD = 64 << 10  # bytes of a request body an entry keeps unless bodies="full"
JOURNAL_BODIES = ("head", "full")
WINDOW = 10_000  # entries the journal keeps in memory by default (the file gets every one)
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_OLD_CHECK = re.compile(r"\.replaykit-journal-check\.[a-z0-9_]{8}")  # earlier `serve --journal` checks

@dataclass(slots=True)
class Entry:
    """One request and what the fake provider served; see the module docstring."""

    seq: int
    time: str
    provider: str | None
    route: str
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: bytes = b""
    body_bytes: int = 0
    body_sha256: str = EMPTY_SHA256
    body_truncated: bool = False
    verdict: str = "pending"
    matched: dict[str, Any] | None = None
    near_misses: list[dict[str, Any]] = field(default_factory=list)
    diff: list[Change] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    status: int = 0
    stream: bool = False
    chunks: int = 0
    outcome: str = "pending"
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    request_violations: list[dict[str, Any]] = field(default_factory=list)
    response_violations: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0

    @property
    def body(self) -> Any:
        """The request body kept: parsed JSON, else its text, else None when empty; the text of the first
        :data:`BODY_HEAD` bytes when ``body_truncated``. Read from ``raw`` at each call."""
        if not self.raw:
            return None
        if self.body_truncated:  # the text of the first BODY_HEAD bytes, less a character they split
            return codecs.getincrementaldecoder("utf-8")("replace").decode(self.raw)
        parsed = body_json(self.raw)
        return parsed if parsed is not None else self.raw.decode("utf-8", "replace")

    def to_json(self, parsed: object = None) -> dict[str, Any]:
        """The entry as a JSON object (valid against the journal-entry contract): ``body`` in place of
        ``raw``; the lists and dicts are the entry's own (serialize them, do not change them). ``parsed``:
        the request body's JSON when the caller already has it (``Received.json``), not parsed again."""
        data = {name: getattr(self, name) for name in _FIELDS}
        data["body"] = parsed if parsed is not None and not self.body_truncated else self.body
        return data

    def summary(self) -> str:
        """The entry on one bounded line (``replaykit serve -v`` prints it): method, path, status, the
        verdict with the interaction served (and where its body differs) or the nearest one missed, the
        faults applied; e.g. ``#2 POST /v1/messages 200 served cassettes/a.yaml#0 (stream)``."""
        what = self.verdict
        if self.matched is not None:
            place = f"{self.matched['cassette']}#{self.matched['index']}"
            what += f" {place} (stream)" if self.stream else f" {place}"
        elif self.error:
            what += f": {' '.join(self.error.split())}"
        if self.outcome not in ("complete", "pending"):
            what += f" ({self.outcome})"
        if self.near_misses:
            what += f"; nearest: {near_text(self.near_misses[0])}"
        if self.diff:
            what += f"; the body differs: {brief(self.diff)}"
        applied = [str(fault["kind"]) for fault in self.faults if fault.get("applied")]
        return f"#{self.seq} {self.method} {self.path} {self.status} {what}" + (
            f"; faults: {', '.join(applied)}" if applied else "")


# the contract's key order: ``body`` where the dataclass has ``raw``
_FIELDS = tuple("body" if f.name == "raw" else f.name for f in fields(Entry))


def body_fields(raw: bytes, sha256: str, bodies: str = "head") -> dict[str, Any]:
    """What an entry keeps of the request body ``raw`` (``sha256``: its hex digest): ``raw`` (the very bytes,
    or the first :data:`BODY_HEAD` of them), ``body_bytes``, ``body_sha256`` and ``body_truncated`` (see the
    module docstring)."""
    cut = bodies == "head" and len(raw) > BODY_HEAD
    return {"raw": raw[:BODY_HEAD] if cut else raw, "body_bytes": len(raw), "body_sha256": sha256,
            "body_truncated": cut}


def _open_log(path: str | os.PathLike[str]) -> IO[bytes]:
    """``path`` opened empty for the journal log, or the :class:`UsageError` that says why it cannot be."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(located(path, None, "is a folder; give a file path, e.g. journal.jsonl"))
    if not target.parent.is_dir():
        raise UsageError(located(path, None, f"the folder {target.parent} does not exist", "create it first"))
    try:
        return target.open("wb")
    except OSError as exc:
        raise UsageError(located(path, None, f"cannot write the journal: {exc.strerror or exc}",
                                 "pass a --journal path in a writable folder")) from exc


def _remove_leftovers(target: Path) -> None:
    """Remove what earlier sessions left beside ``target`` when killed: atomic writes' temporary files."""
    old_checks = [p for p in target.parent.iterdir() if _OLD_CHECK.fullmatch(p.name)]
    for leftover in [*stale_temporaries(target), *old_checks]:
        leftover.unlink(missing_ok=True)


class Journal:
    """Entries in arrival order; safe to append from the server thread while other threads read.

    ``bodies`` (``head`` or ``full``) is how much of each request body an entry keeps (:func:`body_fields`);
    ``window`` how many entries it keeps in memory (the last ones; ``dropped`` counts the others).
    """

    def __init__(self, bodies: str = "head", window: int = WINDOW) -> None:
        if bodies not in JOURNAL_BODIES:
            raise UsageError(f"journal_bodies={bodies!r} must be one of {', '.join(JOURNAL_BODIES)}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise UsageError(f"journal_window={window!r} must be a whole number of entries, 1 or more")
        self.bodies = bodies
        self.window = window
        self.dropped = 0
        self._lock = threading.Lock()
        self._entries: deque[Entry] = deque()
        self._log: IO[bytes] | None = None

    def append(self, entry: Entry) -> None:
        """Record one entry, kept in ``seq`` order; past the window, the oldest is dropped (and counted)."""
        with self._lock:
            entries = self._entries
            if len(entries) >= self.window:
                entries.popleft()
                self.dropped += 1
            if not entries or entries[-1].seq < entry.seq:
                entries.append(entry)
                return
            place = len(entries)
            while place and entries[place - 1].seq > entry.seq:  # finished out of order: a step or two back
                place -= 1
            entries.insert(place, entry)

    def entries(self) -> list[Entry]:
        """A copy of the entries in the window."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        """Forget every entry, and the count dropped."""
        with self._lock:
            self._entries.clear()
            self.dropped = 0

    def open_log(self, path: str | os.PathLike[str]) -> None:
        """Start the journal file at ``path``, empty (see the module docstring); :meth:`log` appends to it."""
        handle = _open_log(path)
        _remove_leftovers(Path(path))
        with self._lock:
            self._log = handle

    @property
    def logging(self) -> bool:
        """True while the journal file is open (:meth:`log` writes to it)."""
        return self._log is not None

    def log(self, entry: Entry, parsed: object = None) -> None:
        """Append ``entry`` to the journal file, if one is open: one JSON line, flushed (``parsed``: the
        request body's JSON already parsed, see :meth:`Entry.to_json`)."""
        if self._log is None:  # no file: nothing to serialize
            return
        # ASCII escapes: a request may carry a lone surrogate (\ud800) that UTF-8 cannot encode
        line = (json.dumps(entry.to_json(parsed)) + "\n").encode("ascii")
        with self._lock:
            if self._log is None:
                return
            try:
                self._log.write(line)
                self._log.flush()
            except OSError as exc:
                problem = f"cannot write the journal: {exc.strerror or exc}"
                fix = "free some space, or pass a --journal path on another disk"
                raise UsageError(located(self._log.name, None, problem, fix)) from exc

    def close_log(self) -> None:
        """Close the journal file (entries are no longer written)."""
        with self._lock:
            log, self._log = self._log, None
        if log is not None:
            log.close()

    def to_json(self) -> list[dict[str, Any]]:
        """Every entry as JSON."""
        return [entry.to_json() for entry in self.entries()]

    def write_jsonl(self, path: str | os.PathLike[str]) -> None:
        """Write every entry, one JSON object a line, atomically (a temporary file renamed over ``path``): a
        snapshot, for library users; ``replaykit serve`` appends to its file as it goes (:meth:`log`)."""
        # ASCII escapes: a request may carry a lone surrogate (\ud800) that UTF-8 cannot encode
        lines = "".join(json.dumps(item) + "\n" for item in self.to_json())
        try:
            write_atomic(Path(path), lines.encode("utf-8"))
        except OSError as exc:
            raise UsageError(
                located(
                    path,
                    None,
                    f"cannot write the journal: {exc.strerror or exc}",
                    "pass a --journal path in a writable folder",
                )
            ) from exc
