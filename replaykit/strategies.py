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
from replaykit.routes import PROVIDER_APIS
from replaykit.transcript import STOP_REASONS

__all__ = [
    "CJK_RANGES",
    "CONTENT_KINDS",
    "OPAQUE_TYPES",
    "PASSAGES",
    "PROVIDERS",
    "SOURCES",
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
           "azure": ("my-gpt5-deployment",), "gemini": ("gemini-2.5-flash", "gemini-2.5-pro"),
           "vertex": ("gemini-2.5-pro",)}
#: Wire types of blocks the transcript keeps opaque, per API; :func:`provider_blocks` also draws made-up ones.
OPAQUE_TYPES = {
    "anthropic-messages": ("server_tool_use", "code_execution_tool_result", "bash_code_execution_tool_result",
                           "text_editor_code_execution_tool_result", "tool_search_tool_result",
                           "container_upload"),
    "openai-responses": ("code_interpreter_call", "image_generation_call", "mcp_call", "file_search_call",
                         "local_shell_call", "custom_tool_call"),
    "openai-chat": ("custom",),  # a tool call of another type than function
    # Gemini: a part the transcript does not model (its data key), or the candidate's urlContextMetadata
    "gemini-generate": ("executableCode", "codeExecutionResult", "fileData", "urlContextMetadata"),
}
_ANTHROPIC_ERRORS = ("invalid_tool_input", "unavailable", "max_uses_exceeded", "too_many_requests",
                     "query_too_long", "request_too_large")
_EPOCH_MS = (1_600_000_000_000, 1_900_000_000_000)
#: The model providers the strategies draw, and each one's default API.
PROVIDERS = {provider: MODEL_APIS[provider] for provider in _MODELS}
Source = tuple[str, str]
#: Every ``(provider, api)`` whose turns the strategies draw: each provider on each of its APIs (openai and
#: azure on Responses and Chat Completions, gemini and vertex on generateContent).
SOURCES: tuple[Source, ...] = tuple((provider, api) for provider in _MODELS
                                    for api in PROVIDER_APIS[provider])


def _sources(providers: Sequence[str]) -> tuple[Source, ...]:
    return tuple(source for source in SOURCES if source[0] in providers)


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
    """``{"provider", "api", "model"}`` targets, for ``providers`` (default: all of :data:`PROVIDERS`), on
    each of their APIs (:data:`SOURCES`)."""
    return _targets(_check_providers(providers))


@cache
def _targets(providers: tuple[str, ...]) -> st.SearchStrategy[JSON]:
    triples = [(provider, api, model) for provider, api in _sources(providers) for model in _MODELS[provider]]
    return st.sampled_from(triples).map(lambda triple: {"provider": triple[0], "api": triple[1],
                                                        "model": triple[2]})


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


def citations(provider: str, text_length: int = 40, *, api: str | None = None) -> st.SearchStrategy[JSON]:
    """A web citation as the provider sends it on ``api`` (default: its default API), for a text of
    ``text_length`` characters.

    Anthropic: ``web_search_result_location`` (``encrypted_index`` opaque); OpenAI and Azure Responses:
    ``url_citation`` with ``0 <= start_index <= end_index <= text_length``; Chat Completions: the same under
    an ``url_citation`` member; Gemini: a ``groundingSupports`` entry (``segment``,
    ``groundingChunkIndices``).
    """
    _check_choice("provider", provider, tuple(PROVIDERS))
    _check_choice("api", api, PROVIDER_APIS[provider])
    return _citations((provider, api or PROVIDERS[provider]), _check_size("text_length", text_length))


