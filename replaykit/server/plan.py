"""What a response will look like on the wire, before it is sent: a :class:`Plan`, which faults rewrite.

A plan is the status, the headers, the chunks to write (one per recorded SSE event, or the body of a
non-stream response) and when each is due. :func:`apply` turns each :class:`~replaykit.server.faults.Fault`
into a change of plan, so the network code (:mod:`replaykit.server.streaming`) knows nothing of faults.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from replaykit import sse
from replaykit.cassette import Response
from replaykit.errors import UsageError
from replaykit.server import envelopes
from replaykit.server.faults import Fault

__all__ = [
    "BATCHED_STREAM_LIMIT",
    "BATCH_LIMIT",
    "HOP_BY_HOP",
    "ORDER",
    "TERMINAL_EVENTS",
    "Batch",
    "Plan",
    "Timing",
    "apply",
    "batched",
    "batches",
    "corrupt",
    "error_plan",
    "fitting_batches",
    "http_chunk",
    "plan_for",
    "replay_headers",
    "status_plan",
]

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "content-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    }
)
TERMINAL_EVENTS = frozenset({"message_stop", "response.completed", "response.incomplete", "response.failed"})
WRITE_SIZE = 1 << 20  # a large non-stream body is written in slices of this size
BATCH_LIMIT = 16 << 10  # bytes gathered at most into one write in fast timing (see streaming)
# A stream framed longer than this is not batched: the server would get ahead of a client by more than one
# of its reads (httpx reads 64 KiB), and that read would end inside an event.
BATCHED_STREAM_LIMIT = 64 << 10
_DATA = re.compile(rb"(?m)^data: ?([^\r\n]*)")
End = Literal["eof", "disconnect", "hang"]
Batch = tuple[bytes, int]  # HTTP chunks framed and joined, and how many they are


@dataclass(frozen=True, slots=True)
class Timing:
    """When stream events are sent: ``fast`` (at once), ``recorded`` (original offsets) or ``fixed:<ms>``."""

    mode: Literal["fast", "recorded", "fixed"] = "fast"
    ms: float = 0.0

    @classmethod
    def parse(cls, text: str) -> Timing:
        """Read ``fast``, ``recorded`` or ``fixed:<ms>``."""
        if text in ("fast", "recorded"):
            return cls(text)  # type: ignore[arg-type]
        name, _, value = text.partition(":")
        try:
            ms = float(value)
        except ValueError:
            ms = -1.0
        if name != "fixed" or not math.isfinite(ms) or ms < 0:
            raise UsageError(f"timing={text!r} must be fast, recorded or fixed:<ms> (e.g. fixed:20)")
        return cls("fixed", ms)

    def offsets(self, count: int, recorded: Sequence[float] | None) -> list[float]:
        """Seconds from the start of the body at which each of ``count`` events is due."""
        if self.mode == "fixed":
            return [i * self.ms / 1000 for i in range(count)]
        if self.mode == "recorded" and recorded:
            known = [max(0.0, float(v)) / 1000 for v in recorded[:count]]
            return known + [known[-1]] * (count - len(known))
        return [0.0] * count


@dataclass(slots=True)
class Plan:
    """A response as it will be written; ``due`` holds each chunk's offset in seconds from the first.

    ``batch`` (a stream in ``fast`` timing): chunks written back to back are gathered into fewer writes,
    each still its own HTTP chunk, and all is sent before any wait (see :mod:`replaykit.server.streaming`).
    ``framed``: the chunks already framed, in :func:`batches`, when the plan replays a recording unchanged
    in ``fast`` timing (``None``: they are framed as they are written).
    """

    status: int
    headers: list[tuple[str, str]]
    chunks: list[bytes | memoryview]
    stream: bool
    due: list[float] = field(default_factory=list)
    head_delay: float = 0.0
    length: int | None = None
    end: End = "eof"
    events: list[sse.Event] = field(default_factory=list, repr=False)
    provider: str | None = None
    notes: list[str] = field(default_factory=list)
    altered: bool = False
    batch: bool = False
    framed: list[Batch] | None = None

    @property
    def timed(self) -> bool:
        """True when some chunk must wait."""
        return any(self.due)

    @property
    def complete(self) -> bool:
        """True when the plan delivers the whole recorded response (only delays were applied)."""
        return not self.altered and self.end == "eof"


def replay_headers(response: Response) -> list[tuple[str, str]]:
    """Recorded headers minus framing and encoding ones: bodies are held decoded; the server frames them."""
    return [(k, v) for k, values in response.headers.items() if k.lower() not in HOP_BY_HOP for v in values]


def http_chunk(chunk: bytes | memoryview) -> tuple[bytes | memoryview, ...]:
    """``chunk`` framed as one HTTP/1.1 chunk: size in hex, CRLF, the bytes, CRLF (join the pieces)."""
    return (b"%x\r\n" % len(chunk), chunk, b"\r\n")


def batches(chunks: Iterable[bytes | memoryview]) -> Iterator[Batch]:
    """``chunks`` framed as HTTP chunks (an empty one skipped) and joined, at most :data:`BATCH_LIMIT` bytes
    a batch (a bigger frame alone), each with how many chunks it holds; made as they are taken."""
    pieces: list[bytes | memoryview] = []
    size = count = 0
    for chunk in chunks:
        frame = http_chunk(chunk)
        length = len(chunk) + len(frame[0]) + 2
        if pieces and size + length > BATCH_LIMIT:
            yield b"".join(pieces), count
            pieces, size, count = [], 0, 0
        if chunk:
            pieces.extend(frame)
            size += length
        count += 1
    if count:
        yield b"".join(pieces), count


def fitting_batches(chunks: Sequence[bytes | memoryview]) -> list[Batch] | None:
    """``chunks`` in :func:`batches` when, framed, they fit :data:`BATCHED_STREAM_LIMIT`; else None."""
    if sum(map(len, chunks)) > BATCHED_STREAM_LIMIT:  # framing only adds to it
        return None
    framed = list(batches(chunks))
    return framed if sum(len(data) for data, _ in framed) <= BATCHED_STREAM_LIMIT else None


def batched(plan: Plan) -> list[Batch] | None:
    """The batches ``plan`` is sent in when it is a stream in ``fast`` timing that never waits and, framed,
    fits :data:`BATCHED_STREAM_LIMIT`; None when it goes event by event."""
    if not plan.batch or plan.timed:
        return None
    return plan.framed if plan.framed is not None else fitting_batches(plan.chunks)


def _slices(body: bytes) -> list[bytes | memoryview]:
    if len(body) <= WRITE_SIZE:
        return [body]
    view = memoryview(body)
    return [view[i : i + WRITE_SIZE] for i in range(0, len(body), WRITE_SIZE)]


def plan_for(
    response: Response,
    timing: Timing,
    provider: str | None,
    *,
    chunks: list[bytes | memoryview] | None = None,
    events: Sequence[sse.Event] = (),
) -> Plan:
    """The plan replaying ``response`` as recorded.

    ``chunks`` are the raw SSE events (default: each ``event.raw`` of ``events``, or of ``response.events``),
    taken by the plan as they are (faults change the list: pass one of your own); ``events`` the parsed
    ones, needed only by faults that read event types (``error_event``, ``drop_terminal``).
    """
    headers = replay_headers(response)
    if not response.is_stream:
        return Plan(
            response.status,
            headers,
            _slices(response.body),
            False,
            length=len(response.body),
            provider=provider,
        )
    if chunks is None:
        chunks = [event.raw for event in (events or response.events)]
    due = timing.offsets(len(chunks), response.event_offsets_ms)
    return Plan(
        response.status,
        headers,
        chunks,
        True,
        due,
        events=list(events),
        provider=provider,
        batch=timing.mode == "fast",
    )


def error_plan(reply: envelopes.ErrorReply) -> Plan:
    """A plan serving an error envelope."""
    return Plan(reply.status, list(reply.headers.items()), [reply.body], False, length=len(reply.body))


# ---------------------------------------------------------------- faults as changes of plan


def _cut(plan: Plan, count: int) -> int:
    count = min(count, len(plan.chunks))
    del plan.chunks[count:], plan.due[count:]
    return count


def _json_of(event: sse.Event) -> Any:
    try:
        return event.json() if event.data is not None else None
    except ValueError:
        return None


def _type_of(event: sse.Event) -> str | None:
    data = _json_of(event)
    return event.event or (data.get("type") if isinstance(data, dict) else None)


def _after(plan: Plan, fault: Fault) -> int:
    return min(fault.after or 0, len(plan.chunks))


def _stall(plan: Plan, fault: Fault) -> bool:
    at = _after(plan, fault)
    if fault.ms is None:
        _cut(plan, at)
        plan.end, plan.altered = "hang", True
    else:
        plan.due[at:] = [due + fault.ms / 1000 for due in plan.due[at:]]
    plan.notes.append(f"stalled after event {at}")
    return True


def _disconnect(plan: Plan, fault: Fault) -> bool:
    if plan.stream:
        at = _cut(plan, _after(plan, fault))
        plan.notes.append(f"disconnected after event {at}")
    else:
        body = b"".join(plan.chunks)
        plan.chunks = [body[: len(body) // 2]]
        plan.notes.append(f"disconnected after {len(body) // 2} of {len(body)} bytes")
    plan.end, plan.altered = "disconnect", True
    return True


def _next_sequence(events: list[sse.Event]) -> int:
    for event in reversed(events):
        data = _json_of(event)
        if isinstance(data, dict) and isinstance(data.get("sequence_number"), int):
            return int(data["sequence_number"]) + 1
    return len(events)


def _last_response(events: list[sse.Event]) -> dict[str, Any] | None:
    for event in reversed(events):
        data = _json_of(event)
        if isinstance(data, dict) and isinstance(data.get("response"), dict):
            return dict(data["response"])
    return None


def _error_event(plan: Plan, fault: Fault) -> bool:
    at = _cut(plan, _after(plan, fault))
    sent = plan.events[:at]
    sequence = _next_sequence(sent)
    if fault.as_failed and plan.provider != "anthropic":
        raw = envelopes.failed_event(
            _last_response(sent), code=fault.error_type, message=fault.message or "", sequence_number=sequence
        )
    else:
        raw = envelopes.error_event(
            plan.provider, error_type=fault.error_type, message=fault.message or "", sequence_number=sequence
        )
    plan.chunks.append(raw)
    plan.due.append(plan.due[-1] if plan.due else 0.0)
    plan.notes.append(f"error event after event {at}")
    plan.altered = True
    return True


def corrupt(raw: bytes) -> bytes:
    """The block with the payload of its first ``data:`` line cut in half (the JSON no longer parses)."""
    found = _DATA.search(raw)
    if found is None:
        return raw[: len(raw) // 2] + b"\n\n"
    payload = found.group(1).rstrip()
    return raw[: found.start(1)] + payload[: len(payload) // 2] + raw[found.end(1) :]


def _corrupt_event(plan: Plan, fault: Fault) -> bool:
    index = (fault.event or 1) - 1
    if index >= len(plan.chunks):
        plan.notes.append(f"not applied: the stream has {len(plan.chunks)} events, not {index + 1}")
        return False
    plan.chunks[index] = corrupt(bytes(plan.chunks[index]))
    plan.notes.append(f"event {index + 1} corrupted")
    plan.altered = True
    return True


def _drop_terminal(plan: Plan, fault: Fault) -> bool:
    for index in range(min(len(plan.events), len(plan.chunks)) - 1, -1, -1):
        event = plan.events[index]
        if _type_of(event) in TERMINAL_EVENTS or (event.data or "").strip() == "[DONE]":
            del plan.chunks[index], plan.due[index]
            plan.notes.append(f"terminal event {index + 1} ({_type_of(event) or event.data}) dropped")
            plan.altered = True
            return True
    plan.notes.append("not applied: no terminal event in the stream")
    return False


def _truncate(plan: Plan, fault: Fault) -> bool:
    body = b"".join(plan.chunks)
    at = len(body) // 2 if fault.at is None else min(fault.at, len(body))
    plan.chunks, plan.length = [body[:at]], at
    plan.notes.append(f"body truncated to {at} of {len(body)} bytes")
    plan.altered = True
    return True


def _delay_events(plan: Plan, fault: Fault) -> bool:
    step = (fault.ms or 0) / 1000
    plan.due = [due + (i + 1) * step for i, due in enumerate(plan.due)]
    plan.notes.append(f"{fault.ms:g} ms before each event")
    return True


def _delay_headers(plan: Plan, fault: Fault) -> bool:
    plan.head_delay += (fault.ms or 0) / 1000
    plan.notes.append(f"{fault.ms:g} ms before the headers")
    return True


_STREAM_ONLY = {
    "stall": _stall,
    "error_event": _error_event,
    "corrupt_event": _corrupt_event,
    "drop_terminal": _drop_terminal,
    "delay_events": _delay_events,
}
_ANY = {"disconnect": _disconnect, "delay_headers": _delay_headers}


# Content changes first, then cuts, then delays: a delay or a cut applies to the content as changed.
ORDER = (
    "corrupt_event",
    "drop_terminal",
    "truncate",
    "error_event",
    "disconnect",
    "stall",
    "delay_events",
    "delay_headers",
)


def apply(plan: Plan, fault: Fault) -> bool:
    """Rewrite ``plan`` for ``fault`` (not ``status``, which replaces the plan); False when it cannot apply.

    Apply several faults in :data:`ORDER`.
    """
    if fault.kind in _ANY:
        return _ANY[fault.kind](plan, fault)
    if fault.kind == "truncate" and not plan.stream:
        return _truncate(plan, fault)
    if fault.kind in _STREAM_ONLY and plan.stream:
        return _STREAM_ONLY[fault.kind](plan, fault)
    return False


def status_plan(fault: Fault, provider: str | None) -> Plan:
    """The plan of a ``status`` fault: the provider's error envelope with its retry headers."""
    extra: dict[str, str] = {}
    if fault.retry_after is not None:
        extra["retry-after"] = f"{fault.retry_after:g}"
    elif fault.status == 429:
        extra["retry-after"] = "1"
    if fault.retry_after_ms is not None:
        extra["retry-after-ms"] = f"{fault.retry_after_ms:g}"
    if fault.should_retry is not None:
        extra["x-should-retry"] = "true" if fault.should_retry else "false"
    reply = envelopes.error_reply(
        provider,
        fault.status or 500,
        message=fault.message or "",
        error_type=fault.error_type,
        code=fault.code,
        headers=extra,
    )
    return error_plan(reply)
