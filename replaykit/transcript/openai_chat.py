"""OpenAI Chat Completions (Azure's and the OpenAI-compatible providers' too): a completion, or its stream of
chunks, into an assistant message.

``choices[0].message`` is converted: reasoning (``reasoning_content`` / ``reasoning``) becomes thinking, the
content (or refusal) text whose citations are the ``annotations`` verbatim, each tool call a toolCall (a tool
call of another type an opaque ``providerBlock``). Perplexity's top-level ``search_results`` / ``citations``
become one hostedSearch ``result`` before them. A stream adds up as the SDK's ``ChatCompletionStreamState``
does (:func:`chat_final_completion`); the mappings are in docs/architecture/transcript.md.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

from replaykit import jsondoc
from replaykit.jsondoc import JSON
from replaykit.transcript.convert import _assistant, _failed, _int, _mapping, _opaque, _typed, _usage
from replaykit.transcript.model import (
    CHAT_API,
    AssistantBlock,
    AssistantMessage,
    ConversionError,
    HostedSearchResult,
    SearchResult,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    Usage,
)

__all__ = ["chat_final_completion", "from_chat", "from_chat_stream"]

_FINISH: dict[str, StopReason] = {"stop": "stop", "length": "length", "tool_calls": "toolUse",
                                  "function_call": "toolUse"}
_REASONING = ("reasoning_content", "reasoning", "reasoning_details")
_SEARCH_KEYS = ("citations", "search_results")


def from_chat(completion: Mapping[str, object], *, timestamp: int,
              provider: str = "openai") -> AssistantMessage:
    """Convert a ``chat.completion`` body into an assistant message (``provider``: openai, azure or the name
    of an OpenAI-compatible one).

    finish_reason ``stop`` is stop (toolUse when the message calls a tool), ``length`` length, ``tool_calls``
    toolUse; ``content_filter``, any other or none is error, naming it.
    """
    body = _mapping(completion, "a chat completion")
    choice = _choice(body)
    said = _mapping(choice.get("message") or {}, "choices[0].message")
    message = _message_of(body, said, provider, timestamp)
    reason = choice.get("finish_reason")
    if not isinstance(reason, str) or reason not in _FINISH:
        return _failed(message, f"finish_reason {reason}" if isinstance(reason, str) else "no finish_reason")
    calls = any(block["type"] == "toolCall" for block in message["content"])
    message["stopReason"] = "toolUse" if calls and reason == "stop" else _FINISH[reason]
    return message


def _choice(body: JSON) -> JSON:
    choices = body.get("choices") or []
    if not isinstance(choices, list):
        raise ConversionError("a chat completion's choices must be a list")
    return _mapping(choices[0], "choices[0]") if choices else {}


def _message_of(body: JSON, message: JSON, provider: str, timestamp: int) -> AssistantMessage:
    content: list[AssistantBlock] = [*_search(body, provider), *_reasoning(message)]
    text = _text(message)
    if text is not None:
        content.append(text)
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ConversionError("choices[0].message.tool_calls must be a list")
    content += [_tool_call(raw, index, provider) for index, raw in enumerate(calls)]
    return _assistant(content, provider, CHAT_API, body, _chat_usage(body.get("usage")), "stop", timestamp)


def _chat_usage(raw: object) -> Usage:
    usage = raw if isinstance(raw, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return _usage(max(_int(usage.get("prompt_tokens")) - cached, 0), _int(usage.get("completion_tokens")),
                  cached, 0)


def _search(body: JSON, provider: str) -> list[HostedSearchResult]:
    """Perplexity's (and xAI's) top-level ``search_results`` / ``citations`` as one hostedSearch result."""
    raw = {key: copy.deepcopy(body[key]) for key in _SEARCH_KEYS if isinstance(body.get(key), list)}
    if not raw:
        return []
    found = raw.get("search_results") or []
    results = [_found(item) for item in found if isinstance(item, dict)] or [
        {"url": url, "title": None} for url in raw.get("citations") or [] if isinstance(url, str)]
    return [{"type": "hostedSearch", "phase": "result", "provider": provider, "api": CHAT_API,
             "toolUseId": str(body.get("id") or "search"), "results": results, "raw": raw}]


def _found(item: JSON) -> SearchResult:
    title, date = item.get("title"), item.get("date")
    return {"url": str(item.get("url") or ""), "title": title if isinstance(title, str) else None,
            "pageAge": date if isinstance(date, str) else None}


def _reasoning(message: JSON) -> list[ThinkingBlock]:
    raw = {key: copy.deepcopy(message[key]) for key in _REASONING if message.get(key)}
    if not raw:
        return []
    said = message.get("reasoning_content") or message.get("reasoning")
    return [{"type": "thinking", "thinking": said if isinstance(said, str) else "", "raw": raw}]


def _text(message: JSON) -> TextBlock | None:
    said = message.get("content")
    if isinstance(said, list):  # a provider that answers with content parts
        said = "".join(str(part.get("text") or "") for part in said if isinstance(part, dict))
    if not isinstance(said, str) or not said:
        said = message.get("refusal")
    if not isinstance(said, str) or not said:
        return None
    text: TextBlock = {"type": "text", "text": said}
    annotations = message.get("annotations")
    if isinstance(annotations, list) and annotations:
        text["citations"] = copy.deepcopy(annotations)
    return text


def _tool_call(raw: object, index: int, provider: str) -> AssistantBlock:
    call = _typed(raw, f"choices[0].message.tool_calls[{index}]")
    function = call.get("function")
    if call["type"] != "function" or not isinstance(function, dict):
        return _opaque(call, provider, CHAT_API)  # a custom tool call, a new kind: kept whole
    try:
        arguments = jsondoc.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    block: ToolCallBlock = {"type": "toolCall", "id": str(call.get("id")), "name": str(function.get("name")),
                            "arguments": arguments if isinstance(arguments, dict) else {},
                            "raw": copy.deepcopy(call)}
    return block


# ---------------------------------------------------------------- streams

_TEXT_DELTAS = ("content", "refusal", "reasoning_content", "reasoning")


class _ChatStream:
    """Adds up ``chat.completion.chunk`` data: choice 0's delta texts concatenated, tool calls by ``index``
    (arguments concatenated), annotations appended; top-level fields take their latest value."""

    def __init__(self) -> None:
        self.body: JSON = {}
        self.message: JSON = {"role": "assistant", "content": None}
        self.calls: dict[int, JSON] = {}
        self.finish: object = None
        self.error: str | None = None

    def feed(self, chunk: JSON) -> None:
        if isinstance(chunk.get("error"), dict):
            error = chunk["error"]
            self.error = f"{error.get('code') or 'error'}: {error.get('message', '')}"
        for key, value in chunk.items():
            if key not in ("choices", "object", "error") and (value is not None or key not in self.body):
                self.body[key] = copy.deepcopy(value)
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and _int(choice.get("index")) == 0:
                self._choice(choice)

    def _choice(self, choice: JSON) -> None:
        if choice.get("finish_reason") is not None:
            self.finish = choice["finish_reason"]
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        for key in _TEXT_DELTAS:
            if isinstance(delta.get(key), str):
                self.message[key] = (self.message.get(key) or "") + delta[key]
        for key in ("annotations", "reasoning_details"):
            if isinstance(delta.get(key), list):
                self.message[key] = [*(self.message.get(key) or []), *copy.deepcopy(delta[key])]
        for raw in delta.get("tool_calls") or []:
            self._tool_call(_mapping(raw, "a streamed tool call"))

    def _tool_call(self, delta: JSON) -> None:
        call = self.calls.setdefault(_int(delta.get("index")), {"id": None, "type": "function",
                                                                "function": {"name": None, "arguments": ""}})
        for key in ("id", "type"):
            if isinstance(delta.get(key), str):
                call[key] = delta[key]
        function = delta.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str):
                call["function"]["name"] = function["name"]
            call["function"]["arguments"] += str(function.get("arguments") or "")

    def final(self) -> JSON:
        if not self.body:
            raise ConversionError("the stream has no chunk")
        message = dict(self.message)
        if self.calls:
            message["tool_calls"] = [self.calls[index] for index in sorted(self.calls)]
        choice = {"index": 0, "message": message, "finish_reason": self.finish, "logprobs": None}
        return {**self.body, "object": "chat.completion", "choices": [choice]}


def chat_final_completion(chunks: Iterable[Mapping[str, object]]) -> JSON:
    """The ``chat.completion`` a stream adds up to (each ``data:`` line's parsed JSON, ``[DONE]`` left out).
    """
    stream = _ChatStream()
    for chunk in chunks:
        stream.feed(_mapping(chunk, "a stream chunk"))
    return stream.final()


def from_chat_stream(chunks: Iterable[Mapping[str, object]], *, timestamp: int,
                     provider: str = "openai") -> AssistantMessage:
    """Convert a Chat Completions stream (each chunk's parsed JSON, in order) into an assistant message.

    Same result as :func:`from_chat` on :func:`chat_final_completion`; a stream broken by an ``error`` chunk
    or ending without a finish_reason gives stopReason error with ``errorMessage``.
    """
    stream = _ChatStream()
    for chunk in chunks:
        stream.feed(_mapping(chunk, "a stream chunk"))
    message = from_chat(stream.final(), timestamp=timestamp, provider=provider)
    if stream.error is not None or stream.finish is None:
        return _failed(message, stream.error or "the stream ended before a chunk with a finish_reason")
    return message
