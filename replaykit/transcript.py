"""The neutral transcript, and converters from Anthropic Messages and OpenAI Responses wire objects.

A transcript is plain JSON (dicts and lists), the same in every language a target is written in::

    {"version": 1, "system": str | null, "tools": [...], "messages": [...], "systemHistory"?: [...]}

Messages are ``user``, ``assistant`` and ``toolResult`` (pi-ai's message model). Assistant content blocks are
``text``, ``thinking``, ``toolCall`` and ``hostedSearch``, the last a union on ``phase``:

- ``call``   — the provider's search call (``server_tool_use`` / ``web_search_call``): ``id``, ``query?``
- ``result`` — ``toolUseId``, ``results: [{url, title, pageAge?}]``; never a ``name`` nor ``arguments``
- ``error``  — ``toolUseId``, ``errorCode``

Each hostedSearch block holds ``raw``: the wire block exactly as received, which is what is replayed to the
same provider. A block without ``raw`` is display-only: shown, never replayed. A search the provider ran from
inside its own code execution (Anthropic programmatic tool calling) is a hostedSearch block like any other:
the ``caller`` that links it to the code stays in ``raw``. OpenAI reasoning items, function calls and
Anthropic ``tool_use`` blocks keep their wire item in ``raw`` too (replayed verbatim to the same provider and
API, ``caller`` included).

Every other provider block the transcript does not model (code execution and its results, tool search, a
container upload, a block type introduced next month) becomes one opaque ``providerBlock``::

    {"type": "providerBlock", "provider", "api", "blockType": <the wire type>, "raw": <the wire block>}

replayed verbatim to the same provider and API and never sent to another. Conversion never fails on an
unknown block or item type: the opaque block is its fallback.

Mappings (decided here, used by every converter):

- usage: Anthropic ``input_tokens`` → input, ``cache_read_input_tokens`` → cacheRead,
  ``cache_creation_input_tokens`` → cacheWrite; OpenAI ``input_tokens`` minus its cached and cache-write
  details → input, ``cached_tokens`` → cacheRead, ``cache_write_tokens`` → cacheWrite.
  ``totalTokens`` is the sum of the four.
- stop reasons: ``end_turn`` / ``stop_sequence`` / ``refusal`` → stop (a refusal is a finished turn with
  valid usage; its text is replayed like any answer), ``max_tokens`` / ``model_context_window_exceeded`` →
  length, ``tool_use`` → toolUse, ``pause_turn`` → pauseTurn. OpenAI ``completed`` → stop (toolUse when the
  output holds a ``function_call``), ``incomplete`` → length, ``failed`` → error, ``cancelled`` → aborted.
  A stream that breaks off (an ``error`` event, or no terminal event) gives stopReason error with
  ``errorMessage``.
- timestamps are given by the caller (``timestamp=``): a converter never invents a time.

``systemHistory`` (optional, internal: never sent to a provider) logs each (re)build of the system prompt and
tool list, ``[{"timestamp", "system", "tools"}, ...]`` in time order; the estimator reads it to tell which
configuration was in force when an assistant turn was produced (see :mod:`replaykit.estimate`).

:func:`restore` validates a stored transcript against ``contracts/replaykit/transcript.schema.json`` and
raises :class:`~replaykit.errors.LocalRequestError` (phase ``validation``) with the JSON pointer and the
message index.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any, Literal, NotRequired, TypedDict, TypeVar, cast

import jsonschema  # type: ignore[import-untyped]

from replaykit import contracts, routes
from replaykit.cassette import Interaction
from replaykit.errors import LocalRequestError, ReplaykitError, UsageError
from replaykit.pointer import json_pointer, resolve

__all__ = [
    "CONTRACT",
    "ROLES",
    "SCHEMA_ID",
    "STOP_REASONS",
    "AssistantBlock",
    "AssistantMessage",
    "ConversionError",
    "FunctionTool",
    "HostedSearchBlock",
    "HostedSearchCall",
    "HostedSearchError",
    "HostedSearchResult",
    "HostedSearchTool",
    "ImageBlock",
    "Message",
    "ProviderBlock",
    "SearchResult",
    "StopReason",
    "SystemEntry",
    "TextBlock",
    "ThinkingBlock",
    "Tool",
    "ToolCallBlock",
    "ToolResultMessage",
    "Transcript",
    "Usage",
    "UserBlock",
    "UserMessage",
    "anthropic_final_body",
    "from_anthropic",
    "from_anthropic_stream",
    "from_interaction",
    "from_openai",
    "from_openai_stream",
    "openai_final_response",
    "restore",
    "schema",
]

SCHEMA_ID = "https://replaykit.dev/contracts/replaykit/transcript.schema.json"
CONTRACT = "replaykit.transcript"
StopReason = Literal["stop", "length", "toolUse", "error", "aborted", "pauseTurn"]
STOP_REASONS: tuple[StopReason, ...] = ("stop", "length", "toolUse", "error", "aborted", "pauseTurn")
ROLES = ("user", "assistant", "toolResult")
ANTHROPIC_API = "anthropic-messages"
OPENAI_API = "openai-responses"
JSON = dict[str, Any]


# ---------------------------------------------------------------- the model


class Usage(TypedDict):
    """Token usage of one assistant turn. Converters write integers; a stored count may be non-finite or
    null (unknown): restore keeps it, the estimator decides whether to anchor on it."""

    input: float | None
    output: float | None
    cacheRead: float | None
    cacheWrite: float | None
    totalTokens: float | None


class TextBlock(TypedDict):
    """Text; ``citations`` are the provider's wire citations, kept verbatim (``encrypted_index`` intact).

    ``signature`` is the OpenAI message item id the text came in (``msg_…``), used to replay it.
    """

    type: Literal["text"]
    text: str
    citations: NotRequired[list[JSON]]
    signature: NotRequired[str]


class ImageBlock(TypedDict):
    """An image in a user or tool-result message: base64 ``data`` and its ``mimeType``."""

    type: Literal["image"]
    data: str
    mimeType: str


class ThinkingBlock(TypedDict):
    """Reasoning. Anthropic: ``signature`` (``redacted``: the signature holds the redacted data).

    OpenAI: ``thinking`` is the summary text and ``raw`` the reasoning item (``encrypted_content`` intact).
    """

    type: Literal["thinking"]
    thinking: str
    signature: NotRequired[str]
    redacted: NotRequired[bool]
    raw: NotRequired[JSON]


class ToolCallBlock(TypedDict):
    """A call of a harness-side function tool; ``raw`` the OpenAI ``function_call`` item when known."""

    type: Literal["toolCall"]
    id: str
    name: str
    arguments: JSON
    raw: NotRequired[JSON]


class SearchResult(TypedDict):
    """One search result as shown: ``url``, ``title`` (may be null), ``pageAge`` (may be null or absent)."""

    url: str
    title: str | None
    pageAge: NotRequired[str | None]


class HostedSearchCall(TypedDict):
    """A provider-hosted search call (``server_tool_use`` or ``web_search_call``)."""

    type: Literal["hostedSearch"]
    phase: Literal["call"]
    id: str
    query: NotRequired[str]
    provider: NotRequired[str]
    api: NotRequired[str]
    raw: NotRequired[JSON]


class HostedSearchResult(TypedDict):
    """Results of a hosted search: no ``name``, no ``arguments``; ``results`` absent in legacy blocks."""

    type: Literal["hostedSearch"]
    phase: Literal["result"]
    toolUseId: str
    results: NotRequired[list[SearchResult]]
    provider: NotRequired[str]
    api: NotRequired[str]
    raw: NotRequired[JSON]


class HostedSearchError(TypedDict):
    """A hosted search that failed (``web_search_tool_result_error`` or a failed ``web_search_call``)."""

    type: Literal["hostedSearch"]
    phase: Literal["error"]
    toolUseId: str
    errorCode: str
    provider: NotRequired[str]
    api: NotRequired[str]
    raw: NotRequired[JSON]


HostedSearchBlock = HostedSearchCall | HostedSearchResult | HostedSearchError


class ProviderBlock(TypedDict):
    """A provider block the transcript does not model, kept whole: replayed verbatim to the same ``provider``
    and ``api``, never sent to another. ``blockType`` is the wire ``type`` of ``raw``."""

    type: Literal["providerBlock"]
    provider: str
    api: str
    blockType: str
    raw: JSON


AssistantBlock = TextBlock | ThinkingBlock | ToolCallBlock | HostedSearchBlock | ProviderBlock
UserBlock = TextBlock | ImageBlock


class UserMessage(TypedDict):
    """What the user said; ``timestamp`` in milliseconds since the epoch."""

    role: Literal["user"]
    content: str | list[UserBlock]
    timestamp: float


class AssistantMessage(TypedDict):
    """One assistant turn, with the provider, API and model that produced it.

    ``responseId`` (the provider's message / response id) and ``errorMessage`` are for display: never sent.
    """

    role: Literal["assistant"]
    content: list[AssistantBlock]
    provider: str
    api: str
    model: str
    usage: Usage
    stopReason: StopReason
    timestamp: float
    responseId: NotRequired[str]
    errorMessage: NotRequired[str]


class ToolResultMessage(TypedDict):
    """The harness's answer to a ``toolCall``."""

    role: Literal["toolResult"]
    toolCallId: str
    toolName: str
    content: str | list[UserBlock]
    isError: bool
    timestamp: float


Message = UserMessage | AssistantMessage | ToolResultMessage


class FunctionTool(TypedDict):
    """A harness-side function tool: ``parameters`` is its JSON Schema."""

    name: str
    parameters: JSON
    description: NotRequired[str]
    type: NotRequired[Literal["function"]]


class HostedSearchTool(TypedDict):
    """The provider's hosted web search, enabled for the conversation."""

    type: Literal["hostedSearch"]
    maxUses: NotRequired[int]
    allowedDomains: NotRequired[list[str]]
    blockedDomains: NotRequired[list[str]]


Tool = FunctionTool | HostedSearchTool


class SystemEntry(TypedDict):
    """One (re)build of the system prompt and tools: in force from ``timestamp`` (milliseconds since the
    epoch) until the next entry. Rebuilding the same configuration is logged too; it is not a change.
    """

    timestamp: float
    system: str | None
    tools: list[Tool]


class Transcript(TypedDict):
    """A stored conversation; ``systemHistory`` is internal (read by the estimator, never sent)."""

    version: Literal[1]
    messages: list[Message]
    system: NotRequired[str | None]
    tools: NotRequired[list[Tool]]
    systemHistory: NotRequired[list[SystemEntry]]


class ConversionError(ReplaykitError, ValueError):
    """A wire object (response body or stream) cannot be converted into an assistant message."""


# ---------------------------------------------------------------- restore (validation)


def schema() -> JSON:
    """The transcript's JSON Schema (``contracts/replaykit/transcript.schema.json``)."""
    return contracts.default().schema(CONTRACT)


@cache
def _validator() -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema())
    validator: jsonschema.protocols.Validator = cls(schema())
    return validator


