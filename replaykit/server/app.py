"""What the server answers: every provider route, and the request handler.

The handler reads the request, takes the next sequence number, picks the faults that apply, matches an
interaction (unless a ``status`` fault or ``enforce_contracts`` answers first), builds the :class:`Plan`,
lets the faults rewrite it, delivers it, and journals the outcome. A request whose body stops arriving for
``body_timeout`` seconds, or is not whole ``body_deadline`` seconds after its head, is answered 408, one
whose framing is broken 400, and journaled (``timeout``,
``malformed``); so is a request aiohttp cannot parse at all (:mod:`~replaykit.server.connections`). Each
entry goes to the journal file when its request is done, and to the state's ``watch`` callable when its
response is over. Paths under ``/__replaykit/`` go to the admin API (:mod:`~replaykit.server.admin`), never
journaled; it loads cassettes through the state's :class:`Host`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web
from aiohttp.http import HttpProcessingError

from replaykit import sse
from replaykit.cassette import Cassette, Interaction
from replaykit.contracts import STRICT, Profile
from replaykit.errors import ReplaykitError
from replaykit.redact import redact_header
from replaykit.redact.names import DEFAULT_RULES
from replaykit.server import envelopes, verdicts
from replaykit.server.connections import Limits, body_began, carried
from replaykit.server.diff import brief
from replaykit.server.faults import (
    EVENT_KINDS,
    Fault,
    apply_all,
    status_plan,
)
from replaykit.server.journal import Entry, Journal, body_fields
from replaykit.server.lane import LaneServer
from replaykit.server.matching import (
    CASSETTE_HEADER,
    INTERACTION_HEADER,
    Match,
    Pool,
    Received,
    Slot,
    near_text,
)
from replaykit.server.plan import (
    Plan,
    Timing,
    error_plan,
    plan_for,
    recorded_chunks,
    unchanged_plan,
)
from replaykit.server.streaming import Progress, Writer, deliver

__all__ = ["ADMIN_PREFIX", "MAX_BODY", "Handler", "Host", "Settings", "State", "Unreadable", "body_here",
           "make_server", "read_body", "refusal"]

ADMIN_PREFIX = "/__replaykit"
MAX_BODY = 1 << 30  # bytes a request body may have


@dataclass(frozen=True, slots=True)
class Settings:
    """How the server answers: timing of streams, whether invalid requests are refused, and the contract
    profile traffic is judged by (only errors refuse a request; a rule the profile relaxes is a warning)."""

    timing: Timing = field(default_factory=Timing)
    enforce_contracts: bool = False
    profile: Profile = STRICT


Handler = Callable[[web.BaseRequest, "State"], Awaitable[web.StreamResponse]]


class Host(Protocol):
    """What the admin API asks of the fake provider that runs the server
    (:class:`~replaykit.server.runner.FakeProvider` is one): load, unload and list cassettes, add stubs."""

    @property
    def max_body(self) -> int:
        """The bytes a compressed body of a cassette may decode to."""

    def load(self, cassettes: Iterable[str | os.PathLike[str] | Cassette], *, add: bool = False) -> None:
        """Load cassettes (paths, folders, :class:`Cassette` objects), replacing the loaded ones unless
        ``add``."""

    def unload(self, names: Iterable[str] = ()) -> list[str]:
        """Unload the cassettes ``names`` name (every one when none); the labels unloaded."""

    def stub(self, interaction: Interaction) -> dict[str, Any]:
        """Add ``interaction`` to the ``<stubs>`` cassette; where it went."""

    def cassettes(self) -> list[dict[str, Any]]:
        """The cassettes loaded: ``{cassette, interactions, routes}`` each."""


@dataclass(slots=True)
class State:
    """Everything the handler shares with the caller's thread; mutate only under ``lock``. ``host`` loads
    cassettes for the admin API; ``watch`` gets each entry, final, when its response is over (in the server
    thread: what it raises is stored in ``errors``)."""

    pool: Pool
    settings: Settings = Settings()
    faults: list[Fault] = field(default_factory=list)
    journal: Journal = field(default_factory=Journal)
    errors: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: Counter[str] = field(default_factory=Counter)
    seq: int = 0
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    limits: Limits = field(default_factory=Limits)
    host: Host | None = None
    watch: Callable[[Entry], None] | None = None
    kill_points: list[dict[str, Any]] = field(default_factory=list)

    def reached(self, point: dict[str, Any]) -> None:
        """Record a kill point reached (a response or a tool call held for a ``kill`` fault)."""
        with self.lock:
            self.kill_points.append(point)

    def reset(self) -> None:
        """Forget the journal, the counters, the faults and which interactions were served."""
        with self.lock:
            self.journal.clear()
            self.counts.clear()
            self.faults.clear()
            self.kill_points.clear()
            self.pool.reset()
            self.seq = 0

    def unused(self, session: bool = False) -> list[dict[str, Any]]:
        """Interactions never delivered whole since the last reset (``session``: since they were loaded):
        ``{cassette, index, line, route}`` each."""
        with self.lock:
            return [{**slot.where(), "route": slot.route.name} for slot in self.pool.unused(session)]


# ---------------------------------------------------------------- reading the request


class Unreadable(Exception):
    """A request whose body could not be read: answered ``status`` and journaled with ``verdict``."""

    def __init__(self, status: int, verdict: str, message: str) -> None:
        super().__init__(message)
        self.status, self.verdict = status, verdict


async def _read_some(request: web.BaseRequest, limits: Limits, due: float) -> bytes:
    """The next bytes of the body, waiting at most ``body_timeout`` seconds and never past ``due`` (loop
    time: the body's deadline)."""
    content = request.content
    try:
        if content.is_eof():  # the rest of the body is here already: no wait, no timer
            return await content.readany()
        paused = asyncio.get_running_loop().time() + limits.body_timeout
        async with asyncio.timeout_at(min(paused, due)):
            return await content.readany()
    except TimeoutError:
        raise _late(limits, due <= paused) from None
    except (web.RequestPayloadError, HttpProcessingError) as exc:
        raise Unreadable(400, "malformed", f"the request body is malformed: {exc}") from None


def _late(limits: Limits, deadline: bool) -> Unreadable:
    """Why a body being read was given up: its ``deadline`` came first, or it paused too long (decided by
    which bound the timer was set to: a timer may fire a tick before its time)."""
    if deadline:
        return Unreadable(408, "timeout", f"the request body was not whole {limits.body_deadline:g} s after "
                                          "its head; send it at once, or raise --body-deadline")
    return Unreadable(408, "timeout", f"no byte of the request body came for {limits.body_timeout:g} s; send "
                                      "the body without pausing, or raise --body-timeout")


def body_here(request: web.BaseRequest) -> bytes | None:
    """The whole body when all of it has arrived (as it mostly has: taken in one read, no wait, no timer),
    else None; a broken or oversized body as :func:`read_body` says."""
    content = request.content
    if not content.is_eof():
        return None
    try:
        body = content.read_nowait()
    except (web.RequestPayloadError, HttpProcessingError) as exc:
        raise Unreadable(400, "malformed", f"the request body is malformed: {exc}") from None
    if len(body) >= MAX_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=len(body))
    return body


