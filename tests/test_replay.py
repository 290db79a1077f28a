"""replay.project: what a correct harness sends, checked on real follow-up requests and by properties."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter
from pydantic_core import ValidationError

from replaykit import cassette, contracts
from replaykit.cassette import Interaction
from replaykit.errors import LocalRequestError, UsageError
from replaykit.replay import (
    ProviderModel,
    citation_text_projection,
    project,
    projection,
    search_text_projection,
)
from replaykit.resources import data_dir
from replaykit.transcript import anthropic_final_body, from_interaction, openai_final_response, restore

JSON = dict[str, Any]
DATA = Path(__file__).parent / "data" / "transcript"
ANTHROPIC = ProviderModel("anthropic", "anthropic-messages", "claude-sonnet-4-5", max_tokens=1024)
OPENAI = ProviderModel("openai", "openai-responses", "gpt-5")
AZURE = ProviderModel("azure", "openai-responses", "my-deployment")
TARGETS = [ANTHROPIC, OPENAI, AZURE]


def _legacy() -> JSON:
    loaded: JSON = json.loads((DATA / "legacy.json").read_text(encoding="utf-8"))
    return loaded


# ---------------------------------------------------------------- the request contract


@cache
def _adapters() -> dict[str, TypeAdapter[Any]]:
    from anthropic.types import message_create_params
    from openai.types.responses import response_create_params

    return {
        "messages": TypeAdapter(message_create_params.MessageCreateParamsNonStreaming),
        "input": TypeAdapter(response_create_params.ResponseCreateParamsNonStreaming),
    }


def sdk_check(body: JSON) -> None:
    """The installed SDK's request param types accept ``body`` (pydantic; raises ValidationError)."""
    adapter = _adapters()["messages" if "messages" in body else "input"]
    _materialize(adapter.validate_python(body))  # Iterable fields validate lazily: consume them


def _materialize(value: Any) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _materialize(item)
    elif isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        for item in value:
            _materialize(item)


def contract_check(body: JSON, profile: contracts.Profile = contracts.STRICT, rules: bool = True) -> None:
    """replaykit's request contract accepts ``body`` (under ``profile``: no error, warnings allowed); without
    ``rules``, its shapes only (not the rulebook's rules across messages)."""
    kind = "anthropic.request" if "messages" in body else "openai.request"
    violations = [v for v in contracts.validate(kind, body, profile) if v.severity == "error"
                  and (rules or contracts.rule_spec(v.rule or "") is None)]
    assert not violations, [str(violation) for violation in violations]


@pytest.fixture(scope="module")
def request_contract() -> Callable[[JSON], None]:
    """Check a body against the request contract's shapes and the installed SDK's request param types (the
    generated transcripts pair no tool result with its call: the rules across messages judge real ones)."""

    def check(body: JSON) -> None:
        contract_check(body, rules=False)
        sdk_check(body)

    return check


@pytest.mark.parametrize("check", [contract_check, sdk_check])
def test_the_request_checks_can_fail(check: Callable[[JSON], None]) -> None:
    good = project(_legacy(), ANTHROPIC)
    check(good)
    broken = copy.deepcopy(good)
    del broken["messages"][1]["content"][1]["content"][0]["encrypted_content"]  # the opaque part is lost
    with pytest.raises((AssertionError, ValidationError)):
        check(broken)
    with pytest.raises((AssertionError, ValidationError)):
        check({"model": "m", "input": [{"type": "web_search_call", "id": "ws_1", "status": "finished"}]})


# ---------------------------------------------------------------- replay on real follow-up requests


def _paths() -> list[Path]:
    """Every bundled cassette, the recorded ones included."""
    return cassette.iter_paths([data_dir("cassettes")])


def _follow_ups() -> Iterator[tuple[str, list[Interaction]]]:
    for path in _paths():
        items = [
            item
            for item in cassette.load(path).interactions
            if item.response.status == 200
            and ("/v1/messages" in item.request.uri or "/responses" in item.request.uri)
        ]
        if len(items) > 1:
            yield f"{path.parent.name}/{path.name}", items


FOLLOW_UPS = list(_follow_ups())
PROFILES = {f"{path.parent.name}/{path.name}": contracts.profile_of(cassette.load(path)) for path in _paths()}


def _user(content: Any) -> JSON:
    if isinstance(content, list):
        content = [{"type": "text", "text": block["text"]} for block in content]
    return {"role": "user", "content": content, "timestamp": 1}


