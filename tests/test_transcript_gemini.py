"""replaykit.transcript.gemini_generate: a Gemini response, and its stream of chunks, into an assistant
message.

The fixtures follow the shapes of the ``google-genai`` SDK's types (``GenerateContentResponse``; checked
against them when the SDK is installed); the text is not ASCII, so a segment's byte offsets differ from its
characters. The real recordings under ``cassettes/recorded/`` (pydantic-ai's) convert too: their responses,
streams and the histories their follow-up requests carry.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recordings import recorded

from replaykit import cassette
from replaykit.cassette import Interaction, Request, Response
from replaykit.transcript import (
    ConversionError,
    from_gemini,
    from_gemini_request,
    from_gemini_stream,
    from_interaction,
    gemini_final_response,
    restore,
)

JSON = dict[str, Any]
STAMP = 1764662400000
THOUGHT = "Looking up Zürich first."
SENTENCES = ("Zürich has about 443,000 inhabitants.", " It is Switzerland’s largest city.")
ANSWER = "".join(SENTENCES)
REDIRECT = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/"


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def supports() -> list[JSON]:
    """One support per sentence of the answer (part 1), offsets in UTF-8 bytes (the first starts at 0:
    omitted, as proto3 JSON leaves a zero out)."""
    first, second = SENTENCES
    return [
        {"segment": {"partIndex": 1, "endIndex": _bytes(first), "text": first},
         "groundingChunkIndices": [0], "confidenceScores": [0.93]},
        {"segment": {"partIndex": 1, "startIndex": _bytes(first) + 1, "endIndex": _bytes(ANSWER),
                     "text": second.strip()},
         "groundingChunkIndices": [0, 1], "confidenceScores": [0.71, 0.66]},
    ]


def grounding() -> JSON:
    return {
        "webSearchQueries": ["Zürich population", "largest city in Switzerland"],
        "searchEntryPoint": {"renderedContent": "<style>.container{}</style><div class=\"container\"></div>"},
        "groundingChunks": [{"web": {"uri": REDIRECT + "AbC1", "title": "stadt-zuerich.ch"}},
                            {"web": {"uri": REDIRECT + "XyZ2", "title": "wikipedia.org"}}],
        "groundingSupports": supports(),
    }


USAGE = {"promptTokenCount": 14, "candidatesTokenCount": 21, "thoughtsTokenCount": 9,
         "toolUsePromptTokenCount": 120, "cachedContentTokenCount": 4, "totalTokenCount": 164}


def response() -> JSON:
    """A grounded answer with a thought summary (``includeThoughts``), as ``generateContent`` returns it."""
    return {
        "candidates": [{
            "content": {"parts": [{"text": THOUGHT, "thought": True, "thoughtSignature": "c2lnLTE="},
                                  {"text": ANSWER}], "role": "model"},
            "finishReason": "STOP", "groundingMetadata": grounding(), "index": 0}],
        "usageMetadata": USAGE, "modelVersion": "gemini-2.5-flash", "responseId": "resp-7Fq",
    }


def chunks() -> list[JSON]:
    """The same answer as ``streamGenerateContent?alt=sse`` sends it: text in pieces, the grounding and the
    finish reason in the last chunk."""
    head = {"modelVersion": "gemini-2.5-flash", "responseId": "resp-7Fq"}

    def chunk(parts: list[JSON], **candidate: Any) -> JSON:
        usage = USAGE if "finishReason" in candidate else {"promptTokenCount": 14, "totalTokenCount": 14}
        return {"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0, **candidate}],
                "usageMetadata": usage, **head}

    return [chunk([{"text": THOUGHT[:10], "thought": True}]),
            chunk([{"text": THOUGHT[10:], "thought": True, "thoughtSignature": "c2lnLTE="}]),
            chunk([{"text": ANSWER[:7]}]),
            chunk([{"text": ANSWER[7:40]}]),
            chunk([{"text": ANSWER[40:]}], finishReason="STOP", groundingMetadata=grounding())]


def _sdk_checked(body: JSON) -> JSON:
    types = pytest.importorskip("google.genai.types")
    types.GenerateContentResponse.model_validate(body)  # the SDK parses the fixture: its shape is real
    return body


def test_the_fixtures_have_the_sdk_s_shapes() -> None:
    _sdk_checked(response())
    for chunk in chunks():
        _sdk_checked(chunk)


def test_grounding_becomes_search_calls_and_one_result_first_then_the_parts() -> None:
    message = from_gemini(response(), timestamp=STAMP)
    calls, result, thinking, text = message["content"][:2], message["content"][2], *message["content"][3:]
    assert [(c["phase"], c["id"], c.get("query")) for c in calls] == [
        ("call", "resp-7Fq:q0", "Zürich population"), ("call", "resp-7Fq:q1", "largest city in Switzerland")]
    assert result["phase"] == "result" and result["toolUseId"] == "resp-7Fq:q0"
    assert result["results"] == [{"url": REDIRECT + "AbC1", "title": "stadt-zuerich.ch"},
                                 {"url": REDIRECT + "XyZ2", "title": "wikipedia.org"}]
    assert result["raw"] == grounding()
    assert thinking == {"type": "thinking", "thinking": THOUGHT, "signature": "c2lnLTE=",
                        "raw": response()["candidates"][0]["content"]["parts"][0]}
    assert text == {"type": "text", "text": ANSWER, "citations": supports()}
    assert (message["provider"], message["api"], message["model"]) == ("gemini", "gemini-generate",
                                                                        "gemini-2.5-flash")
    assert message["responseId"] == "resp-7Fq" and message["stopReason"] == "stop"
    restore({"version": 1, "messages": [message]})


def test_usage_follows_the_plan() -> None:
    usage = from_gemini(response(), timestamp=STAMP)["usage"]
    assert usage == {"input": 14 - 4 + 120, "output": 21 + 9, "cacheRead": 4, "cacheWrite": 0,
                     "totalTokens": 130 + 30 + 4}


def test_the_stream_adds_up_to_the_response_and_converts_the_same() -> None:
    assert gemini_final_response(chunks()) == response()
    assert from_gemini_stream(chunks(), timestamp=STAMP) == from_gemini(response(), timestamp=STAMP)


def test_a_stream_without_a_finish_reason_broke_off() -> None:
    message = from_gemini_stream(chunks()[:-1], timestamp=STAMP)
    assert message["stopReason"] == "error" and "finishReason" in message["errorMessage"]
    assert message["content"][-1] == {"type": "text", "text": ANSWER[:40]}


def test_supports_go_to_the_part_they_index() -> None:
    body = response()
    parts = body["candidates"][0]["content"]["parts"]
    parts.append({"text": "Another part."})
    body["candidates"][0]["groundingMetadata"]["groundingSupports"].append(
        {"segment": {"partIndex": 2, "endIndex": 7, "text": "Another"}, "groundingChunkIndices": [1]})
    texts = [block for block in from_gemini(body, timestamp=STAMP)["content"] if block["type"] == "text"]
    assert [len(text.get("citations", [])) for text in texts] == [2, 1]


@pytest.mark.parametrize(("reason", "stop"), [("STOP", "stop"), ("MAX_TOKENS", "length"),
                                               ("SAFETY", "error"), ("MALFORMED_FUNCTION_CALL", "error"),
                                               (None, "error")])
def test_finish_reasons(reason: str | None, stop: str) -> None:
    body = response()
    body["candidates"][0].pop("finishReason")
    if reason is not None:
        body["candidates"][0]["finishReason"] = reason
    message = from_gemini(body, timestamp=STAMP)
    assert message["stopReason"] == stop
    if stop == "error":
        assert str(reason or "no finishReason") in message["errorMessage"]


def test_a_function_call_is_a_tool_call_and_stop_is_tool_use() -> None:
    part = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"}
    body = {"candidates": [{"content": {"parts": [part], "role": "model"}, "finishReason": "STOP"}],
            "responseId": "r.1/x"}
    message = from_gemini(body, timestamp=STAMP)
    assert message["content"] == [{"type": "toolCall", "id": "call_r_1_x_0", "name": "get_weather",
                                   "arguments": {"city": "Paris"}, "raw": part}]
    assert message["stopReason"] == "toolUse"
    part["functionCall"]["id"] = "fc-9"
    assert from_gemini(body, timestamp=STAMP)["content"][0]["id"] == "fc-9"


def test_unknown_parts_and_url_context_are_kept_whole() -> None:
    body = response()
    code = {"executableCode": {"language": "PYTHON", "code": "print(1)"}}
    novel = {"thoughtSignature": "eA==", "somethingNew": {"x": 1}}
    body["candidates"][0]["content"]["parts"] += [code, novel]
    fetched = {"retrievedUrl": "https://a.example/", "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS"}
    body["candidates"][0]["urlContextMetadata"] = {"urlMetadata": [fetched]}
    content = from_gemini(body, timestamp=STAMP)["content"]
    opaque = [(b["blockType"], b["raw"]) for b in content if b["type"] == "providerBlock"]
    assert opaque == [("urlContextMetadata", body["candidates"][0]["urlContextMetadata"]),
                      ("executableCode", code), ("somethingNew", novel)]
    restore({"version": 1, "messages": [from_gemini(body, timestamp=STAMP)]})


def test_a_blocked_prompt_is_an_error_naming_the_block_reason() -> None:
    body = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}}
    message = from_gemini(body, timestamp=STAMP)
    assert message["content"] == [] and message["errorMessage"] == "promptFeedback.blockReason SAFETY"


def test_nothing_of_the_response_is_shared_with_the_message() -> None:
    body = response()
    message = from_gemini(body, timestamp=STAMP)
    before = copy.deepcopy(message)
    body["candidates"][0]["groundingMetadata"]["groundingSupports"][0]["segment"]["text"] = "changed"
    body["candidates"][0]["content"]["parts"][0]["thoughtSignature"] = "changed"
    assert message == before


@pytest.mark.parametrize("bad", [{"candidates": "x"}, {"candidates": [3]},
                                 {"candidates": [{"content": {"parts": "x"}, "finishReason": "STOP"}]}])
def test_a_malformed_response_is_a_conversion_error(bad: JSON) -> None:
    with pytest.raises(ConversionError):
        from_gemini(bad, timestamp=STAMP)


def _sse(chunks_: list[JSON]) -> bytes:
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n" for chunk in chunks_)


def _interaction(uri: str, body: bytes, content_type: str) -> Interaction:
    headers = {"content-type": [content_type]}
    return Interaction(Request("POST", uri, {}, b"{}"), Response(200, "", headers, body))


@pytest.mark.parametrize(("uri", "provider"), [
    ("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent", "gemini"),
    ("https://aiplatform.googleapis.com/v1beta1/projects/p/locations/global/publishers/google/models/"
     "gemini-2.5-flash:generateContent", "vertex")])
def test_from_interaction_dispatches_gemini_routes(uri: str, provider: str) -> None:
    plain = _interaction(uri, json.dumps(response()).encode(), "application/json")
    expected = from_gemini(response(), timestamp=STAMP, provider=provider)
    assert from_interaction(plain, timestamp=STAMP) == expected
    stream_uri = uri.replace(":generateContent", ":streamGenerateContent")
    streamed = _interaction(stream_uri + "?alt=sse", _sse(chunks()), "text/event-stream")
    assert from_interaction(streamed, timestamp=STAMP) == expected
    array = _interaction(stream_uri, json.dumps(chunks()).encode(), "application/json")
    assert from_interaction(array, timestamp=STAMP) == expected


def test_an_http_error_names_the_model_of_the_path() -> None:
    uri = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"
    body = {"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}}
    item = Interaction(Request("POST", uri, {}, b"{}"),
                       Response(429, "", {"content-type": ["application/json"]}, json.dumps(body).encode()))
    message = from_interaction(item, timestamp=STAMP)
    assert (message["stopReason"], message["model"]) == ("error", "gemini-2.5-pro")
    assert message["errorMessage"] == "HTTP 429: Resource has been exhausted"


def test_grounding_spread_over_chunks_accumulates_and_grounding_resent_whole_does_not_repeat() -> None:
    spread = chunks()
    first, rest = grounding(), grounding()
    chunk_list = rest["groundingChunks"]
    first["groundingChunks"], rest["groundingChunks"] = chunk_list[:1], chunk_list[1:]
    del first["groundingSupports"]
    spread[3]["candidates"][0]["groundingMetadata"] = first
    spread[4]["candidates"][0]["groundingMetadata"] = rest
    assert gemini_final_response(spread) == response()
    resent = chunks()
    resent[3]["candidates"][0]["groundingMetadata"] = first
    assert gemini_final_response(resent) == response()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(ANSWER) - 1), max_size=6, unique=True))
def test_any_split_of_the_answer_into_chunks_converts_as_the_response(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(ANSWER)]
    pieces = [ANSWER[low:high] for low, high in itertools.pairwise(bounds)]
    stream = chunks()[:2] + [{"candidates": [{"content": {"parts": [{"text": piece}], "role": "model"}}]}
                             for piece in pieces]
    stream[-1]["candidates"][0].update(finishReason="STOP", groundingMetadata=grounding())
    stream[-1].update(usageMetadata=USAGE, modelVersion="gemini-2.5-flash", responseId="resp-7Fq")
    assert from_gemini_stream(stream, timestamp=STAMP) == from_gemini(response(), timestamp=STAMP)


# ---------------------------------------------------------------- found by scripts/mutation


_CONVERT = {"body": lambda bad: from_gemini(bad, timestamp=STAMP), "final": gemini_final_response,
            "stream": lambda bad: from_gemini_stream(bad, timestamp=STAMP)}


@pytest.mark.parametrize(("convert", "bad", "said"), [
    ("body", [], "a Gemini response must be a JSON object, not list"),
    ("body", {"candidates": "x"}, "a Gemini response's candidates must be a list"),
    ("body", {"candidates": [3]}, r"candidates\[0\] must be a JSON object, not int"),
    ("body", {"candidates": [{"content": {"parts": "x"}}]}, r"content\.parts must be a list of parts"),
    ("body", {"candidates": [{"content": {"parts": [{"text": "a"}, 1]}}]},
     r"content\.parts\[1\] must be a JSON object, not int"),
    ("final", [1], "a stream chunk must be a JSON object, not int"),
    ("final", [], "the stream has no chunk"),
    ("final", [{"candidates": [{"content": {"parts": ["x"]}}]}], "a streamed part must be a JSON object"),
    ("stream", [], "the stream has no chunk"),
])
def test_a_conversion_error_names_the_place(convert: str, bad: Any, said: str) -> None:
    with pytest.raises(ConversionError, match=f"^{said}"):
        _CONVERT[convert](bad)


def test_the_error_messages_of_a_response_and_a_stream_without_a_finish_reason() -> None:
    assert from_gemini({}, timestamp=STAMP)["errorMessage"] == "the response has no finishReason"
    cut = from_gemini_stream(chunks()[:-1], timestamp=STAMP)
    assert cut["errorMessage"] == "the stream ended before a chunk with a finishReason"


def test_a_response_without_an_id_names_its_blocks_and_calls_by_default() -> None:
    body = response()
    del body["responseId"], body["modelVersion"]
    body["model"] = "gemini-2.5-pro"
    body["candidates"][0]["content"]["parts"].append({"functionCall": {"name": "f", "id": 5, "args": [1]}})
    message = from_gemini(body, timestamp=STAMP, provider="vertex")
    calls, result = message["content"][:2], message["content"][2]
    assert calls[0] == {"type": "hostedSearch", "phase": "call", "provider": "vertex",
                        "api": "gemini-generate", "id": "grounding:q0", "query": "Zürich population"}
    assert {key: value for key, value in result.items() if key not in ("results", "raw")} == {
        "type": "hostedSearch", "phase": "result", "provider": "vertex", "api": "gemini-generate",
        "toolUseId": "grounding:q0"}
    call = message["content"][-1]
    assert (call["id"], call["name"], call["arguments"]) == ("call_gemini_2", "f", {})
    assert message["model"] == "gemini-2.5-pro" and message["stopReason"] == "toolUse"
    del body["candidates"][0]["content"]["parts"][-1]["functionCall"]["name"]
    body["candidates"][0]["finishReason"] = "MAX_TOKENS"
    message = from_gemini(body, timestamp=STAMP)
    assert (message["content"][-1]["name"], message["stopReason"]) == ("", "length")


def test_grounding_that_is_empty_or_without_web_chunks() -> None:
    body = response()
    body["candidates"][0]["groundingMetadata"] = {}
    assert [b["type"] for b in from_gemini(body, timestamp=STAMP)["content"]] == ["thinking", "text"]
    body["candidates"][0]["groundingMetadata"] = {"webSearchQueries": ["q"]}
    assert from_gemini(body, timestamp=STAMP)["content"][1]["results"] == []
    body["candidates"][0]["groundingMetadata"]["groundingChunks"] = [
        {"retrievedContext": {"uri": "gs://b/x"}}, {"web": {"title": 3}}, "x"]
    assert from_gemini(body, timestamp=STAMP)["content"][1]["results"] == [{"url": "", "title": None}]


def test_a_support_without_a_segment_cites_part_zero_and_a_text_keeps_its_signature() -> None:
    body = response()
    parts = body["candidates"][0]["content"]["parts"]
    parts[0] = {"text": "First.", "thoughtSignature": "c2ln"}
    support = {"groundingChunkIndices": [0]}
    body["candidates"][0]["groundingMetadata"]["groundingSupports"] = [support]
    first, second = from_gemini(body, timestamp=STAMP)["content"][3:]
    assert first == {"type": "text", "text": "First.", "citations": [support], "signature": "c2ln"}
    assert second == {"type": "text", "text": ANSWER}


@pytest.mark.parametrize(("part", "kind"), [({"thoughtSignature": "eA=="}, "thoughtSignature"), ({}, "part")])
def test_a_part_of_metadata_alone_is_named_by_its_first_key(part: JSON, kind: str) -> None:
    body = {"candidates": [{"content": {"parts": [part]}, "finishReason": "STOP"}]}
    assert from_gemini(body, timestamp=STAMP)["content"][0]["blockType"] == kind


def test_usage_all_cached() -> None:
    usage = {"promptTokenCount": 4, "cachedContentTokenCount": 4, "candidatesTokenCount": 1}
    got = from_gemini({**response(), "usageMetadata": usage}, timestamp=STAMP)["usage"]
    assert (got["input"], got["output"], got["cacheRead"]) == (0, 1, 4)


def test_nothing_nested_is_shared_with_the_message() -> None:
    body = response()
    parts = body["candidates"][0]["content"]["parts"]
    parts[0]["partMetadata"] = {"k": "v"}
    parts.append({"functionCall": {"name": "f", "args": {"city": {"name": "Paris"}}}})
    body["candidates"][0]["urlContextMetadata"] = {"urlMetadata": [{"retrievedUrl": "https://a.example/"}]}
    message = from_gemini(body, timestamp=STAMP)
    before = copy.deepcopy(message)
    parts[0]["partMetadata"]["k"] = "changed"
    parts[-1]["functionCall"]["args"]["city"]["name"] = "changed"
    parts[-1]["functionCall"]["name"] = "changed"
    body["candidates"][0]["urlContextMetadata"]["urlMetadata"][0]["retrievedUrl"] = "changed"
    assert message == before


def test_nothing_nested_is_shared_with_the_final_response() -> None:
    stream = chunks()
    first, rest = grounding(), grounding()
    web = rest["groundingChunks"]
    first["groundingChunks"], rest["groundingChunks"] = web[:1], web[1:]
    stream[3]["candidates"][0].update(groundingMetadata=first, safetyRatings=[{"category": "X"}])
    stream[4]["candidates"][0]["groundingMetadata"] = rest
    stream[4]["usageMetadata"] = {**USAGE, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 14}]}
    stream[4]["candidates"][0]["content"]["parts"].append({"functionCall": {"name": "f", "args": {"a": 1}}})
    final = gemini_final_response(stream)
    kept = copy.deepcopy(final)
    first["groundingChunks"][0]["web"]["title"] = "changed"
    rest["groundingChunks"][0]["web"]["title"] = "changed"
    stream[3]["candidates"][0]["safetyRatings"][0]["category"] = "changed"
    stream[4]["usageMetadata"]["promptTokensDetails"][0]["tokenCount"] = 0
    stream[4]["candidates"][0]["content"]["parts"][-1]["functionCall"]["args"]["a"] = 2
    assert final == kept


def test_only_plain_consecutive_text_parts_merge_and_the_role_is_kept() -> None:
    def chunk(*parts: JSON, **content: Any) -> JSON:
        return {"candidates": [{"content": {"parts": list(parts), **content}}]}

    call = {"functionCall": {"name": "f"}}
    stream = [chunk({"text": "a"}), chunk({"text": "b", "partMetadata": {"k": 1}}), chunk(call),
              chunk({"text": "c"})]
    final = gemini_final_response(stream)
    assert final["candidates"][0]["content"] == {
        "parts": [{"text": "a"}, {"text": "b", "partMetadata": {"k": 1}}, call, {"text": "c"}],
        "role": "model"}
    other = gemini_final_response([chunk({"text": "a"}, role="other")])
    assert other["candidates"][0]["content"]["role"] == "other"
    blocked = gemini_final_response([{"promptFeedback": {"blockReason": "SAFETY"}}])
    assert blocked["candidates"] == [{"content": {"parts": [], "role": "model"}, "index": 0}]


# ---------------------------------------------------------------- real recordings (cassettes/recorded/)


def _real(name: str) -> list[Interaction]:
    return cassette.load(recorded(f"pydantic-ai__gemini_{name}.yaml")).interactions


def _cuts_bytes(text: str, citation: JSON) -> bool:
    """The segment's offsets are UTF-8 bytes of ``text`` and cut exactly ``segment.text``."""
    segment = citation["segment"]
    return text.encode()[segment.get("startIndex", 0):segment["endIndex"]].decode() == segment["text"]