async def read_body(request: web.BaseRequest, limits: Limits) -> bytes:
    """The whole body, each read waiting at most ``body_timeout`` seconds and all of it arrived within
    ``body_deadline`` seconds of the head (:class:`Unreadable` past either, or when its framing is broken);
    over :data:`MAX_BODY` bytes, aiohttp's 413."""
    body = body_here(request)
    if body is not None:
        return body
    due = body_began(request) + limits.body_deadline
    parts: list[bytes] = []
    size = 0
    while chunk := await _read_some(request, limits, due):
        size += len(chunk)
        if size >= MAX_BODY:
            raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=size)
        parts.append(chunk)
    return b"".join(parts)


def _built(request: web.BaseRequest, body: bytes) -> Received:
    """``request`` with ``body`` as :class:`Received` (repeated headers joined with ``, ``; the lane takes no
    request with one)."""
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return Received.arrived(request.method, request.path, request.query_string, headers, body)


@functools.lru_cache(maxsize=2)
def _second(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))


_LAST: tuple[int, str] = (-1, "")  # the latest millisecond written, and its text (requests come in bursts)


def _timestamp(now: float) -> str:
    """``now`` (seconds since the epoch) as ISO 8601 UTC to the millisecond: ``2026-12-02T13:04:05.123Z``."""
    global _LAST
    whole = int(now * 1000)
    last = _LAST
    if last[0] == whole:
        return last[1]
    epoch, ms = divmod(whole, 1000)
    text = f"{_second(epoch)}.{ms:03d}Z"
    _LAST = (whole, text)
    return text