def restore(data: object, *, source: str = "<transcript>") -> Transcript:
    """Validate a stored transcript and return it unchanged (no migration: legacy blocks load as they are).

    The structure is checked with ``replaykit.contracts.validate("replaykit.transcript", data)`` (which also
    keeps ``systemHistory`` in time order), then every timestamp is checked to be finite; the first violation
    raises :class:`LocalRequestError` (phase ``validation``) naming ``source``, its JSON pointer, the index of
    the message at fault (None outside ``messages``) and the fix (the schema's description of the value).
    """
    violations = contracts.validate(CONTRACT, data)
    if violations:
        first = violations[0]
        errors = list(_validator().iter_errors(data))
        fix = _fix(errors, first.pointer)
        message = _safe_message(data, errors, first)
        raise LocalRequestError(f"{source}: {message}{'; ' + fix if fix else ''}", phase="validation",
                                pointer=first.pointer, message_index=_message_index(first.pointer))
    _check_timestamps(cast(JSON, data), source)
    return cast(Transcript, data)


def _message_index(pointer: str) -> int | None:
    parts = pointer.split("/")
    if len(parts) > 2 and parts[1] == "messages" and parts[2].isdigit():
        return int(parts[2])
    return None


_JSON_TYPES: dict[type, str] = {bool: "a boolean", int: "an integer", float: "a number", type(None): "null",
                                dict: "an object"}


