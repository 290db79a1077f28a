"""One provider request on the wire: where it goes, with which headers, and its stream read into a message.

The body is what :func:`replaykit.replay.project` builds, plus ``stream: true``; endpoints and keys come from
the target protocol's environment (:func:`replaykit.routes.base_urls`). The stream is cut into events by
:class:`replaykit.sse.Parser` and added up by the transcript converters. Failures surface as httpx errors,
:class:`StreamCut` or :class:`ProviderEvent`, classified by :mod:`replaykit.provenance`. Called by the harness
and the research step; the failures are listed in docs/architecture/reference.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from replaykit import sse
from replaykit.jsondoc import JSON
from replaykit.provenance import ErrorInfo, event_error
from replaykit.replay import ProviderModel
from replaykit.transcript import AssistantMessage, from_anthropic_stream, from_openai_stream

__all__ = ["ProviderEvent", "Stalled", "StreamCut", "endpoint", "now_ms", "send"]

_ENDPOINTS = {  # provider: (base URL variable, its default, path under it, key variable, key header)
    "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com", "/v1/messages", "ANTHROPIC_API_KEY",
                  "x-api-key"),
    "openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1", "/responses", "OPENAI_API_KEY",
               "authorization"),
    "azure": ("REPLAYKIT_AZURE_BASE_URL", "", "/responses", "AZURE_OPENAI_API_KEY", "api-key"),
}
_TERMINAL = {"message_stop", "response.completed", "response.incomplete", "response.failed",
             "response.cancelled"}


class StreamCut(ConnectionError):
    """The stream ended before its terminal event, or an event of it is not JSON: a transport failure
    (retryable)."""


class ProviderEvent(Exception):
    """The provider sent an error event mid-stream; ``info`` classifies it (a provider error, status 200)."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message)
        self.info = info


def now_ms() -> int:
    """Milliseconds since the epoch: the timestamp of a message appended now."""
    return int(time.time() * 1000)


def endpoint(provider: str) -> tuple[str, dict[str, str]]:
    """The URL and headers of a model request to ``provider`` (anthropic, openai or azure)."""
    variable, default, path, key_variable, key_header = _ENDPOINTS[provider]
    base = (os.environ.get(variable) or default).rstrip("/")
    key = os.environ.get(key_variable, "")
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    headers[key_header] = f"Bearer {key}" if key_header == "authorization" else key
    if provider == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
    return base + path, headers


def wire_body(body: Mapping[str, object], target: ProviderModel) -> JSON:
    """The projected body as sent: streamed, and stateless on the Responses API."""
    extra: JSON = {"stream": True} if target.api == "anthropic-messages" else {"store": False, "stream": True}
    return {**body, **extra}


class Stalled(Exception):
    """A durable stream that sent nothing for the stall timeout: an interruption, not a retry."""


async def send(client: httpx.AsyncClient, body: Mapping[str, object], target: ProviderModel,
               sink: Callable[[JSON], None] | None = None, stall: float | None = None) -> AssistantMessage:
    """POST ``body`` to ``target``'s provider and read its stream into an assistant message; each event goes
    to ``sink`` as it arrives (a durable turn's stream record); with ``stall``, no bytes for that many seconds
    raises :class:`Stalled`."""
    url, headers = endpoint(target.provider)
    extra: Any = {} if stall is None else {"timeout": httpx.Timeout(stall)}
    async with client.stream("POST", url, json=wire_body(body, target), headers=headers, **extra) as response:
        if response.status_code >= 400:
            await response.aread()
            response.raise_for_status()
        try:
            events = await _events(response, sink)
        except httpx.ReadTimeout as exc:
            if stall is None:
                raise
            raise Stalled(f"the stream sent nothing for {stall * 1000:.0f} ms (stallTimeoutMs)") from exc
    return _message(events, target)


async def _events(response: httpx.Response, sink: Callable[[JSON], None] | None = None) -> list[JSON]:
    parser = sse.Parser()
    events: list[JSON] = []
    async for chunk in response.aiter_raw():
        for event in parser.feed(chunk):
            if event.dispatched:
                events.append(_parsed(event, len(events) + 1))
                if sink is not None:
                    sink(events[-1])
    events += [_parsed(event, len(events) + 1) for event in parser.close() if event.dispatched]
    return events


def _parsed(event: sse.Event, number: int) -> JSON:
    """The event's JSON; an event that is not JSON was garbled on its way: :class:`StreamCut`."""
    try:
        parsed: JSON = event.json()
    except ValueError as exc:
        raise StreamCut(f"event {number} of the stream is not JSON ({exc})") from exc
    return parsed


def _message(events: list[JSON], target: ProviderModel) -> AssistantMessage:
    for event in events:
        if event.get("type") in ("error", "response.failed"):
            raise ProviderEvent(event_error(event))
    if not events or events[-1].get("type") not in _TERMINAL:
        raise StreamCut("the stream ended before its terminal event")
    if target.api == "anthropic-messages":
        return from_anthropic_stream(events, timestamp=now_ms())
    return from_openai_stream(events, timestamp=now_ms(), provider=target.provider)
