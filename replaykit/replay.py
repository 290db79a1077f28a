"""Project a neutral transcript onto a target: exactly the request body a correct harness sends.

:func:`project` builds the Anthropic Messages, OpenAI Responses, Gemini generateContent or Chat Completions
body field by field: provider blocks replayed verbatim from ``raw`` to the same provider and API, projected
to text or left out for another, never when display-only or when the API has no input form for them;
:func:`projection` also returns a :class:`Note` for each block left out, with its JSON pointer. Structural
faults raise :class:`~replaykit.errors.LocalRequestError`. The replay policy: docs/architecture/modules.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from copy import deepcopy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from replaykit.errors import LocalRequestError, UsageError
from replaykit.jsondoc import JSON
from replaykit.routes import APIS, PROVIDER_APIS, Api
from replaykit.routes import MODEL_APIS as PROVIDERS

__all__ = ["APIS", "PROVIDERS", "Api", "Note", "Projection", "Provider", "ProviderModel",
           "citation_text_projection", "project", "projection", "search_text_projection"]

# providers of model turns (replaykit.routes.MODEL_APIS)
Provider = Literal["anthropic", "openai", "azure", "gemini", "vertex"]
ANTHROPIC_SEARCH_TOOL = "web_search_20250305"
_C = TypeVar("_C")
_T = TypeVar("_T")


class Copy(Protocol):
    """How a projection takes a value from the transcript: a deep copy, or the value itself."""

    def __call__(self, value: _T, /) -> _T: ...


def _shared(value: _T) -> _T:
    """The value itself: what a body that is only read (the estimator's) takes instead of a deep copy."""
    return value


@dataclass(frozen=True, slots=True)
class ProviderModel:
    """Which provider wire and model a transcript is replayed as: ``provider`` (anthropic | openai | azure |
    gemini | vertex), its ``api`` (one of the provider's, ``replaykit.routes.PROVIDER_APIS``) and ``model``.

    ``max_tokens`` is sent to Anthropic when given (the API requires it on a real request).
    """

    provider: Provider
    api: Api
    model: str
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        expected = PROVIDER_APIS.get(self.provider)
        if expected is None:
            raise UsageError(f"provider={self.provider!r} must be one of {sorted(PROVIDERS)}")
        if self.api not in expected:
            raise UsageError(f"api={self.api!r} does not fit provider {self.provider!r}; use one of "
                             f"{', '.join(map(repr, expected))}")
        if not isinstance(self.model, str) or not self.model:
            raise UsageError(f"model={self.model!r} must be a non-empty string")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens < 1):
            raise UsageError(f"max_tokens={self.max_tokens!r} must be a positive integer")


if TYPE_CHECKING:
    Target = ProviderModel  # deprecated: the name until 0.2 (CHANGELOG.md); a type checker sees the class
else:

    def __getattr__(name: str) -> object:
        """``Target``, the deprecated name of :class:`ProviderModel`, with a ``DeprecationWarning``."""
        if name != "Target":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import warnings

        warnings.warn("replaykit.replay.Target is deprecated: use replaykit.replay.ProviderModel (the name "
                      "Target means the harness under test, replaykit.scenario.Target)", DeprecationWarning,
                      stacklevel=2)
        return ProviderModel


@dataclass(frozen=True, slots=True)
class Note:
    """A block left out of the projection on purpose: ``pointer`` into the transcript and why."""

    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.pointer}: {self.message}"


@dataclass(frozen=True, slots=True)
class Projection:
    """What :func:`projection` gives: the request ``body`` and the ``notes`` on what it leaves out."""

    body: JSON
    notes: tuple[Note, ...] = ()


# ---------------------------------------------------------------- the cross-provider text


def search_text_projection(block: Mapping[str, object]) -> str:
    """The text a ``hostedSearch`` block becomes for another provider: query, result titles and URLs (a
    Gemini grounding result's queries first)."""
    phase = block.get("phase")
    if phase == "call":
        query = block.get("query")
        return f"[web search: {query}]" if isinstance(query, str) and query else "[web search]"
    if phase == "error":
        return f"[web search error: {block.get('errorCode')}]"
    lines = [*(f"[web search: {query}]" for query in _grounding_queries(block)), "[web search results]"]
    for number, result in enumerate(_results(block), start=1):
        title = result.get("title")
        url = str(result.get("url") or "")
        lines.append(f"{number}. {title} - {url}" if isinstance(title, str) and title else f"{number}. {url}")
    return "\n".join(lines)