def _describe(value: object) -> str:
    """``value`` by its JSON type (and length for strings and arrays), never its content."""
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    return _JSON_TYPES.get(type(value), "a value")


def _safe_message(data: object, errors: list[Any], violation: contracts.Violation) -> str:
    """What is wrong at the violation's pointer, with the schema's expectation and only the type of the value.

    The violation's own message may quote the offending value (user content, keys): it is not used, except
    for ``required``, whose message names the missing member from the schema, and the cross-field rules
    (``x-rules``), whose messages quote only numbers (timestamps) and say the fix.
    """
    if violation.keyword in ("required", "x-rules"):
        return violation.message
    value, expected = resolve(data, violation.pointer), _expected(errors, violation)
    got = _describe(value)
    if violation.keyword == "type" and expected is not _UNKNOWN:
        return f"expected {_types(expected)}, got {got}"
    if violation.keyword == "enum" and isinstance(expected, list):
        return f"got {got}, expected one of {', '.join(json.dumps(item) for item in expected)}"
    if violation.keyword == "const" and expected is not _UNKNOWN:
        return f"got {got}, expected {json.dumps(expected)}"
    return f"{got} breaks the schema's {violation.keyword!r} rule"


def _types(expected: object) -> str:
    return " or ".join(expected) if isinstance(expected, list) else str(expected)


