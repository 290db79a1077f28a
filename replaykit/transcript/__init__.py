"""The neutral transcript, and converters from the wire objects of every model API replaykit speaks.

A transcript is plain JSON, the same in every language: ``{"version": 1, "system", "tools", "messages",
"systemHistory"?}``; provider blocks keep their wire form in ``raw`` (replayed verbatim to the same provider),
and a block it does not model becomes an opaque ``providerBlock``. :func:`restore` validates a stored one; the
parts are model, one converter per API (anthropic_messages, openai_responses, openai_chat, gemini_generate),
interactions and requests. The format and the mappings are in docs/architecture/transcript.md.
"""

from __future__ import annotations

from replaykit.transcript.anthropic_messages import (
    anthropic_final_body,
    from_anthropic,
    from_anthropic_stream,
)
from replaykit.transcript.gemini_generate import from_gemini, from_gemini_stream, gemini_final_response
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
from replaykit.transcript.openai_chat import chat_final_completion, from_chat, from_chat_stream
from replaykit.transcript.openai_responses import from_openai, from_openai_stream, openai_final_response
from replaykit.transcript.requests import (
    from_anthropic_request,
    from_chat_request,
    from_gemini_request,
    from_openai_request,
)
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
    "chat_final_completion",
    "from_anthropic",
    "from_anthropic_request",
    "from_anthropic_stream",
    "from_chat",
    "from_chat_request",
    "from_chat_stream",
    "from_gemini",
    "from_gemini_request",
    "from_gemini_stream",
    "from_interaction",
    "from_openai",
    "from_openai_request",
    "from_openai_stream",
    "gemini_final_response",
    "openai_final_response",
    "restore",
    "schema",
]
