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
:func:`tools`               function tools and the hosted search tool
:func:`user_messages`       user messages (string or text and image blocks)
:func:`assistant_messages`  assistant turns with text, thinking, tool calls, cited text and search rounds
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
from typing import Any, cast

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

__all__ = [
    "CJK_RANGES",
    "PROVIDERS",
    "STOP_REASONS",
    "SYSTEM_CHANGES",
    "USAGE_KINDS",
    "assistant_messages",
    "citations",
    "cjk_text",
    "hosted_search_blocks",
    "mixed_text",
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

PROVIDERS: dict[str, str] = {"anthropic": "anthropic-messages", "openai": "openai-responses",
                             "azure": "openai-responses"}
STOP_REASONS = ("stop", "length", "toolUse", "error", "aborted", "pauseTurn")
USAGE_KINDS = ("valid", "zero", "nan", "infinite")
SYSTEM_CHANGES = ("rebuild", "instruction", "tools")
#: Code point ranges :func:`cjk_text` draws from: Han, Hiragana, Katakana, Hangul syllables, CJK punctuation.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3), (0x3001, 0x3003))
_MODELS = {"anthropic": ("claude-sonnet-4-5", "claude-opus-4-1"), "openai": ("gpt-5", "gpt-4.1-mini"),
           "azure": ("my-gpt5-deployment",)}
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


def _check_providers(providers: Sequence[str] | None) -> tuple[str, ...]:
    if providers is None:
        return tuple(PROVIDERS)
    if isinstance(providers, str) or not providers:
        raise InvalidArgument(f"providers={providers!r} must be a non-empty list of provider names.")
    for provider in providers:
        _check_choice("providers[]", provider, tuple(PROVIDERS))
    return tuple(providers)


def _check_flag(name: str, value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise InvalidArgument(f"{name}={value!r} must be True, False or None.")


# ---------------------------------------------------------------- text, ids, targets


def targets(providers: Sequence[str] | None = None) -> st.SearchStrategy[JSON]:
    """``{"provider", "api", "model"}`` targets, for ``providers`` (default: anthropic, openai, azure)."""
    chosen = _check_providers(providers)
    return st.sampled_from(chosen).flatmap(
        lambda provider: st.builds(lambda model: {"provider": provider, "api": PROVIDERS[provider],
                                                  "model": model}, st.sampled_from(_MODELS[provider])))


def cjk_text(min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    """Text made of CJK characters only (each one counts as a token in replaykit's estimate)."""
    low, high = _check_range("min_size", min_size, "max_size", max_size)
    alphabet = st.one_of([st.characters(min_codepoint=a, max_codepoint=b) for a, b in CJK_RANGES])
    return st.text(alphabet, min_size=low, max_size=high)


def mixed_text(min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    """Text mixing printable ASCII, CJK and any other character (never a lone surrogate)."""
    low, high = _check_range("min_size", min_size, "max_size", max_size)
    cjk = st.one_of([st.characters(min_codepoint=a, max_codepoint=b) for a, b in CJK_RANGES])
    alphabet = st.one_of(st.sampled_from(string.printable), cjk, st.characters(exclude_categories=["Cs"]))
    return st.text(alphabet, min_size=low, max_size=high)


def _words(max_size: int = 20) -> st.SearchStrategy[str]:
    return st.text(string.ascii_letters + string.digits + " -_.", min_size=1, max_size=max_size)


def _names() -> st.SearchStrategy[str]:
    """Tool names as both APIs accept them: ``^[a-zA-Z0-9_-]{1,64}$``."""
    return st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=24)


def _ids(prefix: str) -> st.SearchStrategy[str]:
    tails = st.text(string.ascii_letters + string.digits, min_size=6, max_size=12)
    return tails.map(lambda tail: prefix + tail)


def _urls() -> st.SearchStrategy[str]:
    return st.builds(lambda host, path: f"https://{host}.example/{path}",
                     st.text(string.ascii_lowercase, min_size=1, max_size=10),
                     st.text(string.ascii_lowercase + string.digits + "-/", max_size=20))


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
    if kind is None:
        return st.sampled_from(USAGE_KINDS).flatmap(usages)
    return _USAGES[kind]()


def _valid_usage() -> st.SearchStrategy[JSON]:
    counts = st.integers(0, 200_000)
    return st.tuples(counts, counts, counts, counts).filter(lambda parts: sum(parts) > 0).map(_usage_of)


def _usage_of(parts: tuple[float, ...]) -> JSON:
    names = ("input", "output", "cacheRead", "cacheWrite")
    return {**dict(zip(names, parts, strict=True)), "totalTokens": sum(parts)}


def _zero_usage() -> st.SearchStrategy[JSON]:
    return st.builds(lambda: _usage_of((0, 0, 0, 0)))


def _spoiled_usage(values: st.SearchStrategy[float]) -> Callable[[], st.SearchStrategy[JSON]]:
    fields = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")

    def build() -> st.SearchStrategy[JSON]:
        spoiled = st.sets(st.sampled_from(fields), min_size=1)
        return st.builds(lambda usage, names, bad: {**usage, **{name: bad for name in names}},
                         _valid_usage(), spoiled, values)

    return build


_USAGES: dict[str, Callable[[], st.SearchStrategy[JSON]]] = {
    "valid": _valid_usage, "zero": _zero_usage, "nan": _spoiled_usage(st.just(math.nan)),
    "infinite": _spoiled_usage(st.sampled_from([math.inf, -math.inf])),
}


# ---------------------------------------------------------------- citations and search blocks


def citations(provider: str, text_length: int = 40) -> st.SearchStrategy[JSON]:
    """A web citation as the provider sends it, for a text of ``text_length`` characters.

    Anthropic: ``web_search_result_location`` (``encrypted_index`` opaque); OpenAI and Azure: ``url_citation``
    with ``0 <= start_index <= end_index <= text_length``.
    """
    _check_choice("provider", provider, tuple(PROVIDERS))
    length = _check_size("text_length", text_length)
    if provider == "anthropic":
        return st.builds(lambda url, title, index, cited: {
            "type": "web_search_result_location", "url": url, "title": title, "encrypted_index": index,
            "cited_text": cited}, _urls(), st.none() | _words(), _opaque(), mixed_text(max_size=150))
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
    return st.sampled_from(options).flatmap(lambda option: _search_block(*option))


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


def _search_block(provider: str, phase: str, replayable: bool) -> st.SearchStrategy[JSON]:
    ident = _ids("srvtoolu_" if provider == "anthropic" else "ws_")
    return ident.flatmap(lambda ident: _SEARCH[phase](provider, ident)).map(
        lambda block: block if replayable else {key: value for key, value in block.items() if key != "raw"})


def _head(provider: str, phase: str) -> JSON:
    return {"type": "hostedSearch", "phase": phase, "provider": provider, "api": PROVIDERS[provider]}


def _search_call(provider: str, ident: str) -> st.SearchStrategy[JSON]:
    def build(query: str) -> JSON:
        if provider == "anthropic":
            raw = {"type": "server_tool_use", "id": ident, "name": "web_search", "input": {"query": query}}
        else:
            raw = {"id": ident, "type": "web_search_call", "status": "completed",
                   "action": {"type": "search", "query": query}}
        return {**_head(provider, "call"), "id": ident, "query": query, "raw": raw}

    return st.builds(build, mixed_text(min_size=1, max_size=30))


def _search_result(provider: str, ident: str) -> st.SearchStrategy[JSON]:
    result = st.fixed_dictionaries({"url": _urls(), "title": st.none() | mixed_text(max_size=30),
                                     "pageAge": st.none() | _words()})

    def build(results: list[JSON], secrets: list[str], legacy: bool) -> JSON:
        wire = [{"type": "web_search_result", "url": item["url"], "title": item["title"],
                 "encrypted_content": secret, "page_age": item["pageAge"]}
                for item, secret in zip(results, secrets, strict=False)]
        raw = {"type": "web_search_tool_result", "tool_use_id": ident, "content": wire}
        block = {**_head(provider, "result"), "toolUseId": ident, "raw": raw}
        return block if legacy else {**block, "results": results[:len(wire)]}

    return st.builds(build, st.lists(result, max_size=3), st.lists(_opaque(), min_size=3, max_size=3),
                     st.booleans())


def _search_error(provider: str, ident: str) -> st.SearchStrategy[JSON]:
    if provider == "anthropic":
        return st.sampled_from(_ANTHROPIC_ERRORS).map(lambda code: {
            **_head(provider, "error"), "toolUseId": ident, "errorCode": code,
            "raw": {"type": "web_search_tool_result", "tool_use_id": ident,
                    "content": {"type": "web_search_tool_result_error", "error_code": code}}})
    return st.builds(lambda: {**_head(provider, "error"), "toolUseId": ident, "errorCode": "failed",
                              "raw": {"id": ident, "type": "web_search_call", "status": "failed",
                                      "action": {"type": "search"}}})


_SEARCH: dict[str, Callable[[str, str], st.SearchStrategy[JSON]]] = {
    "call": _search_call, "result": _search_result, "error": _search_error,
}


def _search_round(provider: str) -> st.SearchStrategy[list[JSON]]:
    """A call followed by its outcome (Anthropic: a result or an error block; OpenAI: the call only)."""
    if provider != "anthropic":
        return _ids("ws_").flatmap(lambda ident: st.one_of(_search_call(provider, ident),
                                                           _search_error(provider, ident)).map(lambda b: [b]))
    return _ids("srvtoolu_").flatmap(lambda ident: st.tuples(
        _search_call(provider, ident),
        st.one_of(_search_result(provider, ident), _search_error(provider, ident))).map(list))


# ---------------------------------------------------------------- blocks and messages


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | mixed_text(max_size=20)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(_words(10), inner, max_size=3), max_leaves=6)


def _arguments() -> st.SearchStrategy[JSON]:
    return st.dictionaries(_words(10), _json_values(), max_size=3)


def _text_block(provider: str) -> st.SearchStrategy[JSON]:
    def build(text: str, cites: list[JSON], signature: str | None) -> JSON:
        block: JSON = {"type": "text", "text": text}
        if cites:
            block["citations"] = cites
        if signature is not None and provider != "anthropic":
            block["signature"] = signature
        return block

    return mixed_text(max_size=60).flatmap(lambda text: st.builds(
        build, st.just(text), st.lists(citations(provider, len(text)), max_size=2), st.none() | _ids("msg_")))


def _thinking_block(provider: str) -> st.SearchStrategy[JSON]:
    if provider == "anthropic":
        return st.builds(lambda text, signature, redacted: {
            "type": "thinking", "thinking": "" if redacted else text, "signature": signature,
            **({"redacted": True} if redacted else {})}, mixed_text(max_size=40), _opaque(), st.booleans())
    return st.builds(lambda text, ident, secret: {
        "type": "thinking", "thinking": text,
        "raw": {"type": "reasoning", "id": ident, "summary": [{"type": "summary_text", "text": text}],
                "encrypted_content": secret}}, mixed_text(max_size=40), _ids("rs_"), _opaque())


def _tool_call_block(provider: str) -> st.SearchStrategy[JSON]:
    def build(ident: str, name: str, arguments: JSON, with_raw: bool) -> JSON:
        block: JSON = {"type": "toolCall", "id": ident, "name": name, "arguments": arguments}
        if with_raw and provider != "anthropic":
            block["raw"] = {"type": "function_call", "id": "fc_" + ident, "call_id": ident, "name": name,
                            "arguments": json.dumps(arguments, ensure_ascii=False), "status": "completed"}
        return block

    return st.builds(build, _ids("call_"), _names(), _arguments(), st.booleans())


def _assistant_blocks(provider: str, search: bool) -> st.SearchStrategy[list[JSON]]:
    single = st.one_of(_text_block(provider), _thinking_block(provider), _tool_call_block(provider))
    pieces = st.lists(single.map(lambda block: [block]), max_size=3)
    if search:
        loose = st.one_of(hosted_search_blocks(provider), _search_round(provider))
        pieces = st.lists(st.one_of(single.map(lambda block: [block]), loose.map(_as_list)), max_size=4)
    return pieces.map(lambda groups: [block for group in groups for block in group])


def _as_list(value: JSON | list[JSON]) -> list[JSON]:
    return value if isinstance(value, list) else [value]


def assistant_messages(provider: str | None = None, *, usage: str | None = None,
                       stop_reasons: Sequence[str] | None = None, search: bool = True,
                       timestamp: int | None = None) -> st.SearchStrategy[JSON]:
    """Assistant turns: text (with citations), thinking, tool calls and, when ``search``, hosted search.

    ``usage`` picks the usage kind (see :func:`usages`; None: any), ``stop_reasons`` the allowed stop
    reasons (default: all six), ``timestamp`` a fixed timestamp (default: drawn).
    """
    _check_choice("provider", provider, tuple(PROVIDERS))
    _check_choice("usage", usage, USAGE_KINDS)
    reasons = _check_stop_reasons(stop_reasons)
    when = _timestamp_strategy(timestamp)
    providers = st.sampled_from([provider] if provider else list(PROVIDERS))
    return providers.flatmap(lambda each: st.builds(
        lambda content, model, used, stop, stamp: {
            "role": "assistant", "content": content, "provider": each, "api": PROVIDERS[each], "model": model,
            "usage": used, "stopReason": stop, "timestamp": stamp},
        _assistant_blocks(each, search), st.sampled_from(_MODELS[each]), usages(usage),
        st.sampled_from(reasons), when))


def _check_stop_reasons(stop_reasons: Sequence[str] | None) -> tuple[str, ...]:
    if stop_reasons is None:
        return STOP_REASONS
    if isinstance(stop_reasons, str) or not stop_reasons:
        raise InvalidArgument(f"stop_reasons={stop_reasons!r} must be a non-empty list of stop reasons.")
    for reason in stop_reasons:
        _check_choice("stop_reasons[]", reason, STOP_REASONS)
    return tuple(stop_reasons)


def _timestamp_strategy(timestamp: int | None) -> st.SearchStrategy[int]:
    if timestamp is None:
        return st.integers(*_EPOCH_MS)
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise InvalidArgument(f"timestamp={timestamp!r} must be an integer number of milliseconds.")
    return st.just(timestamp)


def _user_content() -> st.SearchStrategy[str | list[JSON]]:
    text = mixed_text(max_size=60).map(lambda text: {"type": "text", "text": text})
    image = st.builds(lambda data, mime: {"type": "image", "data": data, "mimeType": mime},
                      _opaque(), st.sampled_from(["image/png", "image/jpeg"]))
    return st.one_of(mixed_text(max_size=80), st.lists(st.one_of(text, image), min_size=1, max_size=3))


def user_messages(timestamp: int | None = None) -> st.SearchStrategy[JSON]:
    """User messages: a string or a list of text and image blocks."""
    return st.builds(lambda content, stamp: {"role": "user", "content": content, "timestamp": stamp},
                     _user_content(), _timestamp_strategy(timestamp))


def tool_result_messages(timestamp: int | None = None) -> st.SearchStrategy[JSON]:
    """Tool results: the answer to a ``toolCall``, possibly an error."""
    return st.builds(lambda ident, name, content, failed, stamp: {
        "role": "toolResult", "toolCallId": ident, "toolName": name, "content": content, "isError": failed,
        "timestamp": stamp}, _ids("call_"), _names(), _user_content(), st.booleans(),
        _timestamp_strategy(timestamp))


def tools() -> st.SearchStrategy[JSON]:
    """A tool definition: a function tool with a JSON Schema, or the hosted search tool."""
    kinds = st.dictionaries(_words(10), st.sampled_from(["string", "integer", "boolean"]), max_size=3)
    schema = kinds.map(lambda props: {"type": "object",
                                      "properties": {name: {"type": kind} for name, kind in props.items()}})
    function = st.builds(lambda name, text, params: {"name": name, "description": text, "parameters": params},
                         _names(), mixed_text(max_size=40), schema)
    search = st.builds(lambda uses: {"type": "hostedSearch", **({"maxUses": uses} if uses else {})},
                       st.none() | st.integers(1, 5))
    return st.one_of(function, search)


# ---------------------------------------------------------------- transcripts


def transcripts(min_messages: int = 0, max_messages: int = 8, *, providers: Sequence[str] | None = None,
                usage: str | None = None, search: bool = True) -> st.SearchStrategy[JSON]:
    """Contract-valid transcripts: system, tools and ``min_messages``..``max_messages`` messages of any role.

    Assistant turns come from ``providers`` (default: all), with ``usage`` of that kind (None: any); time
    stamps increase. ``search=False`` leaves out hosted search blocks.
    """
    low, high = _check_range("min_messages", min_messages, "max_messages", max_messages)
    chosen = _check_providers(providers)
    _check_choice("usage", usage, USAGE_KINDS)
    message = st.one_of(user_messages(0), tool_result_messages(0),
                        st.sampled_from(chosen).flatmap(
                            lambda each: assistant_messages(each, usage=usage, search=search, timestamp=0)))
    return st.builds(_transcript, st.none() | mixed_text(max_size=80), st.lists(tools(), max_size=3),
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
    if isinstance(kinds, str) or not kinds:
        raise InvalidArgument(f"kinds={kinds!r} must be a non-empty list of {SYSTEM_CHANGES!r}.")
    for kind in kinds:
        _check_choice("kinds[]", kind, SYSTEM_CHANGES)
    return st.sampled_from(tuple(kinds)).flatmap(
        lambda kind: _CHANGES[kind](transcript).map(lambda changed: (kind, changed)))


def _log(transcript: JSON, system: object, tool_list: object) -> JSON:
    changed = copy.deepcopy(transcript)
    stamps = [message["timestamp"] for message in changed["messages"]] or [_EPOCH_MS[0]]
    history = changed.setdefault("systemHistory", [])
    if not history:
        history.append({"timestamp": min(stamps), "system": transcript.get("system"),
                        "tools": copy.deepcopy(transcript.get("tools", []))})
    when = max([*stamps, *(entry["timestamp"] for entry in history)]) + 1
    history.append({"timestamp": when, "system": system, "tools": copy.deepcopy(tool_list)})
    changed["system"], changed["tools"] = system, copy.deepcopy(tool_list)
    return changed


def _rebuild(transcript: JSON) -> st.SearchStrategy[JSON]:
    return st.just(transcript).map(lambda t: _log(t, t.get("system"), t.get("tools", [])))


def _instruction(transcript: JSON) -> st.SearchStrategy[JSON]:
    old = transcript.get("system") or ""
    return mixed_text(min_size=1, max_size=40).map(
        lambda extra: _log(transcript, old + extra, transcript.get("tools", [])))


def _tool_change(transcript: JSON) -> st.SearchStrategy[JSON]:
    current = list(transcript.get("tools") or [])
    added = tools().filter(lambda tool: tool not in current).map(lambda tool: [*current, tool])
    options = [added] + ([st.integers(0, len(current) - 1).map(
        lambda index: current[:index] + current[index + 1:])] if current else [])
    return st.one_of(options).map(lambda tool_list: _log(transcript, transcript.get("system"), tool_list))


_CHANGES: dict[str, Callable[[JSON], st.SearchStrategy[JSON]]] = {
    "rebuild": _rebuild, "instruction": _instruction, "tools": _tool_change,
}


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
    return cuts.map(lambda points: _cut(bytes(data), sorted(points)))


def _cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = [0, *points, len(data)]
    return [data[start:end] for start, end in itertools.pairwise(edges)]

