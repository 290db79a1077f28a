"""One exchange as the recording proxy sees it: the response's bytes captured as they pass, SSE events timed,
then the interaction made safe to keep (redacted, scanned, checked against its contracts).

:class:`Capture` is fed each piece of the response body with the time it came, then cuts a stream into events
timed from the response's headers (``event_offsets_ms``). :func:`checked` redacts the interaction
(:func:`replaykit.redact.redact`), scans what is left (a key still found refuses the write) and checks it
(:func:`replaykit.contracts.check_interaction`). Fed by :mod:`replaykit.record.proxy`, run by the recorder.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from replaykit import sse
from replaykit.cassette import Cassette, Headers, Interaction, Request, Response
from replaykit.contracts import STRICT, Profile, Violation, check_interaction, place
from replaykit.redact import SecretFinding, kind_label, redact, scan

__all__ = ["Capture", "Checked", "checked", "secrets_line", "violation_line"]


@dataclass(slots=True)
class Capture:
    """A response being forwarded: its status, headers and body's pieces, each with when it arrived.

    Only the pieces and their times are kept while the bytes pass (nothing is parsed on the way: the
    proxy's throughput); :meth:`interaction` cuts the body into events afterwards, each timed by the piece
    that completed it.
    """

    request: Request
    status: int
    reason: str
    headers: Headers
    started: float = field(default_factory=time.perf_counter)
    pieces: list[bytes] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)

    def feed(self, piece: bytes) -> None:
        """Keep ``piece`` of the body, and when it came."""
        self.pieces.append(piece)
        self.arrived.append(time.perf_counter())

    def interaction(self) -> Interaction:
        """The exchange as a cassette holds it; a stream's events each timed, in milliseconds from the
        response's headers, by the arrival of the piece holding its last byte."""
        body = b"".join(self.pieces)
        response = Response(self.status, self.reason, self.headers, body)
        if response.is_stream:
            response.event_offsets_ms = self._offsets(response.events)
        return Interaction(self.request, response)

    def _offsets(self, events: list[sse.Event]) -> list[float]:
        ends = list(itertools.accumulate(len(piece) for piece in self.pieces))
        offsets, at, piece = [], 0, 0
        for event in events:
            at += len(event.raw)
            while piece < len(ends) - 1 and ends[piece] < at:
                piece += 1
            offsets.append(round((self.arrived[piece] - self.started) * 1000, 3))
        return offsets


@dataclass(frozen=True, slots=True)
class Checked:
    """An interaction made safe to keep: ``interaction`` redacted; ``secrets`` found in it after redaction
    (masked; any refuses the write); ``violations`` of its contracts."""

    interaction: Interaction
    secrets: tuple[SecretFinding, ...]
    violations: tuple[Violation, ...]


def checked(interaction: Interaction, profile: Profile = STRICT) -> Checked:
    """``interaction`` redacted, scanned and checked against its route's contracts."""
    clean = redact(Cassette([interaction])).interactions[0]
    left = tuple(scan(Cassette([clean])))
    return Checked(clean, left, tuple(check_interaction(clean, profile=profile)))


def violation_line(index: int, violation: Violation) -> str:
    """``violation`` of interaction ``index`` on one line: ``interactions[i]:events[j] response /p: why``."""
    return f"{place(index, violation)} {violation.part} {violation.pointer or '/'}: {violation.message}"


def secrets_line(secrets: Iterable[SecretFinding]) -> str:
    """The keys that survived redaction, masked, on one line: ``field: kind excerpt, ...``."""
    return ", ".join(f"{s.field}: {kind_label(s.kind)} {s.excerpt}" for s in secrets)