@cache
def _citations(source: Source, length: int) -> st.SearchStrategy[JSON]:
    api = source[1]
    if api == "anthropic-messages":
        return st.builds(lambda url, title, index, cited: {
            "type": "web_search_result_location", "url": url, "title": title, "encrypted_index": index,
            "cited_text": cited}, _urls(), st.none() | _words(), _opaque(), _mixed_text(0, 150))
    span = st.tuples(st.integers(0, length), st.integers(0, length)).map(sorted)
    if api == "gemini-generate":
        return st.builds(lambda bounds, text, chunks: {
            "segment": {"startIndex": bounds[0], "endIndex": bounds[1], "text": text},
            "groundingChunkIndices": chunks}, span, _mixed_text(0, 40),
            st.lists(st.integers(0, 4), min_size=1, max_size=3))
    flat = st.builds(lambda url, title, bounds: {
        "type": "url_citation", "start_index": bounds[0], "end_index": bounds[1], "title": title, "url": url},
        _urls(), _words(), span)
    if api == "openai-chat":
        return flat.map(lambda cite: {"type": "url_citation", "url_citation": {
            key: value for key, value in cite.items() if key != "type"}})
    return flat


def hosted_search_blocks(provider: str | None = None, phase: str | None = None, *,
                         raw: bool | None = None, named: bool | None = None) -> st.SearchStrategy[JSON]:
    """``hostedSearch`` blocks of ``provider`` (None: any) on any of its APIs. ``phase``: call, result or
    error (None: any). ``raw``: True for replayable blocks, False for display-only ones, None for either.
    ``named``: True for blocks whose wire form has a ``name`` (Anthropic ``server_tool_use`` calls), False
    for nameless ones (results, errors, OpenAI calls).

    OpenAI and Azure Responses have no separate result item: their result blocks are display-only. A result
    block is sometimes a legacy one, with its results only in ``raw``. Gemini's result keeps the candidate's
    ``groundingMetadata`` in ``raw``, its calls (one per query) are display-only, and it has no error; Chat
    Completions has a result only (a Perplexity-style answer's ``citations`` and ``search_results``).
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


#: The phases of the hosted search blocks of each API, replayable (with raw) and display-only.
_PHASES = {"anthropic-messages": (("call", "result", "error"), ("call", "result", "error")),
           "openai-responses": (("call", "error"), ("call", "result", "error")),
           "openai-chat": (("result",), ("result",)),
           "gemini-generate": (("result",), ("call", "result"))}


def _search_options(provider: str | None, phase: str | None, raw: bool | None,
                    named: bool | None) -> list[tuple[Source, str, bool]]:
    options = []
    for source in _sources([provider] if provider else list(PROVIDERS)):
        for stage in [phase] if phase else ["call", "result", "error"]:
            for replayable in [raw] if raw is not None else [True, False]:
                if stage not in _PHASES[source[1]][0 if replayable else 1]:
                    continue
                has_name = replayable and source[1] == "anthropic-messages" and stage == "call"
                if named is None or named == has_name:
                    options.append((source, stage, replayable))
    return options


@cache
def _search_blocks(options: tuple[tuple[Source, str, bool], ...]) -> st.SearchStrategy[JSON]:
    return st.one_of([_search_block(*option) for option in options])


@cache
def _search_block(source: Source, phase: str, replayable: bool) -> st.SearchStrategy[JSON]:
    strategy = _SEARCH[phase](source)
    return strategy if replayable else strategy.map(_display_only)


def _display_only(block: JSON) -> JSON:
    return {key: value for key, value in block.items() if key != "raw"}


def _head(source: Source, phase: str) -> JSON:
    return {"type": "hostedSearch", "phase": phase, "provider": source[0], "api": source[1]}


def _search_id(source: Source) -> st.SearchStrategy[str]:
    prefix = {"anthropic-messages": "srvtoolu_", "gemini-generate": "grounding:q", "openai-chat": "chatcmpl-"}
    return _ids(prefix.get(source[1], "ws_"))


@cache
def _grounding() -> st.SearchStrategy[JSON]:
    """A candidate's ``groundingMetadata``: queries, the pages and the supports citing them."""
    chunk = st.builds(lambda uri, title: {"web": {"uri": uri, "title": title}}, _urls(), _words())
    support = st.builds(lambda end, text, chunks: {
        "segment": {"startIndex": 0, "endIndex": end, "text": text}, "groundingChunkIndices": chunks},
                        st.integers(0, 60), _mixed_text(0, 30), st.lists(st.integers(0, 2), max_size=2))
    return st.fixed_dictionaries(
        {"webSearchQueries": st.lists(_mixed_text(1, 30), min_size=1, max_size=2),
         "groundingChunks": st.lists(chunk, max_size=3), "groundingSupports": st.lists(support, max_size=2)},
        optional={"searchEntryPoint": st.builds(lambda html: {"renderedContent": html}, _mixed_text(0, 60))})