_UNKNOWN = object()


def _expected(errors: list[Any], violation: contracts.Violation) -> object:
    """The schema's side of the violation (its ``type``, ``enum`` or ``const``), or ``_UNKNOWN``."""
    for error in errors:
        if error.validator == violation.keyword and json_pointer(error.absolute_path) == violation.pointer:
            return error.validator_value
    return _UNKNOWN


def _fix(errors: list[Any], pointer: str) -> str:
    """The schema's description of the value at ``pointer``: what a valid value looks like."""
    for error in errors:
        parts, where = list(error.absolute_path), error.schema if isinstance(error.schema, dict) else {}
        if error.validator == "required" and isinstance(error.instance, dict):
            missing = next(name for name in error.validator_value if name not in error.instance)
            parts, where = [*parts, missing], _resolve(where.get("properties", {}).get(missing, {}))
        if json_pointer(parts) == pointer and isinstance(where.get("description"), str):
            return str(where["description"])
    return ""


def _resolve(subschema: JSON) -> JSON:
    ref = subschema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved: JSON = schema()["$defs"][ref.removeprefix("#/$defs/")]
        return resolved
    return subschema


def _check_timestamps(data: JSON, source: str) -> None:
    for index, message in enumerate(data["messages"]):
        _check_finite(message["timestamp"], f"/messages/{index}/timestamp", index, source)
    for index, entry in enumerate(data.get("systemHistory", [])):
        _check_finite(entry["timestamp"], f"/systemHistory/{index}/timestamp", None, source)


def _check_finite(stamp: float, pointer: str, message_index: int | None, source: str) -> None:
    if not _finite(stamp):
        raise LocalRequestError(
            f"{source}: timestamp {_shown(stamp)} is not a finite number; store milliseconds since the epoch",
            phase="validation", pointer=pointer, message_index=message_index)


def _finite(stamp: float) -> bool:
    """True for a number a float can hold that is not nan or infinite (an int like 10**400 is not)."""
    try:
        return math.isfinite(stamp)
    except OverflowError:
        return False


def _shown(stamp: float) -> str:
    text = repr(stamp)
    return text if len(text) <= 40 else text[:40] + "…"


# ---------------------------------------------------------------- shared helpers


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


def _obj(value: object) -> JSON:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


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


_Stream = TypeVar("_Stream", "_AnthropicStream", "_OpenAIStream")


