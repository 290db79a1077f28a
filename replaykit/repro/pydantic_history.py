"""A pydantic-ai message history (the JSON ``ModelMessagesTypeAdapter`` dumps) as a neutral transcript.

Requests give the system prompt, user messages and tool results; an Anthropic or OpenAI response becomes the
wire message pydantic-ai sends back to that provider, converted as a recorded answer is
(:func:`~replaykit.transcript.from_anthropic`, :func:`~replaykit.transcript.from_openai`); another provider's
response is display-only. A part with no neutral form is left out and named in :attr:`Converted.left_out`.
Called by :mod:`replaykit.repro.reported`; the mapping is in docs/architecture/repro.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from replaykit.jsondoc import JSON
from replaykit.pointer import json_pointer
from replaykit.transcript import ConversionError, from_anthropic, from_openai

__all__ = ["Converted", "from_pydantic_ai", "is_history"]

Where = list[str | int]
_WIRE = ("anthropic", "openai", "azure")  # the providers whose blocks replay verbatim
_RESULT_TYPES = {"web_search": "web_search_tool_result", "web_fetch": "web_fetch_tool_result",
                 "code_execution": "code_execution_tool_result"}  # Anthropic's server tools pydantic-ai maps
_FINISH = {"stop": "end_turn", "length": "max_tokens", "tool_call": "tool_use", "content_filter": "refusal"}
_ANTHROPIC_STOPS = ("end_turn", "stop_sequence", "refusal", "max_tokens", "model_context_window_exceeded",
                    "tool_use", "pause_turn")
_STATES = {"interrupted": "aborted", "incomplete": "error", "suspended": "pauseTurn"}
_OPENAI_STATUS = ("completed", "incomplete", "failed", "cancelled")
_CALLER = "anthropic_caller"  # the provider_details key pydantic-ai keeps a non-direct caller under


def is_history(doc: object) -> bool:
    """Whether ``doc`` has the shape of a pydantic-ai message history."""
    return isinstance(doc, list) and bool(doc) and all(
        isinstance(item, dict) and item.get("kind") in ("request", "response")
        and isinstance(item.get("parts"), list) for item in doc)


@dataclass
class Converted:
    """The neutral ``transcript`` and the parts ``left_out`` (each its JSON pointer and kind)."""

    transcript: JSON
    left_out: list[str] = field(default_factory=list)


def _fail(at: Where, message: str) -> ConversionError:
    return ConversionError(f"{json_pointer(at) or '/'}: {message}")


def _millis(value: object, fallback: int) -> int:
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value).timestamp() * 1000)
        except ValueError:
            return fallback
    return fallback


def _args(value: object) -> JSON:
    """A tool call's ``args``: an object, its JSON text, or none."""
    if isinstance(value, str):
        try:
            value = json.loads(value or "{}")
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def from_pydantic_ai(history: list[Any], *, timestamp: int) -> Converted:
    """Convert a pydantic-ai message history; ``timestamp`` stands for a time the history does not give."""
    walk = _Walk(timestamp)
    for index, message in enumerate(history):
        if message["kind"] == "request":
            walk.request(message, [index])
        else:
            walk.response(message, [index])
    return Converted(walk.transcript(), walk.left_out)


