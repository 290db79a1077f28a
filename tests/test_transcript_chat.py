"""replaykit.transcript.openai_chat: a Chat Completions answer, and its stream of chunks, into an assistant
message.

The fixtures follow the ``openai`` SDK's types (``ChatCompletion``, ``ChatCompletionChunk``: each is parsed by
them); Perplexity's ``citations`` / ``search_results`` are extra fields the SDK keeps.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from replaykit.cassette import Interaction, Request, Response
from replaykit.transcript import (
    ConversionError,
    chat_final_completion,
    from_chat,
    from_chat_stream,
    from_interaction,
    restore,
)

JSON = dict[str, Any]
STAMP = 1764662400000
ANSWER = "The Eiffel Tower is 330 m tall (Paris, 2024)."
URL = "https://www.toureiffel.paris/en/the-monument/key-figures?utm_source=openai"


def annotations() -> list[JSON]:
    return [{"type": "url_citation", "url_citation": {"start_index": 31, "end_index": 44, "url": URL,
                                                      "title": "Key figures - Eiffel Tower"}}]


USAGE = {"prompt_tokens": 30, "completion_tokens": 17, "total_tokens": 47,
         "prompt_tokens_details": {"cached_tokens": 10, "audio_tokens": 0},
         "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}


def completion() -> JSON:
    """A ``gpt-4o-search-preview`` answer (``web_search_options``): url_citation annotations on the message.
    """
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1764662400,
            "model": "gpt-4o-search-preview-2025-03-11", "system_fingerprint": "fp_1", "usage": USAGE,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": ANSWER, "refusal": None,
                                     "annotations": annotations()}}]}


def chunks() -> list[JSON]:
    """The same answer streamed (``stream_options.include_usage``): the annotations in the last choice chunk,
    the usage in a chunk of its own with no choices."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764662400,
            "model": "gpt-4o-search-preview-2025-03-11", "system_fingerprint": "fp_1", "usage": None}

    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    return [chunk({"role": "assistant", "content": "", "refusal": None}),
            chunk({"content": ANSWER[:20]}), chunk({"content": ANSWER[20:]}),
            chunk({"annotations": annotations()}, "stop"),
            {**head, "choices": [], "usage": USAGE}]


def tool_chunks() -> list[JSON]:
    """Two tool calls whose arguments come in pieces, told apart by ``index``."""
    head = {"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1"}

    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def call(index: int, **fields: Any) -> JSON:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    return [chunk({"role": "assistant", "content": None}),
            call(0, id="call_a", type="function", function={"name": "read", "arguments": ""}),
            call(0, function={"arguments": "{\"path\": "}), call(0, function={"arguments": "\"a.md\"}"}),
            call(1, id="call_b", type="function", function={"name": "ls", "arguments": "{}"}),
            chunk({}, "tool_calls")]


def perplexity() -> JSON:
    return {"id": "pplx-1", "object": "chat.completion", "created": 1, "model": "sonar",
            "citations": ["https://a.example/x", "https://b.example/y"],
            "search_results": [{"title": "A", "url": "https://a.example/x", "date": "2025-01-02"},
                               {"title": "B", "url": "https://b.example/y"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14},
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "A says x [1], B says y [2]."}}]}


def test_the_fixtures_have_the_sdk_s_shapes() -> None:
    for body in (completion(), perplexity()):
        ChatCompletion.model_validate(body)
    for chunk in chunks() + tool_chunks():
        ChatCompletionChunk.model_validate(chunk)


def test_the_content_is_text_whose_citations_are_the_annotations_verbatim() -> None:
    message = from_chat(completion(), timestamp=STAMP)
    assert message["content"] == [{"type": "text", "text": ANSWER, "citations": annotations()}]
    assert (message["provider"], message["api"], message["model"]) == (
        "openai", "openai-chat", "gpt-4o-search-preview-2025-03-11")
    assert message["responseId"] == "chatcmpl-1" and message["stopReason"] == "stop"
    assert message["usage"] == {"input": 20, "output": 17, "cacheRead": 10, "cacheWrite": 0,
                                "totalTokens": 47}
    restore({"version": 1, "messages": [message]})


