"""A provider request's conversation into a neutral transcript: Anthropic ``messages`` and OpenAI ``input``.

Assistant turns go through the response converters (:func:`~replaykit.transcript.from_anthropic`,
:func:`~replaykit.transcript.from_openai`), so their blocks map as a recorded answer's do; they get zero usage
and stopReason ``stop`` (``toolUse`` when they call a tool). Message ``n`` gets ``timestamp + n``. What cannot
be converted raises :class:`~replaykit.transcript.ConversionError` naming the JSON pointer; the details are in
docs/architecture/transcript.md.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

from replaykit.jsondoc import JSON
from replaykit.pointer import json_pointer
from replaykit.transcript.anthropic_messages import from_anthropic
from replaykit.transcript.gemini_generate import content_blocks
from replaykit.transcript.model import ConversionError, Message, Tool, Transcript, UserBlock
from replaykit.transcript.openai_chat import from_chat
from replaykit.transcript.openai_responses import from_openai

__all__ = ["from_anthropic_request", "from_chat_request", "from_gemini_request", "from_openai_request"]


def _fail(parts: list[str | int], message: str) -> ConversionError:
    return ConversionError(f"{json_pointer(parts) or '/'}: {message}")


def _list(value: object, parts: list[str | int], what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(parts, f"{what} must be a list, not {type(value).__name__}")
    return value


def _conversation(doc: object, key: str) -> tuple[JSON, list[object], list[str | int]]:
    """The request body (``{}`` for a bare list) and its ``key`` list, with the pointer prefix of the list."""
    if isinstance(doc, list):
        return {}, doc, []
    if not isinstance(doc, dict):
        raise _fail([], f"a request body (an object with {key}) or its {key} list, not {type(doc).__name__}")
    return doc, _list(doc.get(key), [key], key), [key]


def _transcript(system: str | None, tools: list[Tool], messages: list[Message]) -> Transcript:
    return {"version": 1, "system": system, "tools": tools, "messages": messages}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


# ---------------------------------------------------------------- Anthropic Messages


def from_anthropic_request(doc: object, *, timestamp: int) -> Transcript:
    """An Anthropic Messages request body, or its ``messages`` list, as a neutral transcript."""
    body, messages, prefix = _conversation(doc, "messages")
    out: list[Message] = []
    names: dict[str, str] = {}
    for index, raw in enumerate(messages):
        at = [*prefix, index]
        message = _object(raw, at)
        for converted in _anthropic_turn(message, at, body, names, timestamp):
            converted["timestamp"] = timestamp + len(out)  # one wire message may make several
            out.append(converted)
    return _transcript(_anthropic_system(body.get("system")), _anthropic_tools(body.get("tools")), out)


def _object(value: object, at: list[str | int]) -> JSON:
    if not isinstance(value, dict):
        raise _fail(at, f"a message must be an object, not {type(value).__name__}")
    return value


def _anthropic_turn(message: JSON, at: list[str | int], body: JSON, names: dict[str, str],
                    stamp: int) -> Iterator[Message]:
    role, content = message.get("role"), message.get("content")
    if role == "user" and isinstance(content, str):
        yield {"role": "user", "content": content, "timestamp": stamp}
        return
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else _list(
        content, [*at, "content"], "content")
    if role == "assistant":
        yield _anthropic_assistant(blocks, at, body, names, stamp)
    elif role == "user":
        yield from _anthropic_user(blocks, at, names, stamp)
    else:
        raise _fail([*at, "role"], f"role {role!r}: an Anthropic message is user or assistant")


def _anthropic_assistant(blocks: list[object], at: list[str | int], body: JSON, names: dict[str, str],
                         stamp: int) -> Message:
    calls = [block for block in blocks if isinstance(block, dict) and block.get("type") == "tool_use"]
    names.update({str(call.get("id")): str(call.get("name")) for call in calls})
    answer = {"content": blocks, "model": body.get("model"),
              "stop_reason": "tool_use" if calls else "end_turn"}
    try:
        return from_anthropic(answer, timestamp=stamp)
    except ConversionError as exc:
        raise _fail([*at, "content"], str(exc)) from exc


def _anthropic_user(blocks: list[object], at: list[str | int], names: dict[str, str],
                    stamp: int) -> Iterator[Message]:
    """The user's blocks as one user message; each ``tool_result`` as a toolResult message before it."""
    said: list[UserBlock] = []
    for number, raw in enumerate(blocks):
        where = [*at, "content", number]
        block = _object(raw, where)
        if block.get("type") == "tool_result":
            ident = str(block.get("tool_use_id"))
            result = block.get("content")
            content = result if isinstance(result, str) else [
                _anthropic_user_block(item, [*where, "content", n]) for n, item in enumerate(
                    _list(result or [], [*where, "content"], "a tool result's content"))]
            yield {"role": "toolResult", "toolCallId": ident, "toolName": names.get(ident, ""),
                   "content": content, "isError": bool(block.get("is_error")), "timestamp": stamp}
        else:
            said.append(_anthropic_user_block(block, where))
    if said or not blocks:
        yield {"role": "user", "content": said, "timestamp": stamp}


