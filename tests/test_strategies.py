"""replaykit.strategies: what they draw is what they promise, and bad arguments fail up front."""

from __future__ import annotations

import base64
import copy
import json
import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from replaykit import strategies as rs
from replaykit.errors import LocalRequestError
from replaykit.estimate import CJK, find_anchor, to_target, usage_tokens
from replaykit.replay import project
from replaykit.transcript import restore

JSON = dict[str, Any]
FAST = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _blocks(transcript: JSON) -> list[JSON]:
    return [block for message in transcript["messages"] if message["role"] == "assistant"
            for block in message["content"]]


# ---------------------------------------------------------------- transcripts are contract-valid


@FAST
@given(rs.transcripts())
def test_every_transcript_restores(transcript: JSON) -> None:
    assert restore(transcript) is transcript
    stamps = [message["timestamp"] for message in transcript["messages"]]
    assert stamps == sorted(stamps) and all(math.isfinite(stamp) for stamp in stamps)


def test_the_restore_check_above_fails_on_a_broken_transcript() -> None:
    broken = {"version": 1, "messages": [{"role": "assistant", "content": {"type": "text"}, "timestamp": 1}]}
    with pytest.raises(LocalRequestError):
        restore(broken)


@FAST
@given(rs.transcripts(min_messages=1, providers=["openai"], search=False, usage="zero"))
def test_transcripts_follow_their_arguments(transcript: JSON) -> None:
    assert transcript["messages"]
    for message in transcript["messages"]:
        if message["role"] == "assistant":
            assert message["provider"] == "openai" and usage_tokens(message) is None
    assert not [block for block in _blocks(transcript) if block["type"] == "hostedSearch"]


def test_transcripts_draw_every_kind_of_search_block_and_usage() -> None:
    seen: set[tuple[str, ...]] = set()

    @settings(max_examples=150, deadline=None, database=None)
    @given(rs.transcripts(min_messages=3))
    def collect(transcript: JSON) -> None:
        for block in _blocks(transcript):
            if block["type"] == "hostedSearch":
                seen.add(("search", block["phase"], "raw" if "raw" in block else "display"))
        for message in transcript["messages"]:
            if message["role"] == "assistant":
                seen.add(("usage", "valid" if usage_tokens(message) else "invalid"))

    collect()
    assert {("search", "call", "raw"), ("search", "result", "raw"), ("search", "error", "raw"),
            ("search", "result", "display"), ("usage", "valid"), ("usage", "invalid")} <= seen


# ---------------------------------------------------------------- the pieces


@FAST
@given(rs.hosted_search_blocks(named=False))
def test_nameless_blocks_have_no_name_anywhere(block: JSON) -> None:
    assert "name" not in block and "name" not in block.get("raw", {})


@FAST
@given(rs.hosted_search_blocks(named=True))
def test_named_blocks_are_anthropic_calls_with_raw(block: JSON) -> None:
    assert block["raw"]["name"] == "web_search" and block["phase"] == "call"


@FAST
@given(rs.hosted_search_blocks(raw=False))
def test_display_only_blocks_have_no_raw(block: JSON) -> None:
    assert "raw" not in block


@FAST
@given(rs.hosted_search_blocks("anthropic", "result", raw=True))
def test_anthropic_results_carry_encrypted_content_and_legacy_ones_no_results(block: JSON) -> None:
    assert block["raw"]["tool_use_id"] == block["toolUseId"]
    assert all(item["encrypted_content"] for item in block["raw"]["content"])
    if "results" in block:
        assert [item["url"] for item in block["results"]] == [item["url"] for item in block["raw"]["content"]]


@FAST
@given(rs.cjk_text(min_size=1))
def test_cjk_text_is_all_cjk(text: str) -> None:
    assert len(CJK.findall(text)) == len(text)


@FAST
@given(rs.mixed_text())
def test_mixed_text_survives_json(text: str) -> None:
    assert json.loads(json.dumps(text)) == text
    text.encode("utf-8")  # no lone surrogate