def _grounding_queries(block: Mapping[str, object]) -> list[str]:
    """The queries of a Gemini grounding result (its ``raw`` groundingMetadata's webSearchQueries): its call
    blocks are display-only, so the result carries them to another provider."""
    raw = block.get("raw")
    queries = raw.get("webSearchQueries") if isinstance(raw, dict) else None
    return [query for query in queries if isinstance(query, str) and query] if isinstance(queries, list) \
        else []


def citation_text_projection(citations: object) -> str:
    """The text a text block's citations become for another provider, which cannot take them: each cited
    page's title and URL, once, in the order cited ('' when none names a URL: a Gemini support's pages are in
    its grounding, projected on their own; a document citation names none)."""
    pages: dict[str, str | None] = {}
    for citation in citations if isinstance(citations, list) else []:
        if (page := _cited_page(citation)) is not None:
            pages.setdefault(*page)
    lines = [f"{number}. {title} - {url}" if title else f"{number}. {url}"
             for number, (url, title) in enumerate(pages.items(), start=1)]
    return "\n".join(["[cited sources]", *lines]) if lines else ""


def _cited_page(citation: object) -> tuple[str, str | None] | None:
    """The URL and title a citation names: Anthropic's and Responses' on the citation, Chat Completions'
    inside its ``url_citation``; None for one without a URL."""
    inner = citation.get("url_citation") if isinstance(citation, dict) else None
    source = inner if isinstance(inner, dict) else citation
    url = source.get("url") if isinstance(source, dict) else None
    if not isinstance(url, str) or not url:
        return None
    title = source.get("title") if isinstance(source, dict) else None
    return url, title if isinstance(title, str) and title else None


def _foreign_text(block: JSON) -> str:
    """A text block as another provider gets it: its text, then the pages its citations name."""
    text, sources = _text(block), citation_text_projection(block.get("citations"))
    return f"{text}\n\n{sources}" if text and sources else text or sources


def _results(block: Mapping[str, object]) -> list[JSON]:
    results = block.get("results")
    if isinstance(results, list):
        return [item for item in results if isinstance(item, dict)]
    raw = block.get("raw")
    content = raw.get("content") if isinstance(raw, dict) else None  # a legacy block: results only in raw
    return [item for item in content if isinstance(item, dict)] if isinstance(content, list) else []


# ---------------------------------------------------------------- walking the transcript


class _Walk:
    """Position in the transcript, for errors that name the JSON pointer and the message index."""

    def __init__(self, target: ProviderModel, share: bool = False, since: int = 0) -> None:
        self.target = target
        self.since = since
        self.index: int | None = None
        self.notes: list[Note] = []
        self.copy: Copy = _shared if share else deepcopy

    def fail(self, pointer: str, message: str) -> LocalRequestError:
        return LocalRequestError(message, phase="validation", pointer=pointer, message_index=self.index)

    def blocks(self, message: JSON) -> list[JSON]:
        content = message.get("content")
        if not isinstance(content, list):
            raise self.fail(f"/messages/{self.index}/content",
                            f"content must be a list of blocks, not {type(content).__name__}")
        for number, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise self.fail(f"/messages/{self.index}/content/{number}",
                                "a block must be an object with a string type")
        return content

    def converter(self, table: Mapping[str, _C], block: JSON, number: int) -> _C:
        """The converter of an assistant block's type in ``table``; an unknown type is a validation error."""
        convert = table.get(block["type"])
        if convert is None:
            raise self.fail(f"/messages/{self.index}/content/{number}/type",
                            f"unknown assistant block type {block['type']!r}")
        return convert

    def same(self, message: JSON, block: JSON) -> bool:
        provider = block.get("provider", message.get("provider"))
        api = block.get("api", message.get("api"))
        return provider == self.target.provider and api == self.target.api

    @staticmethod
    def _origin(message: JSON, block: JSON) -> str:
        return f"{block.get('provider', message.get('provider'))}/{block.get('api', message.get('api'))}"

    def _cited(self, message: JSON, block: JSON, number: int) -> None:
        """A note for another provider's citations, which go as text (:func:`citation_text_projection`)."""
        if citation_text_projection(block.get("citations")):
            self.notes.append(Note(f"/messages/{self.index}/content/{number}/citations",
                                   f"citations from {self._origin(message, block)} are sent to "
                                   f"{self.target.provider}/{self.target.api} as text after the text"))

    def kept(self, message: JSON, block: JSON, number: int) -> bool:
        """False, with a note, for a block no projection to this target carries: a display-only search
        record, or an opaque block of another provider or API."""
        kind = block["type"]
        if kind == "text" and not self.same(message, block):
            self._cited(message, block, number)
        if kind not in ("providerBlock", "hostedSearch"):
            return True
        pointer = f"/messages/{self.index}/content/{number}"
        if kind == "providerBlock" and not isinstance(block.get("raw"), dict):
            raise self.fail(f"{pointer}/raw", "a providerBlock must keep its wire block in raw (an object)")
        if kind == "providerBlock" and not self.same(message, block):
            where = self._origin(message, block)
            self.notes.append(Note(pointer, f"providerBlock {block.get('blockType')!r} from {where} is not "
                                            f"sent to {self.target.provider}/{self.target.api}: dropped"))
            return False
        if kind == "hostedSearch" and not isinstance(block.get("raw"), dict):
            if not (self.same(message, block) and self.target.api in _NO_SEARCH_INPUT):
                self.notes.append(Note(pointer, "display-only hostedSearch block (no raw): not replayed"))
            return False
        return True