def _anthropic_user_block(raw: object, at: list[str | int]) -> UserBlock:
    block = _object(raw, at)
    if block.get("type") == "text":
        return {"type": "text", "text": _text(block.get("text"))}
    source = block.get("source")
    if block.get("type") == "image" and isinstance(source, dict) and source.get("type") == "base64":
        return {"type": "image", "data": _text(source.get("data")),
                "mimeType": _text(source.get("media_type"))}
    raise _fail([*at, "type"], f"a user block of type {block.get('type')!r} has no neutral form "
                               "(text, base64 image and tool_result do)")


def _anthropic_system(system: object) -> str | None:
    if isinstance(system, list):
        return "\n\n".join(_text(block.get("text")) for block in system if isinstance(block, dict)) or None
    return system if isinstance(system, str) and system else None


def _anthropic_tools(tools: object) -> list[Tool]:
    out: list[Tool] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if str(tool.get("type", "")).startswith("web_search_"):
            out.append(_hosted_search(tool.get("max_uses"), tool.get("allowed_domains"),
                                      tool.get("blocked_domains")))
        elif "input_schema" in tool and isinstance(tool.get("name"), str):
            out.append(_function(tool["name"], tool.get("description"), tool.get("input_schema")))
    return out


def _hosted_search(max_uses: object, allowed: object, blocked: object) -> Tool:
    tool: JSON = {"type": "hostedSearch"}
    if isinstance(max_uses, int) and not isinstance(max_uses, bool):
        tool["maxUses"] = max_uses
    for key, value in (("allowedDomains", allowed), ("blockedDomains", blocked)):
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            tool[key] = list(value)
    return tool  # type: ignore[return-value]


def _function(name: str, description: object, parameters: object) -> Tool:
    schema = copy.deepcopy(parameters) if isinstance(parameters, dict) else {"type": "object"}
    tool: JSON = {"type": "function", "name": name, "parameters": schema}
    if isinstance(description, str):
        tool["description"] = description
    return tool  # type: ignore[return-value]


# ---------------------------------------------------------------- OpenAI Responses

_USER_ROLES = ("user", "system", "developer")


def from_openai_request(doc: object, *, timestamp: int, provider: str = "openai") -> Transcript:
    """An OpenAI Responses request body, or its ``input`` list, as a neutral transcript (``provider``:
    ``openai`` or ``azure``). Consecutive assistant items (messages, reasoning, function and search calls)
    make one assistant message; ``system`` and ``developer`` messages join ``instructions`` as the system."""
    if isinstance(doc, dict) and isinstance(doc.get("input"), str):
        doc = {**doc, "input": [{"role": "user", "content": doc["input"]}]}
    body, items, prefix = _conversation(doc, "input")
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    state = _OpenAITurns(body, provider, timestamp)
    for index, raw in enumerate(items):
        at = [*prefix, index]
        item = _object(raw, at)
        if item.get("role") in _USER_ROLES and item.get("type", "message") == "message":
            state.flush()
            text_or_blocks = _openai_user_content(item.get("content"), [*at, "content"])
            if item["role"] != "user":
                system.append(text_or_blocks if isinstance(text_or_blocks, str) else "\n".join(
                    _text(block.get("text")) for block in text_or_blocks))
                continue
            state.add({"role": "user", "content": text_or_blocks, "timestamp": state.stamp()})
        elif item.get("type") == "function_call_output":
            state.flush()
            state.tool_result(item, at)
        else:
            state.pending.append((_openai_output_item(item), at))
    state.flush()
    return _transcript("\n\n".join(part for part in system if part) or None,
                       _openai_tools(body.get("tools")), state.messages)


