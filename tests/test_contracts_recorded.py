"""Real recordings and bundled cassettes against the contracts; stream sequence rules; whole interactions."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from recordings import RECORDED, RECORDINGS

from replaykit import cassette, contracts, sse
from replaykit.cassette import Interaction, Request, Response
from replaykit.contracts import Violation, check_interaction
from replaykit.resources import data_dir
from replaykit.verify import check_contracts

BUNDLED = cassette.iter_paths([data_dir("cassettes")])
LLM_STREAM = RECORDED / "llm-anthropic__web_search_stream.yaml"
OPENAI_STREAM = RECORDED / "pydantic-ai__openai_responses_web_search_tool_stream.yaml"


def _violations(path: Path) -> list[tuple[int, Violation]]:
    """The contract errors of a cassette, judged by the profile it declares (strict by default)."""
    loaded = cassette.load(path)
    profile = contracts.profile_of(loaded)
    return [(index, v) for index, item in enumerate(loaded.interactions)
            for v in check_interaction(item, profile=profile) if v.severity == "error"]


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_every_real_recording_meets_the_contracts(path: Path) -> None:
    assert _violations(path) == []


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: str(p.relative_to(data_dir("cassettes"))))
def test_bundled_cassette_meets_the_contracts_except_what_it_lists(path: Path) -> None:
    listed = set(cassette.load(path).meta.extra.get(contracts.EXPECTED_VIOLATIONS, []))
    found = {f"{v.part} {v.pointer}" for _, v in _violations(path)}
    assert found == listed


# ---------------------------------------------------------------- streams


def _stream(path: Path) -> tuple[Interaction, list[dict[str, Any]]]:
    item = next(i for i in cassette.load(path).interactions if i.response.is_stream)
    return item, [e.json() for e in item.response.events if e.data]


def _with_events(item: Interaction, events: list[dict[str, Any]],
                 names: list[str] | None = None) -> Interaction:
    names = names or [str(e.get("type")) for e in events]
    body = sse.serialize(sse.encode(json.dumps(e), name) for e, name in zip(events, names, strict=True))
    response = Response(200, "OK", {"content-type": ["text/event-stream"]}, body)
    return Interaction(item.request, response)


def _sequence(found: list[Violation]) -> list[tuple[int | None, str]]:
    return [(v.event, v.pointer) for v in found if v.keyword in {"sequence", "event", "json"}]


Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]

ANTHROPIC_EDITS: list[tuple[str, Edit, list[tuple[int | None, str]]]] = [
    ("message_start missing", lambda ev: ev[1:], [(0, "/type")]),
    ("message_start twice", lambda ev: ev[:1] + ev[:1] + ev[1:], [(1, "/type")]),
    ("message_stop missing", lambda ev: ev[:-1], [(None, "")]),
    ("event after message_stop", lambda ev: [*ev, ev[-2]], [(None, "/type")]),
    ("delta before its block starts", lambda ev: ev[:1] + ev[2:3] + ev[1:], [(1, "/index")]),
    ("block never stopped", lambda ev: [e for e in ev if e != ev[9]], [(None, "/type")]),
    ("block index skipped", lambda ev: _reindex(ev, 1, 5), [(10, "/index")]),
    ("text delta on a server_tool_use block",
     lambda ev: _set_delta(ev, 2, {"type": "text_delta", "text": "x"}), [(2, "/delta/type")]),
]


def _reindex(events: list[dict[str, Any]], old: int, new: int) -> list[dict[str, Any]]:
    changed = copy.deepcopy(events)
    for event in changed:
        if event.get("index") == old:
            event["index"] = new
    return changed


def _set_delta(events: list[dict[str, Any]], at: int, delta: dict[str, Any]) -> list[dict[str, Any]]:
    changed = copy.deepcopy(events)
    changed[at]["delta"] = delta
    return changed


@pytest.mark.parametrize(("name", "edit", "expected"), ANTHROPIC_EDITS, ids=[e[0] for e in ANTHROPIC_EDITS])
def test_anthropic_sequence_rules(name: str, edit: Edit, expected: list[tuple[int | None, str]]) -> None:
    item, events = _stream(LLM_STREAM)
    assert _sequence(check_interaction(_with_events(item, events))) == []
    found = _sequence(check_interaction(_with_events(item, edit(events))))
    last = len(edit(events)) - 1
    assert [(last if at is None else at, pointer) for at, pointer in expected] == found[:len(expected)], found


def test_anthropic_stream_may_end_with_an_error_event() -> None:
    item, events = _stream(LLM_STREAM)
    cut = [*events[:12], {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    assert check_interaction(_with_events(item, cut)) == []


def test_event_name_must_match_the_data_type() -> None:
    item, events = _stream(LLM_STREAM)
    names = [str(e["type"]) for e in events]
    names[3] = "content_block_stop"
    found = check_interaction(_with_events(item, events, names))
    assert [(v.event, v.pointer, v.keyword) for v in found] == [(3, "/type", "event")]


OPENAI_EDITS: list[tuple[str, Edit, list[tuple[int, str]]]] = [
    ("sequence number repeated", lambda ev: [ev[0], {**ev[1], "sequence_number": 0}, *ev[2:]],
     [(1, "/sequence_number")]),
    ("terminal event missing", lambda ev: ev[:-1], [(59, "")]),
    ("event after the terminal event", lambda ev: [*ev, {**ev[5], "sequence_number": 99}], [(61, "/type")]),
]


@pytest.mark.parametrize(("name", "edit", "expected"), OPENAI_EDITS, ids=[e[0] for e in OPENAI_EDITS])
def test_openai_sequence_rules(name: str, edit: Edit, expected: list[tuple[int, str]]) -> None:
    item, events = _stream(OPENAI_STREAM)
    assert check_interaction(_with_events(item, events)) == []
    assert _sequence(check_interaction(_with_events(item, edit(events)))) == expected


def test_stream_event_violations_carry_the_event_index() -> None:
    item, events = _stream(OPENAI_STREAM)
    broken = copy.deepcopy(events)
    broken[6]["item_id"] = "msg_not_a_search"
    found = check_interaction(_with_events(item, broken))
    assert [(v.part, v.event, v.pointer, v.keyword) for v in found] == [
        ("response", 6, "/item_id", "pattern")]
    assert str(found[0]).startswith("response event 6 /item_id ")


def test_event_data_that_is_not_json_is_reported() -> None:
    item, _ = _stream(LLM_STREAM)
    body = item.response.body.replace(b'data: {"type":"message_stop"', b'data: {"type":message_stop', 1)
    found = check_interaction(Interaction(item.request, Response(200, "OK", item.response.headers, body)))
    assert ("json", "data is not JSON") in [(v.keyword, v.message) for v in found]


# ---------------------------------------------------------------- whole interactions


def _interaction(uri: str, body: Any, status: int, response: Any, stream: bool = False) -> Interaction:
    kind = "text/event-stream" if stream else "application/json"
    raw = response if isinstance(response, bytes) else json.dumps(response).encode()
    return Interaction(Request("POST", uri, {}, json.dumps(body).encode()),
                       Response(status, "", {"content-type": [kind]}, raw))


REQUEST = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


def test_error_status_is_checked_against_the_error_envelope() -> None:
    good = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    assert check_interaction(_interaction("/v1/messages", REQUEST, 429, good)) == []
    bad = {"error": {"message": "slow down"}}  # the OpenAI shape on an Anthropic route
    found = check_interaction(_interaction("/v1/messages", REQUEST, 429, bad))
    assert [(v.part, v.pointer) for v in found] == [("response", "/type"), ("response", "/error/type")]


def test_request_violations_are_marked_as_request() -> None:
    body = {**REQUEST, "messages": [{"role": "user", "content": "hi", "timestamp": 1}]}
    ok = {"type": "error", "error": {"type": "api_error", "message": "x"}}
    found = check_interaction(_interaction("/v1/messages", body, 500, ok))
    assert [(v.part, v.pointer) for v in found] == [("request", "/messages/0/timestamp")]


def test_stream_flag_and_response_kind_must_agree() -> None:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
               "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}
    found = check_interaction(_interaction("/v1/messages", {**REQUEST, "stream": True}, 200, message))
    assert [(v.part, v.keyword) for v in found] == [("response", "stream")]
    assert check_interaction(_interaction("/v1/messages", REQUEST, 200, message)) == []


def test_a_route_that_never_streams_refuses_a_stream() -> None:
    body = sse.encode(json.dumps({"input_tokens": 3}), "message").raw
    found = check_interaction(_interaction("/v1/messages/count_tokens", REQUEST, 200, body, stream=True))
    assert "stream" in [v.keyword for v in found]


def test_unknown_route_and_non_json_body_are_violations() -> None:
    unknown = check_interaction(_interaction("/v1/models", {}, 200, {}))
    assert [(v.keyword, v.message) for v in unknown] == [("route", "no contract covers POST /v1/models")]
    item = Interaction(Request("POST", "/v1/responses", {}, b"not json"),
                       Response(200, "", {"content-type": ["application/json"]}, b"{}"))
    assert next((v.part, v.keyword) for v in check_interaction(item)) == ("request", "json")


# ---------------------------------------------------------------- the verify check


def test_verify_check_findings_and_expected_violations(tmp_path: Path) -> None:
    bad = {"type": "error", "error": {"type": "nope", "message": "x"}}
    item = _interaction("https://api.anthropic.com/v1/messages", REQUEST, 400, bad)
    path = tmp_path / "c.yaml"
    loaded = cassette.Cassette([item])
    [finding] = check_contracts(path, loaded)
    assert (finding.place, finding.code, finding.severity) == ("interactions[0]", "contract", "error")
    assert finding.message.startswith("response /error/type 'nope' is not one of ")
    loaded.meta.extra["x-expected-violations"] = ["response /error/type", "request /model"]
    found = check_contracts(path, loaded)
    assert [(f.place, f.severity) for f in found] == [("interactions[0]", "expected"),
                                                       ("replaykit.x-expected-violations", "error")]
    assert found[1].message.startswith("request /model is listed in x-expected-violations but no longer")


def test_verify_check_places_stream_findings_at_their_event() -> None:
    item, events = _stream(LLM_STREAM)
    broken = copy.deepcopy(events)
    broken[1]["content_block"]["name"] = "web_browse"
    found = check_contracts(Path("x.yaml"), cassette.Cassette([_with_events(item, broken)]))
    assert [(f.place, f.message.split(" '")[0]) for f in found] == [
        ("interactions[0]:events[1]", "response /content_block/name")]
