"""Gemini ``generateContent`` (the Developer API and Vertex serve the same body): a response, or the chunks of
``streamGenerateContent``, into an assistant message.

``candidates[0]`` is converted: its ``groundingMetadata`` becomes hostedSearch blocks first (a ``call`` per
``webSearchQueries`` entry, one ``result`` whose ``raw`` is the metadata verbatim), its parts text (citations:
the ``groundingSupports`` of that part, verbatim), thinking, toolCall or an opaque ``providerBlock``. A
stream's chunks add up as the SDK's do (:func:`gemini_final_response`); the mappings are in
docs/architecture/transcript.md.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping

from replaykit.jsondoc import JSON
from replaykit.transcript.convert import _assistant, _failed, _int, _mapping, _usage
from replaykit.transcript.model import (
    GEMINI_API,
    AssistantBlock,
    AssistantMessage,
    ConversionError,
    HostedSearchCall,
    HostedSearchResult,
    ProviderBlock,
    SearchResult,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    Usage,
)

__all__ = ["from_gemini", "from_gemini_stream", "gemini_final_response"]

_STOPS: dict[str, StopReason] = {"STOP": "stop", "MAX_TOKENS": "length"}
_PART_META = ("thought", "thoughtSignature", "videoMetadata", "partMetadata", "mediaResolution")
_CANDIDATE_KEYS = ("finishReason", "finishMessage", "groundingMetadata", "urlContextMetadata",
                   "citationMetadata", "safetyRatings", "avgLogprobs", "logprobsResult", "tokenCount")
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


def from_gemini(response: Mapping[str, object], *, timestamp: int,
                provider: str = "gemini") -> AssistantMessage:
    """Convert a Gemini ``GenerateContentResponse`` into an assistant message (``provider``: gemini, vertex).

    finishReason ``STOP`` is stop (toolUse when a part calls a function), ``MAX_TOKENS`` length, any other
    (``SAFETY``, ``RECITATION``, ``MALFORMED_FUNCTION_CALL``…) or none is error, naming it.
    """
    body = _mapping(response, "a Gemini response")
    candidate = _candidate(body)
    message = _message_of(body, candidate, provider, timestamp)
    reason = candidate.get("finishReason")
    if isinstance(reason, str) and reason in _STOPS:
        message["stopReason"] = _STOPS[reason]
        if any(block["type"] == "toolCall" for block in message["content"]):
            message["stopReason"] = "toolUse" if reason == "STOP" else "length"
        return message
    return _failed(message, _failure(body, reason))


def _candidate(body: JSON) -> JSON:
    candidates = body.get("candidates") or []
    if not isinstance(candidates, list):
        raise ConversionError("a Gemini response's candidates must be a list")
    return _mapping(candidates[0], "candidates[0]") if candidates else {}


def _failure(body: JSON, reason: object) -> str:
    feedback = body.get("promptFeedback")
    if isinstance(feedback, dict) and isinstance(feedback.get("blockReason"), str):
        return f"promptFeedback.blockReason {feedback['blockReason']}"
    return f"finishReason {reason}" if isinstance(reason, str) else "the response has no finishReason"


def _message_of(body: JSON, candidate: JSON, provider: str, timestamp: int) -> AssistantMessage:
    prefix = str(body.get("responseId") or "")
    content = [*_grounding(candidate, prefix or "grounding", provider),
               *content_blocks(candidate.get("content"), candidate, provider, prefix or "gemini")]
    wire = {"model": body.get("modelVersion") or body.get("model"), "id": body.get("responseId")}
    return _assistant(content, provider, GEMINI_API, wire, _gemini_usage(body.get("usageMetadata")), "stop",
                      timestamp)


def _gemini_usage(raw: object) -> Usage:
    usage = raw if isinstance(raw, dict) else {}
    cached = _int(usage.get("cachedContentTokenCount"))
    fresh = max(_int(usage.get("promptTokenCount")) - cached, 0) + _int(usage.get("toolUsePromptTokenCount"))
    output = _int(usage.get("candidatesTokenCount")) + _int(usage.get("thoughtsTokenCount"))
    return _usage(fresh, output, cached, 0)


# ---------------------------------------------------------------- grounding


def _grounding(candidate: JSON, prefix: str, provider: str) -> list[AssistantBlock]:
    blocks: list[AssistantBlock] = []
    metadata = candidate.get("groundingMetadata")
    if isinstance(metadata, dict) and metadata:
        queries = [query for query in metadata.get("webSearchQueries") or [] if isinstance(query, str)]
        blocks += [_call(f"{prefix}:q{index}", query, provider) for index, query in enumerate(queries)]
        blocks.append(_result(f"{prefix}:q0", metadata, provider))
    url_context = candidate.get("urlContextMetadata")
    if isinstance(url_context, dict):
        blocks.append(_provider_block("urlContextMetadata", url_context, provider))
    return blocks


def _call(ident: str, query: str, provider: str) -> HostedSearchCall:
    return {"type": "hostedSearch", "phase": "call", "provider": provider, "api": GEMINI_API, "id": ident,
            "query": query}


def _result(ident: str, metadata: JSON, provider: str) -> HostedSearchResult:
    chunks = metadata.get("groundingChunks")
    results = [_web(chunk["web"]) for chunk in chunks if isinstance(chunk, dict)
               and isinstance(chunk.get("web"), dict)] if isinstance(chunks, list) else []
    return {"type": "hostedSearch", "phase": "result", "provider": provider, "api": GEMINI_API,
            "toolUseId": ident, "results": results, "raw": copy.deepcopy(metadata)}


def _web(web: JSON) -> SearchResult:
    title = web.get("title")
    return {"url": str(web.get("uri") or ""), "title": title if isinstance(title, str) else None}


def _provider_block(kind: str, raw: JSON, provider: str) -> ProviderBlock:
    return {"type": "providerBlock", "provider": provider, "api": GEMINI_API, "blockType": kind,
            "raw": copy.deepcopy(raw)}


# ---------------------------------------------------------------- parts


def content_blocks(content: object, candidate: JSON, provider: str, prefix: str) -> list[AssistantBlock]:
    """The blocks of a ``Content``'s parts (a response's or a request's ``model`` turn); ``candidate`` holds
    the groundingMetadata whose supports become the text parts' citations; ``prefix`` names function calls
    that come without an id."""
    parts = content.get("parts") if isinstance(content, dict) else None
    if parts is None:
        return []
    if not isinstance(parts, list):
        raise ConversionError("content.parts must be a list of parts")
    supports = _supports(candidate.get("groundingMetadata"))
    return [_part(_mapping(raw, f"content.parts[{index}]"), index, supports, provider, prefix)
            for index, raw in enumerate(parts)]


def _supports(metadata: object) -> list[JSON]:
    supports = metadata.get("groundingSupports") if isinstance(metadata, dict) else None
    listed = supports if isinstance(supports, list) else []
    return [support for support in listed if isinstance(support, dict)]


def _part_index(support: JSON) -> int:
    segment = support.get("segment")
    return _int(segment.get("partIndex")) if isinstance(segment, dict) else 0


def _part(part: JSON, index: int, supports: list[JSON], provider: str, prefix: str) -> AssistantBlock:
    if isinstance(part.get("text"), str) and part.get("thought") is True:
        return _thinking(part)
    if isinstance(part.get("text"), str):
        return _text(part, [s for s in supports if _part_index(s) == index])
    if isinstance(part.get("functionCall"), dict):
        return _function_call(part, f"{prefix}_{index}")
    kind = next((key for key in part if key not in _PART_META), next(iter(part), "part"))
    return _provider_block(kind, part, provider)  # executableCode, inlineData, a new part kind...: kept whole


def _text(part: JSON, supports: list[JSON]) -> TextBlock:
    text: TextBlock = {"type": "text", "text": part["text"]}
    if supports:
        text["citations"] = copy.deepcopy(supports)
    if isinstance(part.get("thoughtSignature"), str):
        text["signature"] = part["thoughtSignature"]
    return text


def _thinking(part: JSON) -> ThinkingBlock:
    thinking: ThinkingBlock = {"type": "thinking", "thinking": part["text"], "raw": copy.deepcopy(part)}
    if isinstance(part.get("thoughtSignature"), str):
        thinking["signature"] = part["thoughtSignature"]
    return thinking


def _function_call(part: JSON, fallback: str) -> ToolCallBlock:
    call = part["functionCall"]
    ident = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
    arguments = call.get("args")
    return {"type": "toolCall", "id": ident or "call_" + _UNSAFE_ID.sub("_", fallback),
            "name": str(call.get("name") or ""),
            "arguments": copy.deepcopy(arguments) if isinstance(arguments, dict) else {},
            "raw": copy.deepcopy(part)}


# ---------------------------------------------------------------- streams


class _GeminiStream:
    """Adds up ``streamGenerateContent`` chunks: consecutive text parts (thought or not) merge into one, every
    other part is appended; groundingMetadata accumulates (``_merge_grounding``), other candidate and
    top-level fields take their latest value."""

    def __init__(self) -> None:
        self.body: JSON = {}
        self.candidate: JSON = {}
        self.parts: list[JSON] = []
        self.chunks = 0

    def feed(self, chunk: JSON) -> None:
        self.chunks += 1
        for key, value in chunk.items():
            if key != "candidates":
                self.body[key] = copy.deepcopy(value)
        candidate = _candidate(chunk)
        for key in _CANDIDATE_KEYS:
            if key == "groundingMetadata" and isinstance(candidate.get(key), dict):
                _merge_grounding(self.candidate.setdefault(key, {}), candidate[key])
            elif key in candidate:
                self.candidate[key] = copy.deepcopy(candidate[key])
        content = candidate.get("content")
        if isinstance(content, dict):
            self.candidate["role"] = content.get("role", "model")
            for raw in content.get("parts") or []:
                self._add(_mapping(raw, "a streamed part"))

    def _add(self, part: JSON) -> None:
        last = self.parts[-1] if self.parts else None
        if last is not None and _mergeable(last, part):
            last["text"] += part["text"]
            if isinstance(part.get("thoughtSignature"), str):
                last["thoughtSignature"] = part["thoughtSignature"]
        else:
            self.parts.append(copy.deepcopy(part))

    def final(self) -> JSON:
        if not self.chunks:
            raise ConversionError("the stream has no chunk")
        candidate: JSON = {"content": {"parts": self.parts, "role": self.candidate.pop("role", "model")}}
        candidate.update(self.candidate)
        candidate["index"] = 0
        return {"candidates": [candidate], **self.body}


def _merge_grounding(merged: JSON, metadata: JSON) -> None:
    """A chunk's groundingMetadata into what came before: a list that repeats the lists received so far (the
    metadata resent whole) replaces them; any other list is appended (the chunks spread over the stream,
    chunk indices counting across all of them); any other field takes its latest value."""
    for key, value in metadata.items():
        before = merged.get(key)
        if isinstance(value, list) and isinstance(before, list) and value[:len(before)] != before:
            merged[key] = before + copy.deepcopy(value)
        else:
            merged[key] = copy.deepcopy(value)


def _mergeable(last: JSON, part: JSON) -> bool:
    texts = isinstance(last.get("text"), str) and isinstance(part.get("text"), str)
    extra = set(part) - {"text", "thought", "thoughtSignature"}
    return texts and not extra and bool(last.get("thought")) == bool(part.get("thought"))


def gemini_final_response(chunks: Iterable[Mapping[str, object]]) -> JSON:
    """The ``GenerateContentResponse`` a ``streamGenerateContent`` stream adds up to (chunks, in order).
    """
    stream = _GeminiStream()
    for chunk in chunks:
        stream.feed(_mapping(chunk, "a stream chunk"))
    return stream.final()


def from_gemini_stream(chunks: Iterable[Mapping[str, object]], *, timestamp: int,
                       provider: str = "gemini") -> AssistantMessage:
    """Convert a ``streamGenerateContent`` stream (each chunk's parsed JSON, in order) into an assistant
    message.

    Same result as :func:`from_gemini` on :func:`gemini_final_response`; a stream whose chunks never name a
    finishReason broke off: stopReason error.
    """
    body = gemini_final_response(chunks)
    message = from_gemini(body, timestamp=timestamp, provider=provider)
    if "finishReason" not in body["candidates"][0]:
        return _failed(message, "the stream ended before a chunk with a finishReason")
    return message