class _OpenAITurns:
    """The messages built so far, and the assistant items waiting to make one assistant message."""

    def __init__(self, body: JSON, provider: str, timestamp: int) -> None:
        self.body, self.provider, self.timestamp = body, provider, timestamp
        self.messages: list[Message] = []
        self.pending: list[tuple[JSON, list[str | int]]] = []
        self.names: dict[str, str] = {}

    def stamp(self) -> int:
        return self.timestamp + len(self.messages)

    def add(self, message: Message) -> None:
        self.messages.append(message)

    def flush(self) -> None:
        if not self.pending:
            return
        items, first = [item for item, _ in self.pending], self.pending[0][1]
        self.names.update({str(item.get("call_id")): str(item.get("name")) for item in items
                           if item.get("type") == "function_call"})
        response = {"status": "completed", "output": items, "model": self.body.get("model")}
        try:
            self.add(from_openai(response, timestamp=self.stamp(), provider=self.provider))
        except ConversionError as exc:
            raise _fail(first, str(exc)) from exc
        self.pending = []

    def tool_result(self, item: JSON, at: list[str | int]) -> None:
        ident = str(item.get("call_id"))
        output = item.get("output")
        content = output if isinstance(output, str) else _openai_user_content(output, [*at, "output"])
        self.add({"role": "toolResult", "toolCallId": ident, "toolName": self.names.get(ident, ""),
                  "content": content, "isError": False, "timestamp": self.stamp()})


def _openai_output_item(item: JSON) -> JSON:
    """An assistant item as a response's output item: an assistant message written as input (``{role,
    content}`` without ``type``, or with ``input_text`` / plain string content) gets the output form."""
    if item.get("role") != "assistant" or item.get("type", "message") != "message":
        return item
    content = item.get("content")
    if isinstance(content, str):
        parts: list[object] = [{"type": "output_text", "text": content, "annotations": []}]
    else:
        parts = [{**part, "type": "output_text"} if _input_text(part) else part for part in content or []]
    return {**item, "type": "message", "content": parts}


