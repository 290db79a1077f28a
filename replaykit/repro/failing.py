"""The failing request of a cassette: what ``replaykit repro`` reproduces when given a recording.

:func:`failing_request` picks the last model request whose response is an error (HTTP status 400 or more, or
a stream that ends in an error event: :func:`replaykit.server.envelopes.streams_an_error`), else the last
model request, and says which and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from replaykit.cassette import Cassette, Interaction
from replaykit.routes import classify_uri
from replaykit.server.envelopes import streams_an_error

__all__ = ["MODEL_ROUTES", "Failing", "failing_request"]

#: The routes of a model request, and the provider each is converted for.
MODEL_ROUTES = {"anthropic.messages": "anthropic", "openai.responses": "openai", "azure.responses": "azure"}


@dataclass(frozen=True)
class Failing:
    """The request chosen: its ``index`` among the cassette's interactions, its ``provider`` and ``why``."""

    index: int
    interaction: Interaction
    provider: str
    why: str


def _error(item: Interaction) -> str | None:
    """What answered ``item`` with an error, or None."""
    response = item.response
    if response.status >= 400:
        return f"HTTP {response.status}"
    if response.is_stream and response.body and streams_an_error(response.body):
        return "a stream that ends in an error event"
    return None


def failing_request(tape: Cassette) -> Failing | None:
    """The last model request answered with an error, else the last model request (None: there is none)."""
    models = [(index, item, MODEL_ROUTES[route]) for index, item in enumerate(tape.interactions)
              if (route := classify_uri(item.request.method, item.request.uri).name) in MODEL_ROUTES]
    if not models:
        return None
    failed = [(index, item, provider, error) for index, item, provider in models
              if (error := _error(item)) is not None]
    if failed:
        index, item, provider, error = failed[-1]
        return Failing(index, item, provider, f"the last whose response is an error: {error}")
    index, item, provider = models[-1]
    return Failing(index, item, provider, "the last request: no response is an error")