#: The APIs that take no search history back: their own search blocks are left out silently.
_NO_SEARCH_INPUT = ("gemini-generate", "openai-chat")


Numbered = list[tuple[int, JSON]]


def _messages(transcript: JSON, walk: _Walk) -> Numbered:
    """The messages from ``walk.since`` on, each with its index in the transcript; their roles checked."""
    messages = transcript.get("messages")
    if not isinstance(messages, list):
        raise walk.fail("/messages", "messages must be a list of messages")
    numbered = list(enumerate(messages[walk.since:], start=walk.since))
    for index, message in numbered:
        walk.index = index
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "toolResult"):
            role = message.get("role") if isinstance(message, dict) else message
            raise walk.fail(f"/messages/{index}/role",
                            f"unknown role {role!r}; use user, assistant or toolResult")
    walk.index = None
    return numbered


def _replayed(message: JSON) -> bool:
    return message.get("stopReason") not in ("error", "aborted")


def _system(transcript: JSON) -> str | None:
    system = transcript.get("system")
    return system if isinstance(system, str) and system else None


def _tools(transcript: JSON, walk: _Walk) -> list[JSON]:
    tools = transcript.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise walk.fail("/tools", "tools must be a list of tool objects")
    return tools


def _text(block: JSON) -> str:
    return str(block.get("text") or "")


def _thinking_text(block: JSON) -> str | None:
    text = block.get("thinking")
    return text if isinstance(text, str) and text and not block.get("redacted") else None


# ---------------------------------------------------------------- Anthropic Messages


def _anthropic_body(transcript: JSON, walk: _Walk) -> JSON:
    body: JSON = {"model": walk.target.model}
    if walk.target.max_tokens is not None:
        body["max_tokens"] = walk.target.max_tokens
    messages = _messages(transcript, walk)
    if (system := _system(transcript)) is not None and not walk.since:
        body["system"] = system
    if not walk.since and (tools := [_anthropic_tool(tool, walk.copy) for tool in _tools(transcript, walk)]):
        body["tools"] = tools
    body["messages"] = _anthropic_messages(messages, walk)
    return body


def _anthropic_tool(tool: JSON, copy: Copy) -> JSON:
    if tool.get("type") == "hostedSearch":
        out: JSON = {"type": ANTHROPIC_SEARCH_TOOL, "name": "web_search"}
        for key, wire in (("maxUses", "max_uses"), ("allowedDomains", "allowed_domains"),
                          ("blockedDomains", "blocked_domains")):
            if key in tool:
                out[wire] = copy(tool[key])
        return out
    out = {"name": str(tool.get("name"))}
    if isinstance(tool.get("description"), str):
        out["description"] = tool["description"]
    out["input_schema"] = copy(tool.get("parameters") or {"type": "object"})
    return out


def _anthropic_messages(messages: Numbered, walk: _Walk) -> list[JSON]:
    out: list[JSON] = []
    for index, message in messages:
        walk.index = index
        role = message["role"]
        if role == "user":
            out.append({"role": "user", "content": _anthropic_user(message, walk)})
        elif role == "toolResult":
            _append_tool_result(out, _anthropic_tool_result(message, walk))
        elif _replayed(message) and (content := _anthropic_assistant(message, walk)):
            out.append({"role": "assistant", "content": content})
    return out


