"""OpenAI Responses (Azure OpenAI serves the same API): a response, or a stream of events, into an assistant
message.

The mappings (usage, status, items) are those of :mod:`replaykit.transcript`. ``_OpenAIStream`` adds a stream
up to its final response as the SDK's ``get_final_response`` does.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

from replaykit import jsondoc
from replaykit.jsondoc import JSON
from replaykit.transcript.convert import (
    _accumulate,
    _assistant,
    _failed,
    _int,
    _mapping,
    _opaque,
    _typed,
    _usage,
)
from replaykit.transcript.model import (
    OPENAI_API,
    AssistantBlock,
    AssistantMessage,
    ConversionError,
    HostedSearchCall,
    HostedSearchError,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    Usage,
)

__all__ = ["from_openai", "from_openai_stream", "openai_final_response"]

_OPENAI_STATUS: dict[str, StopReason] = {
    "completed": "stop", "incomplete": "length", "failed": "error", "cancelled": "aborted",
}
_TERMINAL_EVENTS = {"response.completed", "response.incomplete", "response.failed", "response.cancelled"}


def from_openai(response: Mapping[str, object], *, timestamp: int,
                provider: str = "openai") -> AssistantMessage:
    """Convert an OpenAI Responses body (``object: response``) into an assistant message.

    ``provider`` is ``openai`` or ``azure`` (Azure OpenAI serves the same API).
    """
    body = _mapping(response, "an OpenAI response")
    status = body.get("status")
    if not isinstance(status, str) or status not in _OPENAI_STATUS:
        raise ConversionError(f"response status {status!r} is not final; "
                              f"convert a response whose status is one of {sorted(_OPENAI_STATUS)}")
    message = _openai_message_of(body, _OPENAI_STATUS[status], timestamp, provider)
    error = body.get("error")
    if message["stopReason"] == "error" and isinstance(error, dict):
        message["errorMessage"] = f"{error.get('code') or 'error'}: {error.get('message', '')}"
    return message


def _openai_message_of(body: JSON, stop: StopReason, timestamp: int, provider: str) -> AssistantMessage:
    output = body.get("output") or []
    if not isinstance(output, list):
        raise ConversionError("an OpenAI response's output must be a list of items")
    content = [block for index, item in enumerate(output) for block in _openai_item(item, index, provider)]
    if stop == "stop" and any(block["type"] == "toolCall" for block in content):
        stop = "toolUse"
    return _assistant(content, provider, OPENAI_API, body, _openai_usage(body.get("usage")), stop, timestamp)


def _openai_usage(raw: object) -> Usage:
    usage = raw if isinstance(raw, dict) else {}
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached, written = _int(details.get("cached_tokens")), _int(details.get("cache_write_tokens"))
    fresh = max(_int(usage.get("input_tokens")) - cached - written, 0)
    return _usage(fresh, _int(usage.get("output_tokens")), cached, written)


def _openai_item(raw: object, index: int, provider: str) -> list[AssistantBlock]:
    item = _typed(raw, f"output[{index}]")
    kind = item["type"]
    if kind == "message":
        return list(_openai_message(item, index))
    if kind == "reasoning":
        return [_openai_reasoning(item)]
    if kind == "function_call":
        return [_openai_function_call(item)]
    if kind in ("web_search_call", "x_search_call"):  # x_search_call: xAI's X search, run by the provider
        return [_openai_search(item, provider)]
    return [_opaque(item, provider, OPENAI_API)]  # code interpreter, MCP, a new tool's item...: kept whole


def _openai_message(item: JSON, index: int) -> list[TextBlock]:
    blocks: list[TextBlock] = []
    for number, raw in enumerate(_parts(item, f"output[{index}]")):
        part = _mapping(raw, f"output[{index}].content[{number}]")
        text: TextBlock = {"type": "text", "text": str(part.get("text") or part.get("refusal") or "")}
        if isinstance(part.get("annotations"), list) and part["annotations"]:
            text["citations"] = copy.deepcopy(part["annotations"])
        if isinstance(item.get("id"), str):
            text["signature"] = item["id"]
        blocks.append(text)
    return blocks


def _parts(item: JSON, what: str) -> list[object]:
    """A message item's ``content`` parts: a list (absent or null is none), else a ConversionError."""
    parts = item.get("content") or []
    if not isinstance(parts, list):
        raise ConversionError(f"{what}.content must be a list of content parts, not {type(parts).__name__}")
    return parts


def _openai_reasoning(item: JSON) -> ThinkingBlock:
    summary = [str(part.get("text", "")) for part in item.get("summary") or [] if isinstance(part, dict)]
    return {"type": "thinking", "thinking": "\n\n".join(summary), "raw": copy.deepcopy(item)}


