"""Hypothesis strategies for replaykit's formats: transcripts, search blocks, usage, text, byte streams.

Every strategy is a public function that checks its arguments when called and raises
:class:`hypothesis.errors.InvalidArgument`; what they draw is plain JSON in the neutral transcript format,
and every transcript :func:`transcripts` draws passes :func:`replaykit.transcript.restore`. Text never holds
lone surrogates. Used by replaykit's property suite (:mod:`replaykit.properties`) and by users' own tests;
the table of strategies is in docs/architecture/modules.md.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import math
import random
import string
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from types import MappingProxyType
from typing import cast

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from replaykit.estimate import USAGE_FIELDS
from replaykit.jsondoc import JSON
from replaykit.replay import PROVIDERS as MODEL_APIS
from replaykit.transcript import STOP_REASONS

__all__ = [
    "CJK_RANGES",
    "CONTENT_KINDS",
    "OPAQUE_TYPES",
    "PASSAGES",
    "PROVIDERS",
    "STOP_REASONS",
    "SYSTEM_CHANGES",
    "USAGE_KINDS",
    "assistant_messages",
    "citations",
    "cjk_text",
    "encrypted",
    "hosted_search_blocks",
    "mixed_text",
    "passages",
    "provider_blocks",
    "rechunkings",
    "rich_messages",
    "system_changes",
    "targets",
    "tool_result_messages",
    "tools",
    "transcripts",
    "usages",
    "user_messages",
    "web_urls",
]


USAGE_KINDS = ("valid", "zero", "nan", "infinite")
SYSTEM_CHANGES = ("rebuild", "instruction", "tools")
#: Code point ranges :func:`cjk_text` draws from: Han, Hiragana, Katakana, Hangul syllables, CJK punctuation.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3), (0x3001, 0x3003))
_MODELS = {"anthropic": ("claude-sonnet-4-5", "claude-opus-4-1"), "openai": ("gpt-5", "gpt-4.1-mini"),
           "azure": ("my-gpt5-deployment",)}
#: Wire types of blocks the transcript keeps opaque, per API; :func:`provider_blocks` also draws made-up ones.
OPAQUE_TYPES = {
    "anthropic-messages": ("server_tool_use", "code_execution_tool_result", "bash_code_execution_tool_result",
                           "text_editor_code_execution_tool_result", "tool_search_tool_result",
                           "container_upload"),
    "openai-responses": ("code_interpreter_call", "image_generation_call", "mcp_call", "file_search_call",
                         "local_shell_call", "custom_tool_call"),
}
_ANTHROPIC_ERRORS = ("invalid_tool_input", "unavailable", "max_uses_exceeded", "too_many_requests",
                     "query_too_long", "request_too_large")
_EPOCH_MS = (1_600_000_000_000, 1_900_000_000_000)
#: The model providers the strategies draw, and each one's API.
PROVIDERS = {provider: MODEL_APIS[provider] for provider in _MODELS}


# ---------------------------------------------------------------- argument checks


def _check_size(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an integer.")
    if value < 0:
        raise InvalidArgument(f"{name}={value!r} must not be negative.")
    return value


def _check_range(low_name: str, low: object, high_name: str, high: object) -> tuple[int, int]:
    first, last = _check_size(low_name, low), _check_size(high_name, high)
    if first > last:
        raise InvalidArgument(f"{low_name}={low!r} must not exceed {high_name}={high!r}.")
    return first, last


def _check_choice(name: str, value: object, allowed: Sequence[object]) -> None:
    if value is not None and value not in allowed:
        raise InvalidArgument(f"{name}={value!r} must be None or one of {tuple(allowed)!r}.")


def _check_choices(name: str, values: Sequence[str], allowed: Sequence[str], what: str) -> tuple[str, ...]:
    if isinstance(values, str) or not values:
        raise InvalidArgument(f"{name}={values!r} must be a non-empty list of {what}.")
    for value in values:
        _check_choice(f"{name}[]", value, allowed)
    return tuple(values)


def _check_providers(providers: Sequence[str] | None) -> tuple[str, ...]:
    if providers is None:
        return tuple(PROVIDERS)
    return _check_choices("providers", providers, tuple(PROVIDERS), "provider names")


def _check_flag(name: str, value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be True, False or None.")


# ---------------------------------------------------------------- text, ids, targets
# Strategies are built once (functools.cache) and drawn from many times: building a nested strategy anew
# for every example (flatmap) costs more than drawing from it.


def targets(providers: Sequence[str] | None = None) -> st.SearchStrategy[JSON]:
    """``{"provider", "api", "model"}`` targets, for ``providers`` (default: anthropic, openai, azure)."""
    return _targets(_check_providers(providers))


@cache
def _targets(providers: tuple[str, ...]) -> st.SearchStrategy[JSON]:
    pairs = [(provider, model) for provider in providers for model in _MODELS[provider]]
    return st.sampled_from(pairs).map(lambda pair: {"provider": pair[0], "api": PROVIDERS[pair[0]],
                                                    "model": pair[1]})


def cjk_text(min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    """Text made of CJK characters only (each one counts as a token in replaykit's estimate)."""
    return _cjk_text(*_check_range("min_size", min_size, "max_size", max_size))


@cache
def _cjk_alphabet() -> st.SearchStrategy[str]:
    return st.one_of([st.characters(min_codepoint=a, max_codepoint=b) for a, b in CJK_RANGES])


@cache
def _cjk_text(low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(_cjk_alphabet(), min_size=low, max_size=high)


def mixed_text(min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    """Text mixing printable ASCII, CJK and any other character (never a lone surrogate)."""
    return _mixed_text(*_check_range("min_size", min_size, "max_size", max_size))


@cache
def _mixed_text(low: int, high: int) -> st.SearchStrategy[str]:
    alphabet = st.one_of(st.sampled_from(string.printable), _cjk_alphabet(),
                         st.characters(exclude_categories=["Cs"]))
    return st.text(alphabet, min_size=low, max_size=high)


@cache
def _words(max_size: int = 20) -> st.SearchStrategy[str]:
    return st.text(string.ascii_letters + string.digits + " -_.", min_size=1, max_size=max_size)


@cache
def _names() -> st.SearchStrategy[str]:
    """Tool names as both APIs accept them: ``^[a-zA-Z0-9_-]{1,64}$``."""
    return st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=24)


@cache
def _ids(prefix: str) -> st.SearchStrategy[str]:
    tails = st.text(string.ascii_letters + string.digits, min_size=6, max_size=12)
    return tails.map(lambda tail: prefix + tail)


@cache
def _urls() -> st.SearchStrategy[str]:
    return st.builds(lambda host, path: f"https://{host}.example/{path}",
                     st.text(string.ascii_lowercase, min_size=1, max_size=10),
                     st.text(string.ascii_lowercase + string.digits + "-/", max_size=20))


@cache
def _opaque() -> st.SearchStrategy[str]:
    """Encrypted fields: base64 text, never read, always replayed verbatim."""
    return st.text(string.ascii_letters + string.digits + "+/=", min_size=4, max_size=60)


# ---------------------------------------------------------------- usage


def usages(kind: str | None = None) -> st.SearchStrategy[JSON]:
    """Usage objects ``{input, output, cacheRead, cacheWrite, totalTokens}`` of one ``kind`` (None: any).

    ``valid``: non-negative integers, ``totalTokens`` their sum and above 0. ``zero``: all 0. ``nan`` /
    ``infinite``: one to five fields NaN / +-infinity, the rest valid-looking integers.
    """
    _check_choice("kind", kind, USAGE_KINDS)
    return _usages(kind)


@cache
def _usages(kind: str | None) -> st.SearchStrategy[JSON]:
    if kind is None:
        return st.one_of([_usages(each) for each in USAGE_KINDS])
    if kind == "valid":
        counts = st.integers(0, 200_000)
        return st.tuples(counts, counts, counts, counts).filter(lambda parts: sum(parts) > 0).map(_usage_of)
    if kind == "zero":
        return st.builds(lambda: _usage_of((0, 0, 0, 0)))
    bad = st.just(math.nan) if kind == "nan" else st.sampled_from([math.inf, -math.inf])
    spoiled = st.sets(st.sampled_from(USAGE_FIELDS), min_size=1)
    return st.builds(lambda usage, names, value: {**usage, **{name: value for name in names}},
                     _usages("valid"), spoiled, bad)


def _usage_of(parts: tuple[float, ...]) -> JSON:
    return {**dict(zip(USAGE_FIELDS[:4], parts, strict=True)), "totalTokens": sum(parts)}


# ---------------------------------------------------------------- citations and search blocks


def citations(provider: str, text_length: int = 40) -> st.SearchStrategy[JSON]:
    """A web citation as the provider sends it, for a text of ``text_length`` characters.

    Anthropic: ``web_search_result_location`` (``encrypted_index`` opaque); OpenAI and Azure: ``url_citation``
    with ``0 <= start_index <= end_index <= text_length``.
    """
    _check_choice("provider", provider, tuple(PROVIDERS))
    return _citations(provider, _check_size("text_length", text_length))


@cache
def _citations(provider: str, length: int) -> st.SearchStrategy[JSON]:
    if provider == "anthropic":
        return st.builds(lambda url, title, index, cited: {
            "type": "web_search_result_location", "url": url, "title": title, "encrypted_index": index,
            "cited_text": cited}, _urls(), st.none() | _words(), _opaque(), _mixed_text(0, 150))
    span = st.tuples(st.integers(0, length), st.integers(0, length)).map(sorted)
    return st.builds(lambda url, title, bounds: {
        "type": "url_citation", "start_index": bounds[0], "end_index": bounds[1], "title": title, "url": url},
        _urls(), _words(), span)


def hosted_search_blocks(provider: str | None = None, phase: str | None = None, *,
                         raw: bool | None = None, named: bool | None = None) -> st.SearchStrategy[JSON]:
    """``hostedSearch`` blocks. ``phase``: call, result or error (None: any). ``raw``: True for replayable
    blocks, False for display-only ones, None for either. ``named``: True for blocks whose wire form has a
    ``name`` (Anthropic ``server_tool_use`` calls), False for nameless ones (results, errors, OpenAI calls).

    OpenAI and Azure have no separate result item: their result blocks are display-only. A result block is
    sometimes a legacy one, with its results only in ``raw``.
    """
    _check_choice("provider", provider, tuple(PROVIDERS))
    _check_choice("phase", phase, ("call", "result", "error"))
    _check_flag("raw", raw)
    _check_flag("named", named)
    options = _search_options(provider, phase, raw, named)
    if not options:
        raise InvalidArgument(f"no hostedSearch block is provider={provider!r}, phase={phase!r}, "
                              f"raw={raw!r}, named={named!r}: named blocks are Anthropic calls with raw.")
    return _search_blocks(tuple(options))


def _search_options(provider: str | None, phase: str | None, raw: bool | None,
                    named: bool | None) -> list[tuple[str, str, bool]]:
    options = []
    for each in [provider] if provider else list(PROVIDERS):
        for stage in [phase] if phase else ["call", "result", "error"]:
            for replayable in [raw] if raw is not None else [True, False]:
                if replayable and each != "anthropic" and stage == "result":
                    continue
                has_name = replayable and each == "anthropic" and stage == "call"
                if named is None or named == has_name:
                    options.append((each, stage, replayable))
    return options


@cache
def _search_blocks(options: tuple[tuple[str, str, bool], ...]) -> st.SearchStrategy[JSON]:
    return st.one_of([_search_block(*option) for option in options])


@cache
def _search_block(provider: str, phase: str, replayable: bool) -> st.SearchStrategy[JSON]:
    strategy = _SEARCH[phase](provider)
    return strategy if replayable else strategy.map(_display_only)


def _display_only(block: JSON) -> JSON:
    return {key: value for key, value in block.items() if key != "raw"}


def _head(provider: str, phase: str) -> JSON:
    return {"type": "hostedSearch", "phase": phase, "provider": provider, "api": PROVIDERS[provider]}


def _search_id(provider: str) -> st.SearchStrategy[str]:
    return _ids("srvtoolu_" if provider == "anthropic" else "ws_")


def _search_call(provider: str) -> st.SearchStrategy[JSON]:
    def build(ident: str, query: str) -> JSON:
        if provider == "anthropic":
            raw = {"type": "server_tool_use", "id": ident, "name": "web_search", "input": {"query": query}}
        else:
            raw = {"id": ident, "type": "web_search_call", "status": "completed",
                   "action": {"type": "search", "query": query}}
        return {**_head(provider, "call"), "id": ident, "query": query, "raw": raw}

    return st.builds(build, _search_id(provider), _mixed_text(1, 30))


def _search_result(provider: str) -> st.SearchStrategy[JSON]:
    result = st.fixed_dictionaries({"url": _urls(), "title": _mixed_text(0, 30),
                                    "pageAge": st.none() | _words()})

    def build(ident: str, results: list[JSON], secrets: list[str], legacy: bool) -> JSON:
        wire = [{"type": "web_search_result", "url": item["url"], "title": item["title"],
                 "encrypted_content": secret, "page_age": item["pageAge"]}
                for item, secret in zip(results, secrets, strict=False)]
        raw = {"type": "web_search_tool_result", "tool_use_id": ident, "content": wire}
        block = {**_head(provider, "result"), "toolUseId": ident, "raw": raw}
        return block if legacy else {**block, "results": results}

    return st.builds(build, _search_id(provider), st.lists(result, max_size=3),
                     st.lists(_opaque(), min_size=3, max_size=3), st.booleans())


def _search_error(provider: str) -> st.SearchStrategy[JSON]:
    def build(ident: str, code: str) -> JSON:
        if provider == "anthropic":
            raw = {"type": "web_search_tool_result", "tool_use_id": ident,
                   "content": {"type": "web_search_tool_result_error", "error_code": code}}
        else:
            raw = {"id": ident, "type": "web_search_call", "status": "failed", "action": {"type": "search"}}
        return {**_head(provider, "error"), "toolUseId": ident, "errorCode": code, "raw": raw}

    codes = _ANTHROPIC_ERRORS if provider == "anthropic" else ("failed",)
    return st.builds(build, _search_id(provider), st.sampled_from(codes))


_SEARCH: dict[str, Callable[[str], st.SearchStrategy[JSON]]] = {
    "call": _search_call, "result": _search_result, "error": _search_error,
}


@cache
def _search_round(provider: str) -> st.SearchStrategy[list[JSON]]:
    """A call followed by its outcome (Anthropic: a result or an error block; OpenAI: the call only)."""
    if provider != "anthropic":
        return st.one_of(_search_block(provider, "call", True), _search_block(provider, "error", True)).map(
            lambda block: [block])
    outcome = st.one_of(_search_block(provider, "result", True), _search_block(provider, "error", True))
    return st.tuples(_search_block(provider, "call", True), outcome).map(_pair)


def _pair(blocks: tuple[JSON, JSON]) -> list[JSON]:
    call, outcome = blocks
    raw = {**outcome["raw"], "tool_use_id": call["id"]}
    return [call, {**outcome, "toolUseId": call["id"], "raw": raw}]


# ---------------------------------------------------------------- opaque provider blocks


def provider_blocks(provider: str | None = None) -> st.SearchStrategy[JSON]:
    """Opaque ``providerBlock`` s of ``provider`` (None: any): a wire type the transcript does not model
    (:data:`OPAQUE_TYPES`: code execution and its results, tool search, MCP...) or a made-up one (a server
    tool introduced next month), its ``raw`` a JSON object of that type holding text and nested values."""
    _check_choice("provider", provider, tuple(PROVIDERS))
    return _provider_blocks((provider,) if provider else tuple(PROVIDERS))


@cache
def _provider_blocks(providers: tuple[str, ...]) -> st.SearchStrategy[JSON]:
    return st.one_of([_provider_block(each) for each in providers])


def _provider_block(provider: str) -> st.SearchStrategy[JSON]:
    api = PROVIDERS[provider]
    invented = st.text(string.ascii_lowercase + "_", min_size=1, max_size=16).map(lambda kind: kind + "_2027")
    kinds = st.one_of(st.sampled_from(OPAQUE_TYPES[api]), invented)

    def build(kind: str, ident: str, text: str, extra: JSON) -> JSON:
        raw = {**extra, "type": kind, "id": ident, "content": [{"type": "text", "text": text}]}
        return {"type": "providerBlock", "provider": provider, "api": api, "blockType": kind, "raw": raw}

    ident = _ids("srvtoolu_" if provider == "anthropic" else "ci_")
    return st.builds(build, kinds, ident, _mixed_text(0, 60), st.dictionaries(_words(10), _json_values(),
                                                                              max_size=2))


# ---------------------------------------------------------------- blocks and messages


@cache
def _json_values() -> st.SearchStrategy[object]:
    scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | _mixed_text(0, 20)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(_words(10), inner, max_size=3), max_leaves=6)


def _text_block(provider: str) -> st.SearchStrategy[JSON]:
    def build(text: str, cites: list[JSON], signature: str | None) -> JSON:
        block: JSON = {"type": "text", "text": text}
        if cites:
            block["citations"] = [_fit(cite, len(text)) for cite in cites]
        if signature is not None and provider != "anthropic":
            block["signature"] = signature
        return block

    return st.builds(build, _mixed_text(0, 60), st.lists(_citations(provider, 60), max_size=2),
                     st.none() | _ids("msg_"))


def _fit(citation: JSON, length: int) -> JSON:
    if "start_index" not in citation:
        return citation
    return {**citation, "start_index": min(citation["start_index"], length),
            "end_index": min(citation["end_index"], length)}


def _thinking_block(provider: str) -> st.SearchStrategy[JSON]:
    if provider == "anthropic":
        return st.builds(lambda text, signature, redacted: {
            "type": "thinking", "thinking": "" if redacted else text, "signature": signature,
            **({"redacted": True} if redacted else {})}, _mixed_text(0, 40), _opaque(), st.booleans())
    return st.builds(lambda text, ident, secret: {
        "type": "thinking", "thinking": text,
        "raw": {"type": "reasoning", "id": ident, "summary": [{"type": "summary_text", "text": text}],
                "encrypted_content": secret}}, _mixed_text(0, 40), _ids("rs_"), _opaque())


def _tool_call_block(provider: str) -> st.SearchStrategy[JSON]:
    def build(ident: str, name: str, arguments: JSON, with_raw: bool) -> JSON:
        block: JSON = {"type": "toolCall", "id": ident, "name": name, "arguments": arguments}
        if with_raw and provider == "anthropic":
            block["raw"] = {"type": "tool_use", "id": ident, "name": name, "input": arguments,
                            "caller": {"type": "direct"}}
        elif with_raw:
            block["raw"] = {"type": "function_call", "id": "fc_" + ident, "call_id": ident, "name": name,
                            "arguments": json.dumps(arguments, ensure_ascii=False), "status": "completed"}
        return block

    arguments = st.dictionaries(_words(10), _json_values(), max_size=3)
    return st.builds(build, _ids("call_"), _names(), arguments, st.booleans())


@cache
def _assistant_blocks(provider: str, search: bool, opaque: bool) -> st.SearchStrategy[list[JSON]]:
    kinds = [_text_block(provider), _thinking_block(provider), _tool_call_block(provider)]
    single = st.one_of([*kinds, _provider_block(provider)] if opaque else kinds)
    group = single.map(lambda block: [block])
    if search:
        loose = _search_blocks(tuple(_search_options(provider, None, None, None))).map(lambda block: [block])
        group = st.one_of(group, loose, _search_round(provider))
    return st.lists(group, max_size=4 if search else 3).map(
        lambda groups: [block for each in groups for block in each])


def assistant_messages(provider: str | None = None, *, usage: str | None = None,
                       stop_reasons: Sequence[str] | None = None, search: bool = True, opaque: bool = True,
                       timestamp: int | None = None) -> st.SearchStrategy[JSON]:
    """Assistant turns: text (with citations), thinking, tool calls, when ``search`` hosted search and when
    ``opaque`` opaque provider blocks (:func:`provider_blocks`).

    ``usage`` picks the usage kind (see :func:`usages`; None: any), ``stop_reasons`` the allowed stop
    reasons (default: all six), ``timestamp`` a fixed timestamp (default: drawn).
    """
    _check_choice("provider", provider, tuple(PROVIDERS))
    _check_choice("usage", usage, USAGE_KINDS)
    _check_flag("search", search)
    _check_flag("opaque", opaque)
    providers = (provider,) if provider else tuple(PROVIDERS)
    reasons = STOP_REASONS if stop_reasons is None else \
        _check_choices("stop_reasons", stop_reasons, STOP_REASONS, "stop reasons")
    return _assistants(providers, usage, reasons, (bool(search), bool(opaque)), _check_timestamp(timestamp))


@cache
def _assistants(providers: tuple[str, ...], usage: str | None, reasons: tuple[str, ...],
                kinds: tuple[bool, bool], timestamp: int | None) -> st.SearchStrategy[JSON]:
    return st.one_of([_assistant(each, usage, reasons, kinds, timestamp) for each in providers])


def _assistant(provider: str, usage: str | None, reasons: tuple[str, ...], kinds: tuple[bool, bool],
               timestamp: int | None) -> st.SearchStrategy[JSON]:
    return st.builds(
        lambda content, model, used, stop, stamp: {
            "role": "assistant", "content": content, "provider": provider, "api": PROVIDERS[provider],
            "model": model, "usage": used, "stopReason": stop, "timestamp": stamp},
        _assistant_blocks(provider, *kinds), st.sampled_from(_MODELS[provider]), _usages(usage),
        st.sampled_from(reasons), _stamps(timestamp))


def _check_timestamp(timestamp: int | None) -> int | None:
    if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int)):
        raise InvalidArgument(f"timestamp={timestamp!r} must be an integer number of milliseconds.")
    return timestamp