def test_the_stream_adds_up_to_the_completion_and_converts_the_same() -> None:
    final = chat_final_completion(chunks())
    assert final["choices"][0]["message"]["content"] == ANSWER
    assert final["usage"] == USAGE
    assert from_chat_stream(chunks(), timestamp=STAMP) == from_chat(completion(), timestamp=STAMP)


def test_streamed_tool_call_arguments_add_up_per_index() -> None:
    message = from_chat_stream(tool_chunks(), timestamp=STAMP)
    assert [(b["id"], b["name"], b["arguments"]) for b in message["content"]] == [
        ("call_a", "read", {"path": "a.md"}), ("call_b", "ls", {})]
    assert message["content"][0]["raw"] == {"id": "call_a", "type": "function",
                                            "function": {"name": "read", "arguments": "{\"path\": \"a.md\"}"}}
    assert message["stopReason"] == "toolUse"
    restore({"version": 1, "messages": [message]})


def test_a_stream_without_a_finish_reason_or_with_an_error_chunk_broke_off() -> None:
    cut = from_chat_stream(chunks()[:3], timestamp=STAMP)
    assert cut["stopReason"] == "error" and "finish_reason" in cut["errorMessage"]
    assert cut["content"] == [{"type": "text", "text": ANSWER}]
    broken = [*chunks()[:3], {"error": {"code": 502, "message": "upstream"}}]
    failed = from_chat_stream(broken, timestamp=STAMP)
    assert failed["errorMessage"] == "502: upstream"


def test_perplexity_search_results_are_one_hosted_search_result_before_the_text() -> None:
    message = from_chat(perplexity(), timestamp=STAMP, provider="perplexity")
    result, text = message["content"]
    assert result == {"type": "hostedSearch", "phase": "result", "provider": "perplexity",
                      "api": "openai-chat", "toolUseId": "pplx-1",
                      "results": [{"url": "https://a.example/x", "title": "A", "pageAge": "2025-01-02"},
                                  {"url": "https://b.example/y", "title": "B", "pageAge": None}],
                      "raw": {"citations": perplexity()["citations"],
                              "search_results": perplexity()["search_results"]}}
    assert text["type"] == "text"
    body = perplexity()
    del body["search_results"]
    assert [r["url"] for r in from_chat(body, timestamp=STAMP)["content"][0]["results"]] == body["citations"]
    restore({"version": 1, "messages": [message]})


def test_reasoning_is_thinking_and_a_refusal_is_text() -> None:
    body = completion()
    body["choices"][0]["message"].update(content=None, refusal="I can't help with that.",
                                         reasoning_content="The user asks...")
    content = from_chat(body, timestamp=STAMP)["content"]
    assert content[0] == {"type": "thinking", "thinking": "The user asks...",
                          "raw": {"reasoning_content": "The user asks..."}}
    assert content[1]["text"] == "I can't help with that."


@pytest.mark.parametrize(("finish", "stop"), [("stop", "stop"), ("length", "length"),
                                              ("tool_calls", "toolUse"), ("content_filter", "error"),
                                              (None, "error")])
def test_finish_reasons(finish: str | None, stop: str) -> None:
    body = completion()
    body["choices"][0]["finish_reason"] = finish
    message = from_chat(body, timestamp=STAMP)
    assert message["stopReason"] == stop
    if stop == "error":
        assert str(finish or "no finish_reason") in message["errorMessage"]


def test_a_custom_tool_call_is_kept_whole() -> None:
    body = completion()
    custom = {"id": "call_c", "type": "custom", "custom": {"name": "grammar", "input": "x"}}
    body["choices"][0]["message"]["tool_calls"] = [custom]
    block = from_chat(body, timestamp=STAMP)["content"][-1]
    assert block == {"type": "providerBlock", "provider": "openai", "api": "openai-chat",
                     "blockType": "custom", "raw": custom}