def _input_text(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "input_text"


def _openai_user_content(content: object, at: list[str | int]) -> str | list[UserBlock]:
    if isinstance(content, str):
        return content
    blocks: list[UserBlock] = []
    for number, raw in enumerate(_list(content, at, "content")):
        part = _object(raw, [*at, number])
        if part.get("type") in ("input_text", "output_text", "text"):
            blocks.append({"type": "text", "text": _text(part.get("text"))})
        elif part.get("type") == "input_image" and _text(part.get("image_url")).startswith("data:"):
            head, _, data = _text(part.get("image_url")).partition(",")
            blocks.append({"type": "image", "data": data, "mimeType": head[5:].split(";")[0]})
        else:
            raise _fail([*at, number, "type"], f"a user part of type {json.dumps(part.get('type'))} has no "
                                               "neutral form (input_text and data: input_image do)")
    return blocks


def _openai_tools(tools: object) -> list[Tool]:
    out: list[Tool] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if str(tool.get("type", "")).startswith("web_search"):
            filters = tool.get("filters")
            allowed = filters.get("allowed_domains") if isinstance(filters, dict) else None
            out.append(_hosted_search(None, allowed, None))
        elif tool.get("type") == "function" and isinstance(tool.get("name"), str):
            out.append(_function(tool["name"], tool.get("description"), tool.get("parameters")))
    return out


# ---------------------------------------------------------------- Gemini generateContent

_SNAKE = {"function_call": "functionCall", "function_response": "functionResponse",
          "thought_signature": "thoughtSignature", "inline_data": "inlineData", "mime_type": "mimeType"}


def from_gemini_request(doc: object, *, timestamp: int, provider: str = "gemini") -> Transcript:
    """A Gemini ``generateContent`` request body, or its ``contents`` list, as a neutral transcript
    (``provider``: ``gemini`` or ``vertex``). ``model`` turns go through the response converter; a user turn's
    ``functionResponse`` parts become toolResult messages (matched to the call by id, else by name)."""
    body, contents, prefix = _conversation(doc, "contents")
    state = _GeminiTurns(provider, str(body.get("model") or ""), timestamp)
    for index, raw in enumerate(contents):
        at = [*prefix, index]
        content = _snake_free(_object(raw, at))
        parts = _list(content.get("parts") or [], [*at, "parts"], "parts")
        if content.get("role") == "model":
            state.model_turn(content, index, at)
        elif content.get("role", "user") in ("user", "function", "tool"):  # older docs: role function
            state.user_turn(parts, at)
        else:
            role = json.dumps(content.get("role"))
            raise _fail([*at, "role"], f"role {role}: a Gemini turn is user or model (function: answers)")
    system = body.get("systemInstruction", body.get("system_instruction"))
    return _transcript(_gemini_system(system), _gemini_tools(body.get("tools")), state.messages)


def _snake_free(value: Any) -> Any:
    """``value`` with the REST API's snake_case spellings of part keys in their camelCase form."""
    if isinstance(value, dict):
        return {_SNAKE.get(key, key): _snake_free(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_snake_free(item) for item in value]
    return value


class _GeminiTurns:
    """The messages built so far, and the function calls not yet answered (id, name)."""

    def __init__(self, provider: str, model: str, timestamp: int) -> None:
        self.provider, self.model, self.timestamp = provider, model, timestamp
        self.messages: list[Message] = []
        self.open: list[tuple[str, str]] = []

    def model_turn(self, content: JSON, index: int, at: list[str | int]) -> None:
        try:
            blocks = content_blocks(content, {}, self.provider, f"m{index}")
        except ConversionError as exc:
            raise _fail([*at, "parts"], str(exc)) from exc
        calls = [(block["id"], block["name"]) for block in blocks if block["type"] == "toolCall"]
        self.open += calls
        self.messages.append({
            "role": "assistant", "content": blocks, "provider": self.provider, "api": "gemini-generate",
            "model": self.model, "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                           "totalTokens": 0},
            "stopReason": "toolUse" if calls else "stop", "timestamp": self.timestamp + len(self.messages)})

    def user_turn(self, parts: list[object], at: list[str | int]) -> None:
        said: list[UserBlock] = []
        for number, raw in enumerate(parts):
            where = [*at, "parts", number]
            part = _object(raw, where)
            if isinstance(part.get("functionResponse"), dict):
                self._answer(part["functionResponse"])
            else:
                said.append(_gemini_user_part(part, where))
        if said or not parts:
            stamp = self.timestamp + len(self.messages)
            self.messages.append({"role": "user", "content": said, "timestamp": stamp})

    def _answer(self, response: JSON) -> None:
        ident, name = response.get("id"), str(response.get("name") or "")
        match = next((call for call in self.open if call[0] == ident or (ident is None and call[1] == name)),
                     (str(ident or name), name))
        if match in self.open:
            self.open.remove(match)
        self.messages.append({"role": "toolResult", "toolCallId": match[0], "toolName": name,
                              "content": _gemini_result(response.get("response")), "isError": False,
                              "timestamp": self.timestamp + len(self.messages)})


def _gemini_result(response: object) -> str:
    if isinstance(response, dict) and len(response) == 1 and isinstance(next(iter(response.values())), str):
        return str(next(iter(response.values())))  # {"output": "..."} or {"result": "..."}
    return json.dumps(response, ensure_ascii=False, separators=(",", ":"))


def _gemini_user_part(part: JSON, at: list[str | int]) -> UserBlock:
    if isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    inline = part.get("inlineData")
    if isinstance(inline, dict) and _text(inline.get("mimeType")).startswith("image/"):
        return {"type": "image", "data": _text(inline.get("data")), "mimeType": _text(inline.get("mimeType"))}
    kind = next(iter(part), "")
    raise _fail([*at, kind] if kind else at, f"a user part {json.dumps(kind)} has no neutral form "
                                             "(text, an inlineData image and functionResponse do)")


def _gemini_system(system: object) -> str | None:
    if isinstance(system, str):
        return system or None
    parts = system.get("parts") if isinstance(system, dict) else None
    texts = [_text(part.get("text")) for part in parts or [] if isinstance(part, dict)]
    return "\n\n".join(text for text in texts if text) or None


def _gemini_tools(tools: object) -> list[Tool]:
    out: list[Tool] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if any(key in tool for key in ("googleSearch", "google_search", "googleSearchRetrieval",
                                       "google_search_retrieval")):
            out.append(_hosted_search(None, None, None))
        for declared in tool.get("functionDeclarations", tool.get("function_declarations")) or []:
            if isinstance(declared, dict) and isinstance(declared.get("name"), str):
                parameters = declared.get("parametersJsonSchema", declared.get("parameters"))
                out.append(_function(declared["name"], declared.get("description"), parameters))
    return out


# ---------------------------------------------------------------- OpenAI Chat Completions

_SYSTEM_ROLES = ("system", "developer")


def from_chat_request(doc: object, *, timestamp: int, provider: str = "openai") -> Transcript:
    """A Chat Completions request body, or its ``messages`` list, as a neutral transcript (``provider``:
    ``openai``, ``azure`` or an OpenAI-compatible one). ``system`` / ``developer`` messages make the system;
    ``web_search_options`` enables the hostedSearch tool."""
    body, messages, prefix = _conversation(doc, "messages")
    state = _ChatTurns(body, provider, timestamp)
    for index, raw in enumerate(messages):
        state.add([*prefix, index], _object(raw, [*prefix, index]))
    tools = _chat_tools(body.get("tools"))
    if isinstance(body.get("web_search_options"), dict):
        tools.insert(0, _hosted_search(None, None, None))
    return _transcript("\n\n".join(part for part in state.system if part) or None, tools, state.messages)


class _ChatTurns:
    """The messages and system texts built so far, and the names of the tool calls made."""

    def __init__(self, body: JSON, provider: str, timestamp: int) -> None:
        self.body, self.provider, self.timestamp = body, provider, timestamp
        self.messages: list[Message] = []
        self.system: list[str] = []
        self.names: dict[str, str] = {}

    def add(self, at: list[str | int], message: JSON) -> None:
        role, stamp, content = message.get("role"), self.timestamp + len(self.messages), [*at, "content"]
        if role in _SYSTEM_ROLES:
            self.system.append(_chat_text(message.get("content"), content))
        elif role == "user":
            self.messages.append({"role": "user", "content": _chat_user(message.get("content"), content),
                                  "timestamp": stamp})
        elif role == "assistant":
            self.messages.append(self._assistant(at, message, stamp))
        elif role == "tool":
            ident = message.get("tool_call_id")
            if not isinstance(ident, str) or not ident:
                raise _fail([*at, "tool_call_id"], "a tool message names the call it answers in tool_call_id")
            self.messages.append({"role": "toolResult", "toolCallId": ident,
                                  "toolName": self.names.get(ident, ""), "isError": False,
                                  "content": _chat_user(message.get("content"), content), "timestamp": stamp})
        else:
            raise _fail([*at, "role"], f"role {json.dumps(role)}: a chat message is system, developer, user, "
                                       "assistant or tool")

    def _assistant(self, at: list[str | int], message: JSON, stamp: int) -> Message:
        calls = message.get("tool_calls") or []
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                self.names[str(call.get("id"))] = str(function.get("name"))
        answer = {"model": self.body.get("model"), "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]}
        try:
            return from_chat(answer, timestamp=stamp, provider=self.provider)
        except ConversionError as exc:
            raise _fail(at, str(exc)) from exc


def _chat_text(content: object, at: list[str | int]) -> str:
    said = _chat_user(content, at)
    return said if isinstance(said, str) else "\n".join(
        block["text"] for block in said if block["type"] == "text")


def _chat_user(content: object, at: list[str | int]) -> str | list[UserBlock]:
    if isinstance(content, str):
        return content
    blocks: list[UserBlock] = []
    for number, raw in enumerate(_list(content, at, "content")):
        part = _object(raw, [*at, number])
        image = part.get("image_url")
        url = _text(image.get("url")) if isinstance(image, dict) else ""
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": _text(part.get("text"))})
        elif part.get("type") == "image_url" and url.startswith("data:"):
            head, _, data = url.partition(",")
            blocks.append({"type": "image", "data": data, "mimeType": head[5:].split(";")[0]})
        else:
            kind = json.dumps(part.get("type"))
            raise _fail([*at, number, "type"], f"a content part of type {kind} has no neutral form (text and "
                                               "a data: image_url do)")
    return blocks


def _chat_tools(tools: object) -> list[Tool]:
    out: list[Tool] = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out.append(_function(function["name"], function.get("description"), function.get("parameters")))
    return out