@pytest.mark.parametrize(("kind", "valid"), [("valid", True), ("zero", False), ("nan", False),
                                             ("infinite", False)])
def test_usages_of_each_kind(kind: str, valid: bool) -> None:
    @FAST
    @given(rs.usages(kind))
    def check(usage: JSON) -> None:
        message = {"role": "assistant", "usage": usage, "stopReason": "stop", "timestamp": 1}
        assert (usage_tokens(message) is not None) == valid
        assert set(usage) == set(rs.USAGE_FIELDS)

    check()


@FAST
@given(st.data())
def test_openai_citations_stay_inside_the_text(data: st.DataObject) -> None:
    length = data.draw(st.integers(0, 50))
    citation = data.draw(rs.citations("openai", length))
    assert 0 <= citation["start_index"] <= citation["end_index"] <= length


@FAST
@given(st.binary(max_size=80), st.data())
def test_rechunkings_rebuild_the_stream(stream: bytes, data: st.DataObject) -> None:
    chunks = data.draw(rs.rechunkings(stream))
    assert b"".join(chunks) == stream
    assert all(chunks) and (len(chunks) >= 1 or not stream)


def test_rechunkings_can_cut_inside_a_utf8_character_and_a_crlf() -> None:
    stream = "data: 今\r\n\r\n".encode()
    cuts: set[int] = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(rs.rechunkings(stream, min_chunks=2))
    def collect(chunks: list[bytes]) -> None:
        cuts.add(len(chunks[0]))

    collect()
    assert {7, 10} <= cuts  # mid-character (今 is bytes 6..8), between \r and \n


# ---------------------------------------------------------------- system changes


@FAST
@given(rs.transcripts(min_messages=1).flatmap(lambda t: st.tuples(st.just(t), rs.system_changes(t))))
def test_system_changes_log_the_rebuild_after_every_message(pair: tuple[JSON, tuple[str, JSON]]) -> None:
    original, (kind, changed) = pair
    history = changed["systemHistory"]
    assert history[0] == {"timestamp": original["messages"][0]["timestamp"], "system": original["system"],
                          "tools": original["tools"]}
    assert history[-1]["timestamp"] > max(message["timestamp"] for message in changed["messages"])
    assert (history[-1]["system"], history[-1]["tools"]) == (changed["system"], changed["tools"])
    unchanged = (changed["system"], changed["tools"]) == (original["system"], original["tools"])
    assert unchanged == (kind == "rebuild")
    assert restore(changed) is changed
    assert original.get("systemHistory") is None  # the input is never mutated


def test_a_rebuild_keeps_a_valid_anchor_and_a_change_drops_it() -> None:
    base = {"version": 1, "system": "S", "tools": [], "messages": [
        {"role": "assistant", "content": [], "provider": "anthropic", "api": "anthropic-messages",
         "model": "m", "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
         "stopReason": "stop", "timestamp": 5}]}
    for kind in rs.SYSTEM_CHANGES:
        @settings(max_examples=10, deadline=None, database=None)
        @given(rs.system_changes(copy.deepcopy(base), [kind]))
        def check(pair: tuple[str, JSON]) -> None:
            assert (find_anchor(pair[1]) is not None) == (pair[0] == "rebuild")

        check()


# ---------------------------------------------------------------- argument checks


