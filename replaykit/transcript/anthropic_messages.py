"""Anthropic Messages: a response body, or a stream of events, into an assistant message.

The mappings (usage, stop reasons, blocks) are those of :mod:`replaykit.transcript`: ``web_search`` and
``web_fetch`` calls and results are hostedSearch blocks. ``_AnthropicStream`` adds a stream up to its final
body as the SDK's accumulator does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping

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
    ANTHROPIC_API,
    AssistantBlock,
    AssistantMessage,
    ConversionError,
    HostedSearchCall,
    HostedSearchError,
    HostedSearchResult,
    ProviderBlock,
    SearchResult,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    Usage,
)

__all__ = ["anthropic_final_body", "from_anthropic", "from_anthropic_stream"]

_ANTHROPIC_STOPS: dict[str, StopReason] = {
    "end_turn": "stop", "stop_sequence": "stop", "refusal": "stop",
    "max_tokens": "length", "model_context_window_exceeded": "length",
    "tool_use": "toolUse", "pause_turn": "pauseTurn",
}
_SEARCH_TOOLS = {"web_search", "web_fetch"}


def from_anthropic(message: Mapping[str, object], *, timestamp: int) -> AssistantMessage:
    """Convert an Anthropic Messages response body (``type: message``) into an assistant message."""
    body = _mapping(message, "an Anthropic message")
    return _anthropic_message(body, _anthropic_stop(body.get("stop_reason")), timestamp)


def _anthropic_message(body: JSON, stop: StopReason, timestamp: int) -> AssistantMessage:
    blocks = body.get("content") or []
    if not isinstance(blocks, list):
        raise ConversionError("an Anthropic message's content must be a list of blocks")
    content = [_anthropic_block(block, index) for index, block in enumerate(blocks)]
    usage = _anthropic_usage(body.get("usage"))
    return _assistant(content, "anthropic", ANTHROPIC_API, body, usage, stop, timestamp)


def _anthropic_stop(reason: object) -> StopReason:
    if not isinstance(reason, str) or reason not in _ANTHROPIC_STOPS:
        raise ConversionError(f"unknown Anthropic stop_reason {reason!r}; known: {sorted(_ANTHROPIC_STOPS)}")
    return _ANTHROPIC_STOPS[reason]


def _anthropic_usage(raw: object) -> Usage:
    usage = raw if isinstance(raw, dict) else {}
    return _usage(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")),
                  _int(usage.get("cache_read_input_tokens")), _int(usage.get("cache_creation_input_tokens")))


def _anthropic_block(raw: object, index: int) -> AssistantBlock:
    block = _typed(raw, f"content[{index}]")
    convert = _ANTHROPIC_BLOCKS.get(block["type"])
    return convert(block) if convert is not None else _opaque(block, "anthropic", ANTHROPIC_API)


def _anthropic_text(block: JSON) -> TextBlock:
    text: TextBlock = {"type": "text", "text": str(block.get("text") or "")}
    citations = block.get("citations")
    if isinstance(citations, list) and citations:
        text["citations"] = copy.deepcopy(citations)
    return text


def _anthropic_thinking(block: JSON) -> ThinkingBlock:
    thinking: ThinkingBlock = {"type": "thinking", "thinking": str(block.get("thinking") or "")}
    if _str(block.get("signature")):
        thinking["signature"] = block["signature"]
    return thinking


def _anthropic_redacted(block: JSON) -> ThinkingBlock:
    return {"type": "thinking", "thinking": "", "redacted": True, "signature": str(block.get("data") or "")}


def _anthropic_tool_use(block: JSON) -> ToolCallBlock:
    arguments = block.get("input")
    return {"type": "toolCall", "id": str(block.get("id")), "name": str(block.get("name")),
            "arguments": copy.deepcopy(arguments) if isinstance(arguments, dict) else {},
            "raw": copy.deepcopy(block)}


def _anthropic_server_call(block: JSON) -> HostedSearchCall | ProviderBlock:
    if block.get("name") not in _SEARCH_TOOLS:  # code execution, tool search...: kept whole
        return _opaque(block, "anthropic", ANTHROPIC_API)
    call: HostedSearchCall = {"type": "hostedSearch", "phase": "call", "provider": "anthropic",
                              "api": ANTHROPIC_API, "id": str(block.get("id")), "raw": copy.deepcopy(block)}
    arguments = block.get("input")
    if isinstance(arguments, dict) and isinstance(arguments.get("query"), str):
        call["query"] = arguments["query"]
    return call


def _anthropic_search_result(block: JSON) -> HostedSearchResult | HostedSearchError:
    content = block.get("content")
    if isinstance(content, dict):
        return _anthropic_search_error(block, content)
    items = content if isinstance(content, list) else []
    results = [_search_result(item.get("url"), item.get("title"), item.get("page_age"))
               for item in items if isinstance(item, dict)]
    return {"type": "hostedSearch", "phase": "result", "provider": "anthropic", "api": ANTHROPIC_API,
            "toolUseId": str(block.get("tool_use_id")), "results": results, "raw": copy.deepcopy(block)}


def _anthropic_fetch_result(block: JSON) -> HostedSearchResult | HostedSearchError:
    content = block.get("content")
    content = content if isinstance(content, dict) else {}
    if "error_code" in content:
        return _anthropic_search_error(block, content)
    document = content.get("content")
    title = document.get("title") if isinstance(document, dict) else None
    return {"type": "hostedSearch", "phase": "result", "provider": "anthropic", "api": ANTHROPIC_API,
            "toolUseId": str(block.get("tool_use_id")),
            "results": [_search_result(content.get("url"), title)], "raw": copy.deepcopy(block)}


def _anthropic_search_error(block: JSON, content: JSON) -> HostedSearchError:
    return {"type": "hostedSearch", "phase": "error", "provider": "anthropic", "api": ANTHROPIC_API,
            "toolUseId": str(block.get("tool_use_id")), "errorCode": str(content.get("error_code")),
            "raw": copy.deepcopy(block)}


def _search_result(url: object, title: object, page_age: object = None) -> SearchResult:
    return {"url": str(url or ""), "title": _str(title), "pageAge": _str(page_age)}


_ANTHROPIC_BLOCKS: dict[str, Callable[[JSON], AssistantBlock]] = {
    "text": _anthropic_text, "thinking": _anthropic_thinking, "redacted_thinking": _anthropic_redacted,
    "tool_use": _anthropic_tool_use, "server_tool_use": _anthropic_server_call,
    "web_search_tool_result": _anthropic_search_result, "web_fetch_tool_result": _anthropic_fetch_result,
}


class _AnthropicStream:
    """Accumulates Anthropic stream events into the final message body (as the SDK's accumulator does)."""

    def __init__(self) -> None:
        self.body: JSON | None = None
        self.json_bufs: dict[int, str] = {}
        self.stopped = False
        self.error: str | None = None

    def feed(self, event: JSON) -> None:
        handler = getattr(self, "_on_" + str(event.get("type")), None)
        if handler is not None:
            handler(event)

    def _message(self) -> JSON:
        if self.body is None:
            raise ConversionError("a content event arrived before message_start")
        return self.body

    def _on_message_start(self, event: JSON) -> None:
        self.body = copy.deepcopy(_mapping(event.get("message"), "message_start.message"))
        self.body["content"] = list(self.body.get("content") or [])

    def _on_content_block_start(self, event: JSON) -> None:
        block = copy.deepcopy(_mapping(event.get("content_block"), "content_block_start.content_block"))
        self._message()["content"].append(block)

    def _on_content_block_delta(self, event: JSON) -> None:
        index = event.get("index")
        content = self._message()["content"]
        if not isinstance(index, int) or not 0 <= index < len(content):
            raise ConversionError(f"content_block_delta for unknown block index {index!r}")
        _apply_delta(content[index], _mapping(event.get("delta"), "content_block_delta.delta"),
                     self.json_bufs, index)

    def _on_content_block_stop(self, event: JSON) -> None:
        index = event.get("index")
        buffer = self.json_bufs.pop(index, "") if isinstance(index, int) else ""
        if buffer:
            try:
                self._message()["content"][index]["input"] = jsondoc.loads(buffer)
            except ValueError as exc:
                raise ConversionError(f"block {index}: the streamed input is not JSON: {exc}") from exc

    def _on_message_delta(self, event: JSON) -> None:
        body = self._message()
        delta = _obj(event.get("delta"))
        for key in ("stop_reason", "stop_sequence"):
            if key in delta:
                body[key] = delta[key]
        usage = body.setdefault("usage", {})
        for key, value in _obj(event.get("usage")).items():
            if value is not None:
                usage[key] = copy.deepcopy(value)

    def _on_message_stop(self, event: JSON) -> None:
        self.stopped = True

    def _on_error(self, event: JSON) -> None:
        error = _obj(event.get("error"))
        self.error = f"{error.get('type', 'error')}: {error.get('message', '')}"

    def final(self) -> JSON:
        if self.body is None:
            raise ConversionError("the stream has no message_start event")
        return self.body


def _apply_delta(block: JSON, delta: JSON, json_bufs: dict[int, str], index: int) -> None:
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = block.get("text", "") + str(delta.get("text", ""))
    elif kind == "input_json_delta":
        json_bufs[index] = json_bufs.get(index, "") + str(delta.get("partial_json", ""))
    elif kind == "citations_delta":
        block["citations"] = [*(block.get("citations") or []), copy.deepcopy(delta.get("citation"))]
    elif kind == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
    elif kind == "signature_delta":
        block["signature"] = delta.get("signature")
    # any other delta type extends a block this accumulator does not model: ignored, as the SDK's does


def anthropic_final_body(events: Iterable[Mapping[str, object]]) -> JSON:
    """The final message body an Anthropic stream adds up to (the parsed ``data`` of each event, in order)."""
    return _accumulate(_AnthropicStream(), events).final()


def from_anthropic_stream(events: Iterable[Mapping[str, object]], *, timestamp: int) -> AssistantMessage:
    """Convert an Anthropic Messages stream (parsed event data, in order) into an assistant message.

    Same result as :func:`from_anthropic` on the final body; a stream broken by an ``error`` event or ending
    before ``message_stop`` gives stopReason ``error`` with ``errorMessage``, keeping the content received.
    """
    stream = _accumulate(_AnthropicStream(), events)
    body = stream.final()
    if stream.error is not None or not stream.stopped:
        message = _anthropic_message(body, "error", timestamp)
        return _failed(message, stream.error or "the stream ended before message_stop")
    return from_anthropic(body, timestamp=timestamp)

def _obj(value: object) -> JSON:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