def _anthropic_user(message: JSON, walk: _Walk) -> str | list[JSON]:
    if isinstance(message.get("content"), str):
        return str(message["content"])
    return [_anthropic_user_block(block, walk) for block in walk.blocks(message)]


def _user_block(block: JSON, walk: _Walk) -> None:
    """A user or tool-result block is text or an image, for every target."""
    if block["type"] not in ("image", "text"):
        raise walk.fail(f"/messages/{walk.index}/content", f"a user block cannot be {block['type']!r}")


def _anthropic_user_block(block: JSON, walk: _Walk) -> JSON:
    _user_block(block, walk)
    if block["type"] == "image":
        source = {"type": "base64", "media_type": str(block.get("mimeType")), "data": str(block.get("data"))}
        return {"type": "image", "source": source}
    return {"type": "text", "text": _text(block)}


def _anthropic_tool_result(message: JSON, walk: _Walk) -> JSON:
    content = message.get("content")
    blocks = content if isinstance(content, str) else [
        _anthropic_user_block(block, walk) for block in walk.blocks(message)]
    return {"type": "tool_result", "tool_use_id": str(message.get("toolCallId")), "content": blocks,
            "is_error": bool(message.get("isError"))}


def _append_tool_result(out: list[JSON], result: JSON) -> None:
    last = out[-1] if out else None
    if last and last["role"] == "user" and isinstance(last["content"], list) and all(
            block.get("type") == "tool_result" for block in last["content"]):
        last["content"].append(result)
    else:
        out.append({"role": "user", "content": [result]})


def _anthropic_assistant(message: JSON, walk: _Walk) -> list[JSON]:
    out: list[JSON] = []
    for number, block in enumerate(walk.blocks(message)):
        convert = walk.converter(_ANTHROPIC_BLOCKS, block, number)
        if not walk.kept(message, block, number):
            continue
        if projected := convert(block, walk.same(message, block), walk.copy):
            out.append(projected)
    return out


def _anthropic_text(block: JSON, same: bool, copy: Copy) -> JSON | None:
    text = _text(block) if same else _foreign_text(block)
    if not text:
        return None
    out: JSON = {"type": "text", "text": text}
    if same and isinstance(block.get("citations"), list) and block["citations"]:
        out["citations"] = copy(block["citations"])
    return out


def _anthropic_thinking(block: JSON, same: bool, copy: Copy) -> JSON | None:
    signature = block.get("signature")
    if same and isinstance(signature, str) and signature:
        if block.get("redacted"):
            return {"type": "redacted_thinking", "data": signature}
        return {"type": "thinking", "thinking": str(block.get("thinking") or ""), "signature": signature}
    text = _thinking_text(block)
    return {"type": "text", "text": text} if text else None


def _anthropic_tool_call(block: JSON, same: bool, copy: Copy) -> JSON:
    if same and isinstance(block.get("raw"), dict):
        return copy(block["raw"])
    arguments = block.get("arguments")
    return {"type": "tool_use", "id": str(block.get("id")), "name": str(block.get("name")),
            "input": copy(arguments) if isinstance(arguments, dict) else {}}


def _anthropic_search(block: JSON, same: bool, copy: Copy) -> JSON:
    return copy(block["raw"]) if same else {"type": "text", "text": search_text_projection(block)}


def _verbatim(block: JSON, same: bool, copy: Copy) -> JSON:
    """An opaque block's wire form (only ever reached for the same provider and API: see _Walk.kept)."""
    return copy(block["raw"])


_ANTHROPIC_BLOCKS: dict[str, Callable[[JSON, bool, Copy], JSON | None]] = {
    "text": _anthropic_text, "thinking": _anthropic_thinking, "toolCall": _anthropic_tool_call,
    "hostedSearch": _anthropic_search, "providerBlock": _verbatim,
}


# ---------------------------------------------------------------- OpenAI Responses


def _openai_body(transcript: JSON, walk: _Walk) -> JSON:
    body: JSON = {"model": walk.target.model}
    messages = _messages(transcript, walk)
    if (system := _system(transcript)) is not None and not walk.since:
        body["instructions"] = system
    if not walk.since and (tools := [_openai_tool(tool, walk.copy) for tool in _tools(transcript, walk)]):
        body["tools"] = tools
    body["input"] = _openai_input(messages, walk)
    return body


