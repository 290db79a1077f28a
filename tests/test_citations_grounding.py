"""Citation verification of Gemini grounding supports and Chat Completions ``url_citation`` annotations.

Gemini's segment offsets count UTF-8 bytes (the SDK's ``Segment``: "measured in bytes"; real Japanese answers
misplaced gemini-cli's markers until it read them as bytes, google-gemini/gemini-cli#5955); the fixture's text
is not ASCII, so character offsets are caught.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_transcript_chat import completion, perplexity
from test_transcript_gemini import ANSWER, SENTENCES, chunks, response

from replaykit.citations import verify_chat_completion, verify_gemini_response, verify_transcript
from replaykit.search import Finding
from replaykit.transcript import from_chat, from_gemini, gemini_final_response

JSON = dict[str, Any]
SUPPORTS = "/candidates/0/groundingMetadata/groundingSupports"
CITES = "/messages/0/content/4/citations"  # two search calls, the result, the thinking, then the text
ANN = "/choices/0/message/annotations/0/url_citation"


def _found(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.place, f.code) for f in findings]


def _transcript(*messages: JSON) -> JSON:
    return {"version": 1, "messages": list(messages)}


def _with_supports(supports: list[JSON]) -> JSON:
    body = response()
    body["candidates"][0]["groundingMetadata"]["groundingSupports"] = supports
    return body


def _support(start: int, end: int, text: str, chunks_: list[int] | None = None) -> JSON:
    return {"segment": {"partIndex": 1, "startIndex": start, "endIndex": end, "text": text},
            "groundingChunkIndices": [0] if chunks_ is None else chunks_}


def test_grounded_answers_verify_plain_streamed_and_converted() -> None:
    assert verify_gemini_response(response()) == []
    assert verify_gemini_response(gemini_final_response(chunks())) == []
    assert verify_transcript(_transcript(from_gemini(response(), timestamp=1))) == []


def test_character_offsets_are_caught_where_bytes_and_characters_differ() -> None:
    first = SENTENCES[0]
    assert len(first) != len(first.encode("utf-8"))  # "ü": one character, two bytes
    by_chars = _with_supports([_support(0, len(first), first)])
    mismatch = [(f"{SUPPORTS}/0/segment/text", "segment-text-mismatch")]
    assert _found(verify_gemini_response(by_chars)) == mismatch
    whole = _with_supports([_support(0, len(ANSWER.encode()) + 1, ANSWER)])
    assert _found(verify_gemini_response(whole)) == [(f"{SUPPORTS}/0/segment/endIndex", "span-out-of-range")]


def test_an_offset_inside_a_character_is_caught() -> None:
    split = _with_supports([_support(2, 8, "rich")])  # byte 2 is the second byte of "ü"
    assert _found(verify_gemini_response(split)) == [(f"{SUPPORTS}/0/segment", "span-splits-character")]


def test_a_support_pointing_past_the_chunks_is_rejected_at_its_index() -> None:
    body = response()
    body["candidates"][0]["groundingMetadata"]["groundingSupports"][1]["groundingChunkIndices"] = [0, 2]
    expected = "chunk-index-out-of-range"
    assert _found(verify_gemini_response(body)) == [(f"{SUPPORTS}/1/groundingChunkIndices/1", expected)]
    message = from_gemini(body, timestamp=1)
    place = f"{CITES}/1/groundingChunkIndices/1"
    assert _found(verify_transcript(_transcript(message))) == [(place, expected)]


def test_supports_without_a_grounding_result_point_at_no_chunk() -> None:
    message = from_gemini(response(), timestamp=1)
    message["content"] = [block for block in message["content"] if block["type"] != "hostedSearch"]
    codes = {finding.code for finding in verify_transcript(_transcript(message))}
    assert codes == {"chunk-index-out-of-range"}


@pytest.mark.parametrize("part", [5, 0])  # past the parts; the thought summary
def test_a_support_naming_no_answer_text_part_is_caught(part: int) -> None:
    body = _with_supports([{"segment": {"partIndex": part, "endIndex": 3, "text": "Loo"},
                            "groundingChunkIndices": [0]}])
    assert _found(verify_gemini_response(body)) == [(f"{SUPPORTS}/0/segment/partIndex", "part-missing")]


def test_a_url_citation_in_a_gemini_message_is_the_wrong_type() -> None:
    message = from_gemini(response(), timestamp=1)
    message["content"][4]["citations"] = [{"type": "url_citation", "url": "https://a.example/",
                                           "start_index": 0, "end_index": 1}]
    assert _found(verify_transcript(_transcript(message))) == [(f"{CITES}/0/type", "wrong-citation-type")]


# ---------------------------------------------------------------- Chat Completions


def test_chat_annotations_verify_on_the_wire_and_in_a_transcript() -> None:
    assert verify_chat_completion(completion()) == []
    assert verify_transcript(_transcript(from_chat(completion(), timestamp=1))) == []


def _annotated(**fields: Any) -> JSON:
    body = completion()
    body["choices"][0]["message"]["annotations"][0]["url_citation"].update(fields)
    return body


@pytest.mark.parametrize(("fields", "place", "code"), [
    ({"end_index": 99}, f"{ANN}/end_index", "span-out-of-range"),
    ({"start_index": -1}, f"{ANN}/start_index", "span-out-of-range"),
    ({"start_index": None, "end_index": None}, ANN, "span-missing"),
    ({"url": "javascript:alert(1)"}, f"{ANN}/url", "url-scheme"),
])
def test_a_bad_chat_annotation_is_caught_at_its_pointer(fields: JSON, place: str, code: str) -> None:
    assert _found(verify_chat_completion(_annotated(**fields))) == [(place, code)]


def test_under_the_openai_compatible_profile_a_chat_citation_may_come_without_its_span() -> None:
    body = _annotated()
    del body["choices"][0]["message"]["annotations"][0]["url_citation"]["start_index"]
    del body["choices"][0]["message"]["annotations"][0]["url_citation"]["end_index"]
    assert verify_chat_completion(body, profile="openai-compatible") == []
    assert _found(verify_chat_completion(body)) == [(ANN, "span-missing")]


def _perplexity_cited(url: str) -> JSON:
    body = perplexity()
    body["choices"][0]["message"]["annotations"] = [
        {"type": "url_citation",
         "url_citation": {"url": url, "title": "A", "start_index": 0, "end_index": 1}}]
    return body


def test_a_cited_url_must_be_among_the_answer_s_own_search_results_when_it_has_some() -> None:
    assert verify_chat_completion(_perplexity_cited("https://a.example/x")) == []
    unknown = _perplexity_cited("https://evil.example/")
    assert _found(verify_chat_completion(unknown)) == [(f"{ANN}/url", "unknown-url")]
    converted = from_chat(unknown, timestamp=1, provider="perplexity")
    place = "/messages/0/content/1/citations/0/url_citation/url"
    assert _found(verify_transcript(_transcript(converted))) == [(place, "unknown-url")]
    later = from_chat(_annotated(url="https://other.example/"), timestamp=2)  # no search results of its own
    assert verify_transcript(_transcript(from_chat(perplexity(), timestamp=1), later)) == []


def test_the_fixtures_are_not_changed() -> None:
    body = response()
    before = copy.deepcopy(body)
    verify_gemini_response(body)
    assert body == before
