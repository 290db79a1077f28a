"""replaykit.contracts.streams: each provider's sequence rules on synthetic streams, message by message (the
recorded streams under them are in test_contracts_recorded.py, Gemini's in test_contracts_gemini.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from replaykit import contracts, routes, sse
from replaykit.contracts.streams import check_events

ANTHROPIC = "https://api.anthropic.com/v1/messages"
RESPONSES = "https://api.openai.com/v1/responses"
CHAT = "https://api.openai.com/v1/chat/completions"
GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent"
Found = list[tuple[int | None, str, str]]


def _route(uri: str) -> routes.Route:
    route = routes.known("POST", uri)
    assert route is not None
    return route


def _events(events: list[Any], names: list[str | None] | None = None) -> list[sse.Event]:
    return [sse.encode(e if isinstance(e, str) else json.dumps(e), name)
            for e, name in zip(events, names or [None] * len(events), strict=True)]


def _sequence(uri: str, events: list[Any], names: list[str | None] | None = None) -> Found:
    """The (event, pointer, message) of the violations that are not the schema's."""
    found = check_events(_route(uri), _events(events, names))
    return [(v.event, v.pointer, v.message) for v in found if v.keyword in ("sequence", "json", "event")]


START = {"type": "message_start", "message": {}}
STOP = {"type": "message_stop"}


def _block(index: int, kind: str = "text") -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": {"type": kind}}


def _delta(index: int, kind: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind}}


def _stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def test_a_route_that_never_streams_is_one_stream_violation() -> None:
    route = _route("https://api.anthropic.com/v1/messages/count_tokens")
    for checked in (route, replace(route, contracts=None)):  # no stream contract, or none at all
        assert [(v.pointer, v.keyword, v.message) for v in check_events(checked, [])] == [
            ("", "stream", "anthropic.count_tokens does not stream")]


def test_an_empty_stream_breaks_no_sequence_rule() -> None:
    for uri in (ANTHROPIC, RESPONSES, CHAT, GEMINI):
        assert check_events(_route(uri), []) == []


def test_anthropic_a_clean_stream_with_every_block_kind() -> None:
    events = [START, {"type": "ping"}]
    for index, (kind, delta) in enumerate([("text", "text_delta"), ("text", "citations_delta"),
                                           ("thinking", "thinking_delta"), ("thinking", "signature_delta"),
                                           ("tool_use", "input_json_delta"),
                                           ("server_tool_use", "input_json_delta"),
                                           ("web_search_tool_result", "anything_delta")]):
        events += [_block(index, kind), _delta(index, delta), _stop(index)]
    assert _sequence(ANTHROPIC, [*events, {"type": "message_delta"}, STOP, {"type": "ping"}]) == []


def test_anthropic_message_start_comes_first_and_once() -> None:
    assert _sequence(ANTHROPIC, [{"type": "ping"}, START, START, STOP]) == [
        (0, "/type", "the stream starts with 'ping'; message_start must come first"),
        (1, "/type", "a second message_start; a stream carries one message"),
        (2, "/type", "a second message_start; a stream carries one message")]


def test_anthropic_blocks_open_in_order_and_are_paired_by_index() -> None:
    events = [START, _block(1), _block(0), _block(0), _delta(3, "text_delta"), _stop(3),
              _delta(0, "input_json_delta"), _stop(0), _stop(0), STOP]
    assert _sequence(ANTHROPIC, events) == [
        (1, "/index", "content_block_start for index 1; the next block is 0"),
        (2, "/index", "content_block_start for index 0; the next block is 2"),
        (3, "/index", "content_block_start for index 0; the next block is 2"),
        (4, "/index", "content_block_delta for block 3, which is not open"),
        (5, "/index", "content_block_stop for block 3, which is not open"),
        (6, "/delta/type", "'inpu…ta' (16 chars) cannot extend a 'text' block"),
        (8, "/index", "content_block_stop for block 0, which is not open"),
        (9, "/type", "message_stop while blocks [1] are still open")]


def test_anthropic_a_block_index_defaults_to_zero_and_one_not_an_integer_is_the_schema_s() -> None:
    no_index = [{k: v for k, v in event.items() if k != "index"}
                for event in (_block(0, "tool_use"), _delta(0, "text_delta"), _stop(0))]
    assert _sequence(ANTHROPIC, [START, *no_index, STOP]) == [
        (2, "/delta/type", "'text_delta' cannot extend a 'tool_use' block")]
    odd = [{**_block(0), "content_block": "x"}, {**_delta(0, ""), "delta": "x"}, _stop(0)]
    assert _sequence(ANTHROPIC, [START, *odd, STOP]) == []  # not objects: the schema says so
    assert _sequence(ANTHROPIC, [START, {**_block(0), "index": "0"}, STOP]) == []