class _Walk:
    """The history, message by message."""

    def __init__(self, timestamp: int) -> None:
        self.fallback = timestamp
        self.system: list[str] = []
        self.instructions: str | None = None
        self.messages: list[JSON] = []
        self.left_out: list[str] = []
        self.searched = False

    def stamp(self, *values: object) -> int:
        self.fallback += 1
        return next((_millis(value, 0) for value in values if _millis(value, 0)), self.fallback)

    def transcript(self) -> JSON:
        system = "\n\n".join([*self.system, *([self.instructions] if self.instructions else [])]) or None
        tools: list[JSON] = [{"type": "hostedSearch"}] if self.searched else []
        return {"version": 1, "system": system, "tools": tools, "messages": self.messages}

    def skip(self, at: Where, kind: object) -> None:
        self.left_out.append(f"{json_pointer(at)} ({kind})")

    # ------------------------------------------------------------ requests

    def request(self, message: JSON, at: Where) -> None:
        if isinstance(message.get("instructions"), str):
            self.instructions = message["instructions"]
        for number, part in enumerate(message["parts"]):
            where = [*at, "parts", number]
            if not isinstance(part, dict):
                raise _fail(where, "a part must be an object with a part_kind")
            converted = self.request_part(part, where, message.get("timestamp"))
            if converted is not None:
                self.messages.append(converted)

    def request_part(self, part: JSON, at: Where, sent: object) -> JSON | None:
        kind = part.get("part_kind")
        when = self.stamp(part.get("timestamp"), sent)
        if kind in ("system-prompt", "instruction"):
            self.system.append(_text(part.get("content")))
        elif kind == "user-prompt":
            content = _user(part.get("content"), [*at, "content"])
            return {"role": "user", "content": content, "timestamp": when}
        elif kind == "tool-return" or (kind == "retry-prompt" and part.get("tool_name")):
            failed = kind == "retry-prompt" or part.get("outcome", "success") != "success"
            return {"role": "toolResult", "toolCallId": str(part.get("tool_call_id")),
                    "toolName": str(part.get("tool_name")), "isError": failed, "timestamp": when,
                    "content": [{"type": "text", "text": _text(part.get("content"))}]}
        elif kind == "retry-prompt":
            return {"role": "user", "content": _text(part.get("content")), "timestamp": when}
        else:
            self.skip(at, kind)
        return None

    # ------------------------------------------------------------ responses

    def response(self, message: JSON, at: Where) -> None:
        provider = message.get("provider_name")
        when = self.stamp(message.get("timestamp"))
        self.searched |= any(_search_part(part) for part in message["parts"])
        try:
            if provider == "anthropic":
                converted = dict(from_anthropic(self.anthropic(message, at), timestamp=when))
            elif provider in ("openai", "azure"):
                converted = dict(from_openai(self.openai(message, at), timestamp=when, provider=provider))
            else:
                converted = self.display_only(message, at, when)
        except ConversionError as exc:
            raise _fail(at, str(exc)) from exc
        converted["usage"] = _usage(message.get("usage"))
        state = message.get("state")
        if isinstance(state, str) and state in _STATES:
            converted["stopReason"] = _STATES[state]
        self.messages.append(converted)

    def anthropic(self, message: JSON, at: Where) -> JSON:
        blocks = [block for number, part in enumerate(message["parts"])
                  for block in self.anthropic_block(part, [*at, "parts", number])]
        details = message.get("provider_details")
        reason = details.get("finish_reason") if isinstance(details, dict) else None
        if reason not in _ANTHROPIC_STOPS:
            reason = _FINISH.get(str(message.get("finish_reason")), "end_turn")
        return {"id": message.get("provider_response_id") or "msg", "type": "message", "role": "assistant",
                "model": message.get("model_name") or "", "content": blocks, "stop_reason": reason}

    def anthropic_block(self, part: JSON, at: Where) -> Iterator[JSON]:
        kind, details = part.get("part_kind"), part.get("provider_details") or {}
        if kind == "text":
            citations = details.get("citations") if isinstance(details, dict) else None
            yield {"type": "text", "text": _text(part.get("content"))} | (
                {"citations": citations} if isinstance(citations, list) and citations else {})
        elif kind == "thinking":
            yield _anthropic_thinking(part)
        elif kind == "tool-call":
            yield {"type": "tool_use", "id": str(part.get("tool_call_id")),
                   "name": str(part.get("tool_name")), "input": _args(part.get("args"))}
        elif kind in ("builtin-tool-call", "builtin-tool-return") and part.get("tool_name") in _RESULT_TYPES:
            yield _server_block(part, details if isinstance(details, dict) else {})
        else:
            self.skip(at, kind)

    def openai(self, message: JSON, at: Where) -> JSON:
        returns = {part.get("tool_call_id"): part.get("content") for part in message["parts"]
                   if isinstance(part, dict) and part.get("part_kind") == "builtin-tool-return"}
        items: list[JSON] = []
        for number, part in enumerate(message["parts"]):
            self.openai_item(part, [*at, "parts", number], items, returns)
        details = message.get("provider_details")
        status = details.get("finish_reason") if isinstance(details, dict) else None
        return {"id": message.get("provider_response_id") or "resp", "object": "response",
                "status": status if status in _OPENAI_STATUS else "completed",
                "model": message.get("model_name") or "", "output": items}

    def openai_item(self, part: JSON, at: Where, items: list[JSON], returns: dict[object, object]) -> None:
        kind, ident = part.get("part_kind"), part.get("id")
        last = items[-1] if items else {}
        if kind == "text" and ident is not None and last.get("type") == "message" and last.get("id") == ident:
            last["content"].append(_output_text(part))
        elif kind == "text":
            items.append({"type": "message", "role": "assistant", "status": "completed",
                          "content": [_output_text(part)]} | ({"id": ident} if ident else {}))
        elif kind == "thinking" and ident:
            _reasoning(part, last, items)
        elif kind == "tool-call":
            arguments = json.dumps(_args(part.get("args")))
            items.append({"type": "function_call", "call_id": str(part.get("tool_call_id")),
                          "name": str(part.get("tool_name")), "status": "completed",
                          "arguments": arguments} | ({"id": ident} if ident else {}))
        elif kind == "builtin-tool-call" and part.get("tool_name") == "web_search":
            result = returns.get(part.get("tool_call_id"))
            status = result.get("status") if isinstance(result, dict) else None
            items.append({"id": ident or str(part.get("tool_call_id")), "type": "web_search_call",
                          "status": status or "completed", "action": _args(part.get("args"))})
        elif not (kind == "builtin-tool-return" and part.get("tool_name") == "web_search"):
            self.skip(at, kind)

    def display_only(self, message: JSON, at: Where, when: int) -> JSON:
        provider = str(message.get("provider_name") or "unknown")
        blocks = [block for number, part in enumerate(message["parts"])
                  for block in self.shown(part, [*at, "parts", number], provider)]
        stop = "toolUse" if any(block["type"] == "toolCall" for block in blocks) else "stop"
        return {"role": "assistant", "provider": provider, "api": provider, "model": message.get("model_name")
                or "", "content": blocks, "stopReason": stop, "timestamp": when}

    def shown(self, part: JSON, at: Where, provider: str) -> Iterator[JSON]:
        kind, name = part.get("part_kind"), part.get("tool_name")
        if kind == "text":
            yield {"type": "text", "text": _text(part.get("content"))}
        elif kind == "thinking" and part.get("content"):
            yield {"type": "thinking", "thinking": _text(part.get("content"))}
        elif kind == "tool-call":
            yield {"type": "toolCall", "id": str(part.get("tool_call_id")), "name": str(name),
                   "arguments": _args(part.get("args"))}
        elif kind == "builtin-tool-call" and name == "web_search":
            query = _args(part.get("args")).get("query")
            yield {"type": "hostedSearch", "phase": "call", "provider": provider, "api": provider,
                   "id": str(part.get("tool_call_id"))} | ({"query": query} if isinstance(query, str) else {})
        elif kind == "builtin-tool-return" and name == "web_search":
            yield {"type": "hostedSearch", "phase": "result", "provider": provider, "api": provider,
                   "toolUseId": str(part.get("tool_call_id")), "results": _results(part.get("content"))}
        else:
            self.skip(at, kind)


