"""One provider request on the wire: where it goes, with which headers, and its stream read into a message.

The body is what :func:`replaykit.replay.project` builds, streamed; endpoints and keys come from the target
protocol's environment (:func:`replaykit.routes.base_urls`), per provider and API. The stream is cut into
events by :class:`replaykit.sse.Parser` and added up by the transcript converters; how each API's stream
ends, and the failures (httpx errors, :class:`StreamCut`, :class:`ProviderEvent`, classified by
:mod:`replaykit.provenance`), are in docs/architecture/reference.md. Called by the harness and research.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from replaykit import sse
from replaykit.jsondoc import JSON
from replaykit.provenance import ErrorInfo, event_error
from replaykit.replay import ProviderModel
from replaykit.routes import API_ORIGINS
from replaykit.transcript import (
    AssistantMessage,
    from_anthropic_stream,
    from_chat_stream,
    from_gemini_stream,
    from_openai_stream,
)

__all__ = ["ProviderEvent", "Stalled", "StreamCut", "endpoint", "key_header", "now_ms", "send"]

_VERTEX_PATH = ("/v1beta1/projects/{GOOGLE_CLOUD_PROJECT}/locations/{GOOGLE_CLOUD_LOCATION}/publishers/google"
                "/models/{model}:streamGenerateContent?alt=sse")
# (provider, api): (base URL variable, its default, path under it, key variables (the first set), key header)
_ENDPOINTS: dict[tuple[str, str], tuple[str, str, str, tuple[str, ...], str]] = {
    ("anthropic", "anthropic-messages"): ("ANTHROPIC_BASE_URL", API_ORIGINS["anthropic"], "/v1/messages",
                                          ("ANTHROPIC_API_KEY",), "x-api-key"),
    ("openai", "openai-responses"): ("OPENAI_BASE_URL", "https://api.openai.com/v1", "/responses",
                                     ("OPENAI_API_KEY",), "authorization"),
    ("openai", "openai-chat"): ("OPENAI_BASE_URL", "https://api.openai.com/v1", "/chat/completions",
                                ("OPENAI_API_KEY",), "authorization"),
    ("azure", "openai-responses"): ("REPLAYKIT_AZURE_BASE_URL", "", "/responses", ("AZURE_OPENAI_API_KEY",),
                                    "api-key"),
    ("azure", "openai-chat"): ("REPLAYKIT_AZURE_BASE_URL", "", "/chat/completions", ("AZURE_OPENAI_API_KEY",),
                               "api-key"),
    ("gemini", "gemini-generate"): ("GOOGLE_GEMINI_BASE_URL", API_ORIGINS["gemini"],
                                    "/v1beta/models/{model}:streamGenerateContent?alt=sse",
                                    ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "x-goog-api-key"),
    # Vertex AI takes an OAuth access token (`gcloud auth print-access-token`), not an API key
    ("vertex", "gemini-generate"): ("GOOGLE_VERTEX_BASE_URL", API_ORIGINS["vertex"], _VERTEX_PATH,
                                    ("GOOGLE_CLOUD_ACCESS_TOKEN",), "authorization"),
}
_TERMINAL = {"message_stop", "response.completed", "response.incomplete", "response.failed",
             "response.cancelled"}
_DONE = "[DONE]"  # the end of a Chat Completions stream: not JSON


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


def key_header(target: ProviderModel, key: str) -> tuple[str, str]:
    """The header that carries ``key`` to ``target``'s provider and API, and its value (a bearer token in
    ``authorization``)."""
    name = _ENDPOINTS[target.provider, target.api][4]
    return name, f"Bearer {key}" if name == "authorization" else key


def endpoint(target: ProviderModel) -> tuple[str, dict[str, str]]:
    """The URL and headers of a streamed model request to ``target`` (its provider, API and model)."""
    variable, default, path, key_variables, _ = _ENDPOINTS[target.provider, target.api]
    base = (os.environ.get(variable) or default).rstrip("/")
    key = next((os.environ[name] for name in key_variables if os.environ.get(name)), "")
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    headers.update([key_header(target, key)])
    if target.provider == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
    return base + _path(path, target.model), headers


def _path(template: str, model: str) -> str:
    """The path with the model and the Google Cloud project and location filled in (each quoted)."""
    values = {name: quote(os.environ.get(name, ""), safe="") for name in
              ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION")}
    return template.format(model=quote(model, safe=""), **values) if "{" in template else template


def wire_body(body: Mapping[str, object], target: ProviderModel) -> JSON:
    """The projected body as sent: streamed (Gemini by its URL), stateless on the Responses API, with usage
    in the last chunk of a Chat Completions stream."""
    return {**body, **_STREAMED.get(target.api, {})}


_STREAMED: dict[str, JSON] = {"anthropic-messages": {"stream": True},
                              "openai-responses": {"store": False, "stream": True},
                              "openai-chat": {"stream": True, "stream_options": {"include_usage": True}}}


class Stalled(Exception):
    """A durable stream that sent nothing for the stall timeout: an interruption, not a retry."""


async def send(client: httpx.AsyncClient, body: Mapping[str, object], target: ProviderModel,
               sink: Callable[[JSON], None] | None = None, stall: float | None = None) -> AssistantMessage:
    """POST ``body`` to ``target``'s provider and read its stream into an assistant message; each event goes
    to ``sink`` as it arrives (a durable turn's stream record); with ``stall``, no bytes for that many seconds
    raises :class:`Stalled`."""
    url, headers = endpoint(target)
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
    """The stream's events as JSON; a Chat Completions ``[DONE]`` is kept as ``{"type": "[DONE]"}``."""
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
    if event.data == _DONE:
        return {"type": _DONE}
    try:
        parsed: JSON = event.json()
    except ValueError as exc:
        raise StreamCut(f"event {number} of the stream is not JSON ({exc})") from exc
    return parsed


def _message(events: list[JSON], target: ProviderModel) -> AssistantMessage:
    for event in events:
        if _error(event, target.api):
            raise ProviderEvent(event_error(event))
    if target.api == "openai-chat":
        return _chat(events, target)
    if target.api == "gemini-generate":
        return _gemini(events, target)
    if not events or events[-1].get("type") not in _TERMINAL:
        raise StreamCut("the stream ended before its terminal event")
    if target.api == "anthropic-messages":
        return from_anthropic_stream(events, timestamp=now_ms())
    return from_openai_stream(events, timestamp=now_ms(), provider=target.provider)


def _error(event: JSON, api: str) -> bool:
    """An error inside the stream: Anthropic's and Responses' ``error`` / ``response.failed`` events; on
    Chat Completions and Gemini a chunk that is an error body (``{"error": {...}}``)."""
    if api in ("openai-chat", "gemini-generate"):
        return isinstance(event.get("error"), dict)
    return event.get("type") in ("error", "response.failed")


def _chat(events: list[JSON], target: ProviderModel) -> AssistantMessage:
    """A Chat Completions stream ends with ``data: [DONE]``; without it, it was cut."""
    if not events or events[-1].get("type") != _DONE:
        raise StreamCut("the stream ended before data: [DONE]")
    return from_chat_stream(events[:-1], timestamp=now_ms(), provider=target.provider)


def _gemini(events: list[JSON], target: ProviderModel) -> AssistantMessage:
    """A Gemini stream has no terminal event: the chunk whose candidate has a ``finishReason`` ends it."""
    if not any(_finished(chunk) for chunk in events):
        raise StreamCut("the stream ended before a chunk with a finishReason")
    return from_gemini_stream(events, timestamp=now_ms(), provider=target.provider)


def _finished(chunk: JSON) -> bool:
    candidates = chunk.get("candidates")
    return isinstance(candidates, list) and any(
        isinstance(candidate, dict) and candidate.get("finishReason") for candidate in candidates)