def _stamps(timestamp: int | None) -> st.SearchStrategy[int]:
    return st.integers(*_EPOCH_MS) if timestamp is None else st.just(timestamp)


@cache
def _user_content() -> st.SearchStrategy[str | list[JSON]]:
    text = _mixed_text(0, 60).map(lambda text: {"type": "text", "text": text})
    image = st.builds(lambda data, mime: {"type": "image", "data": data, "mimeType": mime},
                      _opaque(), st.sampled_from(["image/png", "image/jpeg"]))
    return st.one_of(_mixed_text(0, 80), st.lists(st.one_of(text, image), min_size=1, max_size=3))


def user_messages(timestamp: int | None = None) -> st.SearchStrategy[JSON]:
    """User messages: a string or a list of text and image blocks."""
    return _users(_check_timestamp(timestamp))


@cache
def _users(timestamp: int | None) -> st.SearchStrategy[JSON]:
    return st.builds(lambda content, stamp: {"role": "user", "content": content, "timestamp": stamp},
                     _user_content(), _stamps(timestamp))


def tool_result_messages(timestamp: int | None = None) -> st.SearchStrategy[JSON]:
    """Tool results: the answer to a ``toolCall``, possibly an error."""
    return _tool_results(_check_timestamp(timestamp))


@cache
def _tool_results(timestamp: int | None) -> st.SearchStrategy[JSON]:
    return st.builds(lambda ident, name, content, failed, stamp: {
        "role": "toolResult", "toolCallId": ident, "toolName": name, "content": content, "isError": failed,
        "timestamp": stamp}, _ids("call_"), _names(), _user_content(), st.booleans(), _stamps(timestamp))


