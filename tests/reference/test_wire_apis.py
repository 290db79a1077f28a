"""The reference's wire on Chat Completions and Gemini generateContent: endpoints and keys per provider and
API, the body as sent, the end of each stream (Chat's ``data: [DONE]``, Gemini's finishReason), errors inside
a stream, and whole runs against the fake provider on a small cassette made here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replaykit import sse
from replaykit.reference import wire
from replaykit.reference.harness import _target
from replaykit.replay import ProviderModel, citation_text_projection, project
from replaykit.transcript import from_chat_stream, from_gemini_stream

GEMINI = ProviderModel("gemini", "gemini-generate", "gemini-2.5-flash")
VERTEX = ProviderModel("vertex", "gemini-generate", "gemini-2.5-pro")
CHAT = ProviderModel("openai", "openai-chat", "gpt-4o-search-preview")
AZURE_CHAT = ProviderModel("azure", "openai-chat", "my-deployment")
ENV = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-o",
       "REPLAYKIT_AZURE_BASE_URL": "http://127.0.0.1:9/openai/v1", "AZURE_OPENAI_API_KEY": "az",
       "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9/", "GOOGLE_VERTEX_BASE_URL": "http://127.0.0.1:9",
       "GOOGLE_API_KEY": "g-key", "GOOGLE_CLOUD_ACCESS_TOKEN": "ya29.t", "GOOGLE_CLOUD_PROJECT": "proj",
       "GOOGLE_CLOUD_LOCATION": "us-central1"}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY",):
        monkeypatch.delenv(name, raising=False)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


# ---------------------------------------------------------------- where a request goes


@pytest.mark.usefixtures("env")
@pytest.mark.parametrize(("target", "url", "header", "key"), [
    (CHAT, "http://127.0.0.1:9/v1/chat/completions", "authorization", "Bearer sk-o"),
    (AZURE_CHAT, "http://127.0.0.1:9/openai/v1/chat/completions", "api-key", "az"),
    (GEMINI, "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
     "x-goog-api-key", "g-key"),
    (VERTEX, "http://127.0.0.1:9/v1beta1/projects/proj/locations/us-central1/publishers/google/models/"
             "gemini-2.5-pro:streamGenerateContent?alt=sse", "authorization", "Bearer ya29.t"),
    (ProviderModel("openai", "openai-responses", "gpt-5"), "http://127.0.0.1:9/v1/responses", "authorization",
     "Bearer sk-o"),
], ids=["openai-chat", "azure-chat", "gemini", "vertex", "openai-responses"])
def test_each_provider_and_api_has_its_endpoint_and_key(target: ProviderModel, url: str, header: str,
                                                        key: str) -> None:
    found, headers = wire.endpoint(target)
    assert (found, headers[header], headers["accept"]) == (url, key, "text/event-stream")


@pytest.mark.usefixtures("env")
def test_gemini_prefers_gemini_api_key_and_quotes_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gem")
    url, headers = wire.endpoint(ProviderModel("gemini", "gemini-generate", "tuned/../x"))
    assert headers["x-goog-api-key"] == "gem"
    assert url == "http://127.0.0.1:9/v1beta/models/tuned%2F..%2Fx:streamGenerateContent?alt=sse"


def test_the_body_as_sent_streams_on_each_api() -> None:
    body = {"model": "m", "messages": []}
    assert wire.wire_body(body, CHAT) == {**body, "stream": True, "stream_options": {"include_usage": True}}
    assert wire.wire_body({"contents": []}, GEMINI) == {"contents": []}  # streamed by its URL
    assert wire.wire_body({"model": "m", "input": []}, ProviderModel("openai", "openai-responses", "m")) == {
        "model": "m", "input": [], "store": False, "stream": True}


def test_a_step_chooses_the_api_else_the_providers_first() -> None:
    assert _target({"provider": "openai", "model": "m", "api": "openai-chat"}, 100).api == "openai-chat"
    assert _target({"provider": "openai", "model": "m"}, 100).api == "openai-responses"
    assert _target({"provider": "vertex", "model": "m"}, 100) == ProviderModel(
        "vertex", "gemini-generate", "m", max_tokens=100)


# ---------------------------------------------------------------- the end of a stream, errors in it


def test_chat_done_is_the_end_not_a_garbled_event() -> None:
    assert wire._parsed(sse.Event(b"data: [DONE]\n\n", data="[DONE]"), 3) == {"type": "[DONE]"}
    with pytest.raises(wire.StreamCut, match="event 3 of the stream is not JSON"):
        wire._parsed(sse.Event(b"data: [DON\n\n", data="[DON"), 3)


CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
GEMINI_CHUNK = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "index": 0}],
                "responseId": "r1", "modelVersion": "gemini-2.5-flash"}


@pytest.mark.parametrize(("target", "events", "said"), [
    (CHAT, [CHUNK], r"before data: \[DONE\]"),
    (CHAT, [], r"before data: \[DONE\]"),
    (GEMINI, [GEMINI_CHUNK], "before a chunk with a finishReason"),
    (VERTEX, [], "before a chunk with a finishReason"),
])
def test_a_stream_without_its_end_is_cut(target: ProviderModel, events: list[dict[str, object]],
                                         said: str) -> None:
    with pytest.raises(wire.StreamCut, match=said):
        wire._message(events, target)


@pytest.mark.parametrize(("target", "event", "kind", "retryable"), [
    (CHAT, {"error": {"message": "The server had an error", "type": "server_error"}}, "server_error", True),
    (AZURE_CHAT, {"error": {"message": "bad", "type": "invalid_request_error", "code": None}},
     "invalid_request_error", False),
    (GEMINI, {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}},
     "RESOURCE_EXHAUSTED", True),
    (VERTEX, {"error": {"code": 503, "message": "The model is overloaded", "status": "UNAVAILABLE"}},
     "UNAVAILABLE", True),
    (GEMINI, {"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}, "INVALID_ARGUMENT",
     False),
])
def test_an_error_inside_the_stream_is_a_provider_event(target: ProviderModel, event: dict[str, object],
                                                        kind: str, retryable: bool) -> None:
    with pytest.raises(wire.ProviderEvent) as raised:
        wire._message([GEMINI_CHUNK if target.api == "gemini-generate" else CHUNK, event], target)
    info = raised.value.info
    assert (info.code, info.status, info.provider_type, info.retryable) == ("PROVIDER_ERROR", 200, kind,
                                                                            retryable)


# ---------------------------------------------------------------- whole runs against the fake provider

REDIRECT = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC1dEf2"
SEGMENT = {"startIndex": 0, "endIndex": 20, "text": "Spain won Euro 2024."}
GROUNDING = {"webSearchQueries": ["euro 2024 winner"],
             "groundingChunks": [{"web": {"uri": REDIRECT, "title": "uefa.com"}}],
             "groundingSupports": [{"segment": SEGMENT, "groundingChunkIndices": [0]}]}
GEMINI_STREAM = [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Spain won "}]}, "index": 0}],
     "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12}, "modelVersion": "gemini-2.5-flash",
     "responseId": "resp1"},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Euro 2024."}]}, "finishReason": "STOP",
                     "index": 0, "groundingMetadata": GROUNDING}],
     "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 6, "totalTokenCount": 18},
     "modelVersion": "gemini-2.5-flash", "responseId": "resp1"},
]
ANNOTATION = {"type": "url_citation", "url_citation": {"url": "https://uefa.com/euro", "title": "Euro 2024",
                                                       "start_index": 0, "end_index": 10}}
CHAT_STREAM = [
    {**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Spain won."},
                           "finish_reason": None}]},
    {**CHUNK, "choices": [{"index": 0, "delta": {"annotations": [ANNOTATION]}, "finish_reason": "stop"}]},
    {**CHUNK, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}},
]
ANTHROPIC_STREAM = [
    ("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 30, "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                                          "text": ""}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "Four titles."}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                       "usage": {"output_tokens": 4}}),
    ("message_stop", {"type": "message_stop"}),
]
TOOLS = [{"type": "hostedSearch", "maxUses": 5}]


def _stream(uri: str, body: dict[str, object], events: list[tuple[str | None, object]],
            done: bool = False) -> Any:
    from replaykit.cassette import Interaction, Request, Response

    raw = b"".join(sse.encode(json.dumps(data), event=name).raw for name, data in events)
    raw += sse.encode("[DONE]").raw if done else b""
    request = Request("POST", uri, {"content-type": ["application/json"]}, json.dumps(body).encode())
    return Interaction(request, Response(200, "", {"content-type": ["text/event-stream"]}, raw))


def _sent(target: ProviderModel, messages: list[dict[str, object]]) -> dict[str, object]:
    """The body a correct harness sends for ``messages``: the projection, streamed."""
    transcript = {"version": 1, "system": None, "tools": TOOLS, "messages": messages}
    return wire.wire_body(project(transcript, target), target)


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stubs: list[Any],
         steps: list[dict[str, object]]) -> tuple[dict[str, Any], list[Any]]:
    from replaykit.reference import run
    from replaykit.server import FakeProvider

    fake = FakeProvider(journal_bodies="full").start()
    try:
        for stub in stubs:
            fake.stub(stub)
        with monkeypatch.context() as patched:
            for name, value in fake.env().items():
                patched.setenv(name, value)
            patched.setenv("REPLAYKIT_STATE_DIR", str(tmp_path))
            patched.delenv("REPLAYKIT_MUTANT", raising=False)
            patched.chdir(tmp_path)
            outcome = run({"scenario": "wire", "transcript": None, "steps": steps, "tools": TOOLS,
                           "contextWindow": 200000, "reserve": 4096, "idleTimeoutMs": 2000, "maxRetries": 0,
                           "system": None})
    finally:
        fake.stop()
    return outcome, list(fake.journal)


def _user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text, "timestamp": 1}


def test_a_gemini_turn_then_a_switch_to_anthropic_with_its_search_history(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gemini_uri = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    first = _sent(GEMINI, [_user("Who won Euro 2024?")])
    answer = from_gemini_stream(GEMINI_STREAM, timestamp=2)
    anthropic = ProviderModel("anthropic", "anthropic-messages", "claude-sonnet-4-5", max_tokens=4096)
    second = _sent(anthropic, [_user("Who won Euro 2024?"), answer, _user("How many titles?")])
    outcome, journal = _run(monkeypatch, tmp_path, [
        _stream(gemini_uri + "?alt=sse", first, [(None, chunk) for chunk in GEMINI_STREAM]),
        _stream("https://api.anthropic.com/v1/messages", second, ANTHROPIC_STREAM)],
        [{"prompt": "Who won Euro 2024?", "provider": "gemini", "model": "gemini-2.5-flash"},
         {"prompt": "How many titles?", "provider": "anthropic", "model": "claude-sonnet-4-5"}])
    assert outcome["status"] == "ok", outcome
    assert [entry.body for entry in journal] == [first, second]
    assert journal[0].path.endswith("/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    persisted = json.loads((tmp_path / "transcript.json").read_text(encoding="utf-8"))
    turn = persisted["messages"][1]
    assert (turn["provider"], turn["api"]) == ("gemini", "gemini-generate")
    assert [block["raw"] for block in turn["content"] if block["type"] == "hostedSearch" and "raw" in block] \
        == [GROUNDING]
    text = json.dumps(second)
    assert "[web search results]\\n1. uefa.com - https://vertexaisearch" in text
    assert "groundingSupports" not in text and "webSearchQueries" not in text


def test_a_chat_completions_turn_on_openai_and_azure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    first = _sent(CHAT, [_user("Who won?")])
    azure = ProviderModel("azure", "openai-chat", "my-deployment")
    answer = from_chat_stream(CHAT_STREAM, timestamp=2)
    second = _sent(azure, [_user("Who won?"), answer, _user("Sure?")])
    outcome, journal = _run(monkeypatch, tmp_path, [
        _stream("https://api.openai.com/v1/chat/completions", first, [(None, c) for c in CHAT_STREAM], True),
        _stream("https://example.openai.azure.com/openai/v1/chat/completions", second,
                [(None, c) for c in CHAT_STREAM], True)],
        [{"prompt": "Who won?", "provider": "openai", "api": "openai-chat", "model": CHAT.model},
         {"prompt": "Sure?", "provider": "azure", "api": "openai-chat", "model": "my-deployment"}])
    assert outcome["status"] == "ok", outcome
    assert [entry.body for entry in journal] == [first, second]
    # Azure is another provider: the annotations go as text, the pages they name after the answer
    assert second["messages"][1] == {"role": "assistant",
                                     "content": "Spain won.\n\n" + citation_text_projection([ANNOTATION])}
    persisted = json.loads((tmp_path / "transcript.json").read_text(encoding="utf-8"))
    assert persisted["messages"][1]["content"][0]["citations"] == [ANNOTATION]


def test_a_chat_stream_cut_before_done_is_a_transport_failure(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    first = _sent(CHAT, [_user("Who won?")])
    outcome, _ = _run(monkeypatch, tmp_path, [
        _stream("https://api.openai.com/v1/chat/completions", first, [(None, c) for c in CHAT_STREAM])],
        [{"prompt": "Who won?", "provider": "openai", "api": "openai-chat", "model": CHAT.model}])
    assert outcome["status"] == "error"
    assert outcome["error"]["provenance"] == "transport", outcome
