"""replaykit.transcript.requests: a request body's conversation as a neutral transcript.

The strongest check is the round trip: every model request the bundled cassettes hold, converted and
projected back onto its own provider, gives the conversation that was sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replaykit import cassette, routes, strategies
from replaykit.replay import ProviderModel, project
from replaykit.resources import data_dir
from replaykit.transcript import (
    ConversionError,
    from_anthropic_request,
    from_chat_request,
    from_gemini_request,
    from_openai_request,
    restore,
)

JSON = dict[str, Any]


_PROJECTED = ("anthropic-messages", "openai-responses")  # the APIs replay.project writes


def _requests() -> list[tuple[str, str, JSON]]:
    found = []
    for path in sorted(data_dir("cassettes").rglob("*.yaml")):
        for number, item in enumerate(cassette.load(path).interactions):
            route = routes.classify_uri(item.request.method, item.request.uri)
            body = item.request.json() if route.api in _PROJECTED else None
            if isinstance(body, dict) and ("messages" in body or "input" in body):
                found.append((f"{path.name}#{number}", str(route.provider), body))
    return found


def _without_logprobs(items: list[Any]) -> list[Any]:
    """An output_text part as projected (the projection sends no ``logprobs``, which the API ignores)."""
    def part(value: Any) -> Any:
        return {k: v for k, v in value.items() if k != "logprobs"} if isinstance(value, dict) else value
    return [{**item, "content": [part(one) for one in item["content"]]}
            if isinstance(item, dict) and isinstance(item.get("content"), list) else item for item in items]


REQUESTS = _requests()


def test_the_bundled_cassettes_hold_requests_of_both_apis() -> None:
    assert {provider for _, provider, _ in REQUESTS} >= {"anthropic", "openai", "azure"}
    assert len(REQUESTS) > 30


@pytest.mark.parametrize(("name", "provider", "body"), REQUESTS, ids=[name for name, _, _ in REQUESTS])
def test_a_request_converted_and_projected_back_is_the_request(name: str, provider: str, body: JSON) -> None:
    target = ProviderModel(provider, routes.MODEL_APIS[provider], body.get("model") or "m")  # type: ignore[arg-type]
    if provider == "anthropic":
        transcript = from_anthropic_request(body, timestamp=1)
        sent, key = body["messages"], "messages"
    else:
        transcript = from_openai_request(body, timestamp=1, provider=provider)
        given = body["input"]
        sent = given if isinstance(given, list) else [{"role": "user", "content": given}]
        key = "input"
    restore(transcript)  # valid by the transcript contract
    assert _without_logprobs(project(transcript, target)[key]) == _without_logprobs(sent)


def test_anthropic_tool_results_become_tool_result_messages_named_after_their_call() -> None:
    body = {"model": "claude-sonnet-4-6", "system": [{"type": "text", "text": "Be brief."}], "messages": [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read",
                                           "input": {"path": "a.md"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"},
                                     {"type": "text", "text": "and?"}]}],
        "tools": [{"name": "read", "input_schema": {"type": "object"}},
                  {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]}
    transcript = from_anthropic_request(body, timestamp=100)
    roles = [message["role"] for message in transcript["messages"]]
    assert roles == ["user", "assistant", "toolResult", "user"]
    assert transcript["messages"][1]["stopReason"] == "toolUse"
    assert transcript["messages"][2]["toolName"] == "read"
    assert [message["timestamp"] for message in transcript["messages"]] == [100, 101, 102, 103]
    assert transcript["system"] == "Be brief."
    assert transcript["tools"] == [{"type": "function", "name": "read", "parameters": {"type": "object"}},
                                   {"type": "hostedSearch", "maxUses": 2}]
    restore(transcript)


def test_openai_items_group_into_one_assistant_turn_and_system_messages_join_instructions() -> None:
    body = {"model": "gpt-5", "instructions": "Be brief.", "input": [
        {"role": "developer", "content": "Cite sources."},
        {"role": "user", "content": [{"type": "input_text", "text": "look it up"}]},
        {"id": "rs_1", "type": "reasoning", "summary": []},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{\"path\": \"a\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "text"},
        {"role": "assistant", "content": "done"}]}
    transcript = from_openai_request(body, timestamp=5)
    assert [m["role"] for m in transcript["messages"]] == ["user", "assistant", "toolResult", "assistant"]
    assert [block["type"] for block in transcript["messages"][1]["content"]] == ["thinking", "toolCall"]
    assert transcript["messages"][2]["toolName"] == "read"
    assert transcript["system"] == "Be brief.\n\nCite sources."
    restore(transcript)


@pytest.mark.parametrize(("convert", "doc", "pointer"), [
    (from_anthropic_request, {"messages": [{"role": "tool", "content": "x"}]}, "/messages/0/role"),
    (from_anthropic_request, {"messages": [{"role": "user", "content": [{"type": "document"}]}]},
     "/messages/0/content/0/type"),
    (from_anthropic_request, [{"role": "assistant", "content": [{"text": "no type"}]}], "/0/content"),
    (from_anthropic_request, {"messages": "hi"}, "/messages"),
    (from_openai_request, [{"role": "user", "content": [{"type": "input_audio"}]}], "/0/content/0/type"),
    (from_openai_request, {"input": [3]}, "/input/0"),
    (from_gemini_request, {"contents": [{"role": "system", "parts": []}]}, "/contents/0/role"),
    (from_gemini_request, {"contents": [{"role": "user", "parts": [{"fileData": {}}]}]},
     "/contents/0/parts/0/fileData"),
    (from_gemini_request, {"contents": [{"role": "model", "parts": [3]}]}, "/contents/0/parts"),
    (from_gemini_request, {"contents": [{"role": "user", "parts": "hi"}]}, "/contents/0/parts"),
    (from_chat_request, {"messages": [{"role": "function", "content": "x"}]}, "/messages/0/role"),
    (from_chat_request, [{"role": "user", "content": [{"type": "input_audio"}]}], "/0/content/0/type"),
    (from_chat_request, [{"role": "assistant", "tool_calls": [{"id": "x"}]}], "/0"),
    (from_chat_request, {"messages": {}}, "/messages"),
])
def test_what_cannot_be_converted_names_its_pointer(convert: Any, doc: object, pointer: str) -> None:
    with pytest.raises(ConversionError, match=f"^{pointer}: "):
        convert(doc, timestamp=1)


def test_a_bare_openai_input_string_is_one_user_message() -> None:
    transcript = from_openai_request({"model": "gpt-5", "input": "hi"}, timestamp=1)
    assert transcript["messages"] == [{"role": "user", "content": "hi", "timestamp": 1}]


def test_nothing_of_the_request_is_shared_with_the_transcript(tmp_path: Path) -> None:
    block = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    body = {"messages": [{"role": "assistant", "content": [block]}]}
    transcript = from_anthropic_request(body, timestamp=1)
    transcript["messages"][0]["content"][0]["raw"]["input"]["query"] = "changed"
    assert block["input"]["query"] == "q"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategies.transcripts(max_messages=8), st.sampled_from(["anthropic", "openai", "azure"]))
def test_any_projected_body_converts_back_to_a_transcript_that_projects_the_same(transcript: JSON,
                                                                               provider: str) -> None:
    target = ProviderModel(provider, routes.MODEL_APIS[provider], "m")  # type: ignore[arg-type]
    body = project(transcript, target)
    if provider == "anthropic":
        again = from_anthropic_request(body, timestamp=1)
    else:
        again = from_openai_request(body, timestamp=1, provider=provider)
    restore(again)
    assert project(again, target) == body


def test_a_gemini_request_converts_turns_tools_and_function_responses() -> None:
    call = {"functionCall": {"name": "read", "args": {"path": "a.md"}}, "thoughtSignature": "c2ln"}
    body = {
        "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Cite."}]},
        "tools": [{"googleSearch": {}}, {"functionDeclarations": [
            {"name": "read", "description": "Read a file", "parameters": {"type": "OBJECT"}}]},
                  {"codeExecution": {}}],
        "contents": [
            {"role": "user", "parts": [{"text": "read it"},
                                       {"inline_data": {"mime_type": "image/png", "data": "iVBO"}}]},
            {"role": "model", "parts": [{"text": "Planning.", "thought": True}, call]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "hello"}}}]},
            {"role": "model", "parts": [{"text": "It says hello."}]}]}
    transcript = from_gemini_request(body, timestamp=100)
    messages = transcript["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert [m["timestamp"] for m in messages] == [100, 101, 102, 103]
    assert messages[0]["content"][1] == {"type": "image", "data": "iVBO", "mimeType": "image/png"}
    assert [b["type"] for b in messages[1]["content"]] == ["thinking", "toolCall"]
    assert messages[1]["content"][1]["raw"] == call and messages[1]["stopReason"] == "toolUse"
    assert (messages[2]["toolCallId"], messages[2]["toolName"], messages[2]["content"]) == (
        messages[1]["content"][1]["id"], "read", "hello")
    assert messages[3]["api"] == "gemini-generate" and messages[3]["usage"]["totalTokens"] == 0
    assert transcript["system"] == "Be brief.\n\nCite."
    assert transcript["tools"] == [{"type": "hostedSearch"}, {"type": "function", "name": "read",
                                   "description": "Read a file", "parameters": {"type": "OBJECT"}}]
    assert restore(transcript) is transcript


def test_gemini_function_responses_match_their_call_by_id_else_in_order_by_name() -> None:
    calls = [{"functionCall": {"name": "ls", "args": {}}}, {"functionCall": {"name": "ls", "args": {"d": 1}}},
             {"functionCall": {"id": "fc-3", "name": "read", "args": {}}}]
    answers = [{"functionResponse": {"id": "fc-3", "name": "read", "response": {"a": 1, "b": 2}}},
               {"functionResponse": {"name": "ls", "response": {"output": "x"}}},
               {"functionResponse": {"name": "ls", "response": {"output": "y"}}}]
    transcript = from_gemini_request([{"role": "model", "parts": calls}, {"role": "user", "parts": answers}],
                                     timestamp=1, provider="vertex")
    ids = [block["id"] for block in transcript["messages"][0]["content"]]
    assert [m["toolCallId"] for m in transcript["messages"][1:]] == [ids[2], ids[0], ids[1]]
    assert transcript["messages"][1]["content"] == '{"a":1,"b":2}'
    assert transcript["messages"][0]["provider"] == "vertex"
    restore(transcript)


def test_a_chat_request_converts_roles_tools_and_web_search_options() -> None:
    body = {"model": "gpt-4o-search-preview", "web_search_options": {"search_context_size": "low"},
            "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}],
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "developer", "content": [{"type": "text", "text": "Cite."}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "read", "arguments": "{\"p\": 1}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
                {"role": "assistant", "content": "It says hello.", "annotations": [
                    {"type": "url_citation", "url_citation": {"url": "https://a.example/", "title": "A",
                                                              "start_index": 0, "end_index": 2}}]}]}
    transcript = from_chat_request(body, timestamp=7)
    messages = transcript["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert messages[0]["content"][1] == {"type": "image", "data": "iVBO", "mimeType": "image/png"}
    assert messages[1]["content"][0]["arguments"] == {"p": 1} and messages[1]["stopReason"] == "toolUse"
    assert messages[2]["toolName"] == "read"
    assert messages[3]["content"][0]["citations"] == body["messages"][5]["annotations"]
    assert transcript["system"] == "Be brief.\n\nCite."
    assert transcript["tools"] == [{"type": "hostedSearch"},
                                   {"type": "function", "name": "read", "parameters": {"type": "object"}}]
    assert restore(transcript) is transcript


def test_a_gemini_function_turn_of_the_older_docs_answers_like_a_user_turn() -> None:
    turns = [{"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
             {"role": "function", "parts": [{"functionResponse": {"name": "ls", "response": {"r": "x"}}}]}]
    transcript = from_gemini_request({"contents": turns}, timestamp=1)
    assert [m["role"] for m in transcript["messages"]] == ["assistant", "toolResult"]
    assert transcript["messages"][1]["toolCallId"] == transcript["messages"][0]["content"][0]["id"]