def _openai_tool(tool: JSON, copy: Copy) -> JSON:
    if tool.get("type") == "hostedSearch":
        out: JSON = {"type": "web_search"}
        if isinstance(tool.get("allowedDomains"), list):
            out["filters"] = {"allowed_domains": copy(tool["allowedDomains"])}
        return out
    out = {"type": "function", "name": str(tool.get("name"))}
    if isinstance(tool.get("description"), str):
        out["description"] = tool["description"]
    out["parameters"] = copy(tool.get("parameters") or {"type": "object"})
    out["strict"] = False
    return out


def _openai_input(messages: Numbered, walk: _Walk) -> list[JSON]:
    out: list[JSON] = []
    for index, message in messages:
        walk.index = index
        role = message["role"]
        if role == "user":
            out.append({"role": "user", "content": _openai_user(message, walk)})
        elif role == "toolResult":
            out.append({"type": "function_call_output", "call_id": str(message.get("toolCallId")),
                        "output": _openai_user(message, walk, for_tool=True)})
        elif _replayed(message):
            _openai_assistant(message, walk, out)
    return out


def _user_content(message: JSON, walk: _Walk, part: Callable[[JSON, _Walk], JSON], text: str,
                  for_tool: bool) -> str | list[JSON]:
    """A user turn's (or a tool result's) content on an OpenAI wire: its string, else its parts made by
    ``part``; a tool result of text parts only (type ``text``) is their text joined."""
    if isinstance(message.get("content"), str):
        return str(message["content"])
    parts = [part(block, walk) for block in walk.blocks(message)]
    if for_tool and all(each["type"] == text for each in parts):
        return "\n".join(each["text"] for each in parts)
    return parts


def _openai_user(message: JSON, walk: _Walk, for_tool: bool = False) -> str | list[JSON]:
    return _user_content(message, walk, _openai_user_block, "input_text", for_tool)


def _openai_user_block(block: JSON, walk: _Walk) -> JSON:
    _user_block(block, walk)
    if block["type"] == "image":
        url = f"data:{block.get('mimeType')};base64,{block.get('data')}"
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    return {"type": "input_text", "text": _text(block)}


def _openai_assistant(message: JSON, walk: _Walk, out: list[JSON]) -> None:
    for number, block in enumerate(walk.blocks(message)):
        convert = walk.converter(_OPENAI_BLOCKS, block, number)
        if walk.kept(message, block, number):
            convert(block, walk.same(message, block), out, walk.copy)


def _assistant_text(text: str, out: list[JSON]) -> None:
    if text:
        out.append({"role": "assistant", "content": text})


def _openai_text(block: JSON, same: bool, out: list[JSON], copy: Copy) -> None:
    item_id = block.get("signature")
    if not (same and isinstance(item_id, str) and item_id):
        _assistant_text(_text(block) if same else _foreign_text(block), out)
        return
    citations = block.get("citations") if isinstance(block.get("citations"), list) else []
    part = {"type": "output_text", "text": _text(block), "annotations": copy(citations)}
    last = out[-1] if out else None
    if last is not None and last.get("type") == "message" and last.get("id") == item_id:
        last["content"].append(part)
    else:
        out.append({"type": "message", "role": "assistant", "id": item_id, "status": "completed",
                    "content": [part]})


def _openai_thinking(block: JSON, same: bool, out: list[JSON], copy: Copy) -> None:
    if same and isinstance(block.get("raw"), dict):
        out.append(copy(block["raw"]))
    else:
        _assistant_text(_thinking_text(block) or "", out)


def _openai_tool_call(block: JSON, same: bool, out: list[JSON], copy: Copy) -> None:
    if same and isinstance(block.get("raw"), dict):
        out.append(copy(block["raw"]))
        return
    arguments = block.get("arguments") if isinstance(block.get("arguments"), dict) else {}
    out.append({"type": "function_call", "call_id": str(block.get("id")), "name": str(block.get("name")),
                "arguments": json.dumps(arguments, ensure_ascii=False)})


def _openai_search(block: JSON, same: bool, out: list[JSON], copy: Copy) -> None:
    if same:
        out.append(copy(block["raw"]))
    else:
        _assistant_text(search_text_projection(block), out)


