"""replay.project onto Gemini generateContent and OpenAI Chat Completions: the bodies, the policy across
providers (search history both ways), and the SDKs' request types accepting what is built."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import TypeAdapter

from replaykit import strategies as rs
from replaykit.replay import ProviderModel, project, projection, search_text_projection
from replaykit.transcript import restore

JSON = dict[str, Any]
GEMINI = ProviderModel("gemini", "gemini-generate", "gemini-2.5-flash")
VERTEX = ProviderModel("vertex", "gemini-generate", "gemini-2.5-pro")
CHAT = ProviderModel("openai", "openai-chat", "gpt-4o-search-preview")
AZURE_CHAT = ProviderModel("azure", "openai-chat", "my-deployment")
ANTHROPIC = ProviderModel("anthropic", "anthropic-messages", "claude-sonnet-4-5", max_tokens=1024)
RESPONSES = ProviderModel("openai", "openai-responses", "gpt-5")
STAMP = 1764662400000

GROUNDING = {
    "webSearchQueries": ["uefa euro 2024 winner"],
    "searchEntryPoint": {"renderedContent": "<div>chips</div>"},
    "groundingChunks": [{"web": {"uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC1",
                                 "title": "uefa.com"}}],
    "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": 20, "text": "Spain won Euro 2024."},
                           "groundingChunkIndices": [0]}],
}


def gemini_turn(provider: str = "gemini") -> JSON:
    """A grounded Gemini answer as the neutral mapping gives it: search blocks first (the call display-only,
    the result holding the groundingMetadata), then the parts."""
    head = {"provider": provider, "api": "gemini-generate"}
    return {
        "role": "assistant", **head, "model": "gemini-2.5-flash", "stopReason": "toolUse",
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15},
        "timestamp": STAMP + 2,
        "content": [
            {"type": "hostedSearch", "phase": "call", **head, "id": "resp1:q0",
             "query": "uefa euro 2024 winner"},
            {"type": "hostedSearch", "phase": "result", **head, "toolUseId": "resp1:q0",
             "results": [{"url": GROUNDING["groundingChunks"][0]["web"]["uri"], "title": "uefa.com"}],
             "raw": GROUNDING},
            {"type": "providerBlock", **head, "blockType": "urlContextMetadata",
             "raw": {"urlMetadata": [{"retrievedUrl": "https://uefa.com", "urlRetrievalStatus": "OK"}]}},
            {"type": "thinking", "thinking": "Look it up.",
             "raw": {"text": "Look it up.", "thought": True, "thoughtSignature": "c2lnbmF0dXJlMQ=="}},
            {"type": "text", "text": "Spain won Euro 2024.", "citations": GROUNDING["groundingSupports"],
             "signature": "c2lnbmF0dXJlMw=="},
            {"type": "toolCall", "id": "call_1", "name": "lookup", "arguments": {"team": "Spain"},
             "raw": {"functionCall": {"name": "lookup", "args": {"team": "Spain"}},
                     "thoughtSignature": "c2lnbmF0dXJlMg=="}},
            {"type": "providerBlock", **head, "blockType": "executableCode",
             "raw": {"executableCode": {"language": "PYTHON", "code": "print(1)"}}},
        ],
    }


ANNOTATION = {"url": "https://uefa.com/euro", "title": "Euro 2024", "start_index": 0, "end_index": 14}


def chat_turn(provider: str = "openai") -> JSON:
    """A Perplexity-style answer: a result block from top-level search_results, annotated text, a call."""
    head = {"provider": provider, "api": "openai-chat"}
    raw = {"citations": ["https://uefa.com/euro"],
           "search_results": [{"title": "Euro 2024", "url": "https://uefa.com/euro", "date": "2024-07-14"}]}
    return {
        "role": "assistant", **head, "model": "sonar", "stopReason": "toolUse", "timestamp": STAMP + 2,
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15},
        "content": [
            {"type": "hostedSearch", "phase": "result", **head, "toolUseId": "chatcmpl-1",
             "results": [{"url": "https://uefa.com/euro", "title": "Euro 2024", "pageAge": "2024-07-14"}],
             "raw": raw},
            {"type": "thinking", "thinking": "The final was in Berlin."},
            {"type": "text", "text": "Spain won [1].", "citations": [{"type": "url_citation",
                                                                       "url_citation": ANNOTATION}]},
            {"type": "toolCall", "id": "call_9", "name": "lookup", "arguments": {"team": "Spain"},
             "raw": {"id": "call_9", "type": "function",
                     "function": {"name": "lookup", "arguments": "{\"team\":\"Spain\"}"}}},
        ],
    }


def anthropic_turn() -> JSON:
    head = {"provider": "anthropic", "api": "anthropic-messages"}
    call_raw = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                "input": {"query": "euro 2024"}}
    result_raw = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
        {"type": "web_search_result", "url": "https://uefa.com", "title": "UEFA",
         "encrypted_content": "Zm9v"}]}
    return {
        "role": "assistant", **head, "model": "claude-sonnet-4-5", "stopReason": "toolUse",
        "timestamp": STAMP + 2,
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15},
        "content": [
            {"type": "hostedSearch", "phase": "call", **head, "id": "srvtoolu_1", "query": "euro 2024",
             "raw": call_raw},
            {"type": "hostedSearch", "phase": "result", **head, "toolUseId": "srvtoolu_1",
             "results": [{"url": "https://uefa.com", "title": "UEFA"}], "raw": result_raw},
            {"type": "thinking", "thinking": "Search first.", "signature": "sig"},
            {"type": "text", "text": "Spain won.", "citations": [{"type": "web_search_result_location",
                                                                  "url": "https://uefa.com",
                                                                  "encrypted_index": "eA=="}]},
            {"type": "toolCall", "id": "toolu_1", "name": "lookup", "arguments": {"team": "Spain"}},
        ],
    }


def conversation(turn: JSON, call_id: str = "call_1") -> JSON:
    return {"version": 1, "system": "Be brief.",
            "tools": [{"type": "hostedSearch"},
                      {"name": "lookup", "description": "Look a team up.",
                       "parameters": {"type": "object", "properties": {"team": {"type": "string"}}}}],
            "messages": [
                {"role": "user", "content": "Who won Euro 2024?", "timestamp": STAMP},
                turn,
                {"role": "toolResult", "toolCallId": call_id, "toolName": "lookup",
                 "content": [{"type": "text", "text": "Spain: 4 titles"}], "isError": False,
                 "timestamp": STAMP + 3},
                {"role": "toolResult", "toolCallId": "call_2", "toolName": "lookup",
                 "content": [{"type": "text", "text": "no such team"}], "isError": True,
                 "timestamp": STAMP + 4},
            ]}


# ---------------------------------------------------------------- the SDKs' request types


def gemini_sdk_check(body: JSON) -> None:
    """google-genai's types (camelCase aliases, unknown fields forbidden) accept every part of ``body``."""
    types = pytest.importorskip("google.genai.types")
    assert set(body) <= {"contents", "systemInstruction", "tools"}
    body = _decodable(copy.deepcopy(body))
    for content in body["contents"]:
        types.Content.model_validate(content)
        assert content["role"] in ("user", "model")
    if "systemInstruction" in body:
        types.Content.model_validate(body["systemInstruction"])
    for tool in body.get("tools", []):
        types.Tool.model_validate(tool)