def _accumulate(stream: _Stream, events: Iterable[Mapping[str, Any]]) -> _Stream:
    """``stream`` (an :class:`_AnthropicStream` or :class:`_OpenAIStream`) fed every event, in order."""
    for event in events:
        stream.feed(_mapping(event, "a stream event"))
    return stream


# ---------------------------------------------------------------- Anthropic Messages

_ANTHROPIC_STOPS: dict[str, StopReason] = {
    "end_turn": "stop", "stop_sequence": "stop", "refusal": "stop",
    "max_tokens": "length", "model_context_window_exceeded": "length",
    "tool_use": "toolUse", "pause_turn": "pauseTurn",
}
_SEARCH_TOOLS = {"web_search", "web_fetch"}


def from_anthropic(message: Mapping[str, Any], *, timestamp: int) -> AssistantMessage:
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
                self._message()["content"][index]["input"] = json.loads(buffer)
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


def anthropic_final_body(events: Iterable[Mapping[str, Any]]) -> JSON:
    """The final message body an Anthropic stream adds up to (the parsed ``data`` of each event, in order)."""
    return _accumulate(_AnthropicStream(), events).final()


def from_anthropic_stream(events: Iterable[Mapping[str, Any]], *, timestamp: int) -> AssistantMessage:
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


# ---------------------------------------------------------------- OpenAI Responses

_OPENAI_STATUS: dict[str, StopReason] = {
    "completed": "stop", "incomplete": "length", "failed": "error", "cancelled": "aborted",
}
_TERMINAL_EVENTS = {"response.completed", "response.incomplete", "response.failed", "response.cancelled"}


def from_openai(response: Mapping[str, Any], *, timestamp: int, provider: str = "openai") -> AssistantMessage:
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
    if kind == "web_search_call":
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


def _parts(item: JSON, what: str) -> list[Any]:
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
        arguments = json.loads(item.get("arguments") or "{}")
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
    query = _openai_query(item.get("action"))
    if query is not None:
        call["query"] = query
    return call


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


def openai_final_response(events: Iterable[Mapping[str, Any]]) -> JSON:
    """The final response an OpenAI Responses stream adds up to.

    The terminal event's response when it carries the output (as the SDK's ``get_final_response``: reasoning
    items are re-encrypted there, so their ``encrypted_content`` differs from ``output_item.done``); otherwise
    the last snapshot with the output assembled from the ``output_item`` and text delta events.
    """
    return _accumulate(_OpenAIStream(), events).final()


def from_openai_stream(events: Iterable[Mapping[str, Any]], *, timestamp: int,
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


# ---------------------------------------------------------------- cassette interactions


def _route(interaction: Interaction) -> tuple[str, str]:
    """The provider and API of a recorded model turn, from the route table."""
    request = interaction.request
    route = routes.classify_uri(request.method, request.uri)
    if route.provider is None or route.api is None:
        turns = ", ".join(route.name for route in routes.ROUTES if route.api)
        raise ConversionError(f"{request.method} {request.uri} is neither Anthropic Messages nor OpenAI "
                              f"Responses: convert a model turn ({turns})")
    return route.provider, route.api


def _event_data(interaction: Interaction) -> list[JSON]:
    data: list[JSON] = []
    for number, event in enumerate(interaction.response.events):
        if event.data is None:
            continue
        try:
            data.append(_mapping(event.json(), f"stream event {number}"))
        except ValueError as exc:
            raise ConversionError(f"stream event {number}: data is not a JSON object: {exc}") from exc
    return data


def from_interaction(interaction: Interaction, *, timestamp: int) -> AssistantMessage:
    """Convert a recorded exchange: dispatch on the route (``/v1/messages``, ``/responses``, Azure's
    ``/openai/…``) and on the response's content type (a stream or a JSON body).

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
    if response.is_stream:
        return from_openai_stream(_event_data(interaction), timestamp=timestamp, provider=provider)
    return from_openai(_body(interaction), timestamp=timestamp, provider=provider)


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
    model = request.get("model") if isinstance(request, dict) else None
    message = _assistant([], provider, api, {"model": model}, _usage(0, 0, 0, 0), "error", timestamp)
    return _failed(message, f"HTTP {interaction.response.status}: {detail}")