def _search_call(source: Source) -> st.SearchStrategy[JSON]:
    if source[1] == "gemini-generate":  # a query of the groundingMetadata the result keeps: no raw
        return st.builds(lambda ident, query: {**_head(source, "call"), "id": ident, "query": query},
                         _search_id(source), _mixed_text(1, 30))

    def build(ident: str, query: str) -> JSON:
        if source[1] == "anthropic-messages":
            raw = {"type": "server_tool_use", "id": ident, "name": "web_search", "input": {"query": query}}
        else:
            raw = {"id": ident, "type": "web_search_call", "status": "completed",
                   "action": {"type": "search", "query": query}}
        return {**_head(source, "call"), "id": ident, "query": query, "raw": raw}

    return st.builds(build, _search_id(source), _mixed_text(1, 30))


def _search_result(source: Source) -> st.SearchStrategy[JSON]:
    if source[1] == "gemini-generate":
        return st.builds(lambda ident, grounding: {
            **_head(source, "result"), "toolUseId": ident, "raw": grounding,
            "results": [{"url": chunk["web"]["uri"], "title": chunk["web"]["title"]}
                        for chunk in grounding["groundingChunks"]]}, _search_id(source), _grounding())
    result = st.fixed_dictionaries({"url": _urls(), "title": _mixed_text(0, 30),
                                    "pageAge": st.none() | _words()})
    if source[1] == "openai-chat":
        return st.builds(lambda ident, results: {
            **_head(source, "result"), "toolUseId": ident, "results": results,
            "raw": {"citations": [item["url"] for item in results], "search_results": [
                {"title": item["title"], "url": item["url"], "date": item["pageAge"]} for item in results]}},
            _search_id(source), st.lists(result, max_size=3))

    def build(ident: str, results: list[JSON], secrets: list[str], legacy: bool) -> JSON:
        wire = [{"type": "web_search_result", "url": item["url"], "title": item["title"],
                 "encrypted_content": secret, "page_age": item["pageAge"]}
                for item, secret in zip(results, secrets, strict=False)]
        raw = {"type": "web_search_tool_result", "tool_use_id": ident, "content": wire}
        block = {**_head(source, "result"), "toolUseId": ident, "raw": raw}
        return block if legacy else {**block, "results": results}

    return st.builds(build, _search_id(source), st.lists(result, max_size=3),
                     st.lists(_opaque(), min_size=3, max_size=3), st.booleans())


def _search_error(source: Source) -> st.SearchStrategy[JSON]:
    anthropic = source[1] == "anthropic-messages"

    def build(ident: str, code: str) -> JSON:
        if anthropic:
            raw = {"type": "web_search_tool_result", "tool_use_id": ident,
                   "content": {"type": "web_search_tool_result_error", "error_code": code}}
        else:
            raw = {"id": ident, "type": "web_search_call", "status": "failed", "action": {"type": "search"}}
        return {**_head(source, "error"), "toolUseId": ident, "errorCode": code, "raw": raw}

    codes = _ANTHROPIC_ERRORS if anthropic else ("failed",)
    return st.builds(build, _search_id(source), st.sampled_from(codes))


_SEARCH: dict[str, Callable[[Source], st.SearchStrategy[JSON]]] = {
    "call": _search_call, "result": _search_result, "error": _search_error,
}