def _decodable(value: Any) -> Any:
    """``value`` with every inlineData's data valid base64 (the SDK decodes it; drawn data is any text)."""
    if isinstance(value, dict):
        if isinstance(value.get("inlineData"), dict):
            value["inlineData"]["data"] = "AAAA"
        for item in value.values():
            _decodable(item)
    elif isinstance(value, list):
        for item in value:
            _decodable(item)
    return value


def chat_sdk_check(body: JSON) -> None:
    """openai's Chat Completions request params accept ``body``."""
    from openai.types.chat import completion_create_params

    adapter = TypeAdapter(completion_create_params.CompletionCreateParamsNonStreaming)
    validated = adapter.validate_python(body)
    list(validated["messages"])


def test_the_sdk_checks_can_fail() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        gemini_sdk_check({"contents": [{"role": "model", "parts": [{"groundingMetadata": GROUNDING}]}]})
    with pytest.raises(ValidationError):
        chat_sdk_check({"model": "m", "messages": [{"role": "tool", "content": "no call id"}]})


# ---------------------------------------------------------------- Gemini generateContent


def test_gemini_body_places_system_tools_and_contents() -> None:
    body = project(conversation(anthropic_turn(), "toolu_1"), GEMINI)
    gemini_sdk_check(body)
    assert "model" not in body  # the model is in the URL path
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    schema = {"type": "object", "properties": {"team": {"type": "string"}}}
    assert body["tools"] == [{"functionDeclarations": [
        {"name": "lookup", "description": "Look a team up.", "parametersJsonSchema": schema}]},
        {"googleSearch": {}}]
    assert [content["role"] for content in body["contents"]] == ["user", "model", "user"]