def _openai_function_call(item: JSON) -> ToolCallBlock:
    try:
        arguments = jsondoc.loads(item.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    return {"type": "toolCall", "id": str(item.get("call_id")), "name": str(item.get("name")),
            "arguments": arguments if isinstance(arguments, dict) else {}, "raw": copy.deepcopy(item)}


def _openai_search(item: JSON, provider: str) -> HostedSearchCall | HostedSearchError:
    ident = str(item.get("id"))
    if item.get("status") == "failed":
        return {"type": "hostedSearch", "phase": "error", "provider": provider, "api": OPENAI_API,
                "toolUseId": ident, "errorCode": "failed", "raw": copy.deepcopy(item)}
    call: HostedSearchCall = {"type": "hostedSearch", "phase": "call", "provider": provider,
                              "api": OPENAI_API, "id": ident, "raw": copy.deepcopy(item)}
    query = _openai_query(item.get("action")) or _argument_query(item.get("arguments"))
    if query is not None:
        call["query"] = query
    return call


def _argument_query(arguments: object) -> str | None:
    """The ``query`` of an xAI search call's JSON ``arguments`` (None when there is none)."""
    try:
        parsed = jsondoc.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        return None
    query = parsed.get("query") if isinstance(parsed, dict) else None
    return query if isinstance(query, str) else None


def _openai_query(action: object) -> str | None:
    if not isinstance(action, dict):
        return None
    if isinstance(action.get("query"), str):
        return str(action["query"])
    queries = action.get("queries")
    if isinstance(queries, list) and queries and isinstance(queries[0], str):
        return queries[0]
    return None


class _OpenAIStream:
    """Accumulates OpenAI Responses stream events: items by ``output_index``, the terminal response."""

    def __init__(self) -> None:
        self.response: JSON | None = None
        self.items: dict[int, JSON] = {}
        self.terminal = False
        self.error: str | None = None

    def feed(self, event: JSON) -> None:
        kind = str(event.get("type"))
        if kind in {"response.created", "response.in_progress"} or kind in _TERMINAL_EVENTS:
            self.response = copy.deepcopy(_mapping(event.get("response"), f"{kind}.response"))
            self.terminal = self.terminal or kind in _TERMINAL_EVENTS
        elif kind in {"response.output_item.added", "response.output_item.done"}:
            self.items[_index(event)] = copy.deepcopy(_mapping(event.get("item"), f"{kind}.item"))
        elif kind == "response.output_text.delta":
            part = self._part(event)
            part["text"] = part.get("text", "") + str(event.get("delta", ""))
        elif kind == "response.content_part.added":
            self._item(event).setdefault("content", []).append(copy.deepcopy(event.get("part")))
        elif kind == "error":
            self.error = f"{event.get('code') or 'error'}: {event.get('message', '')}"

    def _item(self, event: JSON) -> JSON:
        item = self.items.get(_index(event))
        if item is None:
            raise ConversionError(f"{event.get('type')}: no output_item.added at index {_index(event)}")
        return item

    def _part(self, event: JSON) -> JSON:
        parts = _parts(self._item(event), f"output[{_index(event)}]")
        index = event.get("content_index")
        if not isinstance(index, int) or not 0 <= index < len(parts):
            raise ConversionError(f"output_text.delta for unknown content part {index!r}")
        return _mapping(parts[index], f"output[{_index(event)}] content part {index}")

    def final(self) -> JSON:
        if self.response is None:
            raise ConversionError("the stream has no response.created or terminal response event")
        body = dict(self.response)
        if not (self.terminal and isinstance(body.get("output"), list) and body["output"]):
            body["output"] = [self.items[index] for index in sorted(self.items)]
        return body


def _index(event: JSON) -> int:
    index = event.get("output_index")
    if not isinstance(index, int):
        raise ConversionError(f"{event.get('type')} has no integer output_index")
    return index


def openai_final_response(events: Iterable[Mapping[str, object]]) -> JSON:
    """The final response an OpenAI Responses stream adds up to.

    The terminal event's response when it carries the output (as the SDK's ``get_final_response``: reasoning
    items are re-encrypted there, so their ``encrypted_content`` differs from ``output_item.done``); otherwise
    the last snapshot with the output assembled from the ``output_item`` and text delta events.
    """
    return _accumulate(_OpenAIStream(), events).final()


def from_openai_stream(events: Iterable[Mapping[str, object]], *, timestamp: int,
                       provider: str = "openai") -> AssistantMessage:
    """Convert an OpenAI Responses stream (parsed event data, in order) into an assistant message.

    Same result as :func:`from_openai` on the final response; a stream broken by an ``error`` event or ending
    without a terminal ``response.*`` event gives stopReason ``error`` with ``errorMessage``.
    """
    stream = _accumulate(_OpenAIStream(), events)
    body = stream.final()
    if stream.error is not None or not stream.terminal:
        message = _openai_message_of(body, "error", timestamp, provider)
        return _failed(message, stream.error or "the stream ended before a terminal response event")
    return from_openai(body, timestamp=timestamp, provider=provider)