def _transcript_of(items: list[Interaction], last: JSON) -> JSON:
    """The transcript a harness holds before sending ``last``: its users and the recorded answers."""
    answers = iter(from_interaction(item, timestamp=2) for item in items)
    wire = last.get("messages", last.get("input"))
    messages: list[JSON] = []
    for entry in wire:
        if entry.get("role") == "user":
            messages.append(_user(entry["content"]))
        elif not messages or messages[-1]["role"] != "assistant":
            messages.append(next(answers))
    system = last.get("system", last.get("instructions"))
    return {"version": 1, "system": system, "tools": [], "messages": messages}


def _unencrypted_reasoning(body: JSON) -> JSON:
    return {
        **body,
        "input": [
            {k: v for k, v in item.items() if k != "encrypted_content"}
            if item.get("type") == "reasoning"
            else item
            for item in body["input"]
        ],
    }


def _without_sources(body: JSON) -> JSON:
    return {
        **body,
        "input": [
            {**item, "action": {k: v for k, v in item["action"].items() if k != "sources"}}
            if item.get("type") == "web_search_call"
            else item
            for item in body["input"]
        ],
    }


def _without_citations(body: JSON) -> JSON:
    def strip(message: JSON) -> JSON:
        if not isinstance(message["content"], list):
            return message
        return {
            **message,
            "content": [{k: v for k, v in block.items() if k != "citations"} for block in message["content"]],
        }

    return {**body, "messages": [strip(message) for message in body["messages"]]}


# pydantic-ai's own history is lossy where these recordings were made: it drops citations (the docs say: send
# them back) and web_search_call sources, and replays the reasoning of output_item.done (response.completed
# carries it re-encrypted).
LOSSY: dict[str, Callable[[JSON], JSON]] = {
    "pydantic-ai__anthropic_web_search_tool.yaml": _without_citations,
    "pydantic-ai__openai_responses_web_search_tool_stream.yaml": lambda body: _unencrypted_reasoning(
        _without_sources(body)
    ),
}


@pytest.mark.parametrize(("name", "items"), FOLLOW_UPS, ids=[name for name, _ in FOLLOW_UPS])
def test_project_rebuilds_the_recorded_follow_up(name: str, items: list[Interaction]) -> None:
    last = items[-1].request.json()
    transcript = restore(_transcript_of(items[:-1], last))
    provider = from_interaction(items[0], timestamp=2)["provider"]
    target = ProviderModel(
        provider,
        "anthropic-messages" if provider == "anthropic" else "openai-responses",
        last["model"],
        max_tokens=last.get("max_tokens"),
    )
    body = project(transcript, target)
    normalize = LOSSY.get(Path(name).name, lambda body: body)
    settings = {key: last[key] for key in ("thinking",) if key in last}  # the harness's, not the transcript's
    contract_check({**body, **settings}, PROFILES[name])
    if PROFILES[name] is contracts.STRICT:  # an OpenAI-compatible provider's items break the SDK's types
        sdk_check(normalize(body))  # real sources of type "api" are unknown to the SDK's param types
    key = "messages" if provider == "anthropic" else "input"
    assert normalize(body)[key] == normalize(last)[key]
    assert body.get("system", body.get("instructions")) == last.get("system", last.get("instructions"))


def test_follow_ups_are_found() -> None:
    names = {Path(name).name for name, _ in FOLLOW_UPS}
    assert {"web_search_follow_up.yaml", "web_search_pause_turn.yaml"} <= names
    assert {
        "pydantic-ai__anthropic_pause_turn_web_search.yaml",
        "pydantic-ai__openai_responses_web_search_tool.yaml",
    } <= names


# ---------------------------------------------------------------- the policy, case by case


def _opaque_strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        found = [v for k, v in value.items() if k.startswith("encrypted_") and isinstance(v, str)]
        return found + [s for v in value.values() for s in _opaque_strings(v)]
    return [s for v in value for s in _opaque_strings(v)] if isinstance(value, list) else []


def test_same_provider_replays_raw_verbatim() -> None:
    transcript = _legacy()
    body = project(transcript, ANTHROPIC)
    content = body["messages"][1]["content"]
    raws = [block["raw"] for block in transcript["messages"][1]["content"] if "raw" in block]
    assert content[:2] == raws
    assert json.dumps(content[:2]) == json.dumps(raws)  # byte-identical, key order included
    assert _opaque_strings(body) == _opaque_strings(transcript["messages"])  # encrypted_content and _index


