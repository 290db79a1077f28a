"""Contract verdicts for the journal: the violations of each request received and each response served.

Built on :mod:`replaykit.contracts` (``classify`` picks the route's contracts). The response checked is
the one *served*: a recorded response as replayed (checked once per interaction, then cached), an error
envelope, or a stream or body as a fault changed it (a corrupted event is reported as such).
"""

from __future__ import annotations

import json
from typing import Any

from replaykit import contracts, sse
from replaykit.server.matching import Received, Slot
from replaykit.server.plan import Plan

__all__ = ["CHECK_LIMIT", "request_violations", "response_violations"]

CHECK_LIMIT = 16 << 20


def _rows(found: list[contracts.Violation]) -> list[dict[str, Any]]:
    return [{"pointer": v.pointer, "keyword": v.keyword, "message": v.message, "event": v.event}
            for v in found]


def _check_json(kind: str, body: Any, what: str) -> list[contracts.Violation]:
    if body is None:
        return [contracts.Violation("", "json", f"the {what} body is empty or not JSON")]
    return contracts.validate(kind, body)


def request_violations(received: Received) -> list[dict[str, Any]]:
    """Violations of the request body against its route's request contract (``[]`` off the known routes)."""
    route = contracts.classify(received.method, received.path)
    if route is None:
        return []
    return _rows(_check_json(route.request, received.json, "request"))


def _body(plan: Plan) -> Any:
    try:
        return json.loads(b"".join(bytes(chunk) for chunk in plan.chunks))
    except ValueError:
        return None


def _check_plan(route: contracts.Route, plan: Plan) -> list[contracts.Violation]:
    if plan.status >= 400:
        return _check_json(route.error, _body(plan), f"HTTP {plan.status} error")
    if plan.stream:
        events = sse.parse(b"".join(bytes(chunk) for chunk in plan.chunks))
        return contracts.check_events(route, events)
    return _check_json(route.response, _body(plan), "response")


def response_violations(received: Received, slot: Slot | None, plan: Plan) -> list[dict[str, Any]]:
    """Violations of the response ``plan`` serves; an unaltered replay is checked once per interaction.

    A body over :data:`CHECK_LIMIT` bytes is not checked (it would be held parsed in memory, several times
    its size): the plan gets a note saying so, and ``replaykit verify`` checks the cassette offline.
    """
    route = contracts.classify(received.method, received.path)
    if route is None:
        return []
    size = sum(len(chunk) for chunk in plan.chunks)
    if size > CHECK_LIMIT:
        plan.notes.append(f"response contracts not checked: the body has {size} bytes, over the "
                          f"{CHECK_LIMIT} byte limit; run `replaykit verify` on the cassette")
        return []
    if slot is None or plan.altered or plan.status >= 400:
        return _rows(_check_plan(route, plan))
    key = f"violations:{route.response}"
    if key not in slot.memo:
        slot.memo[key] = _rows(_check_plan(route, plan))
    return list(slot.memo[key])