def test_nothing_of_the_completion_is_shared_with_the_message() -> None:
    body = completion()
    message = from_chat(body, timestamp=STAMP)
    before = copy.deepcopy(message)
    body["choices"][0]["message"]["annotations"][0]["url_citation"]["url"] = "changed"
    assert message == before


@pytest.mark.parametrize("bad", [{"choices": "x"}, {"choices": [1]},
                                 {"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]}])
def test_a_malformed_completion_is_a_conversion_error(bad: JSON) -> None:
    with pytest.raises(ConversionError):
        from_chat(bad, timestamp=STAMP)


def _interaction(uri: str, body: bytes, content_type: str) -> Interaction:
    headers = {"content-type": [content_type]}
    return Interaction(Request("POST", uri, {}, b"{}"), Response(200, "", headers, body))


@pytest.mark.parametrize(("uri", "provider"), [
    ("https://api.openai.com/v1/chat/completions", "openai"),
    ("https://res.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
     "azure")])
def test_from_interaction_dispatches_chat_routes(uri: str, provider: str) -> None:
    expected = from_chat(completion(), timestamp=STAMP, provider=provider)
    plain = _interaction(uri, json.dumps(completion()).encode(), "application/json")
    assert from_interaction(plain, timestamp=STAMP) == expected
    events = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks()]
    sse = b"".join(events) + b"data: [DONE]\n\n"
    assert from_interaction(_interaction(uri, sse, "text/event-stream"), timestamp=STAMP) == expected


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(ANSWER) - 1), max_size=6, unique=True),
       st.lists(st.integers(min_value=1, max_value=15), max_size=4, unique=True))
def test_any_split_of_content_and_arguments_converts_as_the_completion(cuts: list[int],
                                                                       arg_cuts: list[int]) -> None:
    arguments = "{\"path\": \"a.md\"}"
    bounds = [0, *sorted(cuts), len(ANSWER)]
    arg_bounds = [0, *sorted(arg_cuts), len(arguments)]
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764662400,
            "model": "gpt-4o-search-preview-2025-03-11", "system_fingerprint": "fp_1"}
    deltas = [{"content": ANSWER[low:high]} for low, high in itertools.pairwise(bounds)]
    deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": arguments[low:high]}}]}
               for low, high in itertools.pairwise(arg_bounds)]
    deltas[len(bounds) - 1]["tool_calls"][0].update(id="call_a", type="function")
    deltas[len(bounds) - 1]["tool_calls"][0]["function"]["name"] = "read"
    stream = [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    stream.append({**head, "choices": [{"index": 0, "delta": {"annotations": annotations()},
                                        "finish_reason": "tool_calls"}], "usage": USAGE})
    body = completion()
    body["choices"][0].update(finish_reason="tool_calls")
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": arguments}}]
    assert from_chat_stream(stream, timestamp=STAMP) == from_chat(body, timestamp=STAMP)


# ---------------------------------------------------------------- found by scripts/mutation


def _chunk(delta: JSON, finish: str | None = None, index: int = 0, **top: Any) -> JSON:
    return {"id": "chatcmpl-3", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}], **top}


_CONVERT = {"body": lambda bad: from_chat(bad, timestamp=STAMP), "final": chat_final_completion,
            "stream": lambda bad: from_chat_stream(bad, timestamp=STAMP)}


