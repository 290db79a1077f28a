"""Hypothesis strategies for replaykit's formats: transcripts, search blocks, usage, text, byte streams.

Every strategy is a public function that checks its arguments when called (not when drawn) and raises
:class:`hypothesis.errors.InvalidArgument` (a ``TypeError``) with a message such as
``max_messages=-1 must not be negative.``. What they draw is plain JSON (dicts, lists, strings, numbers),
in the neutral transcript format of ``contracts/replaykit/transcript.schema.json``; every transcript
:func:`transcripts` draws passes :func:`replaykit.transcript.restore`.

==========================  =====================================================================
strategy                    draws
==========================  =====================================================================
:func:`targets`             ``{"provider", "api", "model"}`` for anthropic, openai or azure
:func:`cjk_text`            text of CJK characters only (Han, kana, Hangul, CJK punctuation)
:func:`mixed_text`          text mixing ASCII, CJK and any other non-surrogate character
:func:`usages`              usage: ``valid``, ``zero``, ``nan`` or ``infinite``
:func:`citations`           Anthropic ``web_search_result_location`` / OpenAI ``url_citation``
:func:`hosted_search_blocks`  ``hostedSearch`` call / result / error; named or nameless; with or without raw
:func:`provider_blocks`     opaque ``providerBlock`` s: code execution, tool search, a block type never seen
:func:`tools`               function tools and the hosted search tool
:func:`user_messages`       user messages (string or text and image blocks)
:func:`assistant_messages`  assistant turns: text, thinking, tool calls, cited text, search, opaque blocks
:func:`tool_result_messages`  answers to tool calls
:func:`transcripts`         contract-valid transcripts
:func:`system_changes`      a transcript after a system rebuild, an instruction change or a tool change
:func:`rechunkings`         the same byte stream cut into chunks at arbitrary places
==========================  =====================================================================

Text never holds lone surrogates, so every transcript survives a round trip through JSON in any language.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import string
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, cast

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from replaykit.estimate import USAGE_FIELDS
from replaykit.replay import PROVIDERS
from replaykit.transcript import STOP_REASONS

__all__ = [
    "CJK_RANGES",
    "OPAQUE_TYPES",
    "PROVIDERS",
    "STOP_REASONS",
    "SYSTEM_CHANGES",
    "USAGE_KINDS",
    "assistant_messages",
    "citations",
    "cjk_text",
    "hosted_search_blocks",
    "mixed_text",
    "provider_blocks",
    "rechunkings",
    "system_changes",
    "targets",
    "tool_result_messages",
    "tools",
    "transcripts",
    "usages",
    "user_messages",
]

JSON = dict[str, Any]

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
def _json_values() -> st.SearchStrategy[Any]:
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

