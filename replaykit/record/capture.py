"""One exchange as the recording proxy sees it: the response's bytes captured as they pass, SSE events timed,
then the interaction made safe to keep (redacted, scanned, checked against its contracts).

:class:`Capture` is fed each piece of the response body as it is forwarded; a streamed body is cut into
events by :class:`replaykit.sse.Parser` on the way, and each event gets the time it was complete, in
milliseconds from the moment the response's headers arrived (the cassette's ``event_offsets_ms``).
:func:`checked` redacts the interaction (:func:`replaykit.redact.redact`), scans what is left
(:func:`replaykit.redact.scan`: a key still found refuses the write) and checks it against its route's
contracts (:func:`replaykit.contracts.check_interaction`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from replaykit import sse
from replaykit.cassette import Cassette, Headers, Interaction, Request, Response
from replaykit.contracts import STRICT, Profile, Violation, check_interaction, place
from replaykit.redact import SecretFinding, redact, scan

__all__ = ["Capture", "Checked", "checked", "violation_line"]


@dataclass(slots=True)
class Capture:
    """A response being forwarded: its status, headers and body's pieces, and when each SSE event ended."""

    request: Request
    status: int
    reason: str
    headers: Headers
    started: float = field(default_factory=time.perf_counter)
    pieces: list[bytes] = field(default_factory=list)
    offsets: list[float] = field(default_factory=list)
    parser: sse.Parser | None = None

    def __post_init__(self) -> None:
        probe = Response(self.status, self.reason, self.headers)
        self.parser = sse.Parser() if probe.is_stream else None

    def feed(self, piece: bytes) -> None:
        """Keep ``piece`` of the body; time each event it completes."""
        self.pieces.append(piece)
        if self.parser is not None and (done := self.parser.feed(piece)):
            now = self._now()
            self.offsets.extend(now for _ in done)

    def _now(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)

    def interaction(self) -> Interaction:
        """The exchange as a cassette holds it (an unterminated last event is timed at the end)."""
        body = b"".join(self.pieces)
        offsets: list[float] | None = None
        if self.parser is not None:
            left = self.parser.close()
            offsets = self.offsets + [self._now()] * len(left)
            if len(offsets) != sse.count(body):  # pragma: no cover - the parser and count agree
                offsets = None
        return Interaction(self.request, Response(self.status, self.reason, self.headers, body, offsets))


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