def test_gemini_tool_results_are_function_responses_in_one_user_content() -> None:
    body = project(conversation(anthropic_turn(), "toolu_1"), GEMINI)
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "lookup", "response": {"output": "Spain: 4 titles"}}},
        {"functionResponse": {"name": "lookup", "response": {"error": "no such team"}}}]


def test_gemini_tool_result_images_go_in_the_function_response_parts() -> None:
    transcript = conversation(anthropic_turn(), "toolu_1")
    transcript["messages"][2]["content"].append({"type": "image", "mimeType": "image/png", "data": "iVBO"})
    part = project(transcript, GEMINI)["contents"][2]["parts"][0]
    gemini_sdk_check(project(transcript, GEMINI))
    assert part["functionResponse"]["parts"] == [{"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]


def test_anthropic_search_history_goes_to_gemini_as_text() -> None:
    turn = anthropic_turn()
    result = projection(conversation(turn, "toolu_1"), GEMINI)
    parts = result.body["contents"][1]["parts"]
    assert parts == [
        {"text": search_text_projection(turn["content"][0])},
        {"text": search_text_projection(turn["content"][1])},
        {"text": "Search first."},  # thinking: its signature means nothing to Gemini
        {"text": "Spain won.\n\n[cited sources]\n1. https://uefa.com"},  # citations as text
        {"functionCall": {"name": "lookup", "args": {"team": "Spain"}}}]
    assert "encrypted" not in json.dumps(result.body)
    assert [note.pointer for note in result.notes] == ["/messages/1/content/3/citations"]


def test_gemini_replays_its_own_parts_verbatim_and_never_its_grounding() -> None:
    turn = gemini_turn()
    result = projection(conversation(turn), GEMINI)
    gemini_sdk_check(result.body)
    assert result.body["contents"][1] == {"role": "model", "parts": [
        turn["content"][3]["raw"], {"text": "Spain won Euro 2024.", "thoughtSignature": "c2lnbmF0dXJlMw=="},
        turn["content"][5]["raw"], turn["content"][6]["raw"]]}
    dumped = json.dumps(result.body)
    assert "webSearchQueries" not in dumped and "urlMetadata" not in dumped and "grounding" not in dumped
    assert result.notes == ()  # no input form: left out silently


def test_vertex_parts_do_not_go_to_the_gemini_developer_api() -> None:
    result = projection(conversation(gemini_turn("vertex")), GEMINI)
    parts = result.body["contents"][1]["parts"]
    assert "thoughtSignature" not in json.dumps(parts)
    assert parts[0]["text"].startswith("[web search: uefa euro 2024 winner]\n[web search results]\n"
                                       "1. uefa.com - https://vertexaisearch")
    assert [note.pointer for note in result.notes] == ["/messages/1/content/0", "/messages/1/content/2",
                                                       "/messages/1/content/6"]
    assert project(conversation(gemini_turn("vertex")), VERTEX)["contents"][1]["parts"][0] == \
        gemini_turn()["content"][3]["raw"]


def test_gemini_search_history_goes_to_anthropic_and_responses_as_text() -> None:
    turn = gemini_turn()
    text = search_text_projection(turn["content"][1])
    assert text == ("[web search: uefa euro 2024 winner]\n[web search results]\n1. uefa.com - "  # its queries
                    "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC1")
    anthropic = projection(conversation(turn), ANTHROPIC)
    assert anthropic.body["messages"][1]["content"][:3] == [
        {"type": "text", "text": text}, {"type": "text", "text": "Look it up."},
        {"type": "text", "text": "Spain won Euro 2024."}]
    dumped = json.dumps(anthropic.body)
    assert "groundingSupports" not in dumped and "c2lnbmF0dXJl" not in dumped  # no citations, signatures
    responses = project(conversation(turn), RESPONSES)
    assert responses["input"][1:4] == [{"role": "assistant", "content": said}
                                       for said in (text, "Look it up.", "Spain won Euro 2024.")]
    for result in (anthropic, projection(conversation(turn), RESPONSES)):  # the display-only call, the opaque
        assert [note.pointer for note in result.notes] == ["/messages/1/content/0", "/messages/1/content/2",
                                                           "/messages/1/content/6"]


# ---------------------------------------------------------------- OpenAI Chat Completions


def test_chat_body_places_system_tools_and_web_search_options() -> None:
    body = project(conversation(anthropic_turn(), "toolu_1"), CHAT)
    chat_sdk_check(body)
    assert body["model"] == "gpt-4o-search-preview"
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["tools"] == [{"type": "function", "function": {
        "name": "lookup", "description": "Look a team up.",
        "parameters": {"type": "object", "properties": {"team": {"type": "string"}}}}}]
    assert body["web_search_options"] == {}
    assert body["messages"][3:] == [{"role": "tool", "tool_call_id": "toolu_1", "content": "Spain: 4 titles"},
                                    {"role": "tool", "tool_call_id": "call_2", "content": "no such team"}]


def test_anthropic_search_history_goes_to_chat_as_text_with_tool_calls() -> None:
    turn = anthropic_turn()
    assistant = project(conversation(turn, "toolu_1"), CHAT)["messages"][2]
    texts = [search_text_projection(block) for block in turn["content"][:2]]
    assert assistant == {"role": "assistant", "content": "\n\n".join(
        [*texts, "Search first.", "Spain won.", "[cited sources]\n1. https://uefa.com"]),
                         "tool_calls": [{"id": "toolu_1", "type": "function", "function": {
                             "name": "lookup", "arguments": "{\"team\": \"Spain\"}"}}]}


def test_chat_sends_text_only_back_to_chat() -> None:
    turn = chat_turn()
    result = projection(conversation(turn, "call_9"), CHAT)
    chat_sdk_check(result.body)
    assert result.body["messages"][2] == {"role": "assistant", "content": "Spain won [1].",
                                          "tool_calls": [turn["content"][3]["raw"]]}
    dumped = json.dumps(result.body)
    assert "url_citation" not in dumped and "search_results" not in dumped and "Berlin" not in dumped
    assert result.notes == ()


def test_azure_chat_gets_openai_chat_blocks_rebuilt() -> None:
    turn = chat_turn()
    assistant = project(conversation(turn, "call_9"), AZURE_CHAT)["messages"][2]
    assert assistant["content"].startswith("[web search results]\n1. Euro 2024 - https://uefa.com/euro")
    assert assistant["content"].endswith("The final was in Berlin.\n\nSpain won [1].\n\n[cited sources]\n"
                                         "1. Euro 2024 - https://uefa.com/euro")  # annotations as text
    assert assistant["tool_calls"] == [{"id": "call_9", "type": "function", "function": {
        "name": "lookup", "arguments": "{\"team\": \"Spain\"}"}}]


def test_chat_search_history_goes_to_anthropic_as_text() -> None:
    turn = chat_turn()
    result = projection(conversation(turn, "call_9"), ANTHROPIC)
    content = result.body["messages"][1]["content"]
    assert content[0] == {"type": "text", "text": search_text_projection(turn["content"][0])}
    assert content[2] == {"type": "text", "text": "Spain won [1].\n\n[cited sources]\n"  # annotations as text
                          "1. Euro 2024 - https://uefa.com/euro"}
    assert content[3] == {"type": "tool_use", "id": "call_9", "name": "lookup", "input": {"team": "Spain"}}


def test_an_opaque_chat_tool_call_goes_back_in_tool_calls_to_its_own_provider_only() -> None:
    turn = chat_turn()
    custom = {"type": "custom", "id": "call_7", "custom": {"name": "grep", "input": "TODO"}}
    turn["content"].append({"type": "providerBlock", "provider": "openai", "api": "openai-chat",
                            "blockType": "custom", "raw": custom})
    result = projection(conversation(turn, "call_9"), CHAT)
    chat_sdk_check(result.body)
    assert result.body["messages"][2]["tool_calls"] == [turn["content"][3]["raw"], custom]
    assert result.notes == ()
    elsewhere = projection(conversation(turn, "call_9"), AZURE_CHAT)
    assert "call_7" not in json.dumps(elsewhere.body)
    assert [note.pointer for note in elsewhere.notes] == ["/messages/1/content/2/citations",
                                                          "/messages/1/content/4"]


def test_a_chat_turn_with_nothing_to_send_is_omitted() -> None:
    turn = chat_turn()
    turn["content"] = turn["content"][:2]  # its own search results and reasoning: no input form
    assert [m["role"] for m in project(conversation(turn), CHAT)["messages"]] == ["system", "user", "tool",
                                                                                   "tool"]


def test_since_leaves_out_system_and_tools_on_both_wires() -> None:
    transcript = conversation(gemini_turn())
    assert set(project(transcript, GEMINI, since=2)) == {"contents"}
    assert set(project(transcript, CHAT, since=2)) == {"model", "messages"}
    assert [m["role"] for m in project(transcript, CHAT, since=2)["messages"]] == ["tool", "tool"]


# ---------------------------------------------------------------- generated transcripts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcript=rs.transcripts(max_messages=6, opaque=False))  # drawn opaque blocks are made-up parts
def test_every_projection_to_the_new_wires_is_an_sdk_request(transcript: JSON) -> None:
    restore(transcript)
    before = copy.deepcopy(transcript)
    for target in (GEMINI, VERTEX, CHAT, AZURE_CHAT):
        body = project(transcript, target)
        (gemini_sdk_check if target.api == "gemini-generate" else chat_sdk_check)(body)
        dumped = json.dumps(body)
        for key in ("timestamp", "stopReason", "toolUseId", "hostedSearch", "providerBlock", "usage"):
            assert f'"{key}"' not in dumped
    assert transcript == before


# ---------------------------------------------------------------- round trips through the converters

RESPONSE = {"candidates": [{"content": {"role": "model", "parts": [
    {"text": "Plan the search.", "thought": True, "thoughtSignature": "c2lnMQ=="},
    {"text": "Spain won Euro 2024.", "thoughtSignature": "c2lnMg=="},
    {"functionCall": {"name": "lookup", "args": {"team": "Spain"}}, "thoughtSignature": "c2lnMw=="}]},
    "finishReason": "STOP", "groundingMetadata": {**GROUNDING, "groundingSupports": [
        {"segment": {"partIndex": 1, "startIndex": 0, "endIndex": 5, "text": "Spain"},
         "groundingChunkIndices": [0]}]}}],
    "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 7, "totalTokenCount": 16},
    "responseId": "resp1", "modelVersion": "gemini-2.5-flash"}
COMPLETION = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-search-preview",
              "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                  "role": "assistant", "content": "Spain won [1].",
                  "annotations": [{"type": "url_citation", "url_citation": ANNOTATION}],
                  "tool_calls": [{"id": "call_9", "type": "function",
                                  "function": {"name": "lookup", "arguments": "{\"team\":\"Spain\"}"}}]}}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}}