def _openai_verbatim(block: JSON, same: bool, out: list[JSON], copy: Copy) -> None:
    out.append(_verbatim(block, same, copy))


_OPENAI_BLOCKS: dict[str, Callable[[JSON, bool, list[JSON], Copy], None]] = {
    "text": _openai_text, "thinking": _openai_thinking, "toolCall": _openai_tool_call,
    "hostedSearch": _openai_search, "providerBlock": _openai_verbatim,
}


# ---------------------------------------------------------------- Gemini generateContent


def _gemini_body(transcript: JSON, walk: _Walk) -> JSON:
    """``{systemInstruction?, tools?, contents}``: the model is in the URL path, not the body."""
    body: JSON = {}
    messages = _messages(transcript, walk)
    if (system := _system(transcript)) is not None and not walk.since:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    if not walk.since and (tools := _gemini_tools(_tools(transcript, walk), walk.copy)):
        body["tools"] = tools
    body["contents"] = _gemini_contents(messages, walk)
    return body


def _gemini_tools(tools: list[JSON], copy: Copy) -> list[JSON]:
    """One tool holding every function declaration, then ``googleSearch`` (the SDK's REST field names)."""
    declarations = [_gemini_declaration(tool, copy) for tool in tools if tool.get("type") != "hostedSearch"]
    out: list[JSON] = [{"functionDeclarations": declarations}] if declarations else []
    if any(tool.get("type") == "hostedSearch" for tool in tools):
        out.append({"googleSearch": {}})
    return out


def _gemini_declaration(tool: JSON, copy: Copy) -> JSON:
    out: JSON = {"name": str(tool.get("name"))}
    if isinstance(tool.get("description"), str):
        out["description"] = tool["description"]
    out["parametersJsonSchema"] = copy(tool.get("parameters") or {"type": "object"})
    return out


def _gemini_contents(messages: Numbered, walk: _Walk) -> list[JSON]:
    """The contents; a function response carries the ``id`` of its call when the call sent has one."""
    out: list[JSON] = []
    ids: set[str] = set()
    for index, message in messages:
        walk.index = index
        role = message["role"]
        if role == "user":
            out.append({"role": "user", "parts": _gemini_user(message, walk)})
        elif role == "toolResult":
            _append_parts(out, "user", [_gemini_tool_result(message, walk, ids)], "functionResponse")
        elif _replayed(message) and (parts := _gemini_model(message, walk)):
            out.append({"role": "model", "parts": parts})
            ids.update(call["id"] for part in parts if isinstance(call := part.get("functionCall"), dict)
                       and isinstance(call.get("id"), str))
    return out


def _append_parts(out: list[JSON], role: str, parts: list[JSON], key: str) -> None:
    """Consecutive tool results go in one content, as the calls of one turn came in one."""
    last = out[-1] if out else None
    if last and last["role"] == role and all(key in part for part in last["parts"]):
        last["parts"].extend(parts)
    else:
        out.append({"role": role, "parts": parts})


def _gemini_user(message: JSON, walk: _Walk) -> list[JSON]:
    if isinstance(message.get("content"), str):
        return [{"text": str(message["content"])}]
    return [_gemini_user_part(block, walk) for block in walk.blocks(message)]


def _gemini_user_part(block: JSON, walk: _Walk) -> JSON:
    _user_block(block, walk)
    if block["type"] == "image":
        return {"inlineData": {"mimeType": str(block.get("mimeType")), "data": str(block.get("data"))}}
    return {"text": _text(block)}


def _gemini_tool_result(message: JSON, walk: _Walk, ids: set[str]) -> JSON:
    """A ``functionResponse`` part: the text under ``output`` (``error`` when it failed, as Google's docs
    say), images as its own ``parts``."""
    content = message.get("content")
    parts = [{"text": content}] if isinstance(content, str) else [
        _gemini_user_part(block, walk) for block in walk.blocks(message)]
    text = "\n".join(part["text"] for part in parts if "text" in part)
    response: JSON = {"name": str(message.get("toolName") or ""),
                      "response": {"error" if message.get("isError") else "output": text}}
    if (ident := message.get("toolCallId")) in ids:
        response["id"] = ident
    if images := [part for part in parts if "inlineData" in part]:
        response["parts"] = images
    return {"functionResponse": response}