@pytest.mark.parametrize(("name", "index", "query", "chunks_", "cited"), [
    ("web_search_tool", 0, "weather in San Francisco today", 3, 6),
    ("web_search_tool", 1, "current weather in Mexico City", 3, 2),
    ("web_search_tool_stream", 0, "weather in San Francisco today", 5, 8),
    ("web_search_tool_stream", 1, "weather in Mexico City today", 4, 7)])
def test_a_real_grounded_answer_converts(name: str, index: int, query: str, chunks_: int, cited: int) -> None:
    item = _real(name)[index]
    message = from_interaction(item, timestamp=STAMP)
    body = (gemini_final_response(e.json() for e in item.response.events if e.data is not None)
            if item.response.is_stream else item.response.json())
    metadata, usage = body["candidates"][0]["groundingMetadata"], body["usageMetadata"]
    call, result, text = message["content"]
    assert (call["phase"], call["query"], result["phase"], result["toolUseId"]) == (
        "call", query, "result", call["id"])
    assert [r["url"] for r in result["results"]] == [c["web"]["uri"] for c in metadata["groundingChunks"]]
    assert len(result["results"]) == chunks_ and result["raw"] == metadata
    assert text["citations"] == metadata["groundingSupports"] and len(text["citations"]) == cited
    assert all(_cuts_bytes(text["text"], c) for c in text["citations"])
    assert (message["provider"], message["model"], message["responseId"], message["stopReason"]) == (
        "gemini", "gemini-2.5-pro", body["responseId"], "stop")
    assert message["usage"]["totalTokens"] == usage["totalTokenCount"]  # tool-use prompt and thoughts counted
    assert message["usage"]["input"] == usage["promptTokenCount"] + usage["toolUsePromptTokenCount"]