def test_a_converted_gemini_turn_projects_back_to_its_recorded_parts() -> None:
    from replaykit.transcript import from_gemini

    turn = from_gemini(RESPONSE, timestamp=STAMP + 1)
    body = project({"version": 1, "system": None, "tools": [],
                    "messages": [{"role": "user", "content": "Who won?", "timestamp": STAMP}, turn]}, GEMINI)
    gemini_sdk_check(body)
    assert body["contents"][1] == RESPONSE["candidates"][0]["content"]  # grounding is no part: not sent


def test_a_converted_chat_turn_projects_back_to_its_recorded_message_without_annotations() -> None:
    from replaykit.transcript import from_chat

    turn = from_chat(COMPLETION, timestamp=STAMP + 1)
    body = project({"version": 1, "system": None, "tools": [],
                    "messages": [{"role": "user", "content": "Who won?", "timestamp": STAMP}, turn]}, CHAT)
    chat_sdk_check(body)
    recorded = COMPLETION["choices"][0]["message"]
    assert body["messages"][1] == {"role": "assistant", "content": recorded["content"],
                                   "tool_calls": recorded["tool_calls"]}


def test_a_projected_request_converts_back_to_the_same_conversation() -> None:
    from replaykit.transcript import from_chat_request, from_gemini_request

    transcript = conversation(anthropic_turn(), "toolu_1")
    for target, convert in ((GEMINI, from_gemini_request), (CHAT, from_chat_request)):
        back = convert(project(transcript, target), timestamp=STAMP, provider=target.provider)
        assert back["system"] == "Be brief."
        assert [message["role"] for message in back["messages"]] == ["user", "assistant", "toolResult",
                                                                     "toolResult"]
        assert {tool.get("type", "function") for tool in back["tools"]} == {"hostedSearch", "function"}
        call = next(block for block in back["messages"][1]["content"] if block["type"] == "toolCall")
        assert (call["name"], call["arguments"]) == ("lookup", {"team": "Spain"})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcript=rs.transcripts(min_messages=2, max_messages=6, providers=["gemini", "openai", "anthropic"]))
