"""One request's exchange (provider wing): admitted, answered, judged and journaled.

:func:`handle` takes the seam's :class:`~replaykit.server.seam.Request`: it takes the next sequence number,
picks the faults that apply, matches an interaction (unless a ``status`` fault or ``enforce_contracts``
answers first), builds the plan, lets the faults rewrite it and returns the :class:`Exchange` the HTTP wing
delivers; ``close()`` journals the outcome. :class:`State` is what the provider wing shares across threads.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from replaykit import sse
from replaykit.contracts import STRICT, Profile
from replaykit.errors import ReplaykitError
from replaykit.redact import redact_header
from replaykit.redact.names import DEFAULT_RULES
from replaykit.redact.shapes import PLACEHOLDER
from replaykit.server import envelopes, verdicts
from replaykit.server.connections import Limits
from replaykit.server.diff import brief
from replaykit.server.faults import EVENT_KINDS, Fault, apply_all, status_plan
from replaykit.server.journal import Entry, Journal, body_fields
from replaykit.server.matching import (
    CASSETTE_HEADER,
    INTERACTION_HEADER,
    Match,
    Pool,
    Received,
    Slot,
    near_text,
)
from replaykit.server.plan import Plan, Timing, error_plan, plan_for, recorded_chunks, unchanged_plan
from replaykit.server.seam import Exchange, Progress, Request

__all__ = ["Arrival", "KillPoint", "Settings", "State", "begin", "handle"]

KillPoint = dict[str, object]  # a response held after its events (seq, route, events) or a tool call


@dataclass(slots=True, eq=False)
class Arrival:
    """An action to take once the ``nth`` request on ``route`` (a route or provider name, ``*``: any, as a
    fault selects) has arrived: called once, in the server thread, under the state's lock (so it must be
    quick and never call back into the provider)."""

    route: str
    nth: int
    action: Callable[[], None]


@dataclass(frozen=True, slots=True)
class Settings:
    """How the server answers: timing of streams, whether invalid requests are refused, and the contract
    profile traffic is judged by (only errors refuse a request; a rule the profile relaxes is a warning)."""

    timing: Timing = field(default_factory=Timing)
    enforce_contracts: bool = False
    profile: Profile = STRICT


@dataclass(slots=True)
class State:
    """Everything the handler shares with the caller's thread; mutate only under ``lock``. ``watch`` gets
    each entry, final, when its response is over (in the server thread: what it raises goes to ``errors``)."""

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
    watch: Callable[[Entry], None] | None = None
    kill_points: list[KillPoint] = field(default_factory=list)
    arrivals: list[Arrival] = field(default_factory=list)
    open: int = 0  # requests admitted whose entry is not yet in the journal
    quiet: threading.Condition = field(init=False)  # notified as each of them is journaled

    def __post_init__(self) -> None:
        self.quiet = threading.Condition(self.lock)

    def journaled(self) -> None:
        """An admitted request's entry is in the journal: one fewer open."""
        with self.lock:
            self.open = max(0, self.open - 1)
            self.quiet.notify_all()

    def settled(self, timeout: float) -> bool:
        """Wait until every admitted request is in the journal (a client gone: as soon as the server sees it);
        False when ``timeout`` seconds (a bound on a hang) pass first."""
        with self.quiet:
            return self.quiet.wait_for(lambda: self.open == 0, timeout)

    def when_received(self, arrival: Arrival) -> Callable[[], None]:
        """Take ``arrival``'s action once its request has arrived (at once when it has already); the function
        that withdraws it (after which the action is never taken)."""
        with self.lock:
            self.arrivals.append(arrival)
            self.arrived()

        def withdraw() -> None:
            with self.lock:
                if arrival in self.arrivals:
                    self.arrivals.remove(arrival)
        return withdraw

    def arrived(self) -> None:
        """Take the actions of the arrivals whose request has come (the caller holds the lock)."""
        due = [a for a in self.arrivals if self.counts[a.route] >= a.nth]
        for arrival in due:
            self.arrivals.remove(arrival)
            arrival.action()

    def reached(self, point: KillPoint) -> None:
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
            self.seq = self.open = 0

    def unused(self, session: bool = False) -> list[dict[str, object]]:
        """Interactions never delivered whole since the last reset (``session``: since they were loaded):
        ``{cassette, index, line, route}`` each."""
        with self.lock:
            return [{**slot.where(), "route": slot.route.name} for slot in self.pool.unused(session)]


@functools.lru_cache(maxsize=2)
def _second(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))


@functools.lru_cache(maxsize=4)  # requests come in bursts: most share their millisecond with another
def _millisecond(whole: int) -> str:
    epoch, ms = divmod(whole, 1000)
    return f"{_second(epoch)}.{ms:03d}Z"


def _timestamp(now: float) -> str:
    """``now`` (seconds since the epoch) as ISO 8601 UTC to the millisecond: ``2026-12-02T13:04:05.123Z``."""
    return _millisecond(int(now * 1000))


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
        _query(received.query),
        {name: value if _as_sent(name) else redact_header(name, value)
         for name, value in received.headers.items()},
        **body,
    )


def _query(query: dict[str, list[str]]) -> dict[str, list[str]]:
    """``query`` with the values of secret parameters (Gemini's ``?key=``, ``sig``...) replaced for the
    journal."""
    if not query or not any(map(DEFAULT_RULES.secret_query, query)):
        return query
    return {name: [PLACEHOLDER] * len(values) if DEFAULT_RULES.secret_query(name) else values
            for name, values in query.items()}


def _admit(state: State, received: Received) -> tuple[Entry, list[Fault]]:
    with state.lock:
        state.seq += 1
        state.open += 1
        route = received.route
        counts = state.counts
        for key in ("*", route.name, route.provider):
            if key:
                counts[key] += 1
        if state.arrivals:
            state.arrived()
        faults = state.faults
        chosen = [
            f for f in faults if f.selects(route.name, route.provider, counts[f.route or "*"])
        ] if faults else []
        return _entry(state, received), chosen


# ---------------------------------------------------------------- choosing what to serve


def _error_reply(received: Received, status: int, message: str,
                 header: str | None = None) -> envelopes.ErrorReply:
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
            self.state.journaled()
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


@dataclass(slots=True)
class _Refused:
    """The exchange of a request that could not be read: journaled already; its answer closes the
    connection."""

    plan: Plan
    progress: Progress = field(default_factory=Progress)

    def close(self) -> None:
        """Nothing left to journal."""

    def abandon(self) -> None:
        """Nothing left to journal."""


def _refused(state: State, request: Request) -> _Refused:
    """Journal a request that could not be read (``verdict``: ``malformed``, ``timeout``) and answer it in
    the provider's error envelope."""
    unreadable = request.unreadable
    assert unreadable is not None
    received = Received.arrived(request.method, request.path, request.query, request.headers, b"")
    text = " ".join(str(unreadable).split())
    with state.lock:
        state.seq += 1
        entry = _entry(state, received)
    entry.verdict, entry.error, entry.status = unreadable.verdict, text, unreadable.status
    entry.outcome = "complete"
    state.journal.append(entry)
    _log(state, entry)
    _notify(state, entry)
    return _Refused(_replaykit_error(received, unreadable.status, f"replaykit: {text}"))


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


def handle(state: State, request: Request) -> Exchange:
    """The exchange answering ``request`` (the seam's ``handle_request``): begun, or refused when its body
    could not be read."""
    if request.unreadable is not None:
        return _refused(state, request)
    received = Received.arrived(request.method, request.path, request.query, request.headers, request.body)
    return begin(state, received, request.started)
