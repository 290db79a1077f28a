"""The failing request of a cassette: what ``replaykit repro`` reproduces when given a recording.

:func:`failing_request` picks the last model request (any route of a model API in
:data:`replaykit.routes.ROUTES`) whose response is an error (HTTP status 400 or more, or a stream that ends in
an error event: :func:`replaykit.server.envelopes.streams_an_error`), else the last model request, and says
which and why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from replaykit.cassette import Cassette, Interaction
from replaykit.routes import Api, classify_uri, model_of
from replaykit.server.envelopes import streams_an_error

__all__ = ["Failing", "failing_request"]


@dataclass(frozen=True)
class Failing:
    """The request chosen: its ``index`` among the cassette's interactions, its ``provider``, ``api`` and
    ``model`` (the body's, else the path's: Gemini names it there) and ``why``."""

    index: int
    interaction: Interaction
    provider: str
    api: Api
    model: str | None
    why: str = ""


def _error(item: Interaction) -> str | None:
    """What answered ``item`` with an error, or None."""
    response = item.response
    if response.status >= 400:
        return f"HTTP {response.status}"
    if response.is_stream and response.body and streams_an_error(response.body):
        return "a stream that ends in an error event"
    return None


def _model_request(index: int, item: Interaction) -> Failing | None:
    route = classify_uri(item.request.method, item.request.uri)
    if route.provider is None or route.api is None:
        return None
    model = model_of(item.request.json(), urlsplit(item.request.uri).path)
    return Failing(index, item, route.provider, route.api, model)


def failing_request(tape: Cassette) -> Failing | None:
    """The last model request answered with an error, else the last model request (None: there is none)."""
    models = [found for index, item in enumerate(tape.interactions)
              if (found := _model_request(index, item)) is not None]
    if not models:
        return None
    failed = [(found, error) for found in models if (error := _error(found.interaction)) is not None]
    if failed:
        found, error = failed[-1]
        return replace(found, why=f"the last whose response is an error: {error}")
    return replace(models[-1], why="the last request: no response is an error")
