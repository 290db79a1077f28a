"""What the per-API converters share: reading wire objects, building the assistant message.

A converter never invents a time: ``timestamp`` is the caller's, and must be finite.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Protocol, TypeVar

from replaykit.errors import UsageError
from replaykit.jsondoc import JSON
from replaykit.transcript.model import (
    AssistantBlock,
    AssistantMessage,
    ConversionError,
    ProviderBlock,
    StopReason,
    Usage,
    _finite,
)

__all__: list[str] = []  # package-internal: the converters import these helpers by name


def _usage(input_: int, output: int, cache_read: int, cache_write: int) -> Usage:
    total = input_ + output + cache_read + cache_write
    return {"input": input_, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write,
            "totalTokens": total}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _mapping(value: object, what: str) -> JSON:
    if not isinstance(value, dict):
        raise ConversionError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def _typed(value: object, what: str) -> JSON:
    """A wire block or item: a JSON object with a string ``type`` (else a ConversionError)."""
    block = _mapping(value, what)
    if not isinstance(block.get("type"), str):
        raise ConversionError(f"{what} has no string type; a provider block always names its type")
    return block


def _opaque(block: JSON, provider: str, api: str) -> ProviderBlock:
    """A block the transcript does not model, kept whole for replay to the same provider and API."""
    return {"type": "providerBlock", "provider": provider, "api": api, "blockType": block["type"],
            "raw": copy.deepcopy(block)}


def _assistant(content: list[AssistantBlock], provider: str, api: str, body: JSON, usage: Usage,
               stop: StopReason, timestamp: int) -> AssistantMessage:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float) or not _finite(timestamp):
        raise UsageError(f"timestamp={timestamp!r} must be finite milliseconds since the epoch")
    message: AssistantMessage = {
        "role": "assistant", "content": content, "provider": provider, "api": api,
        "model": str(body.get("model") or ""), "usage": usage, "stopReason": stop, "timestamp": timestamp,
    }
    if isinstance(body.get("id"), str):
        message["responseId"] = body["id"]
    return message


def _failed(message: AssistantMessage, reason: str) -> AssistantMessage:
    message["stopReason"] = "error"
    message["errorMessage"] = reason
    return message


class _Accumulator(Protocol):
    """A stream accumulator: takes the parsed data of each event, in order."""

    def feed(self, event: JSON) -> None: ...


_Stream = TypeVar("_Stream", bound=_Accumulator)


def _accumulate(stream: _Stream, events: Iterable[Mapping[str, object]]) -> _Stream:
    """``stream`` (a stream accumulator of one of the converters) fed every event, in order."""
    for event in events:
        stream.feed(_mapping(event, "a stream event"))
    return stream
