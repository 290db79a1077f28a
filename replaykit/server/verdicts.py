"""Contract verdicts for the journal (provider wing): the violations of each request received and each
response served, checked with :mod:`replaykit.contracts` on the route's contracts.

A request body's verdict is cached by contract and SHA-256 (a bounded LRU), a replayed response's once per
interaction; rows are :class:`Row`, shared dicts that refuse changes.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from replaykit import contracts, sse
from replaykit.cassette import body_json
from replaykit.routes import Kinds, Route
from replaykit.server import envelopes
from replaykit.server.matching import Received, Slot
from replaykit.server.plan import Plan

__all__ = ["CHECK_LIMIT", "REQUEST_CACHE", "Row", "first_refused", "request_violations",
           "response_violations", "rule_reply"]

CHECK_LIMIT = 16 << 20
REQUEST_CACHE = 512



class Row(dict[str, Any]):
    """A violation as a journal row, shared between entries: a dict (it serializes as one) that refuses
    changes; a copy (``dict(row)``, ``copy.deepcopy``) is a plain dict."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a journal verdict row is shared and cannot be changed; change a copy: dict(row)")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = __ior__ = _refuse  # type: ignore

    def __reduce__(self) -> tuple[type[dict[str, object]], tuple[dict[str, object]]]:
        return dict, (dict(self),)


Rows = tuple[Row, ...]


class _Verdicts:
    """A thread-safe LRU of request verdicts (``functools.lru_cache`` cannot key on a digest)."""

    def __init__(self) -> None:
        self._rows: OrderedDict[tuple[str, ...], Rows] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> Rows | None:
        """The rows cached under ``key`` (now the most recently used), or None."""
        with self._lock:
            rows = self._rows.get(key)
            if rows is not None:
                self._rows.move_to_end(key)
            return rows

    def put(self, key: tuple[str, ...], rows: Rows) -> None:
        """Cache ``rows``, forgetting the least recently used entry beyond :data:`REQUEST_CACHE`."""
        with self._lock:
            self._rows[key] = rows
            while len(self._rows) > REQUEST_CACHE:
                self._rows.popitem(last=False)

    def clear(self) -> None:
        """Forget every verdict."""
        with self._lock:
            self._rows.clear()


_VERDICTS = _Verdicts()
_RESPONSES = _Verdicts()  # the verdicts of recorded responses, by contract and body digest


def _rows(found: list[contracts.Violation]) -> list[Row]:
    return [Row(pointer=v.pointer, keyword=v.keyword, message=v.message, event=v.event, severity=v.severity,
                **({"rule": v.rule} if v.rule else {})) for v in found]


def request_violations(received: Received,
                       profile: contracts.Profile = contracts.STRICT) -> list[dict[str, Any]]:
    """Violations of the request body against its route's request contract (``[]`` off the known routes),
    under ``profile`` (the rules it relaxes come with ``severity: warning``).

    Cached per body (see the module docstring); each call returns a new list of the cached rows.
    """
    kinds = received.route.contracts
    if kinds is None:
        return []
    key = (kinds.request, profile.name, received.sha256 or hashlib.sha256(received.body).hexdigest())
    rows = _VERDICTS.get(key)
    if rows is None:
        found = contracts.check_body(kinds.request, received.json, "request", profile=profile)
        rows = tuple(_rows(found))
        _VERDICTS.put(key, rows)
    return list(rows)


def first_refused(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The violation a refused request is answered for, as the provider meets them: the first of the
    schema (shapes are checked first), else the first broken rule."""
    return next((row for row in rows if not row.get("rule")), rows[0])


def rule_reply(received: Received, row: dict[str, Any], header: str) -> envelopes.ErrorReply | None:
    """The provider's own answer to a request that breaks the rulebook rule of ``row`` (its real status,
    error type and message, naming the request's ids), with ``x-replaykit-error: header``; None when the
    row is no rulebook rule's."""
    spec = contracts.rule_spec(str(row.get("rule"))) if row.get("rule") else None
    if spec is None:
        return None
    reply = contracts.refusal(spec, received.json)
    provider = received.route.provider
    code = reply.code if isinstance(reply.code, str) and provider != "cloudflare" else None
    return envelopes.error_reply(provider, reply.status, message=reply.message, error_type=reply.type,
                                 code=code, param=reply.param, headers={"x-replaykit-error": header})


def _check_plan(route: Route, kinds: Kinds, plan: Plan,
                profile: contracts.Profile) -> list[contracts.Violation]:
    body = b"".join(plan.chunks)
    if plan.status >= 400:
        what = f"HTTP {plan.status} error"
        return contracts.check_body(kinds.error, body_json(body), what, profile=profile)
    if plan.stream:
        return contracts.check_events(route, sse.parse(body), profile=profile)
    return contracts.check_body(kinds.response, body_json(body), "response", profile=profile)


def response_violations(received: Received, slot: Slot | None, plan: Plan,
                        profile: contracts.Profile = contracts.STRICT) -> list[dict[str, Any]]:
    """Violations of the response ``plan`` serves (under ``profile``); an unaltered replay is checked once
    per interaction (a new list of its rows, shared as :func:`request_violations` shares them).

    A body over :data:`CHECK_LIMIT` bytes is not checked (it would be held parsed in memory, several times
    its size): the plan gets a note saying so, and ``replaykit verify`` checks the cassette offline.
    """
    route = received.route
    if route.contracts is None:
        return []
    if slot is None or plan.altered or plan.status >= 400:
        rows = _checked(route, plan, profile)
    else:
        key = f"violations:{route.contracts.response}:{profile.name}"
        if key not in slot.memo:
            slot.memo[key] = _shared(key, slot, lambda: _checked(route, plan, profile))
        rows = slot.memo[key]
    if rows is None:
        plan.notes.append(f"response contracts not checked: the body has {sum(map(len, plan.chunks))} "
                          f"bytes, over the {CHECK_LIMIT} byte limit; run `replaykit verify` on the cassette")
        return []
    return list(rows)


def _shared(key: str, slot: Slot, check: Callable[[], list[Row] | None]) -> list[Row] | None:
    """``check()`` for ``slot``'s recorded response, or the rows of an identical response checked already
    (a cassette that repeats one response 1,000 times is checked once), by ``key`` and the body's SHA-256."""
    body = slot.interaction.response.body
    if len(body) > CHECK_LIMIT:
        return check()  # not checked: the plan gets a note
    shared = (key, hashlib.sha256(body).hexdigest())
    rows = _RESPONSES.get(shared)
    if rows is None:
        found = check()
        if found is None:
            return None
        rows = tuple(found)
        _RESPONSES.put(shared, rows)
    return list(rows)


def _checked(route: Route, plan: Plan, profile: contracts.Profile) -> list[Row] | None:
    """The violations of ``plan`` as journal rows; None when its body is over :data:`CHECK_LIMIT` (or no
    contract covers the route)."""
    if sum(map(len, plan.chunks)) > CHECK_LIMIT or route.contracts is None:
        return None
    return _rows(_check_plan(route, route.contracts, plan, profile))