@functools.lru_cache(maxsize=512)
def _as_sent(name: str) -> bool:
    """True when header ``name`` is journaled as sent: :func:`~replaykit.redact.redact_header` leaves its
    value alone (not a secret header, and the default rules substitute nothing); known once per name."""
    return not DEFAULT_RULES.secret_header(name) and not DEFAULT_RULES.substitutions


def _entry(state: State, received: Received) -> Entry:
    now = _timestamp(time.time())
    body = body_fields(received.body, received.sha256, state.journal.bodies)
    return Entry(
        state.seq,
        now,
        received.route.provider,
        received.route.name,
        received.method,
        received.path,
        received.query,
        {name: value if _as_sent(name) else redact_header(name, value)
         for name, value in received.headers.items()},
        **body,
    )


def _admit(state: State, received: Received) -> tuple[Entry, list[Fault]]:
    with state.lock:
        state.seq += 1
        route = received.route
        counts = state.counts
        for key in ("*", route.name, route.provider):
            if key:
                counts[key] += 1
        faults = state.faults
        chosen = [
            f for f in faults if f.selects(route.name, route.provider, counts[f.route or "*"])
        ] if faults else []
        return _entry(state, received), chosen


# ---------------------------------------------------------------- choosing what to serve


def _error_reply(
    received: Received, status: int, message: str, header: str | None = None
) -> envelopes.ErrorReply:
    """The provider's error envelope for an answer replaykit makes up itself; ``header`` (default:
    ``message``) goes into ``x-replaykit-error``, and any status but 400 says not to retry."""
    headers = {"x-replaykit-error": _header_text(header or message)}
    if status != 400:
        headers["x-should-retry"] = "false"
    return envelopes.error_reply(received.route.provider, status, message=message, headers=headers)


def _replaykit_error(received: Received, status: int, message: str, header: str | None = None) -> Plan:
    """The plan answering :func:`_error_reply`."""
    return error_plan(_error_reply(received, status, message, header))


def _header_text(text: str) -> str:
    """``text`` as a header value: one line of at most 500 ASCII characters (``…`` becomes ``...``, ``é``
    ``e``, what has no ASCII form ``?``)."""
    decomposed = unicodedata.normalize("NFKD", " ".join(text.split()))
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return plain.encode("ascii", "replace").decode("ascii")[:500]


def _replay_plan(state: State, slot: Slot, faults: list[Fault]) -> Plan:
    response = slot.interaction.response
    provider, timing = slot.route.provider, state.settings.timing
    if not faults:  # the recording unchanged: made once per interaction (framed once, sent as framed)
        return unchanged_plan(response, timing, provider, slot.memo)
    if not response.is_stream:
        return plan_for(response, timing, provider)
    events = sse.parse(response.body) if any(f.kind in EVENT_KINDS for f in faults) else []
    chunks = recorded_chunks(response.body, slot.memo)  # a list of the plan's own: faults change it
    return plan_for(response, timing, provider, chunks=chunks, events=events)