@pytest.mark.parametrize(("convert", "bad", "said"), [
    ("body", [], "a chat completion must be a JSON object, not list"),
    ("body", {"choices": "x"}, "a chat completion's choices must be a list"),
    ("body", {"choices": [1]}, r"choices\[0\] must be a JSON object, not int"),
    ("body", {"choices": [{"message": "x"}]}, r"choices\[0\]\.message must be a JSON object, not str"),
    ("body", {"choices": [{"message": {"tool_calls": "x"}}]}, r"choices\[0\]\.message\.tool_calls must be"),
    ("body", {"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]},
     r"choices\[0\]\.message\.tool_calls\[0\] has no string type"),
    ("final", [1], "a stream chunk must be a JSON object, not int"),
    ("final", [], "the stream has no chunk"),
    ("final", [_chunk({"tool_calls": [1]})], "a streamed tool call must be a JSON object"),
    ("stream", ["x"], "a stream chunk must be a JSON object"),
])
def test_a_conversion_error_names_the_place(convert: str, bad: Any, said: str) -> None:
    with pytest.raises(ConversionError, match=f"^{said}"):
        _CONVERT[convert](bad)


def test_no_choices_is_an_error_without_a_finish_reason() -> None:
    message = from_chat({"id": "chatcmpl-0", "choices": []}, timestamp=STAMP)
    assert (message["content"], message["errorMessage"]) == ([], "no finish_reason")


@pytest.mark.parametrize(("finish", "stop"), [("stop", "toolUse"), ("tool_calls", "toolUse"),
                                              ("length", "length")])
def test_a_message_that_calls_a_tool_stopped_for_tool_use_unless_cut(finish: str, stop: str) -> None:
    body = completion()
    body["choices"][0]["finish_reason"] = finish
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "[1]"}}]
    message = from_chat(body, timestamp=STAMP)
    assert message["stopReason"] == stop
    assert message["content"][-1]["arguments"] == {}  # arguments that are not an object
    assert from_chat({**body, "choices": [{**body["choices"][0], "message": {}}]},
                     timestamp=STAMP)["stopReason"] == ("toolUse" if finish == "tool_calls" else finish)


def test_a_function_tool_call_without_its_function_is_kept_whole() -> None:
    body = completion()
    odd = {"id": "call_d", "type": "function"}
    body["choices"][0]["message"]["tool_calls"] = [odd]
    assert from_chat(body, timestamp=STAMP)["content"][-1] == {
        "type": "providerBlock", "provider": "openai", "api": "openai-chat", "blockType": "function",
        "raw": odd}


@pytest.mark.parametrize(("usage", "plan"), [
    ({"prompt_tokens": 5, "completion_tokens": 9}, (5, 9, 0)),
    ({"prompt_tokens": 4, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 4}}, (0, 1, 4)),
    ({"prompt_tokens": 4, "prompt_tokens_details": {"cached_tokens": 6}}, (0, 0, 6)),
])
def test_usage_without_details_or_all_cached(usage: JSON, plan: tuple[int, int, int]) -> None:
    got = from_chat({**completion(), "usage": usage}, timestamp=STAMP)["usage"]
    assert (got["input"], got["output"], got["cacheRead"]) == plan


def test_search_results_with_missing_fields_and_citations_alone() -> None:
    body = perplexity()
    del body["id"]
    body["search_results"] = [{"title": 3, "date": 20250102}, "not an object"]
    result = from_chat(body, timestamp=STAMP)["content"][0]
    assert result["toolUseId"] == "search"
    assert result["results"] == [{"url": "", "title": None, "pageAge": None}]
    del body["search_results"]
    body["citations"] = ["https://a.example/x", 7]
    assert from_chat(body, timestamp=STAMP)["content"][0]["results"] == [
        {"url": "https://a.example/x", "title": None}]


def test_reasoning_under_its_other_names() -> None:
    body = completion()
    body["choices"][0]["message"]["reasoning"] = "Thinking it over."
    assert from_chat(body, timestamp=STAMP)["content"][0] == {
        "type": "thinking", "thinking": "Thinking it over.", "raw": {"reasoning": "Thinking it over."}}
    details = [{"type": "reasoning.encrypted", "data": "eA=="}]
    del body["choices"][0]["message"]["reasoning"]
    body["choices"][0]["message"]["reasoning_details"] = details
    assert from_chat(body, timestamp=STAMP)["content"][0] == {
        "type": "thinking", "thinking": "", "raw": {"reasoning_details": details}}