def test_real_offsets_count_bytes_not_characters() -> None:
    text = from_interaction(_real("web_search_tool")[0], timestamp=STAMP)["content"][2]
    first = text["citations"][0]["segment"]  # ends in "69°F.": the degree sign is two bytes
    assert text["text"].encode()[first["startIndex"]:first["endIndex"]].decode() == first["text"]
    assert text["text"][first["startIndex"]:first["endIndex"]] != first["text"]


def test_a_real_stream_sends_empty_grounding_until_its_last_chunk() -> None:
    item = _real("web_search_tool_stream")[0]
    grounding_ = [e.json()["candidates"][0]["groundingMetadata"] for e in item.response.events if e.data]
    assert grounding_[:-1] == [{}] * 9 and set(grounding_[-1]) == {
        "searchEntryPoint", "groundingChunks", "groundingSupports", "webSearchQueries"}


@pytest.mark.parametrize("name", ["url_context", "url_context_stream"])
def test_real_url_context_keeps_the_metadata_and_cites_from_byte_zero(name: str) -> None:
    message = from_interaction(_real(name)[0], timestamp=STAMP)
    result, fetched, text = message["content"]
    assert result["phase"] == "result" and result["results"] == [
        {"url": "https://ai.pydantic.dev", "title": "Pydantic AI"}]
    assert (fetched["blockType"], fetched["raw"]) == ("urlContextMetadata", {"urlMetadata": [
        {"retrievedUrl": "https://ai.pydantic.dev", "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS"}]})
    [citation] = text["citations"]
    assert "startIndex" not in citation["segment"] and _cuts_bytes(text["text"], citation)
    assert citation["segment"]["endIndex"] == len(text["text"].encode())
    assert message["stopReason"] == "stop"