@cache
def _search_round(source: Source) -> st.SearchStrategy[list[JSON]]:
    """A call followed by its outcome (Anthropic: a result or an error block; OpenAI Responses: the call
    only; Gemini: a call per query, then the result, one groundingMetadata in all; Chat: the result)."""
    api = source[1]
    if api == "openai-chat":
        return _search_block(source, "result", True).map(lambda block: [block])
    if api == "gemini-generate":
        return st.builds(lambda ident, grounding: _grounded(source, ident, grounding), _ids("resp_"),
                         _grounding())
    if api != "anthropic-messages":
        return st.one_of(_search_block(source, "call", True), _search_block(source, "error", True)).map(
            lambda block: [block])
    outcome = st.one_of(_search_block(source, "result", True), _search_block(source, "error", True))
    return st.tuples(_search_block(source, "call", True), outcome).map(_pair)


def _pair(blocks: tuple[JSON, JSON]) -> list[JSON]:
    call, outcome = blocks
    raw = {**outcome["raw"], "tool_use_id": call["id"]}
    return [call, {**outcome, "toolUseId": call["id"], "raw": raw}]


def _grounded(source: Source, ident: str, grounding: JSON) -> list[JSON]:
    """The blocks of one ``groundingMetadata`` as the neutral mapping gives them: a call per query (id
    ``<responseId>:q<i>``), then the result answering the first."""
    calls = [{**_head(source, "call"), "id": f"{ident}:q{number}", "query": query}
             for number, query in enumerate(grounding["webSearchQueries"])]
    results = [{"url": chunk["web"]["uri"], "title": chunk["web"]["title"]}
               for chunk in grounding["groundingChunks"]]
    return [*calls, {**_head(source, "result"), "toolUseId": f"{ident}:q0", "results": results,
                     "raw": grounding}]


# ---------------------------------------------------------------- opaque provider blocks


def provider_blocks(provider: str | None = None) -> st.SearchStrategy[JSON]:
    """Opaque ``providerBlock`` s of ``provider`` (None: any) on any of its APIs: a wire type the transcript
    does not model (:data:`OPAQUE_TYPES`: code execution and its results, tool search, MCP...) or a made-up
    one (a server tool introduced next month), its ``raw`` a JSON object of that type holding text and
    nested values (a Gemini part: ``{type: {...}}``)."""
    _check_choice("provider", provider, tuple(PROVIDERS))
    return _provider_blocks(_sources((provider,) if provider else tuple(PROVIDERS)))


@cache
def _provider_blocks(sources: tuple[Source, ...]) -> st.SearchStrategy[JSON]:
    return st.one_of([_provider_block(each) for each in sources])


def _provider_block(source: Source) -> st.SearchStrategy[JSON]:
    provider, api = source
    invented = st.text(string.ascii_lowercase + "_", min_size=1, max_size=16).map(lambda kind: kind + "_2027")
    kinds = st.one_of(st.sampled_from(OPAQUE_TYPES[api]), invented)

    def build(kind: str, ident: str, text: str, extra: JSON) -> JSON:
        data = {**extra, "id": ident, "content": [{"type": "text", "text": text}]}
        raw = {kind: data} if api == "gemini-generate" else {**data, "type": kind}
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


def _text_block(source: Source) -> st.SearchStrategy[JSON]:
    def build(text: str, cites: list[JSON], signature: str | None) -> JSON:
        block: JSON = {"type": "text", "text": text}
        if cites:
            block["citations"] = [_fit(cite, len(text)) for cite in cites]
        if signature is not None and source[1] in ("openai-responses", "gemini-generate"):
            block["signature"] = signature  # the message item's id; a Gemini part's thoughtSignature
        return block

    signatures = _encrypted(16, 120) if source[1] == "gemini-generate" else _ids("msg_")
    return st.builds(build, _mixed_text(0, 60), st.lists(_citations(source, 60), max_size=2),
                     st.none() | signatures)


