"""The transcript's model: its TypedDicts, constants and :class:`ConversionError`.

The shape and the mappings are described in :mod:`replaykit.transcript`; the JSON Schema that a stored
transcript is checked against is ``contracts/replaykit/transcript.schema.json``.
"""

from __future__ import annotations

import math
from typing import Literal, NotRequired, TypedDict

from replaykit.errors import ReplaykitError
from replaykit.jsondoc import JSON

__all__ = [
    "ANTHROPIC_API",
    "CHAT_API",
    "CONTRACT",
    "GEMINI_API",
    "OPENAI_API",
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
]

SCHEMA_ID = "https://replaykit.dev/contracts/replaykit/transcript.schema.json"
CONTRACT = "replaykit.transcript"
StopReason = Literal["stop", "length", "toolUse", "error", "aborted", "pauseTurn"]
STOP_REASONS: tuple[StopReason, ...] = ("stop", "length", "toolUse", "error", "aborted", "pauseTurn")
ROLES = ("user", "assistant", "toolResult")
ANTHROPIC_API = "anthropic-messages"
OPENAI_API = "openai-responses"
CHAT_API = "openai-chat"
GEMINI_API = "gemini-generate"


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

    ``signature`` is the OpenAI message item id the text came in (``msg_…``), or the Gemini part's
    ``thoughtSignature``: used to replay it.
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
    Gemini: ``raw`` the thought part (``signature`` its ``thoughtSignature``); Chat Completions: ``raw`` the
    message's reasoning fields.
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
    details: NotRequired[JSON]  # what the host keeps of the call (never sent to a provider)


Message = UserMessage | AssistantMessage | ToolResultMessage


class FunctionTool(TypedDict):
    """A harness-side function tool: ``parameters`` is its JSON Schema."""

    name: str
    parameters: JSON
    description: NotRequired[str]
    type: NotRequired[Literal["function"]]
    host: NotRequired[JSON]  # the host's options of the tool (never sent to a provider)
    recovery: NotRequired[Literal["rerun", "report"]]  # a call cut short runs again, or is reported


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


def _finite(stamp: float) -> bool:
    """True for a number a float can hold that is not nan or infinite (an int like 10**400 is not)."""
    try:
        return math.isfinite(stamp)
    except OverflowError:
        return False
