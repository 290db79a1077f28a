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

:func:`restore` validates a stored transcript (:mod:`~replaykit.transcript.validation`). The parts:
:mod:`~replaykit.transcript.model` (the types), :mod:`~replaykit.transcript.anthropic_messages` and
:mod:`~replaykit.transcript.openai_responses` (the converters), :mod:`~replaykit.transcript.interactions`
(:func:`from_interaction`: a recorded exchange, by its route), :mod:`~replaykit.transcript.requests`
(:func:`from_anthropic_request`, :func:`from_openai_request`: the conversation a request body sent).
"""

from __future__ import annotations

from replaykit.transcript.anthropic_messages import (
    anthropic_final_body,
    from_anthropic,
    from_anthropic_stream,
)
from replaykit.transcript.interactions import from_interaction
from replaykit.transcript.model import (
    CONTRACT,
    ROLES,
    SCHEMA_ID,
    STOP_REASONS,
    AssistantBlock,
    AssistantMessage,
    ConversionError,
    FunctionTool,
    HostedSearchBlock,
    HostedSearchCall,
    HostedSearchError,
    HostedSearchResult,
    HostedSearchTool,
    ImageBlock,
    Message,
    ProviderBlock,
    SearchResult,
    StopReason,
    SystemEntry,
    TextBlock,
    ThinkingBlock,
    Tool,
    ToolCallBlock,
    ToolResultMessage,
    Transcript,
    Usage,
    UserBlock,
    UserMessage,
)
from replaykit.transcript.openai_responses import from_openai, from_openai_stream, openai_final_response
from replaykit.transcript.requests import from_anthropic_request, from_openai_request
from replaykit.transcript.validation import restore, schema

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
    "from_anthropic_request",
    "from_anthropic_stream",
    "from_interaction",
    "from_openai",
    "from_openai_request",
    "from_openai_stream",
    "openai_final_response",
    "restore",
    "schema",
]
