"""Provider error envelopes and mid-stream error events, checked against the contracts."""

from __future__ import annotations

import json

import pytest

from replaykit import contracts, sse
from replaykit.server import envelopes

STATUSES = (400, 401, 402, 403, 404, 413, 429, 500, 503, 504, 529)


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize(
    ("provider", "kind", "header"),
    [
        ("anthropic", "anthropic.error", "request-id"),
        ("openai", "openai.error", "x-request-id"),
        ("azure", "openai.error", "x-request-id"),
        ("cloudflare", "cloudflare.error", "cf-aig-request-id"),
        ("gemini", "gemini.error", "x-request-id"),
        ("vertex", "gemini.error", "x-request-id"),
    ],
)
def test_error_reply_fits_the_provider_contract(provider: str, kind: str, header: str, status: int) -> None:
    reply = envelopes.error_reply(provider, status)
    body = json.loads(reply.body)
    assert contracts.validate(kind, body) == []
    assert reply.status == status and reply.headers["content-type"] == "application/json"
    assert reply.headers[header]


def test_error_reply_overrides() -> None:
    reply = envelopes.error_reply(
        "anthropic", 429, message="slow", error_type="billing_error", headers={"retry-after": "3"}
    )
    body = json.loads(reply.body)
    assert body["error"] == {"type": "billing_error", "message": "slow"}
    assert body["request_id"] == reply.headers["request-id"]
    assert reply.headers["retry-after"] == "3"
    openai_body = json.loads(envelopes.error_reply("openai", 400, code="bad_thing").body)
    assert openai_body["error"]["code"] == "bad_thing"


@pytest.mark.parametrize(("status", "name"), [(400, "INVALID_ARGUMENT"), (429, "RESOURCE_EXHAUSTED"),
                                            (500, "INTERNAL"), (503, "UNAVAILABLE"),
                                            (418, "INVALID_ARGUMENT")])
def test_google_error_reply_carries_the_code_and_its_status_name(status: int, name: str) -> None:
    body = json.loads(envelopes.error_reply("gemini", status, message="m").body)
    assert body == {"error": {"code": status, "message": "m", "status": name}}
    named = json.loads(envelopes.error_reply("vertex", 400, error_type="FAILED_PRECONDITION").body)
    assert named["error"]["status"] == "FAILED_PRECONDITION"


def test_google_error_event_is_a_bare_data_line_that_fails_the_stream() -> None:
    raw = envelopes.error_event("gemini", error_type="UNAVAILABLE", message="overloaded", sequence_number=3)
    (event,) = sse.parse(raw)
    assert event.event is None and raw.startswith(b"data: {")  # google-genai reads "data: " lines only
    assert event.json() == {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    assert contracts.validate("gemini.stream_event", event.json()) == []
    chunk = b'data: {"candidates": [{"content": {"parts": [{"text": "a"}]}}]}\r\n\r\n'
    assert envelopes.streams_an_error(chunk + raw)
    assert not envelopes.streams_an_error(chunk)
    assert not envelopes.streams_an_error(raw + chunk)


def test_anthropic_error_event() -> None:
    (event,) = sse.parse(envelopes.error_event("anthropic", error_type=None, message="", sequence_number=0))
    assert event.event == "error"
    assert event.json() == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert contracts.validate("anthropic.stream_event", event.json()) == []


def test_openai_error_and_failed_events() -> None:
    (error,) = sse.parse(
        envelopes.error_event("openai", error_type="rate_limit_exceeded", message="m", sequence_number=7)
    )
    assert error.json() == {
        "type": "error",
        "code": "rate_limit_exceeded",
        "message": "m",
        "param": None,
        "sequence_number": 7,
    }
    assert contracts.validate("openai.stream_event", error.json()) == []
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "in_progress",
        "model": "m",
        "output": [],
        "error": None,
    }
    (failed,) = sse.parse(envelopes.failed_event(response, code=None, message="", sequence_number=3))
    data = failed.json()
    assert failed.event == "response.failed" and data["sequence_number"] == 3
    assert data["response"]["status"] == "failed" and data["response"]["error"]["code"] == "server_error"
    assert response["status"] == "in_progress"  # the recorded object is not changed


@pytest.mark.parametrize(
    ("events", "failed"),
    [
        ([("message_start", {"type": "message_start"}), ("message_stop", {"type": "message_stop"})], False),
        ([("message_start", {"type": "message_start"}), ("error", {"type": "error"})], True),
        ([(None, {"type": "response.created"}), (None, {"type": "response.failed"})], True),  # data only
        ([("response.created", {"type": "response.created"}), (None, "not json")], False),
    ],
)
def test_a_stream_that_ends_in_an_error_event_is_a_failure(events: list[tuple[str | None, object]],
                                                         failed: bool) -> None:
    body = b"".join(sse.encode(data if isinstance(data, str) else json.dumps(data), event=name).raw
                    for name, data in events)
    assert envelopes.streams_an_error(body) is failed


def _long_stream(*ending: bytes) -> bytes:
    middle = sse.encode(json.dumps({"type": "content_block_delta", "text": "x" * 100}), event="delta").raw
    return middle * (2 * envelopes.ERROR_TAIL // len(middle)) + b"".join(ending)


def test_only_the_end_of_a_long_stream_is_read_for_its_error() -> None:
    error = sse.encode(json.dumps({"type": "error"}), event="error").raw
    stop = sse.encode(json.dumps({"type": "message_stop"}), event="message_stop").raw
    huge = sse.encode(json.dumps({"type": "delta", "text": "y" * envelopes.ERROR_TAIL}), event="delta").raw
    assert envelopes.streams_an_error(_long_stream(error)) is True
    assert envelopes.streams_an_error(_long_stream(error, stop)) is False  # an error ends a stream
    assert envelopes.streams_an_error(_long_stream(huge)) is False  # the last event fills the tail
    assert envelopes.streams_an_error(_long_stream(huge, error.replace(b"\n", b"\r\n"))) is True


def test_a_chat_stream_ending_in_its_error_line_streams_an_error() -> None:
    chunk = b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[]}\n\n'
    line = envelopes.chat_error_event(error_type=None, message="boom")
    assert line.startswith(b'data: {"error": {"message": "boom", "type": "server_error"')
    assert envelopes.streams_an_error(chunk + line)
    assert not envelopes.streams_an_error(chunk + b"data: [DONE]\n\n")
    assert not envelopes.streams_an_error(b'data: {"error": {"message": "x"}, "choices": []}\n\n')