def test_anthropic_nothing_but_a_ping_after_message_stop_or_an_error() -> None:
    late = {"type": "message_delta"}
    assert _sequence(ANTHROPIC, [START, STOP, {"type": "ping"}, late]) == [
        (3, "/type", "'mess…ta' (13 chars) after message_stop; message_stop ends the stream")]
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert _sequence(ANTHROPIC, [START, error]) == []
    assert _sequence(ANTHROPIC, [START, error, late]) == [
        (2, "/type", "'mess…ta' (13 chars) after an error event; an error event ends the stream")]


def test_anthropic_a_stream_without_message_stop_is_flagged_at_its_last_event() -> None:
    assert _sequence(ANTHROPIC, [START, {"type": "ping"}, {"type": "ping"}]) == [
        (2, "", "the stream ends without message_stop (or an error event)")]


def _response_event(kind: str, number: object) -> dict[str, Any]:
    return {"type": kind, "sequence_number": number}


def test_openai_sequence_numbers_increase_and_one_terminal_event_ends_the_stream() -> None:
    events = [_response_event("response.created", 0), _response_event("response.in_progress", 0),
              _response_event("response.in_progress", "x"), _response_event("response.in_progress", 2),
              _response_event("response.completed", 1), _response_event("error", 5)]
    assert _sequence(RESPONSES, events) == [
        (1, "/sequence_number", "0 does not increase on the previous 0"),
        (4, "/sequence_number", "1 does not increase on the previous 2"),
        (5, "/type", "'error' after the terminal event 'response.completed' (event 4)")]


@pytest.mark.parametrize("terminal", ["response.completed", "response.failed", "response.incomplete",
                                      "error"])
def test_openai_each_terminal_event_ends_the_stream(terminal: str) -> None:
    events = [_response_event("response.created", 0), _response_event(terminal, 1)]
    assert _sequence(RESPONSES, events) == []
    assert _sequence(RESPONSES, events[:1]) == [
        (0, "", "the stream has no terminal event (response.completed, response.failed, "
                "response.incomplete or error)")]


def test_chat_nothing_follows_done() -> None:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}
    assert _sequence(CHAT, [chunk, " [DONE] "]) == []
    assert _sequence(CHAT, [chunk, "[DONE]", chunk, "[DONE]"]) == [
        (2, "", "an event after data: [DONE] (event 1); [DONE] ends the stream"),
        (3, "", "an event after data: [DONE] (event 1); [DONE] ends the stream")]


def test_done_is_not_json_outside_chat() -> None:
    assert _sequence(RESPONSES, ["[DONE]", "[DONE]"]) == [(0, "", "data is not JSON"),
                                                          (1, "", "data is not JSON")]


def _candidate(index: int | None = None, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": "a"}]}}
    numbered = candidate | ({} if index is None else {"index": index})
    return numbered | ({"finishReason": finish} if finish else {})


def test_gemini_a_candidate_ends_at_its_finish_reason_and_an_error_ends_all() -> None:
    events = [{"candidates": [_candidate(), _candidate(1)]}, {"candidates": [_candidate(finish="STOP")]},
              {"candidates": [_candidate(1), _candidate(0)]}, {"candidates": "x"},
              {"error": {"code": 500, "message": "x", "status": "INTERNAL"}},
              {"error": {"code": 500, "message": "y", "status": "INTERNAL"}}, {"candidates": []}]
    assert _sequence(GEMINI, events) == [
        (2, "/candidates/1", "candidate 0 goes on after its finishReason (event 1)"),
        (5, "", "a chunk after the error chunk (event 4); an error ends the stream"),
        (6, "", "a chunk after the error chunk (event 4); an error ends the stream")]


def test_the_sse_event_name_must_be_the_data_s_type() -> None:
    events = [START, STOP]
    assert _sequence(ANTHROPIC, events, ["message_start", None]) == []
    assert _sequence(ANTHROPIC, events, ["message_start", "ping"]) == [
        (1, "/type", "the SSE event name is 'ping' but the data's type is 'mess…op' (12 chars)")]
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}
    assert _sequence(CHAT, [chunk], ["message"]) == []  # no type in the data: nothing to match


def test_json_nested_too_deep_says_so_and_a_keepalive_is_skipped() -> None:
    deep = "[" * 10_000 + "]" * 10_000
    events = [sse.encode(json.dumps(START)), sse.encode(comments=["keepalive"]), sse.encode(deep),
              sse.encode(json.dumps(STOP))]
    found = [(v.event, v.pointer, v.message[:25]) for v in check_events(_route(ANTHROPIC), events)
             if v.keyword == "json"]
    assert found == [(2, "", "data: JSON nested deeper ")]


def test_events_are_checked_against_the_profile_given() -> None:
    done = {"id": "58cb9740-f356-49e9-b71e-a02a1376c1b9", "object": "chat.completion.done", "created": 1,
            "model": "m", "choices": []}
    found = check_events(_route(CHAT), _events([done]), contracts.default(), contracts.OPENAI_COMPATIBLE)
    assert {v.severity for v in found} == {"warning"} and all(v.event == 0 for v in found)