@cache
def tools() -> st.SearchStrategy[JSON]:
    """A tool definition: a function tool with a JSON Schema, or the hosted search tool."""
    kinds = st.dictionaries(_words(10), st.sampled_from(["string", "integer", "boolean"]), max_size=3)
    schema = kinds.map(lambda props: {"type": "object",
                                      "properties": {name: {"type": kind} for name, kind in props.items()}})
    function = st.builds(lambda name, text, params: {"name": name, "description": text, "parameters": params},
                         _names(), _mixed_text(0, 40), schema)
    search = st.builds(lambda uses: {"type": "hostedSearch", **({"maxUses": uses} if uses else {})},
                       st.none() | st.integers(1, 5))
    return st.one_of(function, search)


# ---------------------------------------------------------------- transcripts


def transcripts(min_messages: int = 0, max_messages: int = 8, *, providers: Sequence[str] | None = None,
                usage: str | None = None, search: bool = True,
                opaque: bool = True) -> st.SearchStrategy[JSON]:
    """Contract-valid transcripts: system, tools and ``min_messages``..``max_messages`` messages of any role.

    Assistant turns come from ``providers`` (default: all), with ``usage`` of that kind (None: any); time
    stamps increase. ``search=False`` leaves out hosted search blocks, ``opaque=False`` opaque provider
    blocks.
    """
    low, high = _check_range("min_messages", min_messages, "max_messages", max_messages)
    _check_choice("usage", usage, USAGE_KINDS)
    _check_flag("search", search)
    _check_flag("opaque", opaque)
    return _transcripts(low, high, _check_providers(providers), usage, (bool(search), bool(opaque)))