def _gemini_model(message: JSON, walk: _Walk) -> list[JSON]:
    out: list[JSON] = []
    for number, block in enumerate(walk.blocks(message)):
        convert = walk.converter(_GEMINI_BLOCKS, block, number)
        if not walk.kept(message, block, number) or _gemini_metadata(block):
            continue
        if projected := convert(block, walk.same(message, block), walk.copy):
            out.append(projected)
    return out


def _gemini_metadata(block: JSON) -> bool:
    """A candidate's metadata kept as an opaque block (``urlContextMetadata``): not a part, and Gemini takes
    no metadata back, so it is left out silently, as grounding is."""
    return block["type"] == "providerBlock" and block.get("blockType") in _GEMINI_METADATA


_GEMINI_METADATA = frozenset({"urlContextMetadata", "groundingMetadata"})


def _gemini_text(block: JSON, same: bool, copy: Copy) -> JSON | None:
    """Text, its ``thoughtSignature`` back to the same provider; Gemini takes no citations back."""
    text = _text(block)
    signature = block.get("signature")
    if same and isinstance(signature, str) and signature:
        return {"text": text, "thoughtSignature": signature}
    text = text if same else _foreign_text(block)
    return {"text": text} if text else None


def _gemini_thinking(block: JSON, same: bool, copy: Copy) -> JSON | None:
    if same and isinstance(raw := block.get("raw"), dict):
        part: JSON = copy(raw)  # the thought part, its thoughtSignature intact
        return part
    text = _thinking_text(block)
    return {"text": text} if text else None


def _gemini_tool_call(block: JSON, same: bool, copy: Copy) -> JSON:
    if same and isinstance(block.get("raw"), dict):
        return copy(block["raw"])
    arguments = block.get("arguments")
    return {"functionCall": {"name": str(block.get("name")),
                             "args": copy(arguments) if isinstance(arguments, dict) else {}}}


def _gemini_search(block: JSON, same: bool, copy: Copy) -> JSON | None:
    """Gemini never takes groundingMetadata back: its own search blocks are left out, silently (the
    grounded answer is in the text); another provider's become text."""
    return None if same else {"text": search_text_projection(block)}


_GEMINI_BLOCKS: dict[str, Callable[[JSON, bool, Copy], JSON | None]] = {
    "text": _gemini_text, "thinking": _gemini_thinking, "toolCall": _gemini_tool_call,
    "hostedSearch": _gemini_search, "providerBlock": _verbatim,
}


# ---------------------------------------------------------------- OpenAI Chat Completions


def _chat_body(transcript: JSON, walk: _Walk) -> JSON:
    """``{model, messages, tools?, web_search_options?}``; the system prompt is the first message."""
    body: JSON = {"model": walk.target.model}
    numbered = _messages(transcript, walk)
    messages: list[JSON] = []
    if (system := _system(transcript)) is not None and not walk.since:
        messages.append({"role": "system", "content": system})
    tools = [] if walk.since else _tools(transcript, walk)
    if functions := [_chat_tool(tool, walk.copy) for tool in tools if tool.get("type") != "hostedSearch"]:
        body["tools"] = functions
    if any(tool.get("type") == "hostedSearch" for tool in tools):
        body["web_search_options"] = {}
    body["messages"] = messages + _chat_messages(numbered, walk)
    return body


def _chat_tool(tool: JSON, copy: Copy) -> JSON:
    function: JSON = {"name": str(tool.get("name"))}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    function["parameters"] = copy(tool.get("parameters") or {"type": "object"})
    return {"type": "function", "function": function}


def _chat_messages(messages: Numbered, walk: _Walk) -> list[JSON]:
    out: list[JSON] = []
    for index, message in messages:
        walk.index = index
        role = message["role"]
        if role == "user":
            out.append({"role": "user", "content": _chat_user(message, walk)})
        elif role == "toolResult":
            out.append({"role": "tool", "tool_call_id": str(message.get("toolCallId")),
                        "content": _chat_user(message, walk, for_tool=True)})
        elif _replayed(message) and (assistant := _chat_assistant(message, walk)):
            out.append(assistant)
    return out


def _chat_user(message: JSON, walk: _Walk, for_tool: bool = False) -> str | list[JSON]:
    return _user_content(message, walk, _chat_user_part, "text", for_tool)


def _chat_user_part(block: JSON, walk: _Walk) -> JSON:
    _user_block(block, walk)
    if block["type"] == "image":
        return {"type": "image_url", "image_url": {"url": f"data:{block.get('mimeType')};base64,"
                                                          f"{block.get('data')}"}}
    return {"type": "text", "text": _text(block)}


