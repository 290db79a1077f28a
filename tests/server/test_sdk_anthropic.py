"""The official ``anthropic`` SDK, sync and async, pointed at the fake provider replaying real recordings.

What the SDK parses must be exactly what the cassette holds: search calls, results, errors, citations and
``usage.server_tool_use``; its own retries against injected 429 / 529 faults must end in the recorded
success with exactly those retries in the journal; a mid-stream disconnect must surface as its own error.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import httpx2
import pytest
from recordings import recorded
from server_support import bundled

from replaykit import cassette
from replaykit.server import FakeProvider, Fault

pytestmark = pytest.mark.both_lanes  # every response the same with the lane and without it

Json = dict[str, Any]
SEARCH_TOOL = [{"type": "web_search_20250305", "name": "web_search"}]
ASK: Json = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "tools": SEARCH_TOOL,
    "messages": [{"role": "user", "content": "What is new in web search?"}],
}


def _client(fake: FakeProvider, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url("anthropic"), api_key="dummy", max_retries=retries)


def _accumulate(events: list[Json]) -> Json:
    """The message a stream builds, computed from the recorded events without the SDK."""
    message: Json = {}
    partial: dict[int, str] = {}
    for data in events:
        kind = data["type"]
        if kind == "message_start":
            message = dict(data["message"], content=[])
        elif kind == "content_block_start":
            message["content"].append(json.loads(json.dumps(data["content_block"])))
        elif kind == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
            elif delta["type"] == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
        elif kind == "content_block_stop" and data["index"] in partial:
            message["content"][data["index"]]["input"] = json.loads(partial.pop(data["index"]) or "{}")
        elif kind == "message_delta":
            message.update(data["delta"])
            message["usage"] = {**message["usage"], **data["usage"]}
    return message


def _recorded_events(path: Any) -> list[Json]:
    response = cassette.load(path).interactions[0].response
    return [event.json() for event in response.events if event.data is not None and event.event != "ping"]


def _search_facts(message: Json) -> Json:
    """What a harness reads from a search turn: calls, results (or error codes), citations, usage."""
    blocks = message["content"]
    return {
        "calls": [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "server_tool_use"],
        "results": [
            (b["tool_use_id"], b["content"]) for b in blocks if b["type"] == "web_search_tool_result"
        ],
        "citations": [c for b in blocks if b["type"] == "text" for c in b.get("citations") or []],
        "server_tool_use": message["usage"].get("server_tool_use"),
    }


def test_create_returns_exactly_the_recorded_messages(serve: Any) -> None:
    path = recorded("pydantic-ai__anthropic_web_search_tool.yaml")
    recorded_messages = [item.response.json() for item in cassette.load(path).interactions]
    with _client(serve(path)) as client:
        got = [client.messages.create(**ASK).to_dict() for _ in recorded_messages]
    assert got == recorded_messages
    facts = _search_facts(got[0])
    assert facts["calls"] and facts["results"] and facts["citations"]
    assert facts["server_tool_use"]["web_search_requests"] >= 1
    assert all(c["type"] == "web_search_result_location" and c["encrypted_index"] for c in facts["citations"])


def test_create_parses_a_search_error_inside_a_200(serve: Any) -> None:
    path = bundled("anthropic/web_search_error_max_uses_exceeded.yaml")
    with _client(serve(path)) as client:
        message = client.messages.create(**ASK)
    results = [b.content for b in message.content if b.type == "web_search_tool_result"]
    errors = [r for r in results if not isinstance(r, list)]
    assert len(errors) == 1 and errors[0].type == "web_search_tool_result_error"
    assert errors[0].error_code == "max_uses_exceeded"
    assert message.to_dict() == cassette.load(path).interactions[0].response.json()


def test_stream_accumulates_to_what_the_recorded_events_say(serve: Any) -> None:
    path = recorded("llm-anthropic__web_search_stream.yaml")
    with _client(serve(path)) as client, client.messages.stream(**ASK) as stream:
        final = stream.get_final_message().to_dict()
    expected = _accumulate(_recorded_events(path))
    assert final["content"] == expected["content"]
    assert _search_facts(final) == _search_facts(expected)
    assert final["usage"]["server_tool_use"] == {"web_search_requests": 1}


def test_raw_stream_events_are_the_recorded_events_in_order(serve: Any) -> None:
    path = recorded("pydantic-ai__anthropic_web_search_tool_stream.yaml")
    with _client(serve(path)) as client:
        events = [event.to_dict() for event in client.messages.create(**ASK, stream=True)]
    assert events == _recorded_events(path)


def test_async_client_create_and_stream(serve: Any) -> None:
    path = recorded("llm-anthropic__web_search_stream.yaml")
    plain = recorded("pydantic-ai__anthropic_web_search_tool.yaml")
    fake = serve(path, plain)

    async def run() -> tuple[Json, Json]:
        async with anthropic.AsyncAnthropic(
            base_url=fake.base_url("anthropic"), api_key="dummy", max_retries=0
        ) as client:
            async with client.messages.stream(**ASK) as stream:
                streamed = (await stream.get_final_message()).to_dict()
            created = (await client.messages.create(**ASK)).to_dict()
        return streamed, created

    streamed, created = asyncio.run(run())
    assert streamed["content"] == _accumulate(_recorded_events(path))["content"]
    assert created == cassette.load(plain).interactions[0].response.json()  # the 2nd on the route


def test_sdk_retries_429_then_529_and_gets_the_recorded_success(serve: Any) -> None:
    path = recorded("pydantic-ai__anthropic_web_search_tool.yaml")
    fake = serve(
        path,
        faults=[
            Fault("status", route="anthropic", nth=1, status=429, retry_after_ms=1),
            Fault("status", route="anthropic", nth=2, status=529, retry_after_ms=1),
        ],
    )
    with _client(fake, retries=2) as client:
        message = client.messages.create(**ASK)
    assert message.to_dict() == cassette.load(path).interactions[0].response.json()
    journal = fake.journal
    assert [(e.status, e.verdict) for e in journal] == [(429, "fault"), (529, "fault"), (200, "served")]
    assert [e.headers["x-stainless-retry-count"] for e in journal] == ["0", "1", "2"]
    assert journal[2].matched is not None and journal[2].matched["index"] == 0


def test_sdk_gives_up_after_its_retries_with_its_own_error(serve: Any) -> None:
    fake = serve(
        recorded("pydantic-ai__anthropic_web_search_tool.yaml"),
        faults=["route=anthropic,status=529,retry_after_ms=1,nth=1,times=2"],
    )
    with _client(fake, retries=1) as client, pytest.raises(anthropic.InternalServerError) as caught:
        client.messages.create(**ASK)
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"
    assert [e.status for e in fake.journal] == [529, 529]
    assert len(fake.unused()) == 2


def test_mid_stream_disconnect_surfaces_as_the_sdk_transport_error(serve: Any) -> None:
    fake = serve(recorded("llm-anthropic__web_search_stream.yaml"), faults=["kind=disconnect,after=10"])
    with (
        _client(fake) as client,
        # the SDK raises the transport's error, or (anthropic >= 2.17) its APIConnectionError from it
        pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)) as caught,
        client.messages.stream(**ASK) as s,
    ):
        s.get_final_message()
    raised = caught.value
    assert isinstance(raised.__cause__ if isinstance(raised, anthropic.APIConnectionError) else raised,
                      httpx2.RemoteProtocolError)
    entry = fake.journal[0]
    assert (entry.outcome, entry.chunks) == ("disconnected", 10)


def test_mid_stream_error_event_raises_the_sdk_api_error(serve: Any) -> None:
    fake = serve(recorded("llm-anthropic__web_search_stream.yaml"), faults=["kind=error_event,after=3"])
    client = _client(fake)
    with client, pytest.raises(anthropic.APIStatusError) as caught, client.messages.stream(**ASK) as stream:
        stream.get_final_message()
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
