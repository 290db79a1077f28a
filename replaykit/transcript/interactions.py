"""A recorded exchange into an assistant message: :func:`from_interaction` dispatches on its route."""

from __future__ import annotations

from urllib.parse import urlsplit

from replaykit import routes
from replaykit.cassette import Interaction
from replaykit.jsondoc import JSON
from replaykit.transcript.anthropic_messages import from_anthropic, from_anthropic_stream
from replaykit.transcript.convert import _assistant, _failed, _mapping, _usage
from replaykit.transcript.gemini_generate import from_gemini, from_gemini_stream
from replaykit.transcript.model import ANTHROPIC_API, CHAT_API, GEMINI_API, AssistantMessage, ConversionError
from replaykit.transcript.openai_chat import from_chat, from_chat_stream
from replaykit.transcript.openai_responses import from_openai, from_openai_stream

__all__ = ["from_interaction"]


def _route(interaction: Interaction) -> tuple[str, str]:
    """The provider and API of a recorded model turn, from the route table."""
    request = interaction.request
    route = routes.classify_uri(request.method, request.uri)
    if route.provider is None or route.api is None:
        turns = ", ".join(route.name for route in routes.ROUTES if route.api)
        raise ConversionError(f"{request.method} {request.uri} is no model turn: convert one of {turns}")
    return route.provider, route.api


_DONE = "[DONE]"


def _event_data(interaction: Interaction) -> list[JSON]:
    data: list[JSON] = []
    for number, event in enumerate(interaction.response.events):
        if event.data is None or event.data.strip() == _DONE:  # Chat Completions ends with data: [DONE]
            continue
        try:
            data.append(_mapping(event.json(), f"stream event {number}"))
        except ValueError as exc:
            raise ConversionError(f"stream event {number}: data is not a JSON object: {exc}") from exc
    return data


def from_interaction(interaction: Interaction, *, timestamp: int) -> AssistantMessage:
    """Convert a recorded exchange: dispatch on the route's API (Anthropic Messages, OpenAI Responses, Chat
    Completions, Gemini generateContent) and on the response (a stream or a JSON body; Gemini's
    ``:streamGenerateContent`` without ``alt=sse`` answers a JSON array of chunks).

    An HTTP error response gives an assistant message with stopReason ``error``, empty content and zero usage.
    """
    provider, api = _route(interaction)
    response = interaction.response
    if response.status >= 400:
        return _http_error(interaction, provider, api, timestamp)
    if api == ANTHROPIC_API:
        if response.is_stream:
            return from_anthropic_stream(_event_data(interaction), timestamp=timestamp)
        return from_anthropic(_body(interaction), timestamp=timestamp)
    if api == GEMINI_API:
        return _gemini(interaction, provider, timestamp)
    if api == CHAT_API:
        if response.is_stream:
            return from_chat_stream(_event_data(interaction), timestamp=timestamp, provider=provider)
        return from_chat(_body(interaction), timestamp=timestamp, provider=provider)
    if response.is_stream:
        return from_openai_stream(_event_data(interaction), timestamp=timestamp, provider=provider)
    return from_openai(_body(interaction), timestamp=timestamp, provider=provider)


def _gemini(interaction: Interaction, provider: str, timestamp: int) -> AssistantMessage:
    if interaction.response.is_stream:
        return from_gemini_stream(_event_data(interaction), timestamp=timestamp, provider=provider)
    if ":streamGenerateContent" in interaction.request.uri.partition("?")[0]:
        chunks = interaction.response.json()
        if not isinstance(chunks, list):
            raise ConversionError(f"the response to {interaction.request.uri} is not a JSON array of chunks")
        return from_gemini_stream(chunks, timestamp=timestamp, provider=provider)
    return from_gemini(_body(interaction), timestamp=timestamp, provider=provider)


def _body(interaction: Interaction) -> JSON:
    body = interaction.response.json()
    if not isinstance(body, dict):
        raise ConversionError(f"the response to {interaction.request.uri} is not a JSON object")
    return body


def _http_error(interaction: Interaction, provider: str, api: str, timestamp: int) -> AssistantMessage:
    request = interaction.request.json()
    body = interaction.response.json()
    error = body.get("error") if isinstance(body, dict) else None
    detail = error.get("message", "") if isinstance(error, dict) else interaction.response.body[:200].decode(
        "utf-8", "replace")
    model = routes.model_of(request, urlsplit(interaction.request.uri).path)  # Gemini's is in the path
    message = _assistant([], provider, api, {"model": model}, _usage(0, 0, 0, 0), "error", timestamp)
    return _failed(message, f"HTTP {interaction.response.status}: {detail}")
