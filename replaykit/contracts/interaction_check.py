"""Interactions: which contracts apply to a request is said by the route table (:mod:`replaykit.routes`).

:func:`check_interaction` checks one recorded interaction: the request, and the response body or every stream
event (with its ``event`` index) plus the stream's sequence rules; error statuses are checked against the
provider's error envelope (:func:`check_body` and :func:`~replaykit.contracts.streams.check_events` are its
parts); ``replaykit verify`` builds its contract check on it (:func:`replaykit.verify.check_contracts`). A
cassette that is off-contract on purpose lists its violations under ``replaykit: {x-expected-violations:
[...]}`` (:func:`expected_violations`, :func:`expected_keys`).
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlsplit

from replaykit import jsondoc
from replaykit.cassette import Cassette, Interaction, Response
from replaykit.contracts.profiles import STRICT, Profile
from replaykit.contracts.registry import Contracts, default, validate
from replaykit.contracts.streams import check_events
from replaykit.contracts.violations import Violation
from replaykit.redact.shapes import mask
from replaykit.routes import Kinds, Route, known, streams_by_path

__all__ = [
    "EXPECTED_VIOLATIONS",
    "check_body",
    "check_interaction",
    "expected_keys",
    "expected_violations",
    "place",
]

EXPECTED_VIOLATIONS = "x-expected-violations"  # cassette metadata: deliberate contract violations


def check_interaction(interaction: Interaction, contracts: Contracts | None = None,
                      profile: Profile = STRICT) -> list[Violation]:
    """The request, then the response body or every stream event, against the route's contracts."""
    chosen = contracts or default()
    request = interaction.request
    route = known(request.method, request.uri)
    if route is None or route.contracts is None:
        path = urlsplit(request.uri).path
        covers = f"no contract covers {request.method.upper()} {mask(path)}"
        return [Violation("", "route", covers, part="request")]
    body = request.json()
    kinds = route.contracts
    found = [replace(v, part="request") for v in check_body(kinds.request, body, "request", chosen, profile)]
    streamed = _asks_stream(body) or streams_by_path(urlsplit(request.uri).path)
    response = _check_response(chosen, route, kinds, interaction.response, streamed, profile)
    return found + [replace(v, part="response") for v in response]


def check_body(kind: str, body: object, what: str, contracts: Contracts | None = None,
               profile: Profile = STRICT) -> list[Violation]:
    """A parsed JSON body (None when it was empty or not JSON) against ``kind``; ``what`` names it."""
    if body is None:
        deep = f"nested deeper than {jsondoc.MAX_DEPTH} levels"
        return [Violation("", "json", f"the {what} body is empty, not JSON, or {deep}")]
    return validate(kind, body, profile) if contracts is None else contracts.validate(kind, body, profile)


def _asks_stream(body: object) -> bool:
    return isinstance(body, dict) and body.get("stream") is True


def _check_response(contracts: Contracts, route: Route, kinds: Kinds, response: Response, streamed: bool,
                    profile: Profile) -> list[Violation]:
    if response.status >= 400:
        return check_body(kinds.error, response.json(), f"HTTP {response.status} error", contracts, profile)
    if response.is_stream:
        found = [] if streamed else [Violation("", "stream", "an event stream answers a request without "
                                               "stream: true (or a :streamGenerateContent path)")]
        return found + check_events(route, response.iter_events(), contracts, profile)
    if streamed:
        return [Violation("", "stream", "the request asked for stream: true but the response is not "
                          "text/event-stream")]
    return check_body(kinds.response, response.json(), "response", contracts, profile)


def place(index: int, violation: Violation) -> str:
    """Where ``violation`` of interaction ``index`` is: ``interactions[i]`` or
    ``interactions[i]:events[j]``."""
    at = f"interactions[{index}]"
    return at if violation.event is None else f"{at}:events[{violation.event}]"


def expected_keys(index: int, violation: Violation) -> set[str]:
    """The ways an ``x-expected-violations`` entry may name ``violation`` of interaction ``index``.

    ``"<part> <pointer>"`` (any interaction) and ``"interactions[i] <part> <pointer>"`` (or
    ``"interactions[i]:events[j] <part> <pointer>"`` for a stream event); the pointer of the root is ``/``.
    """
    short = f"{violation.part} {violation.pointer or '/'}"
    return {short, f"{place(index, violation)} {short}"}


def expected_violations(cassette: Cassette | None) -> frozenset[str]:
    """The ``x-expected-violations`` a cassette lists (deliberate contract violations of a fixture; none
    for no cassette): what ``replaykit verify`` reports as expected and the pytest plugin leaves out of a
    test's report, each matched by :func:`expected_keys`."""
    listed = cassette.meta.extra.get(EXPECTED_VIOLATIONS) if cassette is not None else None
    return frozenset(map(str, listed)) if isinstance(listed, list) else frozenset()
