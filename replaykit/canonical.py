"""The canonical view of a request body: two encodings that mean the same to the provider are one value.

One definition per wire API (:data:`RULES`, each rule a short function with the sentence it implements);
:func:`canonical` never changes its input, and returns a body that is not a JSON object as it is. The
scenario expectations on what reaches the provider, ``--match-on body`` and the plugin's body matching
compare canonical views, so a harness that encodes a valid request its own way is judged by what it means.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from replaykit.jsondoc import JSON

__all__ = ["RULES", "canonical", "canonical_key", "canonical_transcript"]

Rule = Callable[[JSON], None]


def _text(text: str, kind: str = "text") -> JSON:
    return {"type": kind, "text": text}


def _drop_nulls(node: object) -> object:
    """An optional field sent as null is absent (both APIs read a null optional field as not given)."""
    if isinstance(node, dict):
        return {key: _drop_nulls(value) for key, value in node.items() if value is not None}
    if isinstance(node, list):
        return [_drop_nulls(item) for item in node]
    return node


def _drop_key(node: object, name: str) -> None:
    if isinstance(node, dict):
        node.pop(name, None)
        for value in node.values():
            _drop_key(value, name)
    elif isinstance(node, list):
        for item in node:
            _drop_key(item, name)


# ---------------------------------------------------------------- Anthropic Messages


def a_system_blocks(body: JSON) -> None:
    """``system`` as a string is a list of one text block; an empty one is no system prompt."""
    system = body.get("system")
    if isinstance(system, str):
        if system:
            body["system"] = [_text(system)]
        else:
            del body["system"]


def a_content_blocks(body: JSON) -> None:
    """A message's ``content`` as a string is a list of one text block."""
    for message in body.get("messages") or []:
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            message["content"] = [_text(message["content"])] if message["content"] else []


def a_tool_result_blocks(body: JSON) -> None:
    """A ``tool_result`` whose ``content`` is a string is one text block, no content an empty list, and
    ``is_error: false`` (the default) is absent."""
    for message in body.get("messages") or []:
        for block in message.get("content") or [] if isinstance(message, dict) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block.get("content", "")
                if isinstance(content, str):
                    block["content"] = [_text(content)] if content else []
                if block.get("is_error") is False:
                    del block["is_error"]


def a_merge_turns(body: JSON) -> None:
    """Consecutive messages of one role are one turn: the API combines them
    (https://docs.anthropic.com/en/api/messages, ``messages``)."""
    merged: list[object] = []
    for message in body.get("messages") or []:
        last = merged[-1] if merged else None
        if (isinstance(message, dict) and isinstance(last, dict) and last.get("role") == message.get("role")
                and isinstance(last.get("content"), list) and isinstance(message.get("content"), list)):
            last["content"] = [*last["content"], *message["content"]]
        else:
            merged.append(message)
    if "messages" in body and isinstance(body["messages"], list):
        body["messages"] = merged


def a_no_cache_control(body: JSON) -> None:
    """``cache_control`` is a caching hint, not part of what is asked: left out."""
    _drop_key(body, "cache_control")


# ---------------------------------------------------------------- OpenAI Responses (and Azure's)


_INPUT_ROLES = ("user", "system", "developer")


def o_input_items(body: JSON) -> None:
    """``input`` as a string is one user message."""
    if isinstance(body.get("input"), str):
        body["input"] = [{"type": "message", "role": "user", "content": body["input"]}]


def o_message_type(body: JSON) -> None:
    """An input item with a ``role`` and no ``type`` is a ``message``."""
    for item in body.get("input") or []:
        if isinstance(item, dict) and "role" in item and "type" not in item:
            item["type"] = "message"


def o_instructions(body: JSON) -> None:
    """``instructions`` is a leading system message, and a leading ``developer`` or ``system`` message is the
    system prompt: the leading run of either role is spelt ``system``."""
    items = body.get("input")
    if not isinstance(items, list):
        return
    instructions = body.pop("instructions", None)
    if isinstance(instructions, str) and instructions:
        items.insert(0, {"type": "message", "role": "system", "content": instructions})
    for item in items:
        if not (isinstance(item, dict) and item.get("type") == "message" and item.get("role") in
                ("system", "developer")):
            break
        item["role"] = "system"


def o_content_parts(body: JSON) -> None:
    """A message's ``content`` as a string is one part: ``input_text`` (user, system, developer) or
    ``output_text`` (assistant)."""
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "message" and isinstance(item.get("content"), str):
            kind = "input_text" if item.get("role") in _INPUT_ROLES else "output_text"
            item["content"] = [_text(item["content"], kind)]