def _faulted(plan: Plan, faults: list[Fault], entry: Entry, answered: Fault | None = None) -> Plan:
    """Apply the faults (see :func:`~replaykit.server.faults.apply_all`) and journal whether each applied."""
    if not faults:
        return plan
    for fault, applied in apply_all(plan, faults, answered):
        entry.faults.append({**fault.to_json(), "applied": applied})
    return plan


def _choose(state: State, received: Received, entry: Entry, faults: list[Fault]) -> tuple[Plan, Match | None]:
    status = next((f for f in faults if f.kind == "status"), None) if faults else None
    if status is not None:  # the error is served instead of a recording; a delay can still apply to it
        entry.verdict = "fault"
        return _faulted(status_plan(status, received.route.provider), faults, entry, status), None
    refused = [row for row in entry.request_violations if row.get("severity") != "warning"
               ] if state.settings.enforce_contracts else []
    if refused:
        entry.verdict = "invalid"
        first = verdicts.first_refused(refused)
        message = f"{first.get('pointer') or '/'}: {first.get('message')}"
        ruled = verdicts.rule_reply(received, first, _header_text(f"contract rule {first.get('rule')} at "
                                                                  f"{first.get('pointer') or '/'}"))
        if ruled is not None:  # the provider's own answer: its status, error type and message
            return error_plan(ruled), None
        return _replaykit_error(received, 400, message, f"contract violation at {message}"), None
    with state.lock:
        match = state.pool.match(received)
    if match.slot is None:
        entry.verdict, entry.near_misses, entry.error = "unmatched", match.near_misses, match.reason
        return _replaykit_error(received, 404, _unmatched_message(received, match)), match
    entry.verdict, entry.matched, entry.diff = "served", match.slot.where(), match.diff
    entry.provider = entry.provider or match.slot.route.provider
    try:
        plan = _faulted(_replay_plan(state, match.slot, faults), faults, entry)
    except Exception:
        with state.lock:
            state.pool.release(match.slot)
        raise
    if received.controls or match.diff:
        plan.notes[:0] = _choice_notes(received, match)
    return plan, match


def _unmatched_message(received: Received, match: Match) -> str:
    """What a 404 says (body and ``x-replaykit-error``): why nothing matched, and the nearest interaction with
    the first places its body differs, bounded (see :func:`~replaykit.server.matching.near_text`)."""
    nearest = f"; nearest: {near_text(match.near_misses[0])}" if match.near_misses else ""
    request = f"{received.method} {received.path}"
    return f"replaykit: no recorded interaction for {request}: {match.reason}{nearest}"


def _choice_notes(received: Received, match: Match) -> list[str]:
    """Notes for the journal: the interaction was chosen by replaykit's headers; its body differs."""
    chosen = [f"{name}: {value}" for name, value in received.controls.items()
              if name in (CASSETTE_HEADER, INTERACTION_HEADER)]
    notes = [f"chosen by {', '.join(chosen)}"] if chosen else []
    if match.diff:
        notes.append(f"the request body differs from the recording served: {brief(match.diff)}")
    return notes


# ---------------------------------------------------------------- the handler


