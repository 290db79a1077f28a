"""Streaming: one HTTP chunk per recorded SSE event, at the chosen timing; bodies framed by the server."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest
from recordings import recorded
from server_support import (
    ANTHROPIC,
    anthropic_message,
    anthropic_request,
    cassette_of,
    json_interaction,
    stream_cassette,
    stream_request,
)

from replaykit import cassette, sse
from replaykit.cassette import Cassette, Interaction, Response
from replaykit.errors import UsageError
from replaykit.server import FakeProvider, Timing, app
from replaykit.server.plan import WRITE_SIZE, Plan, plan_for, replay_headers


def _raw_chunks(fake: FakeProvider) -> list[bytes]:
    url = f"{fake.url}/v1/messages"
    with httpx.Client() as client, client.stream("POST", url, json={"stream": True}) as response:
        return list(response.iter_raw())


def test_iter_raw_gets_one_chunk_per_recorded_event(serve: Any) -> None:
    path = recorded("llm-anthropic__web_search_stream.yaml")
    events = cassette.load(path).interactions[0].response.events
    chunks = _raw_chunks(serve(path))
    assert len(chunks) == len(events) == 120
    assert chunks == [event.raw for event in events]  # padding spaces of the real recording kept


def test_chunks_keep_event_boundaries_of_a_synthesized_stream(serve: Any) -> None:
    body = stream_cassette(text_deltas=40)
    chunks = _raw_chunks(serve(body))
    assert chunks == [event.raw for event in body.interactions[0].response.events]
    assert all(len(sse.parse(chunk)) == 1 for chunk in chunks)


def test_a_long_stream_arrives_whole(serve: Any) -> None:
    body = stream_cassette(text_deltas=5000)
    url = f"{serve(body).url}/v1/messages"
    with httpx.Client() as client, client.stream("POST", url, json=stream_request()) as response:
        received = b"".join(response.iter_bytes())
    assert received == body.interactions[0].response.body


@pytest.fixture
def delivered(monkeypatch: pytest.MonkeyPatch) -> list[Plan]:
    """The plans the server begins, in order: what each response was asked to send, and when."""
    plans: list[Plan] = []
    begin = app.begin

    def spy(*args: Any) -> Any:  # every request is begun here, in the lane or on aiohttp's path
        exchange = begin(*args)
        plans.append(exchange.plan)
        return exchange

    monkeypatch.setattr(app, "begin", spy)
    return plans


def _paced(serve: Any, body: Cassette, timing: str, delivered: list[Plan]) -> list[float]:
    """The offsets (s) the server was asked to honour for ``body``; the chunks arrive one per event, in order.

    No clock is read: on a shared machine measured gaps are noise. ``Timing.offsets`` itself is checked by
    ``test_timing_offsets``; here, that the server plans each response with the timing it was given.
    """
    assert _raw_chunks(serve(body, timing=timing)) == [e.raw for e in body.interactions[0].response.events]
    (plan,) = delivered
    return plan.due


def test_fixed_timing_spaces_the_events(serve: Any, delivered: list[Plan]) -> None:
    due = _paced(serve, stream_cassette(text_deltas=2), "fixed:30", delivered)
    assert due == pytest.approx([0.03 * i for i in range(7)])
    assert not delivered[0].batch  # written event by event, each at its time


def test_recorded_timing_replays_the_offsets(serve: Any, delivered: list[Plan]) -> None:
    offsets = [0, 0, 120, 120, 120, 240]
    due = _paced(serve, stream_cassette(text_deltas=1, offsets=offsets), "recorded", delivered)
    assert due == pytest.approx([0, 0, 0.12, 0.12, 0.12, 0.24])
    assert not delivered[0].batch


def test_fast_timing_ignores_the_offsets(serve: Any, delivered: list[Plan]) -> None:
    body = stream_cassette(text_deltas=1, offsets=[0, 0, 5000, 5000, 5000, 9000])
    assert _paced(serve, body, "fast", delivered) == [0.0] * 6  # the recorded offsets would take 9 s
    assert delivered[0].batch


@pytest.mark.parametrize("text", ["slow", "fixed", "fixed:", "fixed:-1", "fixed:nan", "recorded:5"])
def test_timing_syntax_is_checked(text: str) -> None:
    with pytest.raises(UsageError, match="fast, recorded or fixed:<ms>"):
        Timing.parse(text)


def test_timing_offsets() -> None:
    assert Timing.parse("fixed:10").offsets(3, None) == [0.0, 0.01, 0.02]
    assert Timing.parse("recorded").offsets(3, [5, 10]) == [0.005, 0.01, 0.01]
    assert Timing.parse("recorded").offsets(4, [5, 10, 20]) == [0.005, 0.01, 0.02, 0.02]  # the last one known
    assert Timing.parse("recorded").offsets(2, None) == [0.0, 0.0]
    assert Timing.parse("fast").offsets(2, [100, 200]) == [0.0, 0.0]


def test_non_stream_body_is_served_decoded_with_its_recorded_headers(serve: Any) -> None:
    body = json.dumps(anthropic_message("zipped")).encode()
    headers = {
        "content-type": ["application/json"],
        "content-encoding": ["gzip"],
        "content-length": [str(len(gzip.compress(body)))],
        "request-id": ["req_recorded"],
        "transfer-encoding": ["chunked"],
        "x-custom": ["a", "b"],
    }
    item = Interaction(
        json_interaction(ANTHROPIC, anthropic_request(), {}).request, Response(200, "OK", headers, body)
    )
    fake = serve(cassette_of(item))
    raw = httpx.post(f"{fake.url}/v1/messages", headers={"accept-encoding": "gzip"})
    assert raw.headers.get("content-encoding") is None
    assert raw.headers["content-length"] == str(len(body))
    assert raw.headers["request-id"] == "req_recorded"
    assert raw.headers.get_list("x-custom") == ["a", "b"]
    assert raw.content == body


def test_a_body_is_planned_as_recorded_in_slices_of_at_most_one_write_size() -> None:
    """Up to :data:`WRITE_SIZE` the body is one chunk, the recorded bytes themselves (they leave with the
    body's end in one write); a longer one goes in slices of that size, in order."""
    item = json_interaction(ANTHROPIC, anthropic_request(), {}, headers={"request-id": ["req_1"]})
    response = item.response
    response.body = bytes(range(256)) * (WRITE_SIZE // 256)
    plan = plan_for(response, Timing.parse("fast"), "anthropic")
    assert len(plan.chunks) == 1 and plan.chunks[0] is response.body and plan.length == WRITE_SIZE
    assert plan.stream is False and plan.provider == "anthropic" and plan.headers == replay_headers(response)
    response.body += b"tail"
    sliced = plan_for(response, Timing.parse("fast"), "anthropic").chunks
    assert [bytes(chunk) for chunk in sliced] == [response.body[:WRITE_SIZE], b"tail"]
    response.body = response.body * 2
    sliced = plan_for(response, Timing.parse("fast"), "anthropic").chunks
    assert [len(chunk) for chunk in sliced] == [WRITE_SIZE, WRITE_SIZE, 8]
    assert b"".join(sliced) == response.body


def test_a_recorded_gzip_cassette_is_served_as_plain_json(serve: Any, tmp_path: Any) -> None:
    payload = json.dumps(anthropic_message("from gzip")).encode()
    item = json_interaction(ANTHROPIC, anthropic_request(), {})
    item.response = Response(
        200,
        "OK",
        {"content-type": ["application/json"], "content-encoding": ["gzip"]},
        gzip.compress(payload),
    )
    path = tmp_path / "gz.yaml"
    path.write_text(_vcr_yaml(item), encoding="utf-8")
    served = httpx.post(f"{serve(path).url}/v1/messages")
    assert served.json() == json.loads(payload)
    assert "content-encoding" not in served.headers


def _vcr_yaml(item: Interaction) -> str:
    import yaml

    doc = {
        "version": 1,
        "interactions": [
            {
                "request": {"method": "POST", "uri": item.request.uri, "headers": {}, "body": "{}"},
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": item.response.headers,
                    "body": {"string": item.response.body},
                },
            }
        ],
    }
    return yaml.safe_dump(doc)
