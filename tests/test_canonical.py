"""The canonical view (replaykit.canonical): each rule makes two encodings of one meaning equal, and without
it they differ; an expectation reads the view unless ``raw: true``, which still tells the encodings apart."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from replaykit import canonical as rules
from replaykit.canonical import RULES, canonical, canonical_key, canonical_transcript
from replaykit.scenario import Evidence, Scenario, check_all
from replaykit.server import Entry

JSON = dict[str, Any]
A = "anthropic.messages"
R = "openai.responses"


def _user(content: Any) -> JSON:
    return {"role": "user", "content": content}


# (rule, route, one encoding, another encoding of the same request)
CASES: list[tuple[Any, str, JSON, JSON]] = [
    (rules.a_system_blocks, A, {"system": "Be brief.", "messages": []},
     {"system": [{"type": "text", "text": "Be brief."}], "messages": []}),
    (rules.a_content_blocks, A, {"messages": [_user("hi")]},
     {"messages": [_user([{"type": "text", "text": "hi"}])]}),
    (rules.a_tool_result_blocks, A,
     {"messages": [_user([{"type": "tool_result", "tool_use_id": "t", "content": "42"}])]},
     {"messages": [_user([{"type": "tool_result", "tool_use_id": "t", "is_error": False,
                           "content": [{"type": "text", "text": "42"}]}])]}),
    (rules.a_merge_turns, A, {"messages": [_user([{"type": "text", "text": "a"}]),
                                           _user([{"type": "text", "text": "b"}])]},
     {"messages": [_user([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])]}),
    (rules.a_no_cache_control, A,
     {"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}], "messages": []},
     {"system": [{"type": "text", "text": "s"}], "messages": []}),
    (rules.no_false_stream, A, {"messages": [], "stream": False}, {"messages": []}),
    (rules.o_input_items, R, {"input": "hi"},
     {"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}),
    (rules.o_message_type, R, {"input": [{"role": "user", "content": [{"type": "input_text", "text": "h"}]}]},
     {"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "h"}]}]}),
    (rules.o_instructions, R,
     {"instructions": "Be brief.", "input": [{"type": "message", "role": "user", "content": "hi"}]},
     {"input": [{"type": "message", "role": "developer", "content": "Be brief."},
                {"type": "message", "role": "user", "content": "hi"}]}),
    (rules.o_content_parts, R, {"input": [{"type": "message", "role": "assistant", "content": "ok"}]},
     {"input": [{"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "ok"}]}]}),
    (rules.o_defaults, R, {"input": [], "store": True}, {"input": []}),
]


@pytest.mark.parametrize(("rule", "route", "one", "other"), CASES, ids=[case[0].__name__ for case in CASES])
def test_each_rule_makes_two_encodings_equal_and_without_it_they_differ(
    rule: Any, route: str, one: JSON, other: JSON, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert canonical(route, one) == canonical(route, other)
    monkeypatch.setitem(RULES, route, tuple(r for r in RULES[route] if r is not rule))
    assert canonical(route, one) != canonical(route, other)


def test_the_input_is_never_changed_and_a_null_optional_field_is_absent() -> None:
    body = {"system": "s", "messages": [_user("hi")], "metadata": None}
    before = copy.deepcopy(body)
    assert canonical(A, body) == canonical(A, {"system": "s", "messages": [_user("hi")]})
    assert body == before
    assert canonical("cloudflare.websearch", {"query": "q", "limit": None}) == {"query": "q"}
    assert canonical(A, "not an object") == "not an object"


def test_a_real_difference_stays_a_difference() -> None:
    assert canonical(A, {"messages": [_user("hi")]}) != canonical(A, {"messages": [_user("bye")]})
    later = {"input": [{"type": "message", "role": "user", "content": "hi"},
                       {"type": "message", "role": "developer", "content": "Be brief."}]}
    assert canonical(R, later)["input"][1]["role"] == "developer"  # only a leading one is the system prompt


def test_the_key_of_a_streamed_and_a_plain_request_is_one() -> None:
    body = {"model": "m", "messages": [_user("hi")]}
    assert canonical_key(A, {**body, "stream": True}) == canonical_key(A, body)
    assert canonical_key(A, body) != canonical_key(A, {**body, "model": "n"})


def test_a_transcript_by_meaning_keeps_what_it_says_and_leaves_bookkeeping_out() -> None:
    raw = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    one = {"version": 1, "system": None, "tools": [], "systemHistory": [{"timestamp": 1}],
           "messages": [{"role": "user", "content": "hi", "timestamp": 1},
                        {"role": "assistant", "provider": "anthropic", "api": "anthropic-messages",
                         "model": "m", "stopReason": "stop", "timestamp": 2, "usage": {"input": 5},
                         "content": [{"type": "hostedSearch", "phase": "result", "provider": "anthropic",
                                      "api": "anthropic-messages", "toolUseId": "srvtoolu_1", "results": [],
                                      "raw": raw}]}]}
    other = copy.deepcopy(one)
    del other["systemHistory"], other["version"], other["messages"][1]["content"][0]["results"]
    other["messages"][0]["content"] = [{"type": "text", "text": "hi"}]
    other["messages"][1]["usage"] = {"input": 7}
    assert canonical_transcript(one) == canonical_transcript(other)
    changed = copy.deepcopy(one)
    changed["messages"][1]["content"][0]["raw"]["tool_use_id"] = "srvtoolu_2"
    assert canonical_transcript(one) != canonical_transcript(changed)


def _scenario(tmp_path: Path, **reach: Any) -> Scenario:
    doc = {"name": "s", "kind": "contract", "description": "d",
           "steps": [{"prompt": "p", "provider": "anthropic", "model": "m"}],
           "expectations": {"outcome": "ok", "reaches": [reach]}}
    return Scenario(tmp_path / "s.yaml", doc)


def _seen(body: JSON) -> Evidence:
    entry = Entry(1, "2026-01-01T00:00:00Z", "anthropic", A, "POST", "/v1/messages", {}, {},
                  raw=json.dumps(body).encode(), status=200, verdict="served")
    return Evidence({"status": "ok", "persistWrites": 0}, "", [entry], [], None)


@pytest.mark.parametrize("sent", [{"system": "Be brief.", "messages": []},
                                  {"system": [{"type": "text", "text": "Be brief."}], "messages": []}])
def test_reaches_reads_the_view_and_raw_reads_the_encoding(tmp_path: Path, sent: JSON) -> None:
    by_meaning = _scenario(tmp_path, pointer="/system/0/text", equals="Be brief.")
    assert all(check.ok for check in check_all(by_meaning, _seen(sent)))
    raw = _scenario(tmp_path, pointer="/system", equals="Be brief.", raw=True)
    verdict = [check for check in check_all(raw, _seen(sent)) if check.name == "reaches[0]"]
    assert verdict[0].ok is isinstance(sent["system"], str)  # raw: true still tells the encodings apart