@cache
def _transcripts(low: int, high: int, providers: tuple[str, ...], usage: str | None,
                 kinds: tuple[bool, bool]) -> st.SearchStrategy[JSON]:
    message = st.one_of(_users(0), _tool_results(0), _assistants(providers, usage, STOP_REASONS, kinds, 0))
    return st.builds(_transcript, st.none() | _mixed_text(0, 80), st.lists(tools(), max_size=3),
                     st.lists(message, min_size=low, max_size=high), st.integers(*_EPOCH_MS),
                     st.lists(st.integers(1, 120_000), min_size=high, max_size=high))


def _transcript(system: str | None, tool_list: list[JSON], messages: list[JSON], start: int,
                gaps: list[int]) -> JSON:
    stamp = start
    for message, gap in zip(messages, gaps, strict=False):
        stamp += gap
        message["timestamp"] = stamp
    return {"version": 1, "system": system, "tools": tool_list, "messages": messages}


def system_changes(transcript: JSON,
                   kinds: Sequence[str] = SYSTEM_CHANGES) -> st.SearchStrategy[tuple[str, JSON]]:
    """``(kind, changed)``: ``transcript`` after its system was rebuilt once more, after every message.

    ``rebuild`` rebuilds the same system prompt and tools (not a change); ``instruction`` changes the system
    prompt; ``tools`` adds, removes or alters a tool. The change is logged in ``systemHistory`` (an entry
    for the original configuration is added first, at the first message's time, when there is none).
    """
    if not isinstance(transcript, dict) or not isinstance(transcript.get("messages"), list):
        raise InvalidArgument(f"transcript={transcript!r:.60} must be a transcript object.")
    return _changes(st.sampled_from(_check_choices("kinds", kinds, SYSTEM_CHANGES, repr(SYSTEM_CHANGES))),
                    transcript)