def test_recorded_opaque_fields_survive_byte_for_byte() -> None:
    for _, items in FOLLOW_UPS:
        message = from_interaction(items[0], timestamp=2)
        provider = message["provider"]
        target = ANTHROPIC if provider == "anthropic" else ProviderModel(provider, "openai-responses", "m")
        body = project({"version": 1, "messages": [_user("q"), message]}, target)
        expected = _final(items[0])["content" if provider == "anthropic" else "output"]
        assert _opaque_strings(body) == _opaque_strings(expected)


def _final(item: Interaction) -> JSON:
    if not item.response.is_stream:
        body: JSON = item.response.json()
        return body
    events = [event.json() for event in item.response.events if event.data is not None]
    return (
        anthropic_final_body(events) if "/v1/messages" in item.request.uri else openai_final_response(events)
    )


def test_another_provider_gets_a_short_text() -> None:
    body = project(_legacy(), OPENAI)
    texts = [item["content"] for item in body["input"] if item.get("role") == "assistant"]
    assert texts[:2] == [
        "[web search: web search api changelog]",
        "[web search results]\n1. Changelog - https://example.com/changelog",
    ]
    assert _opaque_strings(body) == []
    assert not any(
        item.get("type") in {"server_tool_use", "web_search_tool_result"} for item in body["input"]
    )


def test_search_text_projection_shapes() -> None:
    assert search_text_projection({"phase": "call"}) == "[web search]"
    assert (
        search_text_projection({"phase": "error", "errorCode": "max_uses_exceeded"})
        == "[web search error: max_uses_exceeded]"
    )
    result = {
        "phase": "result",
        "results": [{"url": "https://a.example", "title": None}, {"url": "https://b.example", "title": "B"}],
    }
    assert (
        search_text_projection(result)
        == "[web search results]\n1. https://a.example\n2. B - https://b.example"
    )


def test_openai_search_goes_to_anthropic_as_text(request_contract: Callable[[JSON], None]) -> None:
    items = dict(FOLLOW_UPS).get("openai/web_search.yaml") or dict(FOLLOW_UPS).get(
        "recorded/pydantic-ai__openai_responses_web_search_tool.yaml"
    )
    path = data_dir("cassettes") / "openai" / "web_search.yaml"
    message = from_interaction(items[0] if items else cassette.load(path).interactions[0], timestamp=2)
    body = project({"version": 1, "messages": [_user("q"), message, _user("more")]}, ANTHROPIC)
    request_contract(body)
    texts = [block["text"] for block in body["messages"][1]["content"]]
    calls = [block for block in message["content"] if block["type"] == "hostedSearch"]
    assert calls and all(search_text_projection(block) in texts for block in calls)
    assert _opaque_strings(body) == []


def test_display_only_blocks_are_never_replayed() -> None:
    for target in TARGETS:
        dumped = json.dumps(project(_legacy(), target))
        assert (
            "srvtoolu_02display" not in dumped and "display-only" not in dumped and "shown only" not in dumped
        )


def test_legacy_nameless_result_projects_from_raw() -> None:
    body = project(_legacy(), OPENAI)
    assert "https://example.com/changelog" in body["input"][2]["content"]


def test_system_and_tools_are_placed_per_api() -> None:
    anthropic = project(_legacy(), ANTHROPIC)
    assert list(anthropic) == ["model", "max_tokens", "system", "tools", "messages"]
    assert anthropic["system"] == "You are a research assistant."
    assert anthropic["tools"] == [
        {
            "type": "web_search_20250305",
            "name": "web_search",
            "max_uses": 3,
            "allowed_domains": ["example.com"],
        },
        {
            "name": "get_time",
            "description": "The current time",
            "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
    ]
    openai = project(_legacy(), OPENAI)
    assert list(openai) == ["model", "instructions", "tools", "input"]
    assert openai["tools"][0] == {"type": "web_search", "filters": {"allowed_domains": ["example.com"]}}
    assert openai["tools"][1]["type"] == "function" and openai["tools"][1]["parameters"]["properties"]
    bare = project({"version": 1, "system": "", "messages": [_user("hi")]}, OPENAI)
    assert bare == {"model": "gpt-5", "input": [{"role": "user", "content": "hi"}]}


def test_tool_calls_and_results_pair_up() -> None:
    anthropic = project(_legacy(), ANTHROPIC)["messages"]
    assert anthropic[1]["content"][-1] == {
        "type": "tool_use",
        "id": "toolu_01time",
        "name": "get_time",
        "input": {"tz": "UTC"},
    }
    assert anthropic[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01time",
                "content": [{"type": "text", "text": "2025-12-02T10:00:00Z"}],
                "is_error": False,
            }
        ],
    }
    openai = project(_legacy(), OPENAI)["input"]
    assert {
        "type": "function_call",
        "call_id": "toolu_01time",
        "name": "get_time",
        "arguments": '{"tz": "UTC"}',
    } in openai
    assert {
        "type": "function_call_output",
        "call_id": "toolu_01time",
        "output": "2025-12-02T10:00:00Z",
    } in openai