def _chat_assistant(message: JSON, walk: _Walk) -> JSON | None:
    """One assistant message: its texts joined, its tool calls in ``tool_calls``; None when empty."""
    texts: list[str] = []
    calls: list[JSON] = []
    for number, block in enumerate(walk.blocks(message)):
        if block["type"] == "providerBlock":
            _chat_opaque(message, block, number, walk, calls)
            continue
        convert = walk.converter(_CHAT_BLOCKS, block, number)
        if walk.kept(message, block, number):
            convert(block, walk.same(message, block), (texts, calls), walk.copy)
    if not texts and not calls:
        return None
    out: JSON = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = calls
    return out


def _chat_opaque(message: JSON, block: JSON, number: int, walk: _Walk, calls: list[JSON]) -> None:
    """An opaque Chat Completions block is a tool call of a type the transcript does not model (``custom``):
    its entry goes back in ``tool_calls``, verbatim, to the same provider (another's gets a note from
    ``kept``)."""
    if walk.kept(message, block, number):
        calls.append(walk.copy(block["raw"]))


_ChatParts = tuple[list[str], list[JSON]]


def _chat_text(block: JSON, same: bool, parts: _ChatParts, copy: Copy) -> None:
    """Text alone: Chat Completions takes no annotations back (another provider's cited pages follow as
    text)."""
    if text := _text(block) if same else _foreign_text(block):
        parts[0].append(text)


def _chat_thinking(block: JSON, same: bool, parts: _ChatParts, copy: Copy) -> None:
    """Chat Completions has no input form for reasoning: its own is left out; another's becomes text."""
    if not same and (text := _thinking_text(block)):
        parts[0].append(text)


def _chat_tool_call(block: JSON, same: bool, parts: _ChatParts, copy: Copy) -> None:
    if same and isinstance(block.get("raw"), dict):
        parts[1].append(copy(block["raw"]))
        return
    arguments = block.get("arguments") if isinstance(block.get("arguments"), dict) else {}
    parts[1].append({"id": str(block.get("id")), "type": "function", "function": {
        "name": str(block.get("name")), "arguments": json.dumps(arguments, ensure_ascii=False)}})


def _chat_search(block: JSON, same: bool, parts: _ChatParts, copy: Copy) -> None:
    """Chat Completions takes no search results back: its own are left out silently; another's are text."""
    if not same:
        parts[0].append(search_text_projection(block))


_CHAT_BLOCKS: dict[str, Callable[[JSON, bool, _ChatParts, Copy], None]] = {
    "text": _chat_text, "thinking": _chat_thinking, "toolCall": _chat_tool_call,
    "hostedSearch": _chat_search,
}


# ---------------------------------------------------------------- entry point


def projection(transcript: object, target: ProviderModel, *, share: bool = False,
               since: int = 0) -> Projection:
    """The request body a correct harness sends to ``target`` for ``transcript``, with a note for each
    block left out on purpose (see the module doc).

    ``share=True``: ``raw`` blocks, citations, arguments and tool schemas in the body are the transcript's
    own objects, not deep copies (for a caller that only reads the body, as the estimator does: changing
    such a body changes the transcript). ``since``: only the messages from that index on, without the system
    and the tools (the estimator's tail after a usage anchor; the earlier messages are not read, errors and
    notes keep the transcript's indexes). Raises :class:`LocalRequestError` (phase ``validation``) when the
    structure of what is projected is broken.
    """
    walk = _Walk(target, share, since)
    if not isinstance(transcript, dict):
        raise walk.fail("", f"a transcript must be an object, not {type(transcript).__name__}")
    build = _BODIES.get(target.api)
    if build is None:
        raise UsageError(f"replaying a transcript as {target.api} is not supported yet; use one of "
                         f"{', '.join(_BODIES)}")
    body = build(transcript, walk)
    return Projection(body, tuple(walk.notes))


_BODIES: dict[str, Callable[[JSON, _Walk], JSON]] = {"anthropic-messages": _anthropic_body,
                                                     "openai-responses": _openai_body,
                                                     "gemini-generate": _gemini_body,
                                                     "openai-chat": _chat_body}


def project(transcript: object, target: ProviderModel, *, share: bool = False, since: int = 0) -> JSON:
    """The request body alone of :func:`projection`."""
    return projection(transcript, target, share=share, since=since).body