@st.composite
def _changes(draw: st.DrawFn, kinds: st.SearchStrategy[str], transcript: JSON) -> tuple[str, JSON]:
    kind = draw(kinds)
    system, tool_list = transcript.get("system"), transcript.get("tools") or []
    if kind == "instruction":
        system = (system or "") + draw(_mixed_text(1, 40))
    elif kind == "tools":
        tool_list = _changed_tools(draw, tool_list)
    return kind, _log(transcript, system, tool_list)


def _changed_tools(draw: st.DrawFn, current: list[JSON]) -> list[JSON]:
    remove: bool = draw(st.booleans()) if current else False
    if remove:
        index: int = draw(st.integers(0, len(current) - 1))
        return current[:index] + current[index + 1:]
    added: JSON = draw(tools().filter(lambda tool: tool not in current))
    return [*current, added]


def _log(transcript: JSON, system: object, tool_list: object) -> JSON:
    changed = copy.deepcopy(transcript)
    stamps = [message["timestamp"] for message in changed["messages"]] or [_EPOCH_MS[0]]
    history = changed.setdefault("systemHistory", [])
    if not history:
        history.append({"timestamp": min(stamps), "system": transcript.get("system"),
                        "tools": changed.get("tools", [])})
    when = max([*stamps, *(entry["timestamp"] for entry in history)]) + 1
    history.append({"timestamp": when, "system": system, "tools": copy.deepcopy(tool_list)})
    changed["system"], changed["tools"] = system, copy.deepcopy(tool_list)
    return changed


# ---------------------------------------------------------------- realistic content
# Text as real traffic has it, for comparing an estimate with a real tokenizer: mixed_text and cjk_text draw
# arbitrary code points, which a tokenizer splits into many more tokens than any real text holds.