def test_search_blocks_follow_the_policy_on_the_new_wires(transcript: JSON) -> None:
    replayed = [block for message in transcript["messages"]
                if message["role"] == "assistant" and message["stopReason"] not in ("error", "aborted")
                for block in message["content"] if block["type"] == "hostedSearch" and "raw" in block]
    for target in (GEMINI, VERTEX, CHAT, AZURE_CHAT):
        body = project(transcript, target)
        dumped = json.dumps(body)
        texts = [part.get("text") for content in body.get("contents", []) for part in content["parts"]] + [
            message.get("content") for message in body.get("messages", [])]
        said = "\n".join(text for text in texts if isinstance(text, str))
        for block in replayed:
            if (block["provider"], block["api"]) == (target.provider, target.api):
                assert json.dumps(block["raw"]) not in dumped  # no input form: never sent back
            else:
                assert search_text_projection(block) in said


def test_a_function_response_carries_the_id_of_a_call_sent_with_one() -> None:
    turn = gemini_turn()
    turn["content"][5]["id"] = "fc_1"
    turn["content"][5]["raw"] = {"functionCall": {"id": "fc_1", "name": "lookup", "args": {"team": "Spain"}}}
    parts = project(conversation(turn, "fc_1"), GEMINI)["contents"][2]["parts"]
    gemini_sdk_check(project(conversation(turn, "fc_1"), GEMINI))
    assert [part["functionResponse"].get("id") for part in parts] == ["fc_1", None]  # call_2 had no call
    foreign = project(conversation(turn, "fc_1"), VERTEX)["contents"][2]["parts"]  # rebuilt: no wire id
    assert "id" not in foreign[0]["functionResponse"]