def _fit(citation: JSON, length: int) -> JSON:
    """``citation`` with its offsets cut to a text of ``length`` characters."""
    if "url_citation" in citation:
        return {**citation, "url_citation": _fit(citation["url_citation"], length)}
    if "segment" in citation:
        segment = citation["segment"]
        return {**citation, "segment": {**segment, "startIndex": min(segment["startIndex"], length),
                                        "endIndex": min(segment["endIndex"], length)}}
    if "start_index" not in citation:
        return citation
    return {**citation, "start_index": min(citation["start_index"], length),
            "end_index": min(citation["end_index"], length)}


def _thinking_block(source: Source) -> st.SearchStrategy[JSON]:
    api = source[1]
    if api == "anthropic-messages":
        return st.builds(lambda text, signature, redacted: {
            "type": "thinking", "thinking": "" if redacted else text, "signature": signature,
            **({"redacted": True} if redacted else {})}, _mixed_text(0, 40), _opaque(), st.booleans())
    if api == "gemini-generate":
        return st.builds(lambda text, secret: {
            "type": "thinking", "thinking": text,
            "raw": {"text": text, "thought": True, "thoughtSignature": secret}},
            _mixed_text(0, 40), _encrypted(16, 120))
    if api == "openai-chat":  # reasoning_content: no wire form to send back
        return st.builds(lambda text: {"type": "thinking", "thinking": text}, _mixed_text(0, 40))
    return st.builds(lambda text, ident, secret: {
        "type": "thinking", "thinking": text,
        "raw": {"type": "reasoning", "id": ident, "summary": [{"type": "summary_text", "text": text}],
                "encrypted_content": secret}}, _mixed_text(0, 40), _ids("rs_"), _opaque())


def _tool_call_raw(api: str, ident: str, name: str, arguments: JSON, secret: str | None) -> JSON:
    """The wire form of a function call on ``api``."""
    if api == "anthropic-messages":
        return {"type": "tool_use", "id": ident, "name": name, "input": arguments,
                "caller": {"type": "direct"}}
    encoded = json.dumps(arguments, ensure_ascii=False)
    if api == "gemini-generate":  # the API gives an id to some calls only (then the block's id is it)
        call = {"id": ident, "name": name, "args": arguments} if secret else {"name": name, "args": arguments}
        return {"functionCall": call, "thoughtSignature": secret} if secret else {"functionCall": call}
    if api == "openai-chat":
        return {"id": ident, "type": "function", "function": {"name": name, "arguments": encoded}}
    return {"type": "function_call", "id": "fc_" + ident, "call_id": ident, "name": name,
            "arguments": encoded, "status": "completed"}


def _tool_call_block(source: Source) -> st.SearchStrategy[JSON]:
    def build(ident: str, name: str, arguments: JSON, with_raw: bool, secret: str | None) -> JSON:
        block: JSON = {"type": "toolCall", "id": ident, "name": name, "arguments": arguments}
        if with_raw:
            block["raw"] = _tool_call_raw(source[1], ident, name, arguments, secret)
        return block

    arguments = st.dictionaries(_words(10), _json_values(), max_size=3)
    return st.builds(build, _ids("call_"), _names(), arguments, st.booleans(),
                     st.none() | _encrypted(16, 120))


@cache
def _assistant_blocks(source: Source, search: bool, opaque: bool) -> st.SearchStrategy[list[JSON]]:
    kinds = [_text_block(source), _thinking_block(source), _tool_call_block(source)]
    single = st.one_of([*kinds, _provider_block(source)] if opaque else kinds)
    group = single.map(lambda block: [block])
    if search:
        options = tuple(option for option in _search_options(source[0], None, None, None)
                        if option[0] == source)
        loose = _search_blocks(options).map(lambda block: [block])
        group = st.one_of(group, loose, _search_round(source))
    return st.lists(group, max_size=4 if search else 3).map(
        lambda groups: [block for each in groups for block in each])