#: Lines of real-looking text, drawn by :func:`passages` as runs of consecutive lines (wrapping around).
PASSAGES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "prose": (
        "The search API now returns up to 10 results per request, each with a title, a URL and a short "
        "description.",
        "Results carry the page's age when the publisher states it (for example \"3 days ago\" or \"April "
        "30, 2026\").",
        "Python 3.13 was released on October 7, 2024, with an experimental free-threaded build (PEP 703) "
        "and a new REPL.",
        "The free-threaded build isn't the default: it ships as a separate binary, `python3.13t`, and most "
        "C extensions must be rebuilt for it.",
        "When the context window fills up, the harness summarises older turns and keeps the last 20,000 "
        "tokens verbatim.",
        "Researchers found that the model cited sources it had never retrieved; every citation is now "
        "checked against the evidence.",
        "We moved the billing service from us-east-1 to eu-west-1 last week, and p95 latency dropped from "
        "420 ms to 290 ms.",
        "If the provider answers 529 (overloaded), wait for the `retry-after` header before trying again; "
        "never retry a 400.",
        "The museum reopened its east wing on 12 May after a two-year, €14 million renovation that restored "
        "the original skylights.",
        "Rainfall in the Po valley was 38% below average this spring, and farmers in Lombardy have started "
        "to ration water.",
        "A token is a piece of a word: common words are usually one token, while rare words, numbers and "
        "names are split into several.",
        "Q: Does the new release fix the memory leak? A: Partly: the leak in the parser is gone, the one in "
        "the cache isn't (see #4127).",
        "Please summarise the three articles above in two short paragraphs, then list every company they "
        "mention with its ticker.",
        "The council approved the 2026 budget on Tuesday by 7 votes to 2, including $3.5M for two libraries "
        "and a bike lane on Main St.",
        "Tickets go on sale at 9:00 a.m. on Friday; each customer may buy at most 4, and refunds aren't "
        "available.",
        "According to ACEA, battery-electric cars were 13.6% of new EU registrations in 2024, down from "
        "14.6% in 2023.",
        "The recipe calls for 2 cups (250 g) of flour, a pinch of salt, 3 eggs and ½ cup of warm milk.",
        "During the outage, requests timed out after 30 s, and the retry storm that followed doubled the "
        "load on the primary database.",
        "He spent the afternoon in the archive, reading letters from 1912 for any mention of the ship's "
        "last voyage.",
        "To reproduce the bug: restore the stored transcript, ask the follow-up question, then diff the "
        "request against the recording.",
        "The committee will publish its findings in March, after a public consultation that runs until "
        "January 31.",
        "Most of the answer came from the first two sources [1][2]; the third was a forum post repeating "
        "the claim without evidence.",
        "In Q4, revenue rose 12% year over year to $4.2 billion, while operating costs were flat at $3.1 "
        "billion.",
        "Don't rely on the estimate alone: when the provider reports `usage.input_tokens`, that number is "
        "the one to trust.",
    ),
    "code": (
        "def estimate_tokens(transcript: dict, target: dict) -> int:",
        "    \"\"\"Count the input tokens of the next request, anchored on the last reported usage.\"\"\"",
        "    messages = transcript.get(\"messages\", [])",
        "    anchor = next((i for i in range(len(messages) - 1, -1, -1) if has_usage(messages[i])), None)",
        "    counted = messages if anchor is None else messages[anchor + 1:]",
        "    total = 0 if anchor is None else messages[anchor][\"usage\"][\"totalTokens\"]",
        "    for message in counted:  # only what follows the anchor is estimated",
        "        total += sum(count_text(block) for block in message.get(\"content\", []))",
        "    return total",
        "",
        "class SearchClient:",
        "    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0) -> None:",
        "        headers = {\"authorization\": f\"Bearer {api_key}\", \"user-agent\": "
        "\"research-agent/1.4\"}",
        "        self.session = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)",
        "",
        "    def search(self, query: str, limit: int = 5) -> list[dict[str, str]]:",
        "        response = self.session.post(\"/search\", json={\"query\": query, \"limit\": min(limit, "
        "10)})",
        "        if response.status_code == 429:  # rate limited: the caller decides when to retry",
        "            raise RateLimited(float(response.headers.get(\"retry-after\", \"1\")))",
        "        response.raise_for_status()",
        "        return [item for item in response.json()[\"items\"] if item.get(\"url\", "
        "\"\").startswith(\"https://\")]",
        "",
        "// Ask the search endpoint, keep the first results that have a URL, and time out after 30 seconds.",
        "export async function search(query, { limit = 5, signal = AbortSignal.timeout(30_000) } = {}) {",
        "  const response = await fetch(`${BASE_URL}/search`, {",
        "    method: \"POST\",",
        "    headers: { \"content-type\": \"application/json\", authorization: `Bearer "
        "${process.env.SEARCH_API_KEY}` },",
        "    body: JSON.stringify({ query, limit: Math.min(limit, 10) }),",
        "    signal,",
        "  });",
        "  if (!response.ok) throw new Error(`search failed with HTTP ${response.status}: ${await "
        "response.text()}`);",
        "  const { items = [] } = await response.json();",
        "  return items.filter((item) => item.url).map(({ title, url, description }) => ({ title, url, "
        "description }));",
        "}",
        "",
    ),
    "japanese": (
        "東京の天気は明日から崩れる見込みで、週末は雨が続くでしょう。",
        "このライブラリは、記録した通信を再生してテストを高速に実行します。",
        "検索結果には、ページのタイトルとURL、そして短い要約が含まれています。",
        "会議の議事録を読んで、決定事項と担当者を一覧にしてください。",
        "新しいバージョンでは、起動時間が大幅に短縮されました。",
        "彼は駅前の小さな書店で、古い地図を何枚も買い集めていた。",
        "エラーが発生した場合は、数秒待ってから再試行してください。",
        "来月の展示会に向けて、試作品の最終確認を進めています。",
    ),
    "chinese": (
        "这个工具可以在本地重放录制的请求，不需要网络连接。",
        "今天上午，市政府宣布将在明年扩建地铁三号线。",
        "请把下面三篇文章的要点整理成一份简短的报告。",
        "研究人员发现，模型引用的部分来源并不存在。",
        "搜索结果包括网页标题、链接和一段简短的摘要。",
        "由于天气原因，原定于周末举行的音乐节被推迟了。",
        "新版本修复了多个安全问题，建议所有用户尽快升级。",
        "他每天早上六点起床，先跑步半小时再去上班。",
        "本週的更新改善了搜尋結果的排序方式，也修正了幾個錯誤。",
        "請在下午五點前把報告寄給我，謝謝。",
    ),
    "korean": (
        "이 도구는 녹화된 요청을 재생하여 네트워크 없이 테스트를 실행합니다.",
        "내일부터 서울에는 비가 내리고 기온이 크게 떨어질 예정입니다.",
        "검색 결과에는 페이지 제목과 주소, 짧은 요약이 포함되어 있습니다.",
        "회의에서 결정된 사항과 담당자를 정리해 주세요.",
        "새 버전에서는 시작 시간이 크게 단축되었습니다.",
        "오류가 발생하면 잠시 기다린 후 다시 시도하십시오.",
        "그는 주말마다 동네 도서관에서 책을 빌려 읽는다.",
        "연구진은 모델이 인용한 출처 중 일부가 존재하지 않는다는 사실을 발견했다.",
    ),
})
#: What joins the lines of each kind of passage, and the fewest lines :func:`passages` draws by default.
_JOINS = {"prose": " ", "code": "\n", "japanese": "", "chinese": "", "korean": " "}
_MIN_LINES = {"prose": 6, "code": 8, "japanese": 6, "chinese": 6, "korean": 6}
_TITLES = (
    "What's New In Python 3.13 — Python 3.13 documentation", "Python Release Python 3.13.0 | Python.org",
    "PEP 703 – Making the Global Interpreter Lock Optional in CPython", "Web search tool - Anthropic",
    "Free-threaded CPython is ready to experiment with! | Labs",
    "python - Is the GIL removed in 3.13? - Stack Overflow",
    "Cloudflare Web Search: search the web from your Worker",
    "Release notes — Hypothesis 6.130 documentation",
    "Battery-electric car sales in the EU, 2024 | ACEA",
    "Lombardy drought: farmers ration water as Po falls - BBC News",
)
_HOSTS = ("docs.python.org", "www.python.org", "peps.python.org", "en.wikipedia.org", "github.com",
          "stackoverflow.com", "developers.cloudflare.com", "docs.anthropic.com", "www.bbc.com",
          "www.acea.auto")