@dataclass(slots=True)
class _Exchange:
    """One request's bookkeeping: journaled when the outcome is known, corrected if delivery then fails."""

    state: State
    entry: Entry
    started: float
    received: Received  # its body's JSON (parsed for matching or now) goes to the journal file
    plan: Plan
    match: Match | None = None
    counted: bool = False
    settled: str | None = None
    progress: Progress = field(default_factory=Progress)  # how far delivery got: settles this exchange

    @property
    def slot(self) -> Slot | None:
        return self.match.slot if self.match is not None else None

    def settle(self, progress: Progress) -> None:
        """Record the outcome (called before the last bytes are sent, and again at the very end), in the
        journal and its file.

        The second call changes the entry only when the outcome turned out different (the client left
        during the last write): a client that has its response never sees its entry change. The file then
        gets the entry again, with its final outcome: the last line of a ``seq`` is the final one.
        """
        if self.settled == progress.outcome:
            return
        first, self.settled = self.settled is None, progress.outcome
        entry, plan, slot = self.entry, self.plan, self.slot
        whole = plan.complete and progress.outcome == "complete"
        if slot is not None and whole != self.counted:
            with self.state.lock:
                slot.served += 1 if whole else -1
                slot.served_total += 1 if whole else -1
                self.counted = whole
        entry.status, entry.stream, entry.notes = plan.status, plan.stream, plan.notes
        entry.chunks = len(plan.chunks) if whole else progress.chunks
        entry.outcome = progress.outcome
        entry.duration_ms = round((time.perf_counter() - self.started) * 1000, 3)
        if first:
            self.state.journal.append(entry)
        _log(self.state, entry, self.received)
        if progress.outcome == "hung" and any(f["kind"] == "kill" and f["applied"] for f in entry.faults):
            self.state.reached({"seq": entry.seq, "route": entry.route, "events": progress.chunks})

    def abandon(self) -> None:
        """Close an exchange never delivered: its client left first (``client_closed``)."""
        self.progress.outcome = "client_closed"
        self.close()

    def close(self) -> None:
        """The final word: settle with what really happened; give back a slot that was not served whole; tell
        the state's watcher."""
        self.settle(self.progress)
        slot = self.slot
        if slot is not None and not self.counted:
            with self.state.lock:
                self.state.pool.release(slot)
        _notify(self.state, self.entry)


def _notify(state: State, entry: Entry) -> None:
    """Give ``entry``, final, to the state's watcher; what it raises is an error for the caller's thread."""
    if state.watch is None:
        return
    try:
        state.watch(entry)
    except Exception as exc:
        state.errors.append(exc)


def _log(state: State, entry: Entry, received: Received | None = None) -> None:
    """Append ``entry`` to the journal file, if one is open (``received``: its request, whose body's JSON the
    line reuses); failing to write it is an error for the caller's thread."""
    if not state.journal.logging:
        return
    try:
        state.journal.log(entry, received.json if received is not None else None)
    except ReplaykitError as exc:
        state.errors.append(exc)


def refusal(state: State, request: web.BaseRequest, status: int, verdict: str, message: str) -> web.Response:
    """Journal a request that could not be read (``verdict``: ``malformed``, ``timeout``) and build its
    answer: the provider's error envelope with ``status``, closing the connection."""
    received = _built(request, b"")
    text = " ".join(message.split())
    with state.lock:
        state.seq += 1
        entry = _entry(state, received)
    entry.verdict, entry.error, entry.status, entry.outcome = verdict, text, status, "complete"
    state.journal.append(entry)
    _log(state, entry)
    _notify(state, entry)
    reply = _error_reply(received, status, f"replaykit: {text}")
    response = web.Response(status=status, body=reply.body, headers=reply.headers)
    response.force_close()
    return response


async def _refuse(state: State, request: web.BaseRequest, unreadable: Unreadable) -> web.StreamResponse:
    """Answer a request whose body could not be read and close the connection (the rest of the body is
    never read)."""
    response = refusal(state, request, unreadable.status, unreadable.verdict, str(unreadable))
    with contextlib.suppress(ConnectionError):
        await response.prepare(request)
        await response.write_eof()
    request.protocol.force_close()
    return response


def _internal_error(state: State, received: Received, exc: Exception, entry: Entry) -> Plan:
    state.errors.append(exc)
    message = f"replaykit internal error: {type(exc).__name__}: {exc}"
    entry.verdict, entry.error = "error", message
    return _replaykit_error(received, 500, message)


