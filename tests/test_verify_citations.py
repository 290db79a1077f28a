"""replaykit.verify.check_citations: Gemini grounding and Chat Completions annotations in cassettes.

The answers are the fixtures of the converters' tests, plain and streamed (SSE; Gemini's JSON array of
chunks).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_transcript_chat import chunks as chat_chunks
from test_transcript_chat import completion
from test_transcript_gemini import chunks as gemini_chunks
from test_transcript_gemini import response

from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.verify import CHECKS, check_citations

JSON = dict[str, Any]
GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:"
CHAT = "https://api.openai.com/v1/chat/completions"


def _sse(data: list[JSON], done: bool = False) -> bytes:
    events = [b"data: " + json.dumps(item).encode() + b"\n\n" for item in data]
    return b"".join(events) + (b"data: [DONE]\n\n" if done else b"")


def _cassette(uri: str, body: bytes, stream: bool, profile: str | None = None) -> Cassette:
    content_type = "text/event-stream" if stream else "application/json"
    headers = {"content-type": [content_type]}
    item = Interaction(Request("POST", uri, {}, b"{}"), Response(200, "", headers, body))
    return Cassette([item], Meta(extra={"profile": profile} if profile else {}))


def _past_the_chunks(body: JSON) -> JSON:
    body["candidates"][0]["groundingMetadata"]["groundingSupports"][0]["groundingChunkIndices"] = [7]
    return body


def _bad_gemini_stream() -> list[JSON]:
    chunks = gemini_chunks()
    _past_the_chunks(chunks[-1])
    return chunks


def _cut_span(body: JSON) -> JSON:
    body["choices"][0]["message"]["annotations"][0]["url_citation"]["end_index"] = 999
    return body


def _bad_chat_stream() -> list[JSON]:
    chunks = chat_chunks()
    chunks[3]["choices"][0]["delta"]["annotations"][0]["url_citation"]["end_index"] = 999
    return chunks


SUPPORT = "/candidates/0/groundingMetadata/groundingSupports/0/groundingChunkIndices/0"
SPAN = "/choices/0/message/annotations/0/url_citation/end_index"
CASES = {
    "gemini plain": (GEMINI + "generateContent", json.dumps(response()).encode(),
                     json.dumps(_past_the_chunks(response())).encode(), False, SUPPORT),
    "gemini sse": (GEMINI + "streamGenerateContent?alt=sse", _sse(gemini_chunks()),
                   _sse(_bad_gemini_stream()), True, SUPPORT),
    "gemini array": (GEMINI + "streamGenerateContent", json.dumps(gemini_chunks()).encode(),
                     json.dumps(_bad_gemini_stream()).encode(), False, SUPPORT),
    "chat plain": (CHAT, json.dumps(completion()).encode(), json.dumps(_cut_span(completion())).encode(),
                   False, SPAN),
    "chat sse": (CHAT, _sse(chat_chunks(), done=True), _sse(_bad_chat_stream(), done=True), True, SPAN),
}


def test_the_citation_check_runs_by_default() -> None:
    assert check_citations in CHECKS


@pytest.mark.parametrize(("uri", "good", "bad", "stream", "pointer"), CASES.values(), ids=list(CASES))
def test_a_bad_citation_is_one_finding_at_its_interaction(uri: str, good: bytes, bad: bytes, stream: bool,
                                                          pointer: str) -> None:
    path = Path("x.yaml")
    assert check_citations(path, _cassette(uri, good, stream)) == []
    [finding] = check_citations(path, _cassette(uri, bad, stream))
    assert (finding.severity, finding.place, finding.file) == ("error", "interactions[0]", "x.yaml")
    assert finding.message.startswith(f"response {pointer} ")


def test_the_cassette_profile_relaxes_chat_spans() -> None:
    body = completion()
    del body["choices"][0]["message"]["annotations"][0]["url_citation"]["start_index"]
    del body["choices"][0]["message"]["annotations"][0]["url_citation"]["end_index"]
    raw = json.dumps(body).encode()
    assert [f.code for f in check_citations(Path("x.yaml"), _cassette(CHAT, raw, False))] == ["span-missing"]
    assert check_citations(Path("x.yaml"), _cassette(CHAT, raw, False, "openai-compatible")) == []


def test_an_unreadable_answer_or_an_error_is_left_to_the_other_checks() -> None:
    assert check_citations(Path("x.yaml"), _cassette(CHAT, b"not json", False)) == []
    assert check_citations(Path("x.yaml"), _cassette(CHAT, b"data: {\n\n", True)) == []