def _search_part(part: object) -> bool:
    return isinstance(part, dict) and part.get("tool_name") == "web_search" \
        and part.get("part_kind") in ("builtin-tool-call", "builtin-tool-return")


def _user(content: object, at: Where) -> str | list[JSON]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _fail(at, "a user-prompt's content must be a string or a list")
    return [_user_item(item, [*at, number]) for number, item in enumerate(content)]


def _user_item(item: object, at: Where) -> JSON:
    if isinstance(item, str):
        return {"type": "text", "text": item}
    kind = item.get("kind") if isinstance(item, dict) else None
    if isinstance(item, dict) and kind == "binary" and str(item.get("media_type", "")).startswith("image/"):
        return {"type": "image", "data": str(item.get("data")), "mimeType": str(item["media_type"])}
    if isinstance(item, dict) and kind == "text-content":
        return {"type": "text", "text": _text(item.get("content"))}
    raise _fail(at, f"a user-prompt item of kind {kind!r} has no neutral form (text and images have)")


def _anthropic_thinking(part: JSON) -> JSON:
    signature = part.get("signature")
    if part.get("id") == "redacted_thinking" and isinstance(signature, str):
        return {"type": "redacted_thinking", "data": signature}
    thinking = {"type": "thinking", "thinking": _text(part.get("content"))}
    return thinking | ({"signature": signature} if isinstance(signature, str) and signature else {})


def _server_block(part: JSON, details: JSON) -> JSON:
    """The ``server_tool_use`` or ``*_tool_result`` block pydantic-ai sends back for a built-in tool part."""
    name, ident = str(part["tool_name"]), str(part.get("tool_call_id"))
    block: JSON
    if part.get("part_kind") == "builtin-tool-call":
        block = {"type": "server_tool_use", "id": ident, "name": name, "input": _args(part.get("args"))}
    else:
        block = {"type": _RESULT_TYPES[name], "tool_use_id": ident, "content": part.get("content")}
    caller = details.get(_CALLER)
    return block | ({"caller": caller} if isinstance(caller, dict) else {})


def _output_text(part: JSON) -> JSON:
    details = part.get("provider_details") or {}
    annotations = details.get("annotations") if isinstance(details, dict) else None
    return {"type": "output_text", "text": _text(part.get("content")),
            "annotations": annotations if isinstance(annotations, list) else []}


def _reasoning(part: JSON, last: JSON, items: list[JSON]) -> None:
    """A thinking part as (a summary of) its reasoning item: parts of one id are one item."""
    summary = [{"type": "summary_text", "text": part["content"]}] if part.get("content") else []
    if last.get("type") == "reasoning" and last.get("id") == part["id"]:
        last["summary"].extend(summary)
        return
    item = {"type": "reasoning", "id": part["id"], "summary": summary}
    if isinstance(part.get("signature"), str) and part["signature"]:
        item["encrypted_content"] = part["signature"]
    items.append(item)


def _results(content: object) -> list[JSON]:
    """The results a search return part shows: its list of results, or its ``sources``."""
    items = content.get("sources") if isinstance(content, dict) else content
    found = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
    return [{"url": item["url"], "title": item.get("title") if isinstance(item.get("title"), str) else None}
            for item in found if isinstance(item.get("url"), str)]


def _count(usage: JSON, name: str) -> int:
    value = usage.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _usage(raw: object) -> JSON:
    """pydantic-ai's usage in the neutral form: its ``input_tokens`` include the cache reads and writes."""
    usage = raw if isinstance(raw, dict) else {}
    read, written = _count(usage, "cache_read_tokens"), _count(usage, "cache_write_tokens")
    fresh = max(_count(usage, "input_tokens") - read - written, 0)
    output = _count(usage, "output_tokens")
    return {"input": fresh, "output": output, "cacheRead": read, "cacheWrite": written,
            "totalTokens": fresh + output + read + written}