def assistant_messages(provider: str | None = None, *, usage: str | None = None,
                       stop_reasons: Sequence[str] | None = None, search: bool = True, opaque: bool = True,
                       timestamp: int | None = None) -> st.SearchStrategy[JSON]:
    """Assistant turns of ``provider`` (None: any) on any of its APIs: text (with citations), thinking, tool
    calls, when ``search`` hosted search and when ``opaque`` opaque provider blocks (:func:`provider_blocks`).

    ``usage`` picks the usage kind (see :func:`usages`; None: any), ``stop_reasons`` the allowed stop
    reasons (default: all six), ``timestamp`` a fixed timestamp (default: drawn).
    """
    _check_choice("provider", provider, tuple(PROVIDERS))
    _check_choice("usage", usage, USAGE_KINDS)
    _check_flag("search", search)
    _check_flag("opaque", opaque)
    sources = _sources((provider,) if provider else tuple(PROVIDERS))
    reasons = STOP_REASONS if stop_reasons is None else \
        _check_choices("stop_reasons", stop_reasons, STOP_REASONS, "stop reasons")
    return _assistants(sources, usage, reasons, (bool(search), bool(opaque)), _check_timestamp(timestamp))


@cache
def _assistants(sources: tuple[Source, ...], usage: str | None, reasons: tuple[str, ...],
                kinds: tuple[bool, bool], timestamp: int | None) -> st.SearchStrategy[JSON]:
    return st.one_of([_assistant(each, usage, reasons, kinds, timestamp) for each in sources])


