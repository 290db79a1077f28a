"""Which recorded interaction answers a request (provider wing).

:class:`Pool` holds the loaded interactions (:class:`Slot`) and chooses among those on the request's route
not yet served that every matcher accepts: the first whose body equals the request's, else the next in
order, interactions of an error cassette last. :class:`Received` is the request as matching sees it; the
``x-replaykit-cassette`` / ``x-replaykit-interaction`` headers choose explicitly. A request nothing matches
gets its near misses (:func:`near_text`). The rules in full: docs/architecture/server.md.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replaykit.canonical import canonical
from replaykit.cassette import Interaction, Request, body_json
from replaykit.redact.names import DEFAULT_RULES
from replaykit.routes import Route, classify, classify_uri, model_of, streams_by_path
from replaykit.server.diff import Change, Pattern, brief, compile_patterns, diff
from replaykit.server.envelopes import streams_an_error

__all__ = [
    "BUILTIN_MATCHERS",
    "CASSETTE_HEADER",
    "CONTROL_PREFIX",
    "DEFAULT_VOLATILE",
    "INTERACTION_HEADER",
    "Match",
    "Matcher",
    "Pool",
    "Queue",
    "Received",
    "Slot",
    "is_named",
    "near_text",
    "slots_of",
    "wants_stream",
]

DEFAULT_VOLATILE: tuple[str, ...] = ("/metadata/user_id", "/user", "/safety_identifier", "/prompt_cache_key")
BUILTIN_MATCHERS: tuple[str, ...] = ("stream", "method", "path", "query", "body", "model")
ALWAYS = ("stream",)  # the matchers in force whatever match_on says
CONTROL_PREFIX = "x-replaykit-"
CASSETTE_HEADER = "x-replaykit-cassette"
INTERACTION_HEADER = "x-replaykit-interaction"
NEAR_MISSES = 3
_SUFFIX = re.compile(r"\.(ya?ml|json)$", re.IGNORECASE)

Matcher = Callable[["Received", Request], bool]


@dataclass(frozen=True, slots=True)
class Received:
    """A request as the fake provider received it (header names lower-cased; :attr:`json`: the body parsed,
    or None; ``sha256``: the body's hex digest, set by :meth:`build`; ``controls``: replaykit's own
    ``x-replaykit-*`` headers, kept apart from ``headers``)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    route: Route
    sha256: str = ""
    controls: dict[str, str] = field(default_factory=dict)
    _json: list[Any] = field(default_factory=list, repr=False, compare=False)

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or None when it is not JSON: parsed when first read, then kept (a
        request answered without reading it, e.g. the very bytes of a recording, is never parsed)."""
        if not self._json:
            self._json.append(body_json(self.body))
        return self._json[0]

    @property
    def view(self) -> Any:
        """The body's canonical view on its route (:func:`replaykit.canonical.canonical`), made once."""
        if len(self._json) < 2:
            self._json[:] = [self.json, canonical(self.route.name, self.json)]
        return self._json[1]

    @classmethod
    def build(
        cls,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: bytes,
        route: Route,
    ) -> Received:
        """Build one, hashing the body (hex SHA-256) once; the ``x-replaykit-*`` headers (names lower-cased)
        go to ``controls``."""
        ours: dict[str, str] = {}
        theirs: dict[str, str] = {}
        for name, value in headers.items():
            (ours if name.startswith(CONTROL_PREFIX) else theirs)[name] = value
        return cls(method.upper(), path, query, theirs, body, route, hashlib.sha256(body).hexdigest(), ours)

    @classmethod
    def arrived(cls, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> Received:
        """A request as it came off the wire (:meth:`build`): ``headers`` by lower-cased name (a repeated
        one joined with ``, ``), ``query`` the query string (parsed here), the route classified."""
        parsed = parse_qs(query, keep_blank_values=True) if query else {}
        return cls.build(method, path, parsed, headers, body, classify(method, path))


def wants_stream(body: object, path: str = "") -> bool:
    """True when a request asks for an event stream: its body says ``"stream": true``, or its ``path`` (no
    query) is Gemini's ``:streamGenerateContent``, whose body has no such flag."""
    return (isinstance(body, dict) and body.get("stream") is True) or streams_by_path(path)



@dataclass(slots=True)
class Slot:
    """One loaded interaction: where it came from, its route, and how often it was taken and served (since
    the last reset; ``served_total``: since it was loaded).

    ``memo`` holds what other modules keep per interaction (its stream framed, by
    :mod:`~replaykit.server.plan`; its response's contract verdicts, by :mod:`~replaykit.server.verdicts`).
    """

    cassette: str
    index: int
    interaction: Interaction
    route: Route
    taken: int = 0
    served: int = 0
    served_total: int = 0
    rank: int = field(default=0, repr=False)  # its place among the slots of its route (set by the Pool)
    _json: list[Any] = field(default_factory=list, repr=False)
    memo: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def request_json(self) -> Any:
        """The recorded request body parsed as JSON (once per body)."""
        body = self.interaction.request.body
        if not self._json or self._json[0] is not body:
            self._json[:] = [body, self.interaction.request.json()]
        return self._json[1]

    @property
    def request_view(self) -> Any:
        """The recorded request body's canonical view (once per body)."""
        parsed = self.request_json
        if len(self._json) < 3:
            self._json.append(canonical(self.route.name, parsed))
        return self._json[2]

    def stream_matches(self, received: Received) -> bool:
        """The ``stream`` matcher: ``received`` asks for a stream (:func:`wants_stream`, by body or path;
        the body read from the recording's parse when its bytes are the recording's own, so it is not parsed
        for it) exactly when the interaction was recorded for a stream (its request asked for one by body or
        path, or its response is an event stream). What the recording says is known once per recorded
        request and response body."""
        request, response = self.interaction.request, self.interaction.response
        known = self.memo.get("stream")
        if known is None or known[0] is not request.body or known[1] is not response.body:
            asks = wants_stream(self.request_json)
            streamed = asks or response.is_stream or streams_by_path(_path_of(request))
            known = self.memo["stream"] = (request.body, response.body, asks, streamed)
        asks = known[2] if received.body == known[0] else wants_stream(received.json)
        return bool((asks or streams_by_path(received.path)) == known[3])

    def where(self) -> dict[str, Any]:
        """``{cassette, index, line}`` for the journal."""
        return {"cassette": self.cassette, "index": self.index, "line": self.interaction.line}

    @property
    def failed(self) -> bool:
        """True when the recorded response is an error: a status of 400 or more, or a stream that ends in an
        error event (cached)."""
        if "failed" not in self.memo:
            response = self.interaction.response
            self.memo["failed"] = response.status >= 400 or (response.is_stream and
                                                             streams_an_error(response.body))
        return bool(self.memo["failed"])


@dataclass(frozen=True, slots=True)
class _Check:
    name: str
    accepts: Callable[[Received, Slot], bool]


@dataclass(slots=True)
class Match:
    """The outcome of matching: the slot chosen (or ``None``), the body diff, near misses and why not."""

    slot: Slot | None
    diff: list[Change] = field(default_factory=list)
    near_misses: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""


def _path_of(request: Request) -> str:
    return urlsplit(request.uri).path or "/"


def _query_of(request: Request) -> dict[str, list[str]]:
    return parse_qs(urlsplit(request.uri).query, keep_blank_values=True)


def _public(query: dict[str, list[str]]) -> dict[str, list[str]]:
    """``query`` without its secret parameters (Gemini's ``?key=``...): a recording holds them redacted, a
    client sends its own; like credential headers, they are never matched."""
    return {name: values for name, values in query.items() if not DEFAULT_RULES.secret_query(name)}


def _body_diff(received: Received, slot: Slot, ignore: tuple[Pattern, ...], limit: int) -> list[Change]:
    raw = slot.interaction.request.body or b""
    if received.body == raw:
        return []  # the very bytes recorded
    if received.json is not None and slot.request_json is not None:
        return diff(received.view, slot.request_view, ignore, limit)
    return [
        {
            "pointer": "",
            "change": "changed",
            "received": received.body.decode("utf-8", "replace")[:200],
            "recorded": raw.decode("utf-8", "replace")[:200],
        }
    ]


def _builtin(name: str, ignore: tuple[Pattern, ...]) -> _Check:
    checks: dict[str, Callable[[Received, Slot], bool]] = {
        "stream": lambda r, s: s.stream_matches(r),
        "method": lambda r, s: r.method == s.interaction.request.method.upper(),
        "path": lambda r, s: r.path == _path_of(s.interaction.request),
        "query": lambda r, s: _public(r.query) == _public(_query_of(s.interaction.request)),
        "body": lambda r, s: not _body_diff(r, s, ignore, 1),
        "model": lambda r, s: (
            model_of(r.json, r.path) == model_of(s.request_json, _path_of(s.interaction.request))
        ),
    }
    if name not in checks:
        raise ValueError(f"unknown matcher {name!r}; built-in matchers: {', '.join(BUILTIN_MATCHERS)}")
    return _Check(name, checks[name])


def _rank(slot: Slot) -> int:
    return slot.rank


class Queue:
    """The slots of one route in the order they are tried: by how often each was taken, then in recorded
    order (``levels``: taken count -> slots). Kept up to date by :meth:`move`, not sorted per request."""

    __slots__ = ("levels",)

    def __init__(self, slots: Iterable[Slot]) -> None:
        self.levels: dict[int, list[Slot]] = {}
        for slot in sorted(slots, key=_rank):
            self.levels.setdefault(slot.taken, []).append(slot)

    def order(self, repeat: bool) -> Iterator[Slot]:
        """The slots never taken, in order; with ``repeat``, then the others, least taken first."""
        if not repeat:
            yield from self.levels.get(0, ())
            return
        for taken in sorted(self.levels):  # a level or two: the least taken are always taken first
            yield from self.levels[taken]

    def move(self, slot: Slot, was: int) -> None:
        """Put ``slot``, taken ``was`` times before and ``slot.taken`` times now, at its new place."""
        if was == slot.taken:
            return
        level = self.levels[was]
        del level[0 if level[0] is slot else bisect.bisect_left(level, slot.rank, key=_rank)]
        if not level:
            del self.levels[was]
        now = self.levels.setdefault(slot.taken, [])
        if now and now[-1].rank > slot.rank:
            bisect.insort(now, slot, key=_rank)
        else:  # taken in order, as it mostly is: it goes last
            now.append(slot)


def _user(matcher: Matcher) -> _Check:
    name = getattr(matcher, "__name__", type(matcher).__name__)
    return _Check(name, lambda r, s: bool(matcher(r, s.interaction.request)))


class Pool:
    """The loaded interactions and the matching rules; not thread-safe (the server holds a lock)."""

    def __init__(
        self,
        slots: Iterable[Slot],
        *,
        match_on: Iterable[str | Matcher] = (),
        volatile: Iterable[str] = DEFAULT_VOLATILE,
        strict: bool = False,
        repeat: bool = False,
    ) -> None:
        self.slots = list(slots)
        self.ignore = compile_patterns(volatile)
        names = [*ALWAYS, *(m for m in match_on if m not in ALWAYS)]
        if strict and "body" not in names:
            names.append("body")
        self.checks = tuple(_builtin(m, self.ignore) if isinstance(m, str) else _user(m) for m in names)
        self._body_checked = "body" in names  # a slot the body matcher took has no body diff
        self.repeat = repeat

    @property
    def slots(self) -> list[Slot]:
        """The loaded interactions, in order; setting them indexes them by route and by cassette."""
        return self._slots

    @slots.setter
    def slots(self, slots: list[Slot]) -> None:
        self._slots = slots
        self._by_route: dict[str, list[Slot]] = {}
        self._by_cassette: dict[str, list[Slot]] = {}
        self._failing: dict[str, bool] = {}
        for slot in slots:
            on_route = self._by_route.setdefault(slot.route.name, [])
            slot.rank = len(on_route)
            on_route.append(slot)
            self._by_cassette.setdefault(slot.cassette, []).append(slot)
        self._queues = {route: Queue(on_route) for route, on_route in self._by_route.items()}

    def match(self, received: Received) -> Match:
        """Choose and take the interaction for ``received``; see the module docstring."""
        route = received.route.name
        queue = self._queues.get(route)
        on_route = self._by_route.get(route, [])
        chosen, refusal = self._chosen(received, on_route)
        whole = chosen is on_route  # no x-replaykit-* header narrowed it
        ordered = queue.order(self.repeat) if whole and queue is not None else self._order(chosen)
        slot = self._pick(received, ordered)
        if slot is None:
            reason = refusal or self._reason(received, chosen)
            near = self._near(received, chosen or on_route or self.slots)
            return Match(None, near_misses=near, reason=reason)
        self._count(slot, slot.taken + 1)
        return Match(slot, [] if self._body_checked else _body_diff(received, slot, self.ignore, 50))

    def _count(self, slot: Slot, taken: int) -> None:
        """Set how often ``slot`` was taken, keeping its route's :class:`Queue` in step."""
        was, slot.taken = slot.taken, taken
        on_route = self._by_route.get(slot.route.name, [])
        if slot.rank < len(on_route) and on_route[slot.rank] is slot:  # still loaded (not unloaded meanwhile)
            self._queues[slot.route.name].move(slot, was)

    def _chosen(self, received: Received, on_route: list[Slot]) -> tuple[list[Slot], str]:
        """The slots the ``x-replaykit-*`` headers leave (all without them), and why none is left."""
        if not received.controls:
            return on_route, ""
        slots, name = on_route, received.controls.get(CASSETTE_HEADER)
        if name is not None:
            slots = [slot for slot in slots if is_named(slot.cassette, name)]
            if not slots:
                labels = ", ".join(dict.fromkeys(s.cassette for s in on_route)) or "none"
                return [], (f"{CASSETTE_HEADER}: {name!r} names no cassette loaded on route "
                            f"{received.route.name} (loaded there: {labels})")
        number = received.controls.get(INTERACTION_HEADER)
        if number is None:
            return slots, ""
        if not number.strip().isdigit():
            return [], f"{INTERACTION_HEADER}: {number!r} is not an interaction index; send a 0-based number"
        kept = [slot for slot in slots if slot.index == int(number)]
        return kept, "" if kept else (f"{INTERACTION_HEADER}: no interaction {int(number)} on route "
                                      f"{received.route.name} in {name or 'the cassettes loaded'}")

    def _pick(self, received: Received, ordered: Iterable[Slot]) -> Slot | None:
        """The candidate the module docstring prefers among ``ordered`` (the candidates in order): equal body
        first, then order, error cassettes last."""
        best: Slot | None = None
        best_rank = (True, True)
        checks = self.checks
        for slot in ordered:
            for check in checks:
                if not check.accepts(received, slot):
                    break
            else:
                rank = (not self._body_checked and bool(_body_diff(received, slot, self.ignore, 1)),
                        self._fails(slot.cassette))
                if rank == (False, False):
                    return slot
                if best is None or rank < best_rank:
                    best, best_rank = slot, rank
        return best

    def _fails(self, cassette: str) -> bool:
        """True for an error cassette: every interaction in it answers with an error (known once per load)."""
        failing = self._failing.get(cassette)
        if failing is None:
            slots = self._by_cassette.get(cassette, [])
            failing = self._failing[cassette] = all(slot.failed for slot in slots)
        return failing

    def _order(self, slots: list[Slot]) -> Iterator[Slot]:
        """The order of :meth:`Queue.order` for a few slots the headers chose, sorted on the spot."""
        yield from (s for s in slots if not s.taken)
        if self.repeat:
            yield from sorted((s for s in slots if s.taken), key=lambda s: s.taken)

    def _near(self, received: Received, slots: list[Slot]) -> list[dict[str, Any]]:
        rows = []
        for slot in slots:
            failed = [c.name for c in self.checks if not c.accepts(received, slot)]
            if slot.taken and not self.repeat:
                failed.append("already served")
            rows.append(
                {
                    **slot.where(),
                    "route": slot.route.name,
                    "failed": failed,
                    "diff": _body_diff(received, slot, self.ignore, 10),
                }
            )
        rows.sort(key=lambda row: (len(row["failed"]), len(row["diff"])))
        return rows[:NEAR_MISSES]

    def _reason(self, received: Received, slots: list[Slot]) -> str:
        route = received.route.name
        if not slots:
            return f"no interaction is recorded on route {route} ({len(self.slots)} loaded on other routes)"
        if all(s.taken for s in slots) and not self.repeat:
            return (f"all {len(slots)} interactions recorded on route {route} were already served (serve "
                    "them again with --repeat, or reset: POST /__replaykit/reset)")
        names = ", ".join(c.name for c in self.checks)
        return f"none of the {len(slots)} interactions on route {route} passes the matchers ({names})"

    def release(self, slot: Slot) -> None:
        """Give back a slot whose response was not delivered whole (a fault): the next request may take it."""
        self._count(slot, max(0, slot.taken - 1))

    def unused(self, session: bool = False) -> list[Slot]:
        """Slots never delivered whole since the last reset (``session``: since they were loaded)."""
        return [s for s in self.slots if not (s.served_total if session else s.served)]

    def reset(self) -> None:
        """Forget every use: the next request on each route gets the first interaction again."""
        for slot in self.slots:
            slot.taken = slot.served = 0
        self._queues = {route: Queue(on_route) for route, on_route in self._by_route.items()}


def is_named(label: str, name: str) -> bool:
    """True when ``name`` names the cassette loaded as ``label``: the label itself, or its end after a ``/``,
    with or without the ``.yaml`` / ``.yml`` / ``.json`` suffix (``web_search``,
    ``anthropic/web_search.yaml``)."""
    path, wanted = label.replace("\\", "/"), name.strip().replace("\\", "/")
    return any(form == wanted or form.endswith("/" + wanted) for form in (path, _SUFFIX.sub("", path)))


def near_text(row: dict[str, Any], limit: int = 3, width: int = 40) -> str:
    """A near miss in words, on one bounded line: the interaction, the matchers that refused it, and the
    first ``limit`` places where its body differs (values cut to ``width`` characters, keys masked)."""
    refused = ", ".join(row["failed"]) or "nothing"
    changes = brief(row["diff"], limit, width)
    return f"{row['cassette']}#{row['index']} (refused by: {refused})" + (f": {changes}" if changes else "")


def slots_of(label: str, interactions: Iterable[Interaction]) -> list[Slot]:
    """Slots for the interactions of one cassette, each classified on its recorded URI."""
    return [
        Slot(label, i, item, classify_uri(item.request.method, item.request.uri))
        for i, item in enumerate(interactions)
    ]
