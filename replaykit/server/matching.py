"""Which recorded interaction answers a request.

By default matching is *ordered per route*: the n-th request on a route gets the n-th interaction recorded
on it (cassettes in the order loaded). Matchers narrow the choice: the request gets the first interaction on
its route, not yet served, that every matcher accepts. Built-in matchers, by name:

``method``, ``path``, ``query`` (parsed, order-insensitive), ``body`` (canonical JSON with the volatile
fields ignored; bytes when not JSON) and ``model`` (the body's ``model``, or the Azure deployment in the
path).
A user matcher is any callable ``(received: Received, recorded: replaykit.cassette.Request) -> bool``.

``strict=True`` adds the ``body`` matcher. Either way every match records a structured diff (JSON pointers)
of the body received against the one recorded; a request nothing matches gets the nearest candidates
(near misses) with the matchers that refused them and their diffs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replaykit.cassette import Interaction, Request, body_json
from replaykit.routes import Route, classify_uri
from replaykit.server.diff import Pattern, compile_patterns, diff

__all__ = [
    "BUILTIN_MATCHERS",
    "DEFAULT_VOLATILE",
    "Match",
    "Matcher",
    "Pool",
    "Received",
    "Slot",
    "slots_of",
]

DEFAULT_VOLATILE: tuple[str, ...] = ("/metadata/user_id", "/user", "/safety_identifier", "/prompt_cache_key")
BUILTIN_MATCHERS: tuple[str, ...] = ("method", "path", "query", "body", "model")
NEAR_MISSES = 3
_DEPLOYMENT = re.compile(r"/openai/deployments/([^/]+)/")

Matcher = Callable[["Received", Request], bool]


@dataclass(frozen=True, slots=True)
class Received:
    """A request as the fake provider received it (header names lower-cased; ``json``: the body parsed, or
    None; ``sha256``: the body's hex digest, set by :meth:`build`)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    route: Route
    json: Any = None
    sha256: str = ""

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
        """Build one, parsing the body as JSON and hashing it (hex SHA-256) once."""
        return cls(method.upper(), path, query, headers, body, route, body_json(body),
                   hashlib.sha256(body).hexdigest())


@dataclass(slots=True)
class Slot:
    """One loaded interaction: where it came from, its route, and how often it was taken and served.

    ``memo`` holds what other modules keep per interaction (its stream framed, by
    :mod:`~replaykit.server.plan`; its response's contract verdicts, by :mod:`~replaykit.server.verdicts`).
    """

    cassette: str
    index: int
    interaction: Interaction
    route: Route
    taken: int = 0
    served: int = 0
    _json: list[Any] = field(default_factory=list, repr=False)
    memo: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def request_json(self) -> Any:
        """The recorded request body parsed as JSON (cached)."""
        if not self._json:
            self._json.append(self.interaction.request.json())
        return self._json[0]

    def where(self) -> dict[str, Any]:
        """``{cassette, index, line}`` for the journal."""
        return {"cassette": self.cassette, "index": self.index, "line": self.interaction.line}


@dataclass(frozen=True, slots=True)
class _Check:
    name: str
    accepts: Callable[[Received, Slot], bool]


@dataclass(slots=True)
class Match:
    """The outcome of matching: the slot chosen (or ``None``), the body diff, near misses and why not."""

    slot: Slot | None
    diff: list[dict[str, Any]] = field(default_factory=list)
    near_misses: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""


def _path_of(request: Request) -> str:
    return urlsplit(request.uri).path or "/"


def _query_of(request: Request) -> dict[str, list[str]]:
    return parse_qs(urlsplit(request.uri).query, keep_blank_values=True)


def _model(body: Any, path: str) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    found = _DEPLOYMENT.search(path)
    return found.group(1) if found else None


def _body_diff(
    received: Received, slot: Slot, ignore: tuple[Pattern, ...], limit: int
) -> list[dict[str, Any]]:
    raw = slot.interaction.request.body or b""
    if received.body == raw:
        return []  # the very bytes recorded
    recorded = slot.request_json
    if received.json is not None and recorded is not None:
        return diff(received.json, recorded, ignore, limit)
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
        "method": lambda r, s: r.method == s.interaction.request.method.upper(),
        "path": lambda r, s: r.path == _path_of(s.interaction.request),
        "query": lambda r, s: r.query == _query_of(s.interaction.request),
        "body": lambda r, s: not _body_diff(r, s, ignore, 1),
        "model": lambda r, s: (
            _model(r.json, r.path) == _model(s.request_json, _path_of(s.interaction.request))
        ),
    }
    if name not in checks:
        raise ValueError(f"unknown matcher {name!r}; built-in matchers: {', '.join(BUILTIN_MATCHERS)}")
    return _Check(name, checks[name])


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
        names = list(match_on)
        if strict and "body" not in names:
            names.append("body")
        self.checks = tuple(_builtin(m, self.ignore) if isinstance(m, str) else _user(m) for m in names)
        self._body_checked = "body" in names  # a slot the body matcher took has no body diff
        self.repeat = repeat

    @property
    def slots(self) -> list[Slot]:
        """The loaded interactions, in order; setting them indexes them by route."""
        return self._slots

    @slots.setter
    def slots(self, slots: list[Slot]) -> None:
        self._slots = slots
        self._by_route: dict[str, list[Slot]] = {}
        for slot in slots:
            self._by_route.setdefault(slot.route.name, []).append(slot)

    def match(self, received: Received) -> Match:
        """Choose and take the interaction for ``received``; see the module docstring."""
        on_route = self._by_route.get(received.route.name, [])
        for slot in self._order(on_route):
            if all(check.accepts(received, slot) for check in self.checks):
                slot.taken += 1
                return Match(slot, [] if self._body_checked else _body_diff(received, slot, self.ignore, 50))
        return Match(
            None,
            near_misses=self._near(received, on_route or self.slots),
            reason=self._reason(received, on_route),
        )

    def _order(self, slots: list[Slot]) -> Iterator[Slot]:
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

    def _reason(self, received: Received, on_route: list[Slot]) -> str:
        route = received.route.name
        if not on_route:
            return f"no interaction is recorded on route {route} ({len(self.slots)} loaded on other routes)"
        if all(s.taken for s in on_route) and not self.checks:
            return f"all {len(on_route)} interactions recorded on route {route} were already served"
        names = ", ".join(c.name for c in self.checks)
        return f"none of the {len(on_route)} interactions on route {route} passes the matchers ({names})"

    def release(self, slot: Slot) -> None:
        """Give back a slot whose response was not delivered whole (a fault): the next request may take it."""
        slot.taken = max(0, slot.taken - 1)

    def unused(self) -> list[Slot]:
        """Slots never delivered whole."""
        return [s for s in self.slots if not s.served]

    def reset(self) -> None:
        """Forget every use: the next request on each route gets the first interaction again."""
        for slot in self.slots:
            slot.taken = slot.served = 0


def slots_of(label: str, interactions: Iterable[Interaction]) -> list[Slot]:
    """Slots for the interactions of one cassette, each classified on its recorded URI."""
    return [
        Slot(label, i, item, classify_uri(item.request.method, item.request.uri))
        for i, item in enumerate(interactions)
    ]