def test_consecutive_tool_results_share_one_user_message() -> None:
    transcript = _legacy()
    second = {**transcript["messages"][2], "toolCallId": "toolu_02"}
    transcript["messages"].insert(3, second)
    messages = project(transcript, ANTHROPIC)["messages"]
    assert [block["tool_use_id"] for block in messages[2]["content"]] == ["toolu_01time", "toolu_02"]


def test_errored_and_aborted_turns_are_not_replayed() -> None:
    for reason in ("error", "aborted"):
        transcript = _legacy()
        transcript["messages"][1]["stopReason"] = reason
        roles = [message["role"] for message in project(transcript, ANTHROPIC)["messages"]]
        assert roles == ["user", "user", "user"]


def test_thinking_replays_natively_or_as_text() -> None:
    signed = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    redacted = {"type": "thinking", "thinking": "", "redacted": True, "signature": "opaque"}
    message = {**_legacy()["messages"][1], "content": [signed, redacted]}
    transcript = {"version": 1, "messages": [_user("q"), message]}
    assert project(transcript, ANTHROPIC)["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    assert project(transcript, OPENAI)["input"][1:] == [{"role": "assistant", "content": "hmm"}]


def test_structural_faults_are_local_validation_errors() -> None:
    cases = [
        (["messages", 1, "content"], {"type": "text"}, "/messages/1/content", 1),
        (["messages", 2, "content"], 7, "/messages/2/content", 2),
        (["messages", 1, "content", 0], "text", "/messages/1/content/0", 1),
        (["messages", 1, "content", 4, "type"], "image", "/messages/1/content/4/type", 1),
        (["messages", 0, "role"], "system", "/messages/0/role", 0),
        (["messages"], None, "/messages", None),
    ]
    for path, value, pointer, index in cases:
        transcript = _legacy()
        holder = transcript
        for part in path[:-1]:
            holder = holder[part]
        holder[path[-1]] = value
        for target in TARGETS:
            with pytest.raises(LocalRequestError) as caught:
                project(transcript, target)
            assert (caught.value.phase, caught.value.pointer, caught.value.message_index) == (
                "validation",
                pointer,
                index,
            )


def test_targets_check_their_arguments() -> None:
    with pytest.raises(UsageError, match="provider='google'"):
        ProviderModel("google", "openai-responses", "m")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="use one of 'openai-responses'"):
        ProviderModel("azure", "anthropic-messages", "m")
    with pytest.raises(UsageError, match="model"):
        ProviderModel("openai", "openai-responses", "")
    with pytest.raises(UsageError, match="max_tokens"):
        ProviderModel("anthropic", "anthropic-messages", "m", max_tokens=0)


# ---------------------------------------------------------------- properties over generated transcripts

SENTINEL = "SENTINEL-internal-7f3a"
# keys of the neutral model that no wire body has: finding one in a body means an internal field leaked
NEUTRAL_ONLY = {
    "timestamp",
    "stopReason",
    "usage",
    "responseId",
    "errorMessage",
    "toolUseId",
    "phase",
    "pageAge",
    "mimeType",
    "toolCallId",
    "toolName",
    "isError",
    "cacheRead",
    "totalTokens",
    "hostedSearch",
    "displayId",
    "replaykit",
    "systemHistory",
}