def test_a_real_vertex_answer_converts() -> None:
    message = from_interaction(_real("vertex_provider")[0], timestamp=STAMP)
    assert message["content"] == [{"type": "text", "text": "The capital of France is Paris.\n"}]
    assert (message["provider"], message["model"], message["stopReason"]) == (
        "vertex", "gemini-2.0-flash", "stop")
    assert message["usage"] == {"input": 13, "output": 8, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 21}


@pytest.mark.parametrize("name", ["web_search_tool", "web_search_tool_stream"])
def test_a_real_follow_up_request_holds_the_answer_without_its_grounding(name: str) -> None:
    first, second = _real(name)
    answer = from_interaction(first, timestamp=STAMP)["content"][-1]["text"]
    transcript = from_gemini_request(second.request.json(), timestamp=STAMP)
    assert transcript["system"] == "You are a helpful chatbot."
    assert transcript["tools"] == [{"type": "hostedSearch"}]
    assert [m["role"] for m in transcript["messages"]] == ["user", "assistant", "user"]
    assert transcript["messages"][1]["content"] == [{"type": "text", "text": answer}]
    assert transcript["messages"][2]["content"] == [{"type": "text", "text": "how about Mexico City?"}]


def test_real_anthropic_history_sent_to_gemini_keeps_every_text_block() -> None:
    anthropic, gemini = _real("web_search_history_from_anthropic")
    said = [b["text"] for b in from_interaction(anthropic, timestamp=STAMP)["content"] if b["type"] == "text"]
    transcript = from_gemini_request(gemini.request.json(), timestamp=STAMP)
    assert [b["text"] for b in transcript["messages"][1]["content"]] == said and len(said) == 27
    assert (transcript["system"], transcript["tools"]) == (None, [])
    reply = from_interaction(gemini, timestamp=STAMP)
    assert (reply["provider"], reply["model"], reply["stopReason"]) == ("gemini", "gemini-2.0-flash", "stop")