@pytest.mark.parametrize(("said", "text"), [
    ({"content": [{"type": "text", "text": "Hello"}, {"type": "text"}, "x", {"text": " there"}]},
     "Hello there"),
    ({"content": "", "refusal": "No."}, "No."),
    ({"content": [], "refusal": "No."}, "No."),
    ({"content": "", "refusal": ""}, None),
    ({"content": "Hi", "annotations": []}, "Hi"),
])
def test_content_parts_an_empty_content_and_a_refusal(said: JSON, text: str | None) -> None:
    body = completion()
    body["choices"][0]["message"] = {"role": "assistant", **said}
    content = from_chat(body, timestamp=STAMP)["content"]
    assert content == ([] if text is None else [{"type": "text", "text": text}])


def test_nothing_nested_is_shared_with_the_message_or_the_final_completion() -> None:
    body = perplexity()
    details = [{"type": "reasoning.text", "text": "hm"}]
    body["choices"][0]["message"].update(reasoning_details=details, tool_calls=[
        {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}])
    message = from_chat(body, timestamp=STAMP)
    before = copy.deepcopy(message)
    body["search_results"][0]["title"] = "changed"
    details[0]["text"] = "changed"
    body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = "changed"
    assert message == before
    stream = [_chunk({"annotations": annotations(), "reasoning_details": copy.deepcopy(details)}),
              _chunk({}, "stop", usage=copy.deepcopy(USAGE))]
    final = chat_final_completion(stream)
    kept = copy.deepcopy(final)
    stream[0]["choices"][0]["delta"]["annotations"][0]["url_citation"]["url"] = "changed"
    stream[1]["usage"]["prompt_tokens_details"]["cached_tokens"] = 0
    assert final == kept


def test_the_final_completion_has_the_sdk_s_shape() -> None:
    expected = completion()
    del expected["choices"][0]["message"]["refusal"]  # streamed as null: never a string to add up
    assert chat_final_completion(chunks()) == expected
    final = chat_final_completion(tool_chunks())
    assert final["object"] == "chat.completion" and "usage" not in final
    assert final["choices"][0] == {"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "read", "arguments": "{\"path\": \"a.md\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}}
    ChatCompletion.model_validate(final)


def test_stream_fields_accumulate_and_a_later_null_keeps_the_value() -> None:
    stream = [_chunk({"annotations": annotations()[:1], "reasoning_details": [{"i": 1}]}, usage=None),
              _chunk({"annotations": annotations(), "reasoning_details": [{"i": 2}]}, usage=USAGE),
              _chunk({"tool_calls": [{"index": 0, "id": "x", "function": {"name": "ls"}}]}),
              _chunk({"tool_calls": [{"index": 1, "id": "y", "type": "custom"}]}),
              _chunk({"content": "ignored"}, index=1), {"choices": ["x"]},
              _chunk(None, "tool_calls", usage=None)]  # type: ignore[arg-type]
    final = chat_final_completion(stream)
    message = final["choices"][0]["message"]
    assert message["annotations"] == annotations() * 2
    assert message["reasoning_details"] == [{"i": 1}, {"i": 2}]
    assert message["content"] is None and final["usage"] == USAGE
    assert [(c["type"], c["function"]) for c in message["tool_calls"]] == [
        ("function", {"name": "ls", "arguments": ""}), ("custom", {"name": None, "arguments": ""})]
    assert chat_final_completion(stream[:1])["usage"] is None


def test_a_stream_error_names_its_code_and_message_and_breaks_even_a_finished_stream() -> None:
    cut = from_chat_stream(chunks()[:3], timestamp=STAMP)
    assert cut["errorMessage"] == "the stream ended before a chunk with a finish_reason"
    assert chat_final_completion(chunks()[:3])["choices"][0]["finish_reason"] is None
    for error, said in [({"message": "overloaded"}, "error: overloaded"), ({"code": 502}, "502: ")]:
        broken = [*chunks()[:4], {"error": error}]
        assert from_chat_stream(broken, timestamp=STAMP)["errorMessage"] == said
        assert "error" not in chat_final_completion(broken)