def o_defaults(body: JSON) -> None:
    """``store: true`` is the default (https://platform.openai.com/docs/api-reference/responses/create)."""
    if body.get("store") is True:
        del body["store"]


# ---------------------------------------------------------------- both


def no_false_stream(body: JSON) -> None:
    """``stream: false`` is the default: no stream."""
    if body.get("stream") is False:
        del body["stream"]


_ANTHROPIC: tuple[Rule, ...] = (a_system_blocks, a_content_blocks, a_tool_result_blocks, a_merge_turns,
                                a_no_cache_control, no_false_stream)
_OPENAI: tuple[Rule, ...] = (o_input_items, o_message_type, o_instructions, o_content_parts, o_defaults,
                             no_false_stream)

#: The rules of each route's canonical view, in the order applied (after optional nulls are dropped).
RULES: dict[str, tuple[Rule, ...]] = {
    "anthropic.messages": _ANTHROPIC,
    "anthropic.count_tokens": _ANTHROPIC,
    "openai.responses": _OPENAI,
    "azure.responses": _OPENAI,
}


def canonical(route: str, body: object) -> Any:
    """The canonical view of ``body``, a request on ``route`` (a :mod:`replaykit.routes` name); a route with
    no rules, or a body that is not an object, only loses its null fields."""
    view = _drop_nulls(body)
    if not isinstance(view, dict):
        return view
    for rule in RULES.get(route, ()):
        rule(view)
    return view


_STREAMING = ("stream", "stream_options")


def canonical_key(route: str, body: object) -> str:
    """The canonical view as JSON text without ``stream`` (and Chat Completions' ``stream_options``, which
    only a stream takes): the same request, streamed or not, has one key."""
    view = canonical(route, body)
    if isinstance(view, dict):
        view = {key: value for key, value in view.items() if key not in _STREAMING}
    return json.dumps(view, sort_keys=True, ensure_ascii=False)


# ---------------------------------------------------------------- the neutral transcript

# What a neutral transcript means, per message role and block type: the fields kept by the comparison. A
# search block is its ``raw`` (what is replayed; ``query`` / ``results`` are views of it); a turn's usage is
# the provider's count as each harness books it, checked by the estimate expectations instead.
_MESSAGE_FIELDS = {
    "user": ("role", "content"),
    "assistant": ("role", "content", "provider", "api", "model", "stopReason"),
    "toolResult": ("role", "toolCallId", "toolName", "content", "isError"),
}
_BLOCK_FIELDS = {
    "text": ("type", "text", "citations"),
    "thinking": ("type", "thinking", "signature", "redacted"),
    "image": ("type", "data", "mimeType"),
    "toolCall": ("type", "id", "name", "arguments"),
    "hostedSearch": ("type", "phase", "provider", "api", "raw"),
    "providerBlock": ("type", "provider", "api", "blockType", "raw"),
}


def _block(block: object) -> object:
    if isinstance(block, str):
        return _text(block)
    if not isinstance(block, dict) or block.get("type") not in _BLOCK_FIELDS:
        return block
    return {key: block[key] for key in _BLOCK_FIELDS[block["type"]] if key in block}


def _message(message: object) -> object:
    if not isinstance(message, dict) or message.get("role") not in _MESSAGE_FIELDS:
        return message
    kept = {key: message[key] for key in _MESSAGE_FIELDS[message["role"]] if key in message}
    content = kept.get("content")
    if isinstance(content, str):
        kept["content"] = [_text(content)]
    elif isinstance(content, list):
        kept["content"] = [_block(block) for block in content]
    return kept


def canonical_transcript(transcript: object) -> object:
    """A neutral transcript (``contracts/replaykit/transcript.schema.json``) by meaning: ``system``, ``tools``
    and the messages, each with the fields of :data:`_MESSAGE_FIELDS` and its blocks with those of
    :data:`_BLOCK_FIELDS`; a ``content`` as a string is one text block; optional nulls are absent. A harness's
    own bookkeeping (``version``, ``systemHistory``, derived fields, usage) is left out."""
    view = _drop_nulls(transcript)
    if not isinstance(view, dict):
        return view
    kept = {key: view[key] for key in ("system", "tools", "messages") if key in view}
    if isinstance(kept.get("messages"), list):
        kept["messages"] = [_message(message) for message in kept["messages"]]
    return kept