@pytest.mark.parametrize(("build", "message"), [
    (lambda: rs.transcripts(max_messages=-1), "max_messages=-1 must not be negative."),
    (lambda: rs.transcripts(min_messages=3, max_messages=2),
     "min_messages=3 must not exceed max_messages=2."),
    (lambda: rs.transcripts(usage="huge"), "usage='huge' must be None or one of"),
    (lambda: rs.transcripts(providers=[]), "providers=[] must be a non-empty list"),
    (lambda: rs.transcripts(providers=["cohere"]), "providers[]='cohere' must be None or one of"),
    (lambda: rs.mixed_text(min_size=1.5),  # type: ignore[arg-type]
     "min_size=1.5 must be an integer."),
    (lambda: rs.cjk_text(max_size=-2), "max_size=-2 must not be negative."),
    (lambda: rs.usages("negative"), "kind='negative' must be None or one of"),
    (lambda: rs.citations("cohere"), "provider='cohere'"),
    (lambda: rs.citations("openai", -1), "text_length=-1 must not be negative."),
    (lambda: rs.hosted_search_blocks(phase="start"), "phase='start'"),
    (lambda: rs.hosted_search_blocks(raw="yes"),  # type: ignore[arg-type]
     "raw='yes' must be True, False or None."),
    (lambda: rs.hosted_search_blocks("openai", named=True), "named blocks are Anthropic calls with raw"),
    (lambda: rs.hosted_search_blocks(phase="result", named=True), "named blocks are Anthropic calls"),
    (lambda: rs.assistant_messages(stop_reasons=["done"]), "stop_reasons[]='done'"),
    (lambda: rs.assistant_messages(timestamp=1.5),  # type: ignore[arg-type]
     "timestamp=1.5 must be an integer"),
    (lambda: rs.user_messages(timestamp="now"),  # type: ignore[arg-type]
     "timestamp='now'"),
    (lambda: rs.targets(providers="anthropic"), "providers='anthropic' must be a non-empty list"),
    (lambda: rs.system_changes({"messages": []}, ["reorder"]), "kinds[]='reorder'"),
    (lambda: rs.system_changes([], ["rebuild"]),  # type: ignore[arg-type]
     "transcript=[] must be a transcript object."),
    (lambda: rs.rechunkings("text"),  # type: ignore[arg-type]
     "data='text' must be bytes."),
    (lambda: rs.rechunkings(b"ab", min_chunks=3), "min_chunks=3 must not exceed len(data)=2."),
    (lambda: rs.rechunkings(b"abc", min_chunks=3, max_chunks=2),
     "min_chunks=3 must not exceed max_chunks=2."),
])
def test_bad_arguments_fail_when_the_strategy_is_made(build: Any, message: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        build()
    assert message in str(caught.value)
    assert isinstance(caught.value, TypeError)


# ---------------------------------------------------------------- real-looking content


@FAST
@given(st.sampled_from(["prose", "code", "japanese", "chinese", "korean"]).flatmap(
    lambda kind: st.tuples(st.just(kind), rs.passages(kind, 2, 5))))
def test_passages_are_runs_of_consecutive_lines(drawn: tuple[str, str]) -> None:
    kind, text = drawn
    lines = rs.PASSAGES[kind]
    joiner = rs._JOINS[kind]
    runs = {joiner.join(lines[(start + n) % len(lines)] for n in range(count))
            for start in range(len(lines)) for count in range(2, 6)}
    assert text in runs


@FAST
@given(rs.passages("cjk"))
def test_cjk_passages_are_mostly_cjk(text: str) -> None:
    assert len(CJK.findall(text)) > 0.7 * len(text)


@FAST
@given(rs.web_urls(), rs.encrypted(10, 40))
def test_urls_are_urls_and_encrypted_fields_base64(url: str, secret: str) -> None:
    assert re.fullmatch(r"https://[a-z.]+/[\w./-]+([?#][\w.=-]+)?", url), url
    assert 10 <= len(base64.b64decode(secret, validate=True)) <= 40


@FAST
@given(rs.targets(), st.sampled_from(rs.CONTENT_KINDS).flatmap(
    lambda kind: st.tuples(st.just(kind), rs.rich_messages(kind))))
def test_rich_messages_restore_project_and_never_anchor(target: JSON, drawn: tuple[str, list[JSON]]) -> None:
    kind, messages = drawn
    transcript = {"version": 1, "system": None, "tools": [], "messages": messages}
    assert restore(transcript) is transcript and find_anchor(transcript) is None
    project(transcript, to_target(target))
    blocks = {block["type"] for message in messages if message["role"] == "assistant"
              for block in message["content"]}
    if kind == "search":
        assert blocks & {"hostedSearch", "toolCall"}
    elif kind == "opaque":
        assert blocks == {"providerBlock"}
    else:
        assert messages[0]["role"] == "user" and blocks == {"text"}


@FAST
@given(rs.rich_messages("opaque", "azure"))
def test_opaque_content_is_of_the_provider_asked(messages: list[JSON]) -> None:
    assert {block["provider"] for message in messages for block in message["content"]} == {"azure"}


@pytest.mark.parametrize(("build", "message"), [
    (lambda: rs.passages("latin"), "kind='latin' must be one of"),
    (lambda: rs.passages("prose", 0), "min_lines=0 must be at least 1."),
    (lambda: rs.passages("prose", 5, 4), "min_lines=5 must not exceed max_lines=4."),
    (lambda: rs.encrypted(-1), "min_bytes=-1 must not be negative."),
    (lambda: rs.rich_messages("images"), "kind='images'"),
    (lambda: rs.rich_messages("search", "cohere"), "provider='cohere'"),
])
def test_bad_content_arguments_fail_when_the_strategy_is_made(build: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        build()


# ---------------------------------------------------------------- Gemini and Chat Completions


def test_targets_cover_every_provider_on_every_api() -> None:
    seen: set[tuple[str, str]] = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(rs.targets())
    def collect(target: JSON) -> None:
        to_target(target)  # a valid ProviderModel
        seen.add((target["provider"], target["api"]))

    collect()
    assert seen == set(rs.SOURCES)
    assert {("gemini", "gemini-generate"), ("vertex", "gemini-generate"), ("openai", "openai-chat"),
            ("azure", "openai-chat")} <= seen


def test_transcripts_draw_the_search_blocks_of_the_new_apis() -> None:
    seen: set[tuple[str, str]] = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(rs.transcripts(min_messages=3, providers=["gemini", "openai"]))
    def collect(transcript: JSON) -> None:
        for block in _blocks(transcript):
            if block["type"] == "hostedSearch" and "raw" in block:
                seen.add((block["api"], block["phase"]))
                if block["api"] == "gemini-generate":
                    assert "webSearchQueries" in block["raw"]  # the candidate's groundingMetadata
                if block["api"] == "openai-chat":
                    assert set(block["raw"]) == {"citations", "search_results"}  # Perplexity's top level

    collect()
    assert {("gemini-generate", "result"), ("openai-chat", "result")} <= seen
    assert ("gemini-generate", "call") not in seen  # display-only: the query is in the result


@FAST
@given(st.data())
def test_chat_and_gemini_citations_stay_inside_the_text(data: st.DataObject) -> None:
    length = data.draw(st.integers(0, 50))
    chat = data.draw(rs.citations("openai", length, api="openai-chat"))
    assert chat["type"] == "url_citation"
    assert 0 <= chat["url_citation"]["start_index"] <= chat["url_citation"]["end_index"] <= length
    segment = data.draw(rs.citations("gemini", length))["segment"]
    assert 0 <= segment["startIndex"] <= segment["endIndex"] <= length


def test_citations_check_the_api_fits_the_provider() -> None:
    with pytest.raises(InvalidArgument, match="api='gemini-generate'"):
        rs.citations("openai", api="gemini-generate")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["gemini", "vertex", "openai", "azure"]).flatmap(
    lambda provider: rs.rich_messages("search", provider)))
def test_rich_search_turns_of_the_new_apis_restore_and_project(messages: list[JSON]) -> None:
    transcript = {"version": 1, "system": None, "tools": [], "messages": messages}
    restore(transcript)
    for target in ({"provider": "gemini", "api": "gemini-generate", "model": "m"},
                   {"provider": "anthropic", "api": "anthropic-messages", "model": "m"},
                   {"provider": "openai", "api": "openai-chat", "model": "m"}):
        project(transcript, to_target(target))