def _assistant(source: Source, usage: str | None, reasons: tuple[str, ...], kinds: tuple[bool, bool],
               timestamp: int | None) -> st.SearchStrategy[JSON]:
    return st.builds(
        lambda content, model, used, stop, stamp: {
            "role": "assistant", "content": content, "provider": source[0], "api": source[1],
            "model": model, "usage": used, "stopReason": stop, "timestamp": stamp},
        _assistant_blocks(source, *kinds), st.sampled_from(_MODELS[source[0]]), _usages(usage),
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
    message = st.one_of(_users(0), _tool_results(0),
                        _assistants(_sources(providers), usage, STOP_REASONS, kinds, 0))
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

    - ``search``: hosted search turns of ``provider`` (None: any) on any of its APIs: calls, results
      (encrypted content included) and answers that cite them (Gemini: grounding metadata and supports;
      Chat Completions: search results and annotations); or a search tool's call and its results as JSON;
    - ``opaque``: a turn of opaque provider blocks of ``provider`` (code execution: code, output, encrypted
      output);
    - ``cjk``, ``code``, ``prose``: a user message and an answer of that kind of text.
    """
    _check_choice("kind", kind, CONTENT_KINDS)
    _check_choice("provider", provider, tuple(PROVIDERS))
    return _rich(kind, _sources((provider,) if provider else tuple(PROVIDERS)))


@cache
def _rich(kind: str, sources: tuple[Source, ...]) -> st.SearchStrategy[list[JSON]]:
    if kind in ("cjk", "code", "prose"):
        text = passages(kind)
        return st.builds(lambda asked, said, source: [
            {"role": "user", "content": asked}, _turn(source, [{"type": "text", "text": said}])],
            text, text, st.sampled_from(sources)).map(_stamped)
    build = _search_turns if kind == "search" else _opaque_turns
    return st.one_of([build(source) for source in sources]).map(_stamped)


def _stamped(messages: list[JSON]) -> list[JSON]:
    for offset, message in enumerate(messages):
        message["timestamp"] = _EPOCH_MS[0] + 1000 * offset
    return messages


def _turn(source: Source, blocks: list[JSON]) -> JSON:
    return {"role": "assistant", "content": blocks, "provider": source[0], "api": source[1],
            "model": _MODELS[source[0]][0], "usage": _usage_of((0, 0, 0, 0)), "stopReason": "stop"}


@cache
def _queries() -> st.SearchStrategy[str]:
    return st.sampled_from(["python 3.13 release date", "free-threaded build default python 3.13",
                            "PEP 703 status", "EU electric car registrations 2024", "Po valley drought 2026"])


_RICH_SEARCH: dict[str, Callable[[Source], st.SearchStrategy[list[JSON]]]] = {}


@cache
def _search_turns(source: Source) -> st.SearchStrategy[list[JSON]]:
    turns = st.lists(_RICH_SEARCH[source[1]](source), min_size=1, max_size=3).map(lambda rounds: [
        _turn(source, [block for each in rounds for block in each])])
    return st.one_of(turns, _search_tool(source))


@st.composite
def _anthropic_search(draw: st.DrawFn, source: Source) -> list[JSON]:
    ident, query = draw(_ids("srvtoolu_01")), draw(_queries())
    pages = draw(st.lists(st.fixed_dictionaries({
        "type": st.just("web_search_result"), "url": web_urls(), "title": st.sampled_from(_TITLES),
        "encrypted_content": encrypted(200, 3000),
        "page_age": st.sampled_from([None, "3 days ago", "April 30, 2026"])}), min_size=2, max_size=8))
    call = {**_head(source, "call"), "id": ident, "query": query,
            "raw": {"type": "server_tool_use", "id": ident, "name": "web_search", "input": {"query": query}}}
    results = [{"url": page["url"], "title": page["title"], "pageAge": page["page_age"]} for page in pages]
    result = {**_head(source, "result"), "toolUseId": ident, "results": results,
              "raw": {"type": "web_search_tool_result", "tool_use_id": ident, "content": pages}}
    cited = [{"type": "web_search_result_location", "url": page["url"], "title": page["title"],
              "encrypted_index": draw(encrypted(60, 200)), "cited_text": draw(passages("prose", 1, 2))}
             for page in pages[:draw(st.integers(1, len(pages)))]]
    answer = {"type": "text", "text": draw(passages("prose", 1, 3)), "citations": cited}
    return [call, result, answer]


@st.composite
def _openai_search(draw: st.DrawFn, source: Source) -> list[JSON]:
    ident, query = draw(_ids("ws_0")), draw(_queries())
    urls = draw(st.lists(web_urls(), min_size=2, max_size=8))
    action = {"type": "search", "query": query, "sources": [{"type": "url", "url": url} for url in urls]}
    call = {**_head(source, "call"), "id": ident, "query": query,
            "raw": {"id": ident, "type": "web_search_call", "status": "completed", "action": action}}
    text = draw(passages("prose", 1, 3))
    cited = [{"type": "url_citation", "start_index": 0, "end_index": len(text), "url": url,
              "title": draw(st.sampled_from(_TITLES))} for url in urls[:draw(st.integers(1, len(urls)))]]
    answer = {"type": "text", "text": text, "citations": cited, "signature": draw(_ids("msg_0"))}
    return [call, answer]


@st.composite
def _gemini_search(draw: st.DrawFn, source: Source) -> list[JSON]:
    """A grounded answer: the grounding blocks (Vertex AI Search redirect URIs), then the text its
    supports cite by UTF-8 byte offsets."""
    text = draw(passages("prose", 1, 3))
    size = len(text.encode())
    chunks = [{"web": {"uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/"
                              + draw(encrypted(60, 150)).replace("/", "_").replace("+", "-"),
                       "title": draw(st.sampled_from(_TITLES))}}
              for _ in range(draw(st.integers(1, 6)))]
    supports = [{"segment": {"startIndex": 0, "endIndex": size, "text": text},
                 "groundingChunkIndices": list(range(len(chunks)))}]
    grounding = {"webSearchQueries": draw(st.lists(_queries(), min_size=1, max_size=3, unique=True)),
                 "searchEntryPoint": {"renderedContent": draw(passages("code", 2, 6))},
                 "groundingChunks": chunks, "groundingSupports": supports}
    answer = {"type": "text", "text": text, "citations": supports}
    return [*_grounded(source, draw(_ids("resp_0")), grounding), answer]


@st.composite
def _chat_search(draw: st.DrawFn, source: Source) -> list[JSON]:
    """A Perplexity-style answer: its search results, then the text whose annotations cite them."""
    text = draw(passages("prose", 1, 3))
    pages = [{"title": draw(st.sampled_from(_TITLES)), "url": draw(web_urls()),
              "date": draw(st.sampled_from([None, "2026-04-30"]))} for _ in range(draw(st.integers(1, 6)))]
    raw = {"citations": [page["url"] for page in pages], "search_results": pages}
    result = {**_head(source, "result"), "toolUseId": draw(_ids("chatcmpl-0")), "raw": raw,
              "results": [{"url": page["url"], "title": page["title"], "pageAge": page["date"]}
                          for page in pages]}
    cited = [{"type": "url_citation", "url_citation": {"url": page["url"], "title": page["title"],
                                                       "start_index": 0, "end_index": len(text)}}
             for page in pages]
    return [result, {"type": "text", "text": text, "citations": cited}]


_RICH_SEARCH.update({"anthropic-messages": _anthropic_search, "openai-responses": _openai_search,
                     "gemini-generate": _gemini_search, "openai-chat": _chat_search})


@st.composite
def _search_tool(draw: st.DrawFn, source: Source) -> list[JSON]:
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
    return [{**_turn(source, [call]), "stopReason": "toolUse"}, result]


@cache
def _opaque_turns(source: Source) -> st.SearchStrategy[list[JSON]]:
    blocks = {"anthropic-messages": _code_execution, "gemini-generate": _gemini_code,
              "openai-chat": _chat_opaque}.get(source[1], _code_interpreter)
    return st.lists(blocks(source), min_size=1, max_size=3).map(
        lambda rounds: [_turn(source, [block for each in rounds for block in each])])


def _opaque_block(source: Source, raw: JSON, kind: str | None = None) -> JSON:
    return {"type": "providerBlock", "provider": source[0], "api": source[1],
            "blockType": kind or raw["type"], "raw": raw}


@st.composite
def _code_execution(draw: st.DrawFn, source: Source) -> list[JSON]:
    ident, code = draw(_ids("srvtoolu_01")), draw(passages("code"))
    if draw(st.booleans()):
        output = {"type": "encrypted_code_execution_result", "encrypted_stdout": draw(encrypted(100, 2000)),
                  "return_code": 0, "content": []}
    else:
        output = {"type": "code_execution_result", "stdout": draw(passages("prose", 1, 4)), "stderr": "",
                  "return_code": 0, "content": []}
    call = {"type": "server_tool_use", "id": ident, "name": "code_execution", "input": {"code": code}}
    result = {"type": "code_execution_tool_result", "tool_use_id": ident, "content": output}
    return [_opaque_block(source, call), _opaque_block(source, result)]


@st.composite
def _code_interpreter(draw: st.DrawFn, source: Source) -> list[JSON]:
    raw = {"type": "code_interpreter_call", "id": draw(_ids("ci_0")), "status": "completed",
           "code": draw(passages("code")), "container_id": draw(_ids("cntr_0")),
           "outputs": [{"type": "logs", "logs": draw(passages("prose", 1, 4))}]}
    reasoning = {"type": "reasoning", "id": draw(_ids("rs_0")), "summary": [],
                 "encrypted_content": draw(encrypted(300, 3000))}
    return [_opaque_block(source, reasoning), _opaque_block(source, raw)]


@st.composite
def _gemini_code(draw: st.DrawFn, source: Source) -> list[JSON]:
    """Gemini's code execution: an ``executableCode`` part and its ``codeExecutionResult``."""
    code = {"executableCode": {"language": "PYTHON", "code": draw(passages("code"))}}
    output = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": draw(passages("prose", 1, 4))}}
    return [_opaque_block(source, code, "executableCode"),
            _opaque_block(source, output, "codeExecutionResult")]


@st.composite
def _chat_opaque(draw: st.DrawFn, source: Source) -> list[JSON]:
    """A custom tool call on Chat Completions (free-form input, not JSON): kept whole."""
    raw = {"type": "custom", "id": draw(_ids("call_0")),
           "custom": {"name": "apply_patch", "input": draw(passages("code"))}}
    return [_opaque_block(source, raw)]


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

