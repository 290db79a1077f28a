"""What a response will look like on the wire, before it is sent: a :class:`Plan`, which faults rewrite.

A plan is the status, the headers, the chunks to write (one per recorded SSE event, or the body of a
non-stream response) and when each is due. :mod:`replaykit.server.faults` turns each fault into a change of
plan, so the network code (:mod:`replaykit.server.streaming`) knows nothing of faults; this module knows
nothing of them either.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from itertools import pairwise
from typing import Any, Literal, TypeVar, cast

from aiohttp.http import SERVER_SOFTWARE

from replaykit import sse
from replaykit.cassette import Response
from replaykit.errors import UsageError
from replaykit.server import envelopes

__all__ = [
    "BATCH_LIMIT",
    "HOP_BY_HOP",
    "LAST_CHUNK",
    "Batch",
    "Plan",
    "Timing",
    "Whole",
    "batched",
    "batches",
    "error_plan",
    "http_chunk",
    "plan_for",
    "recorded_batches",
    "recorded_chunks",
    "recorded_whole",
    "replay_headers",
    "unchanged_plan",
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
WRITE_SIZE = 1 << 20  # a large non-stream body is written in slices of this size
# Bytes gathered at most into one write in fast timing (see streaming): one client read (httpx reads
# 64 KiB), so a stream this long goes in one write with its headers, a longer one a read at a time.
BATCH_LIMIT = 64 << 10
LAST_CHUNK = b"0\r\n\r\n"  # the chunk that ends a chunked body
PARSE_SLICE = 1 << 16  # bytes of a recorded body parsed at a time when it is cut into events
End = Literal["eof", "disconnect", "hang"]
Batch = tuple[bytes, int]  # HTTP chunks framed and joined, and how many they are
_T = TypeVar("_T")


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
    ``framed``: the chunks already framed, in :func:`batches` (the last one ending the body), when the plan
    replays a recording unchanged in ``fast`` timing (``None``: they are framed as they are written);
    ``whole``: then also the whole response, head and body, when it fits one write (:func:`recorded_whole`).
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
    whole: Whole | None = None

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


def batches(chunks: Iterable[bytes | memoryview], end: bool = False) -> Iterator[Batch]:
    """``chunks`` framed as HTTP chunks (an empty one skipped) and joined, at most :data:`BATCH_LIMIT` bytes
    a batch (a bigger frame alone), each with how many chunks it holds; made as they are taken. ``end``: the
    last batch also holds :data:`LAST_CHUNK` (the body's end), so it leaves in the same write."""
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
    if end:
        pieces.append(LAST_CHUNK)
    if count or end:
        yield b"".join(pieces), count


def batched(plan: Plan) -> list[Batch] | None:
    """The batches ``plan`` is sent in when it is a stream in ``fast`` timing that never waits (the last one
    ending the body when the plan ends with ``eof``); None when it goes event by event."""
    if not plan.batch or plan.timed:
        return None
    return plan.framed if plan.framed is not None else list(batches(plan.chunks, plan.end == "eof"))


# ---------------------------------------------------------------- a recording framed once per interaction


def _per_body(memo: dict[str, Any], key: str, body: bytes, make: Callable[[], _T]) -> _T:
    """``make()``, kept in ``memo`` under ``key`` for as long as ``body`` is the very same object."""
    cached = memo.get(key)
    if cached is None or cached[0] is not body:
        cached = memo[key] = (body, make())
    return cast(_T, cached[1])


def _event_ends(body: bytes) -> list[int]:
    view = memoryview(body)
    pieces = (bytes(view[i : i + PARSE_SLICE]) for i in range(0, len(body), PARSE_SLICE))
    ends, total = [], 0
    for event in sse.iter_events(pieces):  # a slice at a time: a huge stream never exists twice in memory
        total += len(event.raw)
        ends.append(total)
    if total != len(body):  # a BOM or other bytes outside the blocks: keep the body whole
        return [len(body)]
    return ends


def _event_views(body: bytes) -> list[bytes | memoryview]:
    view, ends = memoryview(body), _event_ends(body)
    return [view[a:b] for a, b in pairwise([0, *ends])]


def recorded_chunks(body: bytes, memo: dict[str, Any]) -> list[bytes | memoryview]:
    """The SSE events of a recorded ``body`` as views into it, one per event (their ``raw`` bytes uncopied).

    ``memo`` is the interaction's cache (``Slot.memo``): the views are made once per body (a new ``body``
    gets new ones); the list returned is a new one.
    """
    return list(_per_body(memo, "framing:chunks", body, lambda: _event_views(body)))


def recorded_batches(body: bytes, memo: dict[str, Any]) -> list[Batch]:
    """The events of a recorded ``body`` framed as HTTP chunks, in :func:`batches` with the body's end, made
    once per body (kept in ``memo`` as :func:`recorded_chunks`)."""
    return list(_per_body(memo, "framing:batches", body,
                          lambda: list(batches(recorded_chunks(body, memo), end=True))))


@dataclass(frozen=True, slots=True)
class Whole:
    """A recorded response as one HTTP/1.1 keep-alive response, in the bytes aiohttp writes for it: ``head``
    (the status line, the headers recorded, ``Transfer-Encoding`` for a stream or ``Content-Length``, and
    aiohttp's default ``Content-Type`` when none was recorded), a ``Date`` line when ``date`` (none was
    recorded; it is the one part made per second), then ``rest`` (aiohttp's ``Server`` line unless one was
    recorded, the blank line, the body: a stream framed whole with its final chunk); ``chunks``: the events
    in it (1 for a body with a length)."""

    head: bytes
    date: bool
    rest: bytes
    chunks: int


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what aiohttp refuses in a header (injection)
_REASONS = {status.value: status.phrase for status in HTTPStatus}  # the reason phrases aiohttp sends


def _lines(headers: list[tuple[str, str]]) -> str:
    return "".join(f"{name}: {value}\r\n" for name, value in headers)


def _whole(status: int, headers: list[tuple[str, str]], body: Batch, length: int | None) -> Whole | None:
    """``body`` (a stream framed whole, or ``length`` bytes) and its head, as aiohttp writes them."""
    names = {name.lower() for name, _ in headers}
    framing = ("Transfer-Encoding", "chunked") if length is None else ("Content-Length", str(length))
    typed = "content-type" in names or length == 0
    head = [*headers, framing, *([] if typed else [("Content-Type", "application/octet-stream")])]
    rest = [] if "server" in names else [("Server", SERVER_SOFTWARE)]
    unsafe = any(_CONTROL.search(text) for line in head + rest for text in line)
    if status < 200 or status in (204, 304) or unsafe:
        return None  # no body, or a header aiohttp refuses: sent the general way
    data, count = body
    status_line = f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
    return Whole((status_line + _lines(head)).encode(), "date" not in names,
                 (_lines(rest) + "\r\n").encode() + data, count)


def recorded_whole(response: Response, memo: dict[str, Any]) -> Whole | None:
    """``response`` replayed unchanged as a :class:`Whole` (a stream's framing from ``memo``, see
    :func:`recorded_batches`; :func:`unchanged_plan` keeps the result); None when it does not fit one write
    (:data:`BATCH_LIMIT`)."""
    headers = replay_headers(response)
    if not response.is_stream:
        body = response.body
        return _whole(response.status, headers, (body, 1), len(body)) if len(body) <= BATCH_LIMIT else None
    framed = recorded_batches(response.body, memo)
    return _whole(response.status, headers, framed[0], None) if len(framed) == 1 else None


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


def _unchanged(response: Response, timing: Timing, memo: dict[str, Any]) -> Plan:
    """The parts of an unchanged plan shared by every request (no provider: each plan is given its own)."""
    if not response.is_stream:
        plan = plan_for(response, timing, None)
        plan.whole = recorded_whole(response, memo)  # no event to pace: whole whatever the timing
        return plan
    plan = plan_for(response, timing, None, chunks=recorded_chunks(response.body, memo))
    if plan.batch:  # at once: framed once, sent as framed
        plan.framed = recorded_batches(response.body, memo)
        plan.whole = recorded_whole(response, memo)
    return plan


def unchanged_plan(response: Response, timing: Timing, provider: str | None, memo: dict[str, Any]) -> Plan:
    """The plan replaying ``response`` as recorded, with no fault: what does not depend on the request (its
    headers, events, offsets, framing and, when it goes in one write, the whole response) is made once per
    body and timing (kept in ``memo`` as :func:`recorded_chunks`) and shared by the plans returned, which
    only read it; a plan that faults change comes from :func:`plan_for`, with lists of its own."""
    kept = memo.get("plan:unchanged")
    if kept is None or kept[0] is not response.body or (kept[1] is not timing and kept[1] != timing):
        kept = memo["plan:unchanged"] = (response.body, timing, _unchanged(response, timing, memo))
    model: Plan = kept[2]
    return Plan(model.status, model.headers, model.chunks, model.stream, model.due, length=model.length,
                provider=provider, batch=model.batch, framed=model.framed, whole=model.whole)


def error_plan(reply: envelopes.ErrorReply) -> Plan:
    """A plan serving an error envelope."""
    return Plan(reply.status, list(reply.headers.items()), [reply.body], False, length=len(reply.body))