_SLUGS = ("whatsnew", "3.13", "release", "free-threading", "howto", "pep-0703", "questions", "78094021",
          "is-the-gil-removed-in-python-3-13", "news", "world-europe-68231123", "ai-gateway", "web-search",
          "en", "docs", "build-with-claude", "tool-use", "press-releases", "2024", "python-3-13-0")
#: Content kinds :func:`rich_messages` draws.
CONTENT_KINDS = ("search", "opaque", "cjk", "code", "prose")


def passages(kind: str, min_lines: int | None = None, max_lines: int = 12) -> st.SearchStrategy[str]:
    """Real-looking text: ``min_lines``..``max_lines`` consecutive lines of :data:`PASSAGES` ``[kind]`` (or,
    for ``cjk``, of one of ``japanese``, ``chinese``, ``korean``), from any line, wrapping around.

    ``min_lines`` defaults to enough lines that any run tokenizes like the whole passage (6 sentences, 8
    lines of code).
    """
    if kind not in (*PASSAGES, "cjk"):
        raise InvalidArgument(f"kind={kind!r} must be one of {(*PASSAGES, 'cjk')!r}.")
    kinds = ("japanese", "chinese", "korean") if kind == "cjk" else (kind,)
    low = max(_MIN_LINES[each] for each in kinds) if min_lines is None else min_lines
    low, high = _check_range("min_lines", low, "max_lines", max_lines)
    if low < 1:
        raise InvalidArgument(f"min_lines={min_lines!r} must be at least 1.")
    return st.one_of([_passages(each, low, high) for each in kinds])


@cache
def _passages(kind: str, low: int, high: int) -> st.SearchStrategy[str]:
    lines, join = PASSAGES[kind], _JOINS[kind]
    return st.builds(lambda start, count: join.join(lines[(start + n) % len(lines)] for n in range(count)),
                     st.integers(0, len(lines) - 1), st.integers(low, high))


@cache
def web_urls() -> st.SearchStrategy[str]:
    """URLs as search results carry them: a known host, a path of real slugs, sometimes a tracking query."""
    path = st.lists(st.sampled_from(_SLUGS), min_size=1, max_size=4).map("/".join)
    query = st.sampled_from(["", "?utm_source=chatgpt.com", "?ref=search", "#section-3"])
    return st.builds(lambda host, where, tail: f"https://{host}/{where}{tail}", st.sampled_from(_HOSTS), path,
                     query)


def encrypted(min_bytes: int = 16, max_bytes: int = 3000) -> st.SearchStrategy[str]:
    """An encrypted field as providers send it: the base64 of ``min_bytes``..``max_bytes`` random bytes (drawn
    from a seed, so that a long field costs Hypothesis a few bytes of its own)."""
    return _encrypted(*_check_range("min_bytes", min_bytes, "max_bytes", max_bytes))


@cache
def _encrypted(low: int, high: int) -> st.SearchStrategy[str]:
    return st.builds(lambda seed, size: base64.b64encode(random.Random(seed).randbytes(size)).decode(),
                     st.integers(0, 2**32 - 1), st.integers(low, high))


def rich_messages(kind: str, provider: str | None = None) -> st.SearchStrategy[list[JSON]]:
    """Messages rich in one kind of content (:data:`CONTENT_KINDS`), all of it real-looking
    (:func:`passages`, :func:`web_urls`, :func:`encrypted`), none with usage that could anchor an estimate:

    - ``search``: hosted search turns of ``provider`` (None: any): calls, results (encrypted content
      included) and answers that cite them; or a search tool's call and its results as JSON text;
    - ``opaque``: a turn of opaque provider blocks of ``provider`` (code execution: code, output, encrypted
      output);
    - ``cjk``, ``code``, ``prose``: a user message and an answer of that kind of text.
    """
    _check_choice("kind", kind, CONTENT_KINDS)
    _check_choice("provider", provider, tuple(PROVIDERS))
    return _rich(kind, (provider,) if provider else tuple(PROVIDERS))


@cache
def _rich(kind: str, providers: tuple[str, ...]) -> st.SearchStrategy[list[JSON]]:
    if kind in ("cjk", "code", "prose"):
        text = passages(kind)
        return st.builds(lambda asked, said, provider: [
            {"role": "user", "content": asked}, _turn(provider, [{"type": "text", "text": said}])],
            text, text, st.sampled_from(providers)).map(_stamped)
    build = _search_turns if kind == "search" else _opaque_turns
    return st.one_of([build(provider) for provider in providers]).map(_stamped)


def _stamped(messages: list[JSON]) -> list[JSON]:
    for offset, message in enumerate(messages):
        message["timestamp"] = _EPOCH_MS[0] + 1000 * offset
    return messages


def _turn(provider: str, blocks: list[JSON]) -> JSON:
    return {"role": "assistant", "content": blocks, "provider": provider, "api": PROVIDERS[provider],
            "model": _MODELS[provider][0], "usage": _usage_of((0, 0, 0, 0)), "stopReason": "stop"}


@cache
def _queries() -> st.SearchStrategy[str]:
    return st.sampled_from(["python 3.13 release date", "free-threaded build default python 3.13",
                            "PEP 703 status", "EU electric car registrations 2024", "Po valley drought 2026"])


@cache
def _search_turns(provider: str) -> st.SearchStrategy[list[JSON]]:
    hosted = _anthropic_search if provider == "anthropic" else _openai_search
    turns = st.lists(hosted(provider), min_size=1, max_size=3).map(lambda rounds: [
        _turn(provider, [block for each in rounds for block in each])])
    return st.one_of(turns, _search_tool(provider))