def begin(state: State, received: Received, started: float) -> _Exchange:
    """Admit ``received`` (journaled from here on), choose its answer and judge both: the exchange, whose
    ``plan`` is to be delivered, ``progress`` advanced as it goes and :meth:`~_Exchange.close` called at the
    end. ``started``: :func:`time.perf_counter` when the request came."""
    entry, faults = _admit(state, received)
    match: Match | None = None
    try:
        profile = state.settings.profile
        entry.request_violations = verdicts.request_violations(received, profile)
        plan, match = _choose(state, received, entry, faults)
        slot = match.slot if match is not None else None
        entry.response_violations = verdicts.response_violations(received, slot, plan, profile)
    except Exception as exc:
        plan = _internal_error(state, received, exc, entry)
    exchange = _Exchange(state, entry, started, received, plan, match)
    exchange.progress.on_settle = exchange.settle
    return exchange


async def handle(request: web.BaseRequest, state: State) -> web.StreamResponse:
    """Answer one provider request (see the module docstring), or deliver the one the lane began."""
    exchange = carried(request)
    if not isinstance(exchange, _Exchange):
        started = time.perf_counter()
        try:
            received = _built(request, await read_body(request, state.limits))
        except Unreadable as unreadable:
            return await _refuse(state, request, unreadable)
        exchange = begin(state, received, started)
    try:
        return await deliver(request, exchange.plan, state.closing, exchange.progress)
    finally:
        exchange.close()


def _lane_answer(state: State) -> Callable[[Received, float], _Exchange | None]:
    """What the lane asks of a plain request (:mod:`~replaykit.server.lane`): None (the general way) for the
    admin API, or while a fault is set (the answer is then never prepared whole) or timing is not ``fast`` (a
    stream's answer is then never prepared whole); else the exchange :func:`begin` makes."""

    def answer(received: Received, started: float) -> _Exchange | None:
        path = received.path
        if state.faults or state.settings.timing.mode != "fast" or path.startswith(ADMIN_PREFIX):
            return None
        return begin(state, received, started)

    return answer


def _continue(request: web.BaseRequest) -> None:
    """Answer ``Expect: 100-continue`` before the body is read, as aiohttp's router would (curl sends it for
    bodies over 1 MiB and would otherwise wait a second before sending the body): written to the transport
    at once, before anything else of the response."""
    transport = request.transport
    expects = request.version >= (1, 1) and request.headers.get("Expect", "").lower() == "100-continue"
    if expects and transport is not None and not transport.is_closing():
        transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")


def make_server(state: State, admin: Handler | None = None, **options: Any) -> LaneServer:
    """The server answering for ``state``, under ``state.limits``: plain requests in the lane
    (:mod:`~replaykit.server.lane`), the others on aiohttp's low-level server: a path under
    :data:`ADMIN_PREFIX` to ``admin`` (:func:`replaykit.server.admin.answer`), every other request to
    :func:`handle`, requests aiohttp cannot parse to :func:`refusal`. ``options`` go to aiohttp's connection
    handler (``access_log``...).

    Built in the event loop that will run it. No ``web.Application``: it has nothing to offer a server of
    five routes but its router and middlewares, which cost about a tenth of each request.
    """
    loop = asyncio.get_running_loop()

    async def dispatch(request: web.BaseRequest) -> web.StreamResponse:
        body_began(request)  # taken now, whether or not the handler reads the body
        _continue(request)
        path = request.path
        ours = admin is not None and (path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/"))
        return await (admin if ours and admin is not None else handle)(request, state)

    def build(
        message: Any, payload: Any, protocol: Any, writer: Any, task: asyncio.Task[None]
    ) -> web.BaseRequest:
        # replaykit's writer in place of aiohttp's: one write per response whose whole answer is known
        ours = Writer(protocol, loop)
        return web.BaseRequest(message, payload, protocol, ours, task, loop, client_max_size=MAX_BODY)

    def malformed(request: web.BaseRequest, message: str) -> web.StreamResponse:
        return refusal(state, request, 400, "malformed", f"the request could not be parsed: {message}")

    return LaneServer(dispatch, answer=_lane_answer(state), limits=state.limits, on_malformed=malformed,
                      request_factory=build, handler_cancellation=True, **options)
