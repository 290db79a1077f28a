"""The journal: one entry per request the fake provider received, with what it did about it.

Each :class:`Entry` holds the sequence number, arrival time, provider and route, method, path, query,
headers (secrets redacted), the parsed body, a ``verdict``, the interaction that answered it (cassette and
index) or the near misses when none did, the body diff against the recording, the faults applied, the status
served, how far the response got (``chunks``, ``outcome``) and the contract violations of the request and
of the response. ``Entry.to_json()`` is valid against ``contracts/replaykit/journal-entry.schema.json``.

Verdicts are cached (:mod:`~replaykit.server.verdicts`): a request body already seen on the same contract
(SDK retries, test suites sending the same request) gets a copy of its earlier ``request_violations``
instead of being validated again, and an unaltered replay's ``response_violations`` are computed once per
interaction. The entries are the same as without the caches.

Verdicts: ``served`` (a recorded interaction answered), ``unmatched`` (none did: the near misses say why),
``fault`` (a ``status`` fault answered), ``invalid`` (refused under ``enforce_contracts``) or ``error``
(replaykit failed while handling it; the exception is re-raised in the caller's thread).

:class:`Journal` is thread-safe: the server thread appends, any thread reads.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from replaykit.cassette import write_atomic
from replaykit.errors import UsageError, located

__all__ = ["SCHEMA_ID", "Entry", "Journal"]

SCHEMA_ID = "https://replaykit.dev/contracts/replaykit/journal-entry.schema.json"

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
    body: Any
    verdict: str = "pending"
    matched: dict[str, Any] | None = None
    near_misses: list[dict[str, Any]] = field(default_factory=list)
    diff: list[dict[str, Any]] = field(default_factory=list)
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

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object (valid against the journal-entry contract)."""
        return asdict(self)


class Journal:
    """Entries in arrival order; safe to append from the server thread while other threads read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[Entry] = []

    def append(self, entry: Entry) -> None:
        """Record one entry (entries are kept sorted by ``seq``)."""
        with self._lock:
            self._entries.append(entry)
            if len(self._entries) > 1 and self._entries[-2].seq > entry.seq:
                self._entries.sort(key=lambda e: e.seq)

    def entries(self) -> list[Entry]:
        """A copy of the entries so far."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def to_json(self) -> list[dict[str, Any]]:
        """Every entry as JSON."""
        return [entry.to_json() for entry in self.entries()]

    def write_jsonl(self, path: str | os.PathLike[str]) -> None:
        """Write one JSON object a line, atomically (a temporary file renamed over ``path``)."""
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