@st.composite
def _anthropic_search(draw: st.DrawFn, provider: str) -> list[JSON]:
    ident, query = draw(_ids("srvtoolu_01")), draw(_queries())
    pages = draw(st.lists(st.fixed_dictionaries({
        "type": st.just("web_search_result"), "url": web_urls(), "title": st.sampled_from(_TITLES),
        "encrypted_content": encrypted(200, 3000),
        "page_age": st.sampled_from([None, "3 days ago", "April 30, 2026"])}), min_size=2, max_size=8))
    call = {**_head(provider, "call"), "id": ident, "query": query,
            "raw": {"type": "server_tool_use", "id": ident, "name": "web_search", "input": {"query": query}}}
    results = [{"url": page["url"], "title": page["title"], "pageAge": page["page_age"]} for page in pages]
    result = {**_head(provider, "result"), "toolUseId": ident, "results": results,
              "raw": {"type": "web_search_tool_result", "tool_use_id": ident, "content": pages}}
    cited = [{"type": "web_search_result_location", "url": page["url"], "title": page["title"],
              "encrypted_index": draw(encrypted(60, 200)), "cited_text": draw(passages("prose", 1, 2))}
             for page in pages[:draw(st.integers(1, len(pages)))]]
    answer = {"type": "text", "text": draw(passages("prose", 1, 3)), "citations": cited}
    return [call, result, answer]


@st.composite
def _openai_search(draw: st.DrawFn, provider: str) -> list[JSON]:
    ident, query = draw(_ids("ws_0")), draw(_queries())
    urls = draw(st.lists(web_urls(), min_size=2, max_size=8))
    action = {"type": "search", "query": query, "sources": [{"type": "url", "url": url} for url in urls]}
    call = {**_head(provider, "call"), "id": ident, "query": query,
            "raw": {"id": ident, "type": "web_search_call", "status": "completed", "action": action}}
    text = draw(passages("prose", 1, 3))
    cited = [{"type": "url_citation", "start_index": 0, "end_index": len(text), "url": url,
              "title": draw(st.sampled_from(_TITLES))} for url in urls[:draw(st.integers(1, len(urls)))]]
    answer = {"type": "text", "text": text, "citations": cited, "signature": draw(_ids("msg_0"))}
    return [call, answer]


@st.composite
def _search_tool(draw: st.DrawFn, provider: str) -> list[JSON]:
    """A search tool's call, and its results as JSON text in the tool result (compact or indented). The
    results' titles and descriptions are consecutive lines, as different pages have different ones."""
    ident, query = draw(_ids("call_")), draw(_queries())
    count, start = draw(st.integers(3, 10)), draw(st.integers(0, len(PASSAGES["prose"]) - 1))
    items = [{"title": _TITLES[(start + n) % len(_TITLES)], "url": draw(web_urls()),
              "description": PASSAGES["prose"][(start + n) % len(PASSAGES["prose"])],
              "lastModifiedDate": draw(st.sampled_from(["2026-04-30T08:12:00Z", "2025-10-07"]))}
             for n in range(count)]
    indent = draw(st.sampled_from([None, 2]))
    call = {"type": "toolCall", "id": ident, "name": "web_search", "arguments": {"query": query}}
    result = {"role": "toolResult", "toolCallId": ident, "toolName": "web_search", "isError": False,
              "content": json.dumps({"query": query, "items": items}, ensure_ascii=False, indent=indent)}
    return [{**_turn(provider, [call]), "stopReason": "toolUse"}, result]


@cache
def _opaque_turns(provider: str) -> st.SearchStrategy[list[JSON]]:
    blocks = _code_execution if provider == "anthropic" else _code_interpreter
    return st.lists(blocks(provider), min_size=1, max_size=3).map(
        lambda rounds: [_turn(provider, [block for each in rounds for block in each])])


def _opaque_block(provider: str, raw: JSON) -> JSON:
    return {"type": "providerBlock", "provider": provider, "api": PROVIDERS[provider],
            "blockType": raw["type"], "raw": raw}


@st.composite
def _code_execution(draw: st.DrawFn, provider: str) -> list[JSON]:
    ident, code = draw(_ids("srvtoolu_01")), draw(passages("code"))
    if draw(st.booleans()):
        output = {"type": "encrypted_code_execution_result", "encrypted_stdout": draw(encrypted(100, 2000)),
                  "return_code": 0, "content": []}
    else:
        output = {"type": "code_execution_result", "stdout": draw(passages("prose", 1, 4)), "stderr": "",
                  "return_code": 0, "content": []}
    call = {"type": "server_tool_use", "id": ident, "name": "code_execution", "input": {"code": code}}
    result = {"type": "code_execution_tool_result", "tool_use_id": ident, "content": output}
    return [_opaque_block(provider, call), _opaque_block(provider, result)]


@st.composite
def _code_interpreter(draw: st.DrawFn, provider: str) -> list[JSON]:
    raw = {"type": "code_interpreter_call", "id": draw(_ids("ci_0")), "status": "completed",
           "code": draw(passages("code")), "container_id": draw(_ids("cntr_0")),
           "outputs": [{"type": "logs", "logs": draw(passages("prose", 1, 4))}]}
    reasoning = {"type": "reasoning", "id": draw(_ids("rs_0")), "summary": [],
                 "encrypted_content": draw(encrypted(300, 3000))}
    return [_opaque_block(provider, reasoning), _opaque_block(provider, raw)]


# ---------------------------------------------------------------- byte streams


def rechunkings(data: bytes, min_chunks: int = 1,
                max_chunks: int | None = None) -> st.SearchStrategy[list[bytes]]:
    """``data`` cut into ``min_chunks``..``max_chunks`` non-empty chunks at arbitrary byte offsets
    (mid-line, mid-UTF-8 character, between ``\\r`` and ``\\n``); their concatenation is always ``data``.
    Empty ``data`` gives ``[]``.
    """
    if not isinstance(data, bytes | bytearray):
        raise InvalidArgument(f"data={data!r:.60} must be bytes.")
    low = _check_size("min_chunks", min_chunks)
    high = len(data) if max_chunks is None else _check_size("max_chunks", max_chunks)
    if not data:
        return st.just([])
    if low > len(data):
        raise InvalidArgument(f"min_chunks={min_chunks!r} must not exceed len(data)={len(data)}.")
    low, high = max(low, 1), min(high, len(data))
    if low > high:
        raise InvalidArgument(f"min_chunks={min_chunks!r} must not exceed max_chunks={max_chunks!r}.")
    cuts = st.sets(st.integers(1, len(data) - 1), min_size=low - 1, max_size=high - 1) if len(data) > 1 \
        else st.just(cast(set[int], set()))
    whole = bytes(data)
    return cuts.map(lambda points: _cut(whole, sorted(points)))


def _cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = [0, *points, len(data)]
    return [data[start:end] for start, end in itertools.pairwise(edges)]

