"""Gemini generateContent under the contracts: the path, not the body, makes a stream, and a stream's
sequence rules (no terminal event; nothing for a candidate after its finishReason, nothing after an error)."""

from __future__ import annotations

import json
from typing import Any

from replaykit import contracts, routes, sse
from replaykit.cassette import Interaction, Request, Response
from replaykit.contracts.interaction_check import check_interaction

URI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"
BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def _chunk(text: str, finish: str | None = None, index: int = 0) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "index": index}
    return candidate | ({"finishReason": finish} if finish else {})


def _stream(*chunks: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(chunk)}\r\n\r\n".encode() for chunk in chunks)


def _checked(method: str, chunks: list[dict[str, Any]]) -> list[str]:
    request = Request("POST", f"{URI}:{method}", {}, json.dumps(BODY).encode())
    response = Response(200, "OK", {"content-type": ["text/event-stream"]}, _stream(*chunks))
    return [v.message for v in check_interaction(Interaction(request, response))]


def test_a_stream_path_asks_for_the_stream_its_answer_is() -> None:
    chunks = [{"candidates": [_chunk("a")]}, {"candidates": [_chunk("b", "STOP")]}]
    assert _checked("streamGenerateContent?alt=sse", chunks) == []
    assert any("without stream: true" in m for m in _checked("generateContent", chunks))
    assert routes.streams_by_path("/v1beta1/publishers/google/models/m:streamGenerateContent")
    assert not routes.streams_by_path("/v1beta/models/m:generateContent")


def _sequence(*chunks: dict[str, Any]) -> list[str]:
    route = routes.known("POST", f"{URI}:streamGenerateContent")
    assert route is not None
    events = [sse.encode(json.dumps(chunk)) for chunk in chunks]
    return [v.message for v in contracts.check_events(route, events) if v.keyword == "sequence"]


def test_a_candidate_after_its_finish_reason_breaks_the_sequence() -> None:
    finished = {"candidates": [_chunk("a", "STOP")]}
    assert _sequence({"candidates": [_chunk("a")]}, finished) == []
    late = _sequence(finished, {"candidates": [_chunk("more")]})
    assert late == ["candidate 0 goes on after its finishReason (event 0)"]
    assert _sequence(finished, {"candidates": [_chunk("other", index=1)]}) == []  # another candidate


def test_nothing_follows_an_error_chunk() -> None:
    error = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    assert _sequence({"candidates": [_chunk("a")]}, error) == []
    assert _sequence(error, {"candidates": [_chunk("a")]}) == [
        "a chunk after the error chunk (event 0); an error ends the stream"]