def _keys_and_strings(value: Any) -> Iterator[tuple[str, str]]:
    """``("key", name)`` for every member name, ``("type", v)`` for every ``type`` value, ``("str", v)``."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield "key", key
            if key == "type" and isinstance(item, str):
                yield "type", item
            yield from _keys_and_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys_and_strings(item)
    elif isinstance(value, str):
        yield "str", value


def assert_no_leak(body: JSON) -> None:
    """No neutral-only member name or block type, and no internal value, anywhere in ``body``.

    User text may say "systemHistory": only names and ``type`` values are checked against NEUTRAL_ONLY.
    """
    found = set(_keys_and_strings(body))
    names = {text for kind, text in found if kind in ("key", "type")}
    assert not names & NEUTRAL_ONLY, f"internal keys leaked: {sorted(names & NEUTRAL_ONLY)}"
    assert not any(SENTINEL in text for _, text in found), "an internal value leaked"


def test_the_leak_check_can_fail() -> None:
    body = project(_legacy(), ANTHROPIC)
    assert_no_leak(body)
    for leak in ({"timestamp": 1}, {"note": SENTINEL}, {"type": "hostedSearch"}):
        with pytest.raises(AssertionError):
            assert_no_leak({**body, "messages": [*body["messages"], {**body["messages"][0], **leak}]})
    with pytest.raises(AssertionError):
        assert_no_leak({**body, "systemHistory": []})
    assert_no_leak({**body, "messages": [{"role": "user", "content": "systemHistory"}]})  # user text is text


def test_the_system_history_is_never_sent() -> None:
    transcript = _legacy()
    earlier = {"name": "lookup_" + SENTINEL, "description": SENTINEL, "parameters": {"type": "object"}}
    transcript["systemHistory"] = [
        {"timestamp": 1764662400000, "system": SENTINEL + " (the prompt before)", "tools": [earlier]},
        {"timestamp": 1764662401000, "system": transcript["system"], "tools": transcript["tools"]},
    ]
    restore(transcript)
    for target in TARGETS:
        body = project(transcript, target)
        assert body == project(_legacy(), target)  # the history changes nothing that is sent
        assert_no_leak(body)
        assert "systemHistory" not in json.dumps(body)


_words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30)
_ids = st.from_regex(r"[A-Za-z0-9_]{6,14}", fullmatch=True)
_extra = st.fixed_dictionaries(
    {}, optional={"displayId": st.just(SENTINEL + "-id"), "replaykit": st.just({"note": SENTINEL})}
)


def _internal(block: st.SearchStrategy[JSON]) -> st.SearchStrategy[JSON]:
    return st.builds(lambda b, extra: {**b, **extra}, block, _extra)


def _anthropic_search(provider: str) -> st.SearchStrategy[list[JSON]]:
    def build(ident: str, query: str, urls: list[str], raw: bool) -> list[JSON]:
        ident = ident if raw else "shown_" + ident
        call = {
            "type": "server_tool_use",
            "id": "srvtoolu_" + ident,
            "name": "web_search",
            "input": {"query": query},
        }
        results = [
            {
                "type": "web_search_result",
                "url": url,
                "title": url.upper(),
                "encrypted_content": "Eq" + ident,
                "page_age": None,
            }
            for url in urls
        ]
        result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_" + ident, "content": results}
        blocks = [
            {
                "type": "hostedSearch",
                "phase": "call",
                "provider": provider,
                "api": "anthropic-messages",
                "id": "srvtoolu_" + ident,
                "query": query,
                "raw": call,
            },
            {
                "type": "hostedSearch",
                "phase": "result",
                "provider": provider,
                "api": "anthropic-messages",
                "toolUseId": "srvtoolu_" + ident,
                "raw": result,
                "results": [{"url": url, "title": url.upper(), "pageAge": SENTINEL} for url in urls],
            },
        ]
        return blocks if raw else [{k: v for k, v in block.items() if k != "raw"} for block in blocks]

    urls = st.lists(st.from_regex(r"https://[a-z]{3,8}\.example/[a-z]{0,6}", fullmatch=True), max_size=3)
    return st.builds(build, _ids, _words, urls, st.booleans())


def _openai_search(provider: str) -> st.SearchStrategy[list[JSON]]:
    def build(ident: str, query: str, failed: bool, raw: bool) -> list[JSON]:
        ident = ident if raw else "shown_" + ident
        item = {
            "type": "web_search_call",
            "id": "ws_" + ident,
            "status": "failed" if failed else "completed",
            "action": {"type": "search", "query": query},
        }
        block: JSON = (
            {"type": "hostedSearch", "phase": "error", "toolUseId": "ws_" + ident, "errorCode": "failed"}
            if failed
            else {"type": "hostedSearch", "phase": "call", "id": "ws_" + ident, "query": query}
        )
        block.update({"provider": provider, "api": "openai-responses"})
        return [{**block, "raw": item}] if raw else [block]

    return st.builds(build, _ids, _words, st.booleans(), st.booleans())


def _common_blocks(api: str) -> st.SearchStrategy[list[JSON]]:
    text = st.builds(lambda t: [{"type": "text", "text": t}], _words)
    call = st.builds(
        lambda i, n, a: [{"type": "toolCall", "id": "call_" + i, "name": n, "arguments": a}],
        _ids,
        _ids,
        st.dictionaries(_ids, _words, max_size=2),
    )
    if api == "anthropic-messages":
        thinking = st.builds(lambda t, s: [{"type": "thinking", "thinking": t, "signature": s}], _words, _ids)
        cited = st.builds(
            lambda t, i: [
                {
                    "type": "text",
                    "text": t,
                    "citations": [
                        {
                            "type": "web_search_result_location",
                            "url": "https://a.example",
                            "title": "A",
                            "encrypted_index": "Eo" + i,
                            "cited_text": t[:20],
                        }
                    ],
                }
            ],
            _words,
            _ids,
        )
        return st.one_of(text, call, thinking, cited)
    reasoning = st.builds(
        lambda t, i: [
            {
                "type": "thinking",
                "thinking": t,
                "raw": {
                    "type": "reasoning",
                    "id": "rs_" + i,
                    "summary": [{"type": "summary_text", "text": t}],
                    "encrypted_content": "gAAA" + i,
                },
            }
        ],
        _words,
        _ids,
    )
    said = st.builds(
        lambda t, i: [
            {
                "type": "text",
                "text": t,
                "signature": "msg_" + i,
                "citations": [
                    {
                        "type": "url_citation",
                        "url": "https://a.example",
                        "title": "A",
                        "start_index": 0,
                        "end_index": 1,
                    }
                ],
            }
        ],
        _words,
        _ids,
    )
    return st.one_of(text, call, reasoning, said)


_producers = st.sampled_from(
    [("anthropic", "anthropic-messages"), ("openai", "openai-responses"), ("azure", "openai-responses")]
)


@st.composite
def assistant_messages(draw: st.DrawFn) -> JSON:
    provider, api = draw(_producers)
    search = _anthropic_search(provider) if api == "anthropic-messages" else _openai_search(provider)
    groups = draw(st.lists(st.one_of(search, _common_blocks(api)), max_size=5))
    content = [draw(_internal(st.just(block))) for group in groups for block in group]
    usage = {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3}
    message = {
        "role": "assistant",
        "content": content,
        "provider": provider,
        "api": api,
        "model": SENTINEL,
        "usage": usage,
        "timestamp": 1764662405000,
        "responseId": SENTINEL + "-resp",
        "stopReason": draw(st.sampled_from(["stop", "length", "toolUse", "pauseTurn", "error", "aborted"])),
    }
    return {**message, **draw(_extra)}


_images = st.builds(
    lambda mime: {"type": "image", "data": "iVBORw0KGgo=", "mimeType": mime},
    st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]),
)
_user_content = _words | st.lists(
    st.builds(lambda t: {"type": "text", "text": t}, _words) | _images, min_size=1, max_size=3
)
user_messages = st.builds(
    lambda c, extra: {"role": "user", "content": c, "timestamp": 1764662400000, **extra},
    _user_content,
    _extra,
)
tool_results = st.builds(
    lambda i, c, e: {
        "role": "toolResult",
        "toolCallId": "call_" + i,
        "toolName": SENTINEL,
        "content": c,
        "isError": e,
        "timestamp": 1764662401000,
    },
    _ids,
    _user_content,
    st.booleans(),
)
_tools = st.lists(
    st.one_of(
        st.builds(lambda n: {"name": n, "description": "d", "parameters": {"type": "object"}}, _ids),
        st.just({"type": "hostedSearch", "maxUses": 2, "allowedDomains": ["example.com"]}),
    ),
    max_size=2,
)
_history_tools = st.lists(
    st.builds(lambda n: {"name": SENTINEL + n, "description": SENTINEL, "parameters": {"type": "object"}},
              _ids)
    | st.just({"type": "hostedSearch", "maxUses": 9, "blockedDomains": [SENTINEL + ".example"]}),
    max_size=2,
)


def _history_entry(at: int) -> st.SearchStrategy[JSON]:
    stamp = 1764662400000 + at
    return _history_tools.map(lambda tools: {"timestamp": stamp, "system": SENTINEL, "tools": tools})


_histories = st.lists(st.integers(0, 10_000), max_size=3).flatmap(
    lambda offsets: st.tuples(*map(_history_entry, sorted(offsets))).map(list)
)
transcripts = st.builds(
    lambda system, tools, rest, extra: {"version": 1, "system": system, "tools": tools, "messages": rest,
                                        **extra},
    st.none() | _words,
    _tools,
    st.lists(st.one_of(user_messages, assistant_messages(), tool_results), max_size=6).map(
        lambda rest: [{"role": "user", "content": "start", "timestamp": 1764662400000}, *rest]
    ),
    st.fixed_dictionaries({}, optional={"systemHistory": _histories}),  # internal: never sent
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcript=transcripts)
def test_every_projection_is_a_valid_request_without_leaks(
    transcript: JSON, request_contract: Callable[[JSON], None]
) -> None:
    restore(transcript)
    for target in TARGETS:
        before = copy.deepcopy(transcript)
        body = project(transcript, target)
        assert transcript == before  # projecting never changes the transcript
        request_contract(body)
        assert_no_leak(body)
        assert body["model"] == target.model


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcript=transcripts)
def test_search_blocks_follow_the_policy(transcript: JSON) -> None:
    replayable = [
        (message, block)
        for message in transcript["messages"]
        if message["role"] == "assistant" and message["stopReason"] not in ("error", "aborted")
        for block in message["content"]
        if block["type"] == "hostedSearch"
    ]
    for target in TARGETS:
        dumped = json.dumps(project(transcript, target))
        for _, block in replayable:
            same = block["provider"] == target.provider
            if "raw" not in block:
                assert "shown_" not in dumped
            elif same:
                assert json.dumps(block["raw"]) in dumped
            else:
                assert json.dumps(search_text_projection(block)) in dumped


# ---------------------------------------------------------------- every recorded turn, replayed


def _turns() -> list[tuple[str, Interaction]]:
    """Every answered Messages / Responses exchange of every bundled cassette (recorded and synthesized)."""
    return [(f"{path.parent.name}/{path.name}#{index}", item) for path in _paths()
            for index, item in enumerate(cassette.load(path).interactions)
            if item.response.status == 200 and item.response.body
            and ("/v1/messages" in item.request.uri or "/responses" in item.request.uri)]


TURNS = _turns()
_TEXT = frozenset({"text", "message"})  # rebuilt from the transcript's text and citations
_THINKING = frozenset({"thinking", "redacted_thinking"})  # rebuilt from thinking and signature
_REBUILT = _TEXT | _THINKING  # every other block is replayed from raw


def _sent(message: JSON) -> list[JSON]:
    """What ``project`` sends back of an assistant ``message`` to its own provider: blocks or input items."""
    provider = message["provider"]
    target = ANTHROPIC if provider == "anthropic" else ProviderModel(provider, "openai-responses", "m")
    body = project(restore({"version": 1, "messages": [_user("q"), message]}), target)
    if provider != "anthropic":
        return list(body["input"][1:])
    return list(body["messages"][1]["content"]) if len(body["messages"]) > 1 else []


def _text_of(block: JSON) -> list[tuple[str, Any]]:
    parts = block["content"] if block["type"] == "message" else [block]
    return [(part.get("text"), part.get("citations") or part.get("annotations") or None) for part in parts]


@pytest.mark.parametrize(("name", "item"), TURNS, ids=[name for name, _ in TURNS])
def test_a_recorded_turn_replays_byte_for_byte_to_its_own_provider(name: str, item: Interaction) -> None:
    """Conversion, restore and projection give the wire blocks back: every block kept in raw (search,
    code execution, tool calls, reasoning items) byte for byte, key order included; thinking with its
    signature; text with its citations."""
    message = from_interaction(item, timestamp=2)
    sent = _sent(message)
    if message["stopReason"] == "error":  # a stream broken mid-way is never replayed
        assert sent == []
        return
    wire = _final(item)["content" if message["provider"] == "anthropic" else "output"]

    def kind(blocks: list[JSON], kinds: frozenset[str], keep: bool = True) -> list[JSON]:
        return [block for block in blocks if (block.get("type") in kinds) == keep]

    assert [json.dumps(b) for b in kind(sent, _REBUILT, False)] == \
        [json.dumps(b) for b in kind(wire, _REBUILT, False)]
    assert kind(sent, _THINKING) == kind(wire, _THINKING)
    texts = [pair for block in kind(wire, _TEXT) for pair in _text_of(block)]
    assert [pair for block in kind(sent, _TEXT) for pair in _text_of(block)] == \
        [pair for pair in texts if pair[0]]  # an empty text block is not sent


def test_the_new_shapes_are_among_the_replayed_turns() -> None:
    names = {name.partition("#")[0] for name, _ in TURNS}
    assert {"anthropic/code_execution_search.yaml", "anthropic/code_execution_search_stream.yaml",
            "openai/web_search_no_action.yaml", "openai/web_search_no_action_stream.yaml",
            "openai/compatible_xai_web_search.yaml"} <= names


@pytest.mark.parametrize(("name", "item"), TURNS, ids=[name for name, _ in TURNS])
def test_another_provider_never_gets_an_opaque_block(name: str, item: Interaction) -> None:
    message = from_interaction(item, timestamp=2)
    transcript = restore({"version": 1, "messages": [_user("q"), message, _user("next")]})
    opaque = [number for number, block in enumerate(message["content"]) if block["type"] == "providerBlock"]
    for target in TARGETS:
        if target.provider == message["provider"]:
            continue
        made = projection(transcript, target)
        dumped = json.dumps(made.body)
        assert not any(json.dumps(message["content"][n]["raw"]) in dumped for n in opaque)
        dropped = [note.pointer for note in made.notes if not note.pointer.endswith("/citations")]
        assert dropped == [f"/messages/1/content/{n}" for n in opaque]
        contract_check(made.body)


def test_code_execution_blocks_are_opaque_and_the_search_in_them_is_a_search() -> None:
    item = cassette.load(data_dir("cassettes") / "anthropic" / "code_execution_search.yaml").interactions[0]
    content = from_interaction(item, timestamp=2)["content"]
    kinds = [(block["type"], block.get("phase") or block.get("blockType")) for block in content]
    assert kinds == [("text", None), ("providerBlock", "server_tool_use"), ("hostedSearch", "call"),
                     ("hostedSearch", "result"), ("providerBlock", "code_execution_tool_result"),
                     ("text", None)]
    caller = {"type": "code_execution_20260120", "tool_id": content[1]["raw"]["id"]}
    assert content[2]["raw"]["caller"] == caller
    assert content[3]["raw"]["caller"] == content[2]["raw"]["caller"]
    assert content[2]["query"] == "Python 3.13 release date"


def test_a_cross_provider_projection_says_what_it_dropped() -> None:
    item = cassette.load(data_dir("cassettes") / "anthropic" / "code_execution_search.yaml").interactions[0]
    transcript = {"version": 1, "messages": [_user("q"), from_interaction(item, timestamp=2)]}
    made = projection(transcript, OPENAI)
    assert [str(note) for note in made.notes] == [
        "/messages/1/content/1: providerBlock 'server_tool_use' from anthropic/anthropic-messages is not "
        "sent to openai/openai-responses: dropped",
        "/messages/1/content/4: providerBlock 'code_execution_tool_result' from anthropic/anthropic-messages "
        "is not sent to openai/openai-responses: dropped",
        "/messages/1/content/5/citations: citations from anthropic/anthropic-messages are sent to "
        "openai/openai-responses as text after the text"]
    assert projection(transcript, ANTHROPIC).notes == ()
    assert project(transcript, OPENAI) == made.body


def test_a_display_only_block_is_noted() -> None:
    notes = projection(_legacy(), ANTHROPIC).notes
    assert notes and all("display-only hostedSearch block" in note.message for note in notes)


def test_an_opaque_block_without_raw_is_a_validation_error() -> None:
    block = {"type": "providerBlock", "provider": "anthropic", "api": "anthropic-messages", "blockType": "x"}
    message = {"role": "assistant", "content": [block], "provider": "anthropic", "api": "anthropic-messages",
               "model": "m", "usage": {}, "stopReason": "stop", "timestamp": 1}
    with pytest.raises(LocalRequestError) as caught:
        project({"version": 1, "messages": [message]}, ANTHROPIC)
    assert caught.value.pointer == "/messages/0/content/0/raw"


def test_another_providers_citations_go_as_text_naming_each_cited_page_once() -> None:
    chat = {"type": "url_citation", "url_citation": {"url": "https://peps.python.org/pep-0008/",
                                                     "title": "PEP 8", "start_index": 0, "end_index": 4}}
    responses = {"type": "url_citation", "url": "https://docs.python.org/3/", "title": "", "start_index": 0,
                 "end_index": 4}
    support = {"segment": {"endIndex": 4, "text": "Text"}, "groundingChunkIndices": [0]}
    document = {"type": "char_location", "cited_text": "Text", "document_index": 0}
    block = {"type": "text", "text": "Text", "citations": [chat, responses, chat, support, document]}
    message = {"role": "assistant", "content": [block], "provider": "openai", "api": "openai-chat",
               "model": "gpt-4o-search-preview", "stopReason": "stop", "timestamp": 2}
    transcript = {"version": 1, "messages": [_user("q"), message, _user("next")]}
    made = projection(transcript, ANTHROPIC)
    assert made.body["messages"][1]["content"] == [{"type": "text", "text": (
        "Text\n\n[cited sources]\n1. PEP 8 - https://peps.python.org/pep-0008/\n2. https://docs.python.org/3/")}]
    assert [note.pointer for note in made.notes] == ["/messages/1/content/0/citations"]
    assert citation_text_projection([support, document]) == ""
