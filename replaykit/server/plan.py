"""What a response will look like on the wire, before it is sent: the :class:`~replaykit.server.seam.Plan` of
a recorded response or an error envelope, which :mod:`~replaykit.server.faults` then rewrites.

Knows nothing of faults nor of the network; a recording replayed unchanged is framed once per interaction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, TypeVar, cast

from replaykit import sse
from replaykit.cassette import Response
from replaykit.errors import UsageError
from replaykit.server import envelopes
from replaykit.server.prepared import BATCH_LIMIT, Batch, Whole, batches, whole
from replaykit.server.seam import Plan

__all__ = [
    "HOP_BY_HOP",
    "Memo",
    "Plan",
    "Timing",
    "error_plan",
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
PARSE_SLICE = 1 << 16  # bytes of a recorded body parsed at a time when it is cut into events
_T = TypeVar("_T")
Memo = dict[str, object]  # an interaction's cache (``Slot.memo``): what is made of its bodies


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


def replay_headers(response: Response) -> list[tuple[str, str]]:
    """Recorded headers minus framing and encoding ones: bodies are held decoded; the server frames them."""
    return [(k, v) for k, values in response.headers.items() if k.lower() not in HOP_BY_HOP for v in values]


# ---------------------------------------------------------------- a recording framed once per interaction


def _per_body(memo: Memo, key: str, body: bytes, make: Callable[[], _T]) -> _T:
    """``make()``, kept in ``memo`` under ``key`` for as long as ``body`` is the very same object."""
    cached = cast("tuple[bytes, _T] | None", memo.get(key))
    if cached is None or cached[0] is not body:
        cached = (body, make())
        memo[key] = cached
    return cached[1]


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


def recorded_chunks(body: bytes, memo: Memo) -> list[bytes | memoryview]:
    """The SSE events of a recorded ``body`` as views into it, one per event (their ``raw`` bytes uncopied).

    ``memo`` is the interaction's cache (``Slot.memo``): the views are made once per body (a new ``body``
    gets new ones); the list returned is a new one.
    """
    return list(_per_body(memo, "framing:chunks", body, lambda: _event_views(body)))


def recorded_batches(body: bytes, memo: Memo) -> list[Batch]:
    """The events of a recorded ``body`` framed as HTTP chunks, in :func:`batches` with the body's end, made
    once per body (kept in ``memo`` as :func:`recorded_chunks`)."""
    return list(_per_body(memo, "framing:batches", body,
                          lambda: list(batches(recorded_chunks(body, memo), end=True))))


def recorded_whole(response: Response, memo: Memo) -> Whole | None:
    """``response`` replayed unchanged as a :class:`Whole` (a stream's framing from ``memo``, see
    :func:`recorded_batches`; :func:`unchanged_plan` keeps the result); None when it does not fit one write
    (:data:`BATCH_LIMIT`)."""
    headers = replay_headers(response)
    if not response.is_stream:
        body = response.body
        return whole(response.status, headers, (body, 1), len(body)) if len(body) <= BATCH_LIMIT else None
    framed = recorded_batches(response.body, memo)
    return whole(response.status, headers, framed[0], None) if len(framed) == 1 else None


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


def _unchanged(response: Response, timing: Timing, memo: Memo) -> Plan:
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


def unchanged_plan(response: Response, timing: Timing, provider: str | None, memo: Memo) -> Plan:
    """The plan replaying ``response`` as recorded, with no fault: what does not depend on the request (its
    headers, events, offsets, framing and, when it goes in one write, the whole response) is made once per
    body and timing (kept in ``memo`` as :func:`recorded_chunks`) and shared by the plans returned, which
    only read it; a plan that faults change comes from :func:`plan_for`, with lists of its own."""
    kept = cast("tuple[bytes, Timing, Plan] | None", memo.get("plan:unchanged"))
    if kept is None or kept[0] is not response.body or (kept[1] is not timing and kept[1] != timing):
        kept = (response.body, timing, _unchanged(response, timing, memo))
        memo["plan:unchanged"] = kept
    model = kept[2]
    return Plan(model.status, model.headers, model.chunks, model.stream, model.due, length=model.length,
                provider=provider, batch=model.batch, framed=model.framed, whole=model.whole)


def error_plan(reply: envelopes.ErrorReply) -> Plan:
    """A plan serving an error envelope."""
    return Plan(reply.status, list(reply.headers.items()), [reply.body], False, length=len(reply.body))
