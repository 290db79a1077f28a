"""The official ``openai`` SDK (``OpenAI`` and ``AzureOpenAI``) pointed at the fake provider.

``responses.create`` with and without streaming must parse to exactly the recorded response and events
(``web_search_call`` actions, ``url_citation`` annotations); the SDK's retries against a 429 end in the
recorded success; a mid-stream disconnect surfaces as the SDK's ``APIConnectionError``.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from recordings import recorded
from server_support import bundled

from replaykit import cassette
from replaykit.server import FakeProvider, Fault

pytestmark = pytest.mark.both_lanes  # every response the same with the lane and without it

Json = dict[str, Any]
TOOLS: list[Any] = [{"type": "web_search"}]


def _client(fake: FakeProvider, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url("openai"), api_key="dummy", max_retries=retries)


def _events(path: Any, index: int = 0) -> list[Json]:
    response = cassette.load(path).interactions[index].response
    return [event.json() for event in response.events if event.data is not None]


def _actions(response: Json) -> list[Json]:
    return [item["action"] for item in response["output"] if item["type"] == "web_search_call"]


def _citations(response: Json) -> list[Json]:
    return [
        a
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
        for a in part.get("annotations") or []
        if a["type"] == "url_citation"
    ]


def test_create_returns_exactly_the_recorded_responses(serve: Any) -> None:
    path = recorded("pydantic-ai__openai_responses_web_search_allowed_domains.yaml")
    expected = cassette.load(path).interactions[0].response.json()
    with _client(serve(path)) as client:
        got = client.responses.create(model="gpt-5", input="search", tools=TOOLS).to_dict(warnings=False)
    assert got == expected
    assert {a["type"] for a in _actions(got)} >= {"search", "open_page"}


def test_streamed_events_are_the_recorded_events(serve: Any) -> None:
    path = recorded("pydantic-ai__openai_responses_web_search_tool_stream.yaml")
    with _client(serve(path)) as client:
        events = [
            event.to_dict(warnings=False)
            for event in client.responses.create(model="gpt-5", input="q", tools=TOOLS, stream=True)
        ]
        follow_up = client.responses.create(model="gpt-5", input="q2", tools=TOOLS).to_dict(warnings=False)
    recorded_events = _events(path)
    assert events == recorded_events
    assert events[-1]["type"] == "response.completed"
    assert _actions(events[-1]["response"]) == _actions(recorded_events[-1]["response"]) != []
    assert follow_up == cassette.load(path).interactions[1].response.json()


def test_stream_helper_final_response_has_the_citations(serve: Any) -> None:
    path = bundled("openai/web_search_stream.yaml")
    twin = bundled("openai/web_search.yaml")
    with _client(serve(path)) as client, client.responses.stream(model="gpt-5", input="q", tools=TOOLS) as s:
        final = s.get_final_response().to_dict(warnings=False)
    expected = cassette.load(twin).interactions[0].response.json()
    assert _citations(final) == _citations(expected) != []
    assert _actions(final) == _actions(expected) != []


def test_azure_client_on_the_v1_base_url(serve: Any) -> None:
    path = bundled("azure/web_search.yaml")
    fake = serve(path)
    with openai.AzureOpenAI(
        base_url=fake.base_url("azure"), api_key="dummy", api_version="preview", max_retries=0
    ) as client:
        got = client.responses.create(model="my-deployment", input="q", tools=TOOLS).to_dict(warnings=False)
    assert got == cassette.load(path).interactions[0].response.json()
    entry = fake.journal[0]
    assert (entry.route, entry.path, entry.query) == (
        "azure.responses",
        "/openai/v1/responses",
        {"api-version": ["preview"]},
    )
    assert entry.headers["api-key"] == "REDACTED"


def test_azure_client_on_an_endpoint_streams(serve: Any) -> None:
    path = bundled("azure/web_search_stream.yaml")
    fake = serve(path)
    with openai.AzureOpenAI(
        azure_endpoint=fake.env()["AZURE_OPENAI_ENDPOINT"],
        api_key="dummy",
        api_version="2025-04-01-preview",
        max_retries=0,
    ) as client:
        events = [
            e.to_dict(warnings=False)
            for e in client.responses.create(model="dep", input="q", tools=TOOLS, stream=True)
        ]
    assert events == _events(path)
    assert fake.journal[0].path == "/openai/responses"


def test_sdk_retries_a_429_and_gets_the_recorded_success(serve: Any) -> None:
    path = recorded("pydantic-ai__openai_responses_web_search_tool.yaml")
    fake = serve(
        path, faults=[Fault("status", route="openai.responses", nth=1, status=429, retry_after_ms=1)]
    )
    with _client(fake, retries=1) as client:
        got = client.responses.create(model="gpt-5", input="q", tools=TOOLS).to_dict(warnings=False)
    assert got == cassette.load(path).interactions[0].response.json()
    assert [(e.status, e.headers["x-stainless-retry-count"]) for e in fake.journal] == [
        (429, "0"),
        (200, "1"),
    ]


def test_rate_limit_error_carries_the_openai_envelope(serve: Any) -> None:
    fake = serve(
        recorded("pydantic-ai__openai_responses_web_search_tool.yaml"),
        faults=["route=openai,nth=1,status=429,retry_after=0,message=slow down"],
    )
    with _client(fake) as client, pytest.raises(openai.RateLimitError) as caught:
        client.responses.create(model="gpt-5", input="q")
    assert caught.value.body == {
        "message": "slow down",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert caught.value.response.headers["retry-after"] == "0"
    assert caught.value.request_id is not None and caught.value.request_id.startswith("req_")


def test_mid_stream_disconnect_raises_api_connection_error(serve: Any) -> None:
    fake = serve(
        recorded("pydantic-ai__openai_responses_web_search_tool_stream.yaml"),
        faults=["kind=disconnect,after=7"],
    )
    with _client(fake) as client, pytest.raises(openai.APIConnectionError):
        for _ in client.responses.create(model="gpt-5", input="q", stream=True):
            pass
    assert fake.journal[0].outcome == "disconnected"


def test_mid_stream_error_event_reaches_the_sdk(serve: Any) -> None:
    fake = serve(
        recorded("pydantic-ai__openai_responses_web_search_tool_stream.yaml"),
        faults=["kind=error_event,after=4,error_type=server_error,message=boom"],
    )
    with _client(fake) as client:
        events = [
            e.to_dict(warnings=False) for e in client.responses.create(model="gpt-5", input="q", stream=True)
        ]
    assert len(events) == 5
    assert events[-1] == {
        "type": "error",
        "code": "server_error",
        "message": "boom",
        "param": None,
        "sequence_number": events[-2]["sequence_number"] + 1,
    }


def test_response_failed_instead_of_error_event(serve: Any) -> None:
    fake = serve(
        recorded("pydantic-ai__openai_responses_web_search_tool_stream.yaml"),
        faults=["kind=error_event,after=4,as_failed=true"],
    )
    with _client(fake) as client:
        events = [
            e.to_dict(warnings=False) for e in client.responses.create(model="gpt-5", input="q", stream=True)
        ]
    failed = events[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "server_error"
    assert failed["response"]["id"] == events[0]["response"]["id"]
