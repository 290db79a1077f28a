"""The neutral transcript: converters on real recordings, stream == final body, restore's validation."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NotRequired, get_origin, get_type_hints

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replaykit import cassette, contracts
from replaykit.cassette import Interaction
from replaykit.errors import LocalRequestError
from replaykit.provenance import classify
from replaykit.resources import data_dir
from replaykit.routes import classify_uri
from replaykit.transcript import (
    ConversionError,
    SystemEntry,
    Transcript,
    anthropic_final_body,
    chat_final_completion,
    from_anthropic,
    from_anthropic_stream,
    from_chat,
    from_gemini,
    from_interaction,
    from_openai,
    from_openai_stream,
    gemini_final_response,
    openai_final_response,
    restore,
    schema,
)

JSON = dict[str, Any]
DATA = Path(__file__).parent / "data" / "transcript"
STAMP = 1764662400000


# ---------------------------------------------------------------- where the recordings are


def _cassette_paths() -> list[Path]:
    """Every bundled cassette, the recordings in ``recorded/`` included."""
    return cassette.iter_paths([data_dir("cassettes")])


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _provider_interactions() -> Iterator[tuple[str, Interaction]]:
    for path in _cassette_paths():
        for number, item in enumerate(cassette.load(path).interactions):
            if classify_uri(item.request.method, item.request.uri).api is not None:  # a model turn
                yield f"{_name(path)}#{number}", item


INTERACTIONS = list(_provider_interactions())
_API = {name: classify_uri(item.request.method, item.request.uri).api for name, item in INTERACTIONS}
#: The Anthropic and Responses streams, which have SDK accumulators as oracles (Chat and Gemini: below).
STREAMS = [(name, item) for name, item in INTERACTIONS
           if item.response.is_stream and _API[name] in ("anthropic-messages", "openai-responses")]
#: The Chat Completions and Gemini streams: their chunks, merged, convert as the streamed message.
CHUNKED = [(name, item) for name, item in INTERACTIONS
           if item.response.is_stream and _API[name] in ("openai-chat", "gemini-generate")]


def _events(item: Interaction) -> list[JSON]:
    return [event.json() for event in item.response.events if event.data is not None]


def _wrap(*messages: JSON) -> JSON:
    return {"version": 1, "system": None, "tools": [], "messages": list(messages)}


def test_the_recordings_are_found() -> None:
    assert len([name for name, _ in INTERACTIONS if "recorded" in name]) >= 11
    assert len(STREAMS) >= 3


# ---------------------------------------------------------------- converters on real traffic


@pytest.mark.parametrize(("name", "item"), INTERACTIONS, ids=[name for name, _ in INTERACTIONS])
def test_every_recorded_exchange_converts_to_a_valid_message(name: str, item: Interaction) -> None:
    message = from_interaction(item, timestamp=STAMP)
    restore(_wrap({"role": "user", "content": "q", "timestamp": STAMP}, message))
    assert message["timestamp"] == STAMP
    usage = message["usage"]
    assert usage["totalTokens"] == usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
    for block in message["content"]:
        if block["type"] == "hostedSearch" and ("raw" in block or block["api"] != "gemini-generate"):
            assert set(block["raw"]) & _SEARCH_WIRE[block["api"]] or block["raw"].get("type") in _SEARCH_WIRE[
                block["api"]]
            assert "name" not in block or block["phase"] == "call"


#: What a hostedSearch block's raw wire form is, by API: a block type, or the keys of its wire object (a
#: Gemini query is a string of webSearchQueries: its call block has no wire form of its own).
_SEARCH_WIRE = {
    "anthropic-messages": {"server_tool_use", "web_search_tool_result", "web_fetch_tool_result"},
    "openai-responses": {"web_search_call", "x_search_call"},
    "openai-chat": {"search_results", "citations"},
    "gemini-generate": {"groundingChunks", "webSearchQueries", "groundingSupports"},
}


def _sdk_anthropic_body(events: list[JSON]) -> JSON:
    """The final body as the Anthropic SDK's own accumulator builds it: an independent oracle."""
    from anthropic.lib.streaming._messages import accumulate_event

    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for data in events:
        if data.get("type") not in {"ping", "error"}:
            snapshot = accumulate_event(event=data, current_snapshot=snapshot, json_bufs=buffers)  # type: ignore[arg-type]
    body: JSON = snapshot.to_dict()
    return body


def _oracle(item: Interaction, events: list[JSON]) -> JSON:
    """The final body of a stream, built without replaykit: the SDK's accumulator or the terminal event."""
    if "/v1/messages" in item.request.uri:
        return _sdk_anthropic_body(events)
    terminal = [
        data
        for data in events
        if data.get("type") in {"response.completed", "response.incomplete", "response.failed"}
    ]
    return dict(terminal[-1]["response"])


def _finished(events: list[JSON]) -> bool:
    kinds = {data.get("type") for data in events}
    return "error" not in kinds and bool(
        kinds & {"message_stop", "response.completed", "response.incomplete", "response.failed"}
    )


@pytest.mark.parametrize(("name", "item"), STREAMS, ids=[name for name, _ in STREAMS])
def test_a_stream_converts_like_its_final_body(name: str, item: Interaction) -> None:
    events = _events(item)
    streamed = from_interaction(item, timestamp=STAMP)
    body = _oracle(item, events)
    if "/v1/messages" in item.request.uri:
        expected = from_anthropic(body, timestamp=STAMP) if _finished(events) else None
    else:
        expected = (
            from_openai(body, timestamp=STAMP, provider=streamed["provider"]) if _finished(events) else None
        )
    if expected is None:  # a broken stream: an error message that keeps what arrived
        assert streamed["stopReason"] == "error" and streamed["errorMessage"]
    else:
        assert streamed == expected


def _pairs() -> list[tuple[str, Interaction, Interaction]]:
    """Cassette pairs ``X.yaml`` / ``X_stream.yaml``: the same exchanges, as a body and as a stream.

    Not in ``recorded/``: there the two files are separate real conversations.
    """
    paths = {_name(path): path for path in _cassette_paths()}
    pairs: list[tuple[str, Interaction, Interaction]] = []
    for name, path in paths.items():
        twin = paths.get(name.replace("_stream.yaml", ".yaml"))
        if name.endswith("_stream.yaml") and twin is not None and path.parent.name != "recorded":
            streamed, plain = cassette.load(path).interactions, cassette.load(twin).interactions
            pairs += [
                (f"{name}#{n}", a, b)
                for n, (a, b) in enumerate(zip(plain, streamed, strict=False))
                if b.response.is_stream
            ]
    return pairs


@pytest.mark.parametrize(("name", "plain", "streamed"), _pairs(), ids=[name for name, _, _ in _pairs()])
def test_a_cassette_pair_converts_alike(name: str, plain: Interaction, streamed: Interaction) -> None:
    assert from_interaction(streamed, timestamp=STAMP) == from_interaction(plain, timestamp=STAMP)


def _unencrypted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unencrypted(v) for k, v in value.items() if k != "encrypted_content"}
    return [_unencrypted(v) for v in value] if isinstance(value, list) else value


@pytest.mark.parametrize(("name", "item"), CHUNKED, ids=[name for name, _ in CHUNKED])
def test_a_chunked_stream_converts_like_its_merged_body(name: str, item: Interaction) -> None:
    chunks = [event.json() for event in item.response.events if event.data not in (None, "[DONE]")]
    streamed = from_interaction(item, timestamp=STAMP)
    if _API[name] == "openai-chat":
        merged = from_chat(chat_final_completion(chunks), timestamp=STAMP, provider=streamed["provider"])
    else:
        merged = from_gemini(gemini_final_response(chunks), timestamp=STAMP, provider=streamed["provider"])
    assert streamed == merged and streamed["content"]


def test_my_accumulators_match_the_oracles_on_real_streams() -> None:
    assert STREAMS
    for _, item in STREAMS:
        events = _events(item)
        if not _finished(events):
            continue
        oracle = _oracle(item, events)
        if "/v1/messages" in item.request.uri:
            assert from_anthropic(anthropic_final_body(events), timestamp=1) == from_anthropic(
                oracle, timestamp=1
            )
            continue
        assert openai_final_response(events)["output"] == oracle["output"]
        # without the terminal event the output is assembled from the item events: the same items, except
        # that the server re-encrypts reasoning in response.completed
        assembled = openai_final_response(events[:-1])["output"]
        assert _unencrypted(assembled) == _unencrypted(oracle["output"])


# ---------------------------------------------------------------- streams built from bodies (the wire docs)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _anthropic_block_events(index: int, block: JSON, size: int) -> list[JSON]:
    kind = block["type"]
    deltas: list[JSON] = []
    start = copy.deepcopy(block)
    if kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "citations_delta", "citation": c} for c in block.get("citations") or []]
        deltas += [{"type": "text_delta", "text": part} for part in _chunks(block["text"], size)]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": part} for part in _chunks(block["thinking"], size)]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind in {"tool_use", "server_tool_use"}:
        start = {**block, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": part}
            for part in _chunks(json.dumps(block["input"]), size)
        ]
    events = [{"type": "content_block_start", "index": index, "content_block": start}]
    events += [{"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas]
    return [*events, {"type": "content_block_stop", "index": index}]


def anthropic_stream_of(body: JSON, size: int = 7) -> list[JSON]:
    """The stream the Messages API sends for ``body`` (per the streaming docs), text in ``size`` chunks."""
    usage = body["usage"]
    head = {
        **body,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    events: list[JSON] = [{"type": "message_start", "message": head}, {"type": "ping"}]
    for index, block in enumerate(body["content"]):
        events += _anthropic_block_events(index, block, size)
    delta = {"stop_reason": body["stop_reason"], "stop_sequence": body.get("stop_sequence")}
    events.append(
        {
            "type": "message_delta",
            "delta": delta,
            "usage": {"output_tokens": usage["output_tokens"], "input_tokens": usage["input_tokens"]},
        }
    )
    return [*events, {"type": "message_stop"}]


def _openai_item_events(index: int, item: JSON, size: int) -> list[JSON]:
    added = {**copy.deepcopy(item), "status": "in_progress"}
    events: list[JSON] = []
    if item["type"] == "message":
        added["content"] = []
        for part_index, part in enumerate(item["content"]):
            where = {"item_id": item["id"], "output_index": index, "content_index": part_index}
            empty = {"type": "output_text", "text": "", "annotations": []}
            events.append({"type": "response.content_part.added", **where, "part": empty})
            events += [
                {"type": "response.output_text.delta", **where, "delta": text}
                for text in _chunks(part["text"], size)
            ]
    head = [{"type": "response.output_item.added", "output_index": index, "item": added}]
    return [*head, *events, {"type": "response.output_item.done", "output_index": index, "item": item}]


def openai_stream_of(response: JSON, size: int = 7) -> list[JSON]:
    """The stream the Responses API sends for ``response`` (per the SDK's event types)."""
    head = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[JSON] = [{"type": "response.created", "response": head}]
    for index, item in enumerate(response["output"]):
        events += _openai_item_events(index, item, size)
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
        response["status"], "response.failed"
    )
    events.append({"type": terminal, "response": response})
    return [{**event, "sequence_number": number} for number, event in enumerate(events)]


def _recorded_bodies(api: str) -> list[JSON]:
    marker = "/v1/messages" if api == "anthropic" else "/responses"
    return [
        item.response.json()
        for _, item in INTERACTIONS
        if marker in item.request.uri and not item.response.is_stream and item.response.status == 200
    ]


def test_recorded_bodies_streamed_back_convert_alike() -> None:
    bodies = _recorded_bodies("anthropic") + _recorded_bodies("openai")
    assert bodies
    for body in bodies:
        if "content" in body:
            assert from_anthropic_stream(anthropic_stream_of(body), timestamp=1) == from_anthropic(
                body, timestamp=1
            )
        else:
            assert from_openai_stream(openai_stream_of(body), timestamp=1) == from_openai(body, timestamp=1)


def test_a_lost_delta_is_seen() -> None:
    body = {
        "id": "msg_1",
        "model": "m",
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 4},
        "content": [{"type": "text", "text": "abcdefghijklmnop"}],
    }
    events = anthropic_stream_of(body, size=4)
    del events[4]  # one text_delta
    assert from_anthropic_stream(events, timestamp=1) != from_anthropic(body, timestamp=1)


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_ids = st.from_regex(r"[A-Za-z0-9_]{4,12}", fullmatch=True)
_citation = st.fixed_dictionaries(
    {
        "type": st.just("web_search_result_location"),
        "url": _text,
        "title": _text,
        "encrypted_index": _ids,
        "cited_text": _text,
    }
)
_result = st.fixed_dictionaries(
    {
        "type": st.just("web_search_result"),
        "url": _text,
        "title": _text,
        "encrypted_content": _ids,
        "page_age": st.none() | _text,
    }
)
_anthropic_blocks = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": _text, "citations": st.lists(_citation, max_size=2)}
    ),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _text, "signature": _ids}),
    st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": _ids}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": _ids,
            "name": _ids,
            "input": st.dictionaries(_ids, _text | st.integers(), max_size=3),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("server_tool_use"),
            "id": _ids,
            "name": st.just("web_search"),
            "input": st.fixed_dictionaries({"query": _text}),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("web_search_tool_result"),
            "tool_use_id": _ids,
            "content": st.lists(_result, max_size=3)
            | st.fixed_dictionaries(
                {
                    "type": st.just("web_search_tool_result_error"),
                    "error_code": st.sampled_from(["unavailable", "max_uses_exceeded"]),
                }
            ),
        }
    ),
)
_stops = st.sampled_from(
    [
        "end_turn",
        "stop_sequence",
        "max_tokens",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    ]
)
_counts = st.integers(min_value=0, max_value=10**6)
anthropic_bodies = st.fixed_dictionaries(
    {
        "id": _ids,
        "type": st.just("message"),
        "role": st.just("assistant"),
        "model": _ids,
        "content": st.lists(_anthropic_blocks, max_size=6),
        "stop_reason": _stops,
        "stop_sequence": st.none(),
        "usage": st.fixed_dictionaries(
            {
                "input_tokens": _counts,
                "output_tokens": _counts,
                "cache_read_input_tokens": _counts,
                "cache_creation_input_tokens": _counts,
            }
        ),
    }
)
_openai_items = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("reasoning"),
            "id": _ids,
            "encrypted_content": _ids,
            "summary": st.lists(
                st.fixed_dictionaries({"type": st.just("summary_text"), "text": _text}), max_size=2
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("web_search_call"),
            "id": _ids,
            "status": st.sampled_from(["completed", "failed"]),
            "action": st.fixed_dictionaries({"type": st.just("search"), "query": _text}),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("message"),
            "id": _ids,
            "role": st.just("assistant"),
            "status": st.just("completed"),
            "content": st.lists(
                st.fixed_dictionaries(
                    {"type": st.just("output_text"), "text": _text, "annotations": st.just([])}
                ),
                min_size=1,
                max_size=2,
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call"),
            "id": _ids,
            "call_id": _ids,
            "name": _ids,
            "status": st.just("completed"),
            "arguments": st.dictionaries(_ids, _text, max_size=2).map(json.dumps),
        }
    ),
)
openai_responses = st.fixed_dictionaries(
    {
        "id": _ids,
        "object": st.just("response"),
        "model": _ids,
        "output": st.lists(_openai_items, max_size=6),
        "status": st.sampled_from(["completed", "incomplete", "failed"]),
        "error": st.none(),
        "usage": st.fixed_dictionaries(
            {
                "input_tokens": _counts,
                "output_tokens": _counts,
                "input_tokens_details": st.fixed_dictionaries({"cached_tokens": st.just(0)}),
            }
        ),
    }
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=anthropic_bodies, size=st.integers(min_value=1, max_value=9))
def test_any_anthropic_stream_converts_like_its_body(body: JSON, size: int) -> None:
    message = from_anthropic(body, timestamp=STAMP)
    assert from_anthropic_stream(anthropic_stream_of(body, size), timestamp=STAMP) == message
    restore(_wrap(message))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(response=openai_responses, size=st.integers(min_value=1, max_value=9))
def test_any_openai_stream_converts_like_its_body(response: JSON, size: int) -> None:
    message = from_openai(response, timestamp=STAMP)
    assert from_openai_stream(openai_stream_of(response, size), timestamp=STAMP) == message
    restore(_wrap(message))


# ---------------------------------------------------------------- mappings


def _anthropic(stop: str = "end_turn", **usage: int) -> JSON:
    return {
        "id": "msg_x",
        "model": "claude-x",
        "stop_reason": stop,
        "content": [],
        "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
    }


@pytest.mark.parametrize(
    ("wire", "neutral"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("refusal", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "toolUse"),
        ("pause_turn", "pauseTurn"),
    ],
)
def test_anthropic_stop_reasons(wire: str, neutral: str) -> None:
    assert from_anthropic(_anthropic(wire), timestamp=1)["stopReason"] == neutral


def test_anthropic_usage_maps_cache_fields() -> None:
    usage = from_anthropic(_anthropic(cache_read_input_tokens=7, cache_creation_input_tokens=3), timestamp=1)[
        "usage"
    ]
    assert usage == {"input": 10, "output": 5, "cacheRead": 7, "cacheWrite": 3, "totalTokens": 25}


def _openai(status: str, *items: JSON) -> JSON:
    return {
        "id": "resp_x",
        "model": "gpt-x",
        "status": status,
        "output": list(items),
        "error": None,
        "usage": {
            "input_tokens": 100,
            "output_tokens": 20,
            "total_tokens": 120,
            "input_tokens_details": {"cached_tokens": 60},
        },
    }


_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "f",
    "arguments": '{"a": 1}',
    "status": "completed",
}


@pytest.mark.parametrize(
    ("status", "items", "neutral"),
    [
        ("completed", [], "stop"),
        ("completed", [_CALL], "toolUse"),
        ("incomplete", [], "length"),
        ("failed", [], "error"),
        ("cancelled", [], "aborted"),
    ],
)
def test_openai_statuses(status: str, items: list[JSON], neutral: str) -> None:
    assert from_openai(_openai(status, *items), timestamp=1)["stopReason"] == neutral


def test_openai_usage_splits_cached_input() -> None:
    usage = from_openai(_openai("completed"), timestamp=1)["usage"]
    assert usage == {"input": 40, "output": 20, "cacheRead": 60, "cacheWrite": 0, "totalTokens": 120}


def test_openai_items_keep_their_wire_form() -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "queries": ["first", "second"]},
    }
    failed = {"type": "web_search_call", "id": "ws_2", "status": "failed", "action": {"type": "search"}}
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "encrypted_content": "gAAA" + "x" * 8,
        "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
    }
    content = from_openai(_openai("completed", reasoning, search, failed, _CALL), timestamp=1)["content"]
    assert content[0] == {"type": "thinking", "thinking": "a\n\nb", "raw": reasoning}
    assert content[1]["query"] == "first" and content[1]["raw"] == search
    assert content[2] == {
        "type": "hostedSearch",
        "phase": "error",
        "provider": "openai",
        "api": "openai-responses",
        "toolUseId": "ws_2",
        "errorCode": "failed",
        "raw": failed,
    }
    assert content[3] == {
        "type": "toolCall",
        "id": "call_1",
        "name": "f",
        "arguments": {"a": 1},
        "raw": _CALL,
    }


def test_anthropic_search_blocks_and_citations() -> None:
    call = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    error = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
    }
    cite = {
        "type": "web_search_result_location",
        "url": "u",
        "title": "t",
        "encrypted_index": "Eo1",
        "cited_text": "c",
    }
    body = {**_anthropic(), "content": [call, error, {"type": "text", "text": "x", "citations": [cite]}]}
    content = from_anthropic(body, timestamp=1)["content"]
    assert content[0]["phase"] == "call" and content[0]["query"] == "q" and content[0]["raw"] == call
    assert content[1]["phase"] == "error" and content[1]["errorCode"] == "max_uses_exceeded"
    assert "name" not in content[1] and "arguments" not in content[1]
    assert content[2] == {"type": "text", "text": "x", "citations": [cite]}


def test_conversion_errors_say_what_is_wrong() -> None:
    with pytest.raises(ConversionError, match=r"content\[0\] has no string type"):
        from_anthropic({**_anthropic(), "content": [{"kind": "code_execution_tool_result"}]}, timestamp=1)
    with pytest.raises(ConversionError, match=r"output\[0\] has no string type"):
        from_openai(_openai("completed", {"type": None}), timestamp=1)
    with pytest.raises(ConversionError, match="stop_reason 'sleepy'"):
        from_anthropic(_anthropic("sleepy"), timestamp=1)
    with pytest.raises(ConversionError, match="status 'in_progress' is not final"):
        from_openai(_openai("in_progress"), timestamp=1)
    with pytest.raises(ConversionError, match="no message_start"):
        from_anthropic_stream([{"type": "ping"}], timestamp=1)


def test_tool_arguments_nested_past_the_limit_are_not_parsed() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    events = anthropic_stream_of({**_anthropic("tool_use"), "content": [use]}, size=1 << 20)
    events[3]["delta"]["partial_json"] = deep  # the one input_json_delta
    with pytest.raises(ConversionError, match="block 0: the streamed input is not JSON: JSON nested deeper"):
        from_anthropic_stream(events, timestamp=1)
    message = from_openai(_openai("completed", {**_CALL, "arguments": deep}), timestamp=1)
    assert message["content"][0]["arguments"] == {}  # as for any arguments that are not JSON


@pytest.mark.parametrize("content", [["just a string"], [42], "a string, not a list of parts"])
def test_a_message_part_that_is_not_an_object_is_a_conversion_error(content: Any) -> None:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "content": content}
    with pytest.raises(ConversionError, match=r"output\[0\]"):
        from_openai(_openai("completed", item), timestamp=1)


@pytest.mark.parametrize("parts", [["not a part"], "text"])
def test_a_streamed_part_that_is_not_an_object_is_a_conversion_error(parts: Any) -> None:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "content": parts}
    events = [{"type": "response.created", "response": _openai("in_progress")},
              {"type": "response.output_item.added", "output_index": 0, "item": item},
              {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "x"}]
    with pytest.raises(ConversionError, match=r"output\[0\].*content part"):
        from_openai_stream(events, timestamp=1)


def test_a_broken_stream_keeps_what_arrived() -> None:
    body = {**_anthropic(), "content": [{"type": "text", "text": "partial answer"}]}
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    events = [*anthropic_stream_of(body)[:-2], overloaded]
    message = from_anthropic_stream(events, timestamp=1)
    assert message["stopReason"] == "error" and message["errorMessage"] == "overloaded_error: Overloaded"
    assert message["content"] == [{"type": "text", "text": "partial answer"}]
    cut = openai_stream_of(_openai("completed"))[:-1]
    assert from_openai_stream(cut, timestamp=1)["stopReason"] == "error"


def _interaction(uri: str, status: int, body: JSON) -> Interaction:
    request = cassette.Request("POST", uri, {}, json.dumps({"model": "deployment-1"}).encode())
    headers = {"content-type": ["application/json"]}
    return Interaction(request, cassette.Response(status, "", headers, json.dumps(body).encode()))


def test_from_interaction_dispatches_on_the_route() -> None:
    azure = _interaction("https://res.openai.azure.com/openai/v1/responses", 200, _openai("completed"))
    assert from_interaction(azure, timestamp=1)["provider"] == "azure"
    plain = _interaction("https://api.openai.com/v1/responses", 200, _openai("completed"))
    assert from_interaction(plain, timestamp=1)["provider"] == "openai"
    failed = _interaction(
        "https://api.anthropic.com/v1/messages",
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    message = from_interaction(failed, timestamp=1)
    assert (message["stopReason"], message["model"], message["content"]) == ("error", "deployment-1", [])
    assert message["errorMessage"] == "HTTP 529: Overloaded"
    with pytest.raises(ConversionError, match="no model turn"):
        from_interaction(_interaction("https://example.com/v1/other", 200, {}), timestamp=1)


# ---------------------------------------------------------------- restore


def _legacy() -> JSON:
    loaded: JSON = json.loads((DATA / "legacy.json").read_text(encoding="utf-8"))
    return loaded


def test_the_schema_has_its_id() -> None:
    assert schema()["$id"] == "https://replaykit.dev/contracts/replaykit/transcript.schema.json"


def test_legacy_and_display_only_blocks_load_unchanged() -> None:
    data = _legacy()
    before = copy.deepcopy(data)
    assert restore(data, source="legacy.json") == before
    legacy_result = data["messages"][1]["content"][1]
    assert "name" not in legacy_result and "results" not in legacy_result and "provider" not in legacy_result
    assert "raw" not in data["messages"][1]["content"][2]


def _broken(path: list[Any], value: Any) -> JSON:
    data = _legacy()
    target = data
    for part in path[:-1]:
        target = target[part]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "pointer", "index"),
    [
        (["messages", 1, "content"], "not blocks", "/messages/1/content", 1),
        (["messages", 1, "content"], {"type": "text", "text": "x"}, "/messages/1/content", 1),
        (["messages", 2, "content"], 42, "/messages/2/content", 2),
        (["messages", 0, "timestamp"], _DELETE, "/messages/0/timestamp", 0),
        (["messages", 3, "timestamp"], math.nan, "/messages/3/timestamp", 3),
        (["messages", 3, "timestamp"], math.inf, "/messages/3/timestamp", 3),
        (["messages", 3, "timestamp"], 10**400, "/messages/3/timestamp", 3),
        (["messages", 3, "timestamp"], "2025-12-02", "/messages/3/timestamp", 3),
        (["messages", 2, "role"], "tool", "/messages/2/role", 2),
        (["messages", 1, "content", 1, "name"], "web_search", "/messages/1/content/1", 1),
        (["messages", 1, "content", 1, "phase"], "done", "/messages/1/content/1/phase", 1),
        (["messages", 1, "content", 4, "type"], "serverToolUse", "/messages/1/content/4/type", 1),
        (["messages", 1, "stopReason"], "end_turn", "/messages/1/stopReason", 1),
        (["messages", 1, "usage", "totalTokens"], _DELETE, "/messages/1/usage/totalTokens", 1),
        (["messages"], {"0": {}}, "/messages", None),
        (["version"], 2, "/version", None),
        (["tools", 0, "blockedDomains"], ["a.example"], "/tools/0", None),
    ],
)
def test_restore_names_the_pointer_and_the_message(
    path: list[Any], value: Any, pointer: str, index: int | None
) -> None:
    with pytest.raises(LocalRequestError) as caught:
        restore(_broken(path, value), source="stored.json")
    error = caught.value
    assert (error.phase, error.pointer, error.message_index) == ("validation", pointer, index)
    assert str(error).startswith(f"validation error at {pointer}: stored.json: ")


def _secretish() -> str:
    return "sk-" + "ant-api03-" + "Zq7v" * 12  # built at run time: no key shape is written in this file


@pytest.mark.parametrize(("path", "planted"), [
    (["messages", 1, "content"], lambda key: f"my private note {key}"),
    (["messages", 1, "content"], lambda key: {"type": "text", "text": f"my private note {key}"}),
    (["messages", 2, "content"], lambda key: [{"type": "text", "text": key}, 42]),
    (["messages", 2, "role"], lambda key: key),
    (["messages", 1, "content", 1, "name"], lambda key: key),
    (["messages", 1, "content", 1, "phase"], lambda key: key),
    (["messages", 1, "stopReason"], lambda key: key),
    (["messages"], lambda key: {key: {"text": "my private note"}}),
    (["version"], lambda key: key),
    (["tools", 0, "blockedDomains"], lambda key: [key]),
], ids=["string", "object", "array", "enum", "not", "phase", "stop", "member-name", "const", "tools"])
def test_restore_messages_describe_the_value_never_quote_it(path: list[Any], planted: Any) -> None:
    key = _secretish()
    with pytest.raises(LocalRequestError) as caught:
        restore(_broken(path, planted(key)), source="stored.json")
    shown = [str(caught.value), classify(caught.value).message]
    for text in shown:
        assert "Zq7v" not in text and "private note" not in text and "srvtoolu" not in text, text
    assert "got a" in shown[0] or "breaks the schema" in shown[0]


def test_a_restore_message_names_the_type_and_length() -> None:
    with pytest.raises(LocalRequestError) as caught:
        restore(_broken(["messages", 1, "content"], "not blocks"))
    assert "expected array, got a string of 10 characters" in str(caught.value)
    with pytest.raises(LocalRequestError) as caught:
        restore(_broken(["messages", 2, "role"], "tool"))
    expected = 'got a string of 4 characters, expected one of "user", "assistant", "toolResult"'
    assert expected in str(caught.value)


def test_restore_refuses_what_is_not_a_transcript() -> None:
    for data in (None, [], "{}"):
        with pytest.raises(LocalRequestError) as caught:
            restore(data)
        assert caught.value.pointer == "" and caught.value.message_index is None


def test_restore_explains_the_fix() -> None:
    with pytest.raises(LocalRequestError, match="never invent one"):
        restore(_broken(["messages", 0, "timestamp"], _DELETE))
    with pytest.raises(LocalRequestError, match="no name and no arguments"):
        restore(_broken(["messages", 1, "content", 1, "arguments"], {}))


# ---------------------------------------------------------------- systemHistory


def _entry(at: Any, system: Any = "You are a research assistant.", tools: Any = None) -> JSON:
    return {"timestamp": at, "system": system, "tools": [] if tools is None else tools}


def _with_history(*entries: Any) -> JSON:
    data = _legacy()
    data["systemHistory"] = list(entries)
    return data


def test_a_system_history_restores_unchanged() -> None:
    tools = _legacy()["tools"]
    rebuilt = {**_entry(STAMP + 5, tools=tools), "note": "same time: rebuilt"}
    data = _with_history(_entry(STAMP, None), _entry(STAMP + 5, "Be brief.", tools), rebuilt,
                         _entry(STAMP + 9.5))
    before = copy.deepcopy(data)
    assert restore(data, source="stored.json") is data
    assert data == before
    assert restore(_with_history(), source="empty.json")["systemHistory"] == []


def test_the_typed_dicts_follow_the_schema() -> None:
    entry, hints = schema()["$defs"]["systemEntry"], get_type_hints(SystemEntry, include_extras=True)
    assert set(hints) == set(entry["required"]) == set(entry["properties"])
    assert not any(get_origin(hint) is NotRequired for hint in hints.values())
    history = get_type_hints(Transcript, include_extras=True)["systemHistory"]
    assert history == NotRequired[list[SystemEntry]]
    assert "systemHistory" not in schema()["required"]
    assert schema()["properties"]["systemHistory"]["items"] == {"$ref": "#/$defs/systemEntry"}


_GOOD = _entry(STAMP)


@pytest.mark.parametrize(
    ("history", "pointer", "says"),
    [
        ({"0": _GOOD}, "/systemHistory", "expected array, got an object; systemHistory must be a list"),
        ([_GOOD, "Be brief."], "/systemHistory/1", "expected object, got a string of 9 characters"),
        ([{"system": None, "tools": []}], "/systemHistory/0/timestamp", "'timestamp' is required; timestamp"),
        ([{"timestamp": STAMP, "tools": []}], "/systemHistory/0/system", "'system' is required; an entry's"),
        ([_GOOD, {"timestamp": STAMP, "system": None}], "/systemHistory/1/tools", "'tools' is required"),
        ([_entry("2025-12-02")], "/systemHistory/0/timestamp", "expected number, got a string of 10"),
        ([_entry(True)], "/systemHistory/0/timestamp", "expected number, got a boolean"),
        ([_GOOD, _entry(math.nan)], "/systemHistory/1/timestamp", "timestamp nan is not a finite number"),
        ([_entry(math.inf)], "/systemHistory/0/timestamp", "timestamp inf is not a finite number"),
        ([_entry(-math.inf)], "/systemHistory/0/timestamp", "timestamp -inf is not a finite number"),
        ([_entry(10**400)], "/systemHistory/0/timestamp", "timestamp 1" + "0" * 39 + "… is not"),
        ([_entry(STAMP, 42)], "/systemHistory/0/system", "expected string or null, got an integer"),
        ([_entry(STAMP, tools={"name": "x"})], "/systemHistory/0/tools", "expected array, got an object"),
        ([_entry(STAMP, tools=[{"name": "x"}])], "/systemHistory/0/tools/0/parameters", "'parameters' is"),
        ([_entry(STAMP, tools=[{"type": "hostedSearch", "allowedDomains": [], "blockedDomains": []}])],
         "/systemHistory/0/tools/0", "never both"),
        ([_GOOD, _entry(STAMP + 5), _entry(STAMP + 4)], "/systemHistory/2/timestamp",
         f"systemHistory entry 2 (timestamp {STAMP + 4}) is earlier than entry 1 (timestamp {STAMP + 5}); "
         "list the systemHistory entries in time order"),
    ],
    ids=["not-a-list", "not-an-object", "no-timestamp", "no-system", "no-tools", "string-stamp",
         "boolean-stamp", "nan", "inf", "-inf", "huge", "system-type", "tools-type", "bad-tool",
         "two-domain-lists", "out-of-order"],
)
def test_restore_names_the_system_history_pointer(history: Any, pointer: str, says: str) -> None:
    data = _with_history(*history) if isinstance(history, list) else {**_legacy(), "systemHistory": history}
    with pytest.raises(LocalRequestError) as caught:
        restore(data, source="stored.json")
    error = caught.value
    assert (error.phase, error.pointer, error.message_index) == ("validation", pointer, None)
    assert str(error).startswith(f"validation error at {pointer}: stored.json: "), str(error)
    assert says in str(error)


def test_system_history_messages_never_quote_the_prompt() -> None:
    key = _secretish()
    for history in ([_entry(STAMP, [key])], [_entry(STAMP, tools=[{"name": key}])],
                    [_entry(STAMP + 1, key), _entry(STAMP, key)], [{"system": key, "tools": [key]}]):
        with pytest.raises(LocalRequestError) as caught:
            restore(_with_history(*history), source="stored.json")
        for text in (str(caught.value), classify(caught.value).message):
            assert "Zq7v" not in text, text


def test_the_time_order_rule_compares_finite_neighbours() -> None:
    rule = contracts.RULES["non_decreasing_timestamps"]

    def paths(*stamps: Any) -> list[list[Any]]:
        return [list(error.path) for error in rule({"systemHistory": [{"timestamp": at} for at in stamps]})]

    assert paths(1, 1, 2, 2.5) == []
    assert paths(3, 2, 1) == [["systemHistory", 1, "timestamp"], ["systemHistory", 2, "timestamp"]]
    assert paths(5, math.nan, None, "4", True, 4) == [["systemHistory", 5, "timestamp"]]
    assert paths(1, math.inf, 2) == []  # non-finite: restore reports it, the order is not judged on it
    assert list(rule({"systemHistory": [{"timestamp": 2}, "x", {"timestamp": 1}]}))
    assert list(rule({"systemHistory": {"a": {"timestamp": 2}}})) == list(rule({"messages": []})) == []


def test_a_transcript_embedded_in_another_contract_keeps_its_history_in_order() -> None:
    data = _with_history(_entry(STAMP + 1), _entry(STAMP))
    request = {"id": 1, "transcript": data, "target": {"provider": "anthropic", "api": "anthropic-messages",
                                                       "model": "claude-sonnet-4-5"}}
    found = [(v.pointer, v.keyword) for v in contracts.validate("replaykit.estimator-request", request)]
    assert found == [("/transcript/systemHistory/1/timestamp", "x-rules")]
    data["systemHistory"].reverse()
    assert contracts.validate("replaykit.estimator-request", request) == []


# ---------------------------------------------------------------- blocks the transcript does not model


NEW_BLOCKS = [
    {"type": "server_tool_use", "id": "srvtoolu_01code", "name": "code_execution",
     "input": {"code": "print(1)"}, "caller": {"type": "direct"}},
    {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_01code",
     "content": {"type": "encrypted_code_execution_result", "encrypted_stdout": "Eq1", "stderr": "",
                 "return_code": 1, "content": [], "abort_reason": None}},
    {"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_01bash",
     "content": {"type": "bash_code_execution_result", "stdout": "650\n", "stderr": "", "return_code": 0,
                 "content": []}},
    {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_01ts",
     "content": {"type": "tool_search_tool_search_result", "tool_references": []}},
    {"type": "container_upload", "file_id": "file_01"},
    {"type": "mind_reading_tool_result_2027", "tool_use_id": "srvtoolu_01mind", "content": {"thought": "x"}},
]


@pytest.mark.parametrize("block", NEW_BLOCKS, ids=lambda block: str(block["type"]))
def test_a_block_the_transcript_does_not_model_becomes_one_opaque_block(block: JSON) -> None:
    body = {**_anthropic(), "content": [{"type": "text", "text": "a"}, block]}
    content = from_anthropic(body, timestamp=1)["content"]
    assert content[1] == {"type": "providerBlock", "provider": "anthropic", "api": "anthropic-messages",
                          "blockType": block["type"], "raw": block}
    assert content[1]["raw"] is not block  # a copy: the wire body is never shared with the transcript
    assert restore({"version": 1, "messages": [_user("q"), from_anthropic(body, timestamp=1)]})


def _user(text: str) -> JSON:
    return {"role": "user", "content": text, "timestamp": 1}


@pytest.mark.parametrize("item", [
    {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "code": "1+1",
     "container_id": "c"},
    {"type": "code_interpreter_call", "id": "fc_uuid_us-east-1_0", "status": "completed",
     "name": "code_execution", "arguments": "{}"},  # xAI's form
    {"type": "custom_tool_call", "id": "ctc_1", "call_id": "xs_call_1", "name": "x_search", "input": "q"},
    {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBOR"},
    {"type": "a_tool_of_next_year_call", "id": "nx_1"},
], ids=lambda item: str(item["type"]))
def test_an_openai_item_the_transcript_does_not_model_becomes_one_opaque_block(item: JSON) -> None:
    content = from_openai(_openai("completed", item), timestamp=1, provider="azure")["content"]
    assert content == [{"type": "providerBlock", "provider": "azure", "api": "openai-responses",
                        "blockType": item["type"], "raw": item}]


def test_a_search_run_by_code_is_a_hosted_search_with_its_caller_in_raw() -> None:
    caller = {"type": "code_execution_20260120", "tool_id": "srvtoolu_01code"}
    call = {"type": "server_tool_use", "id": "srvtoolu_01s", "name": "web_search", "input": {"query": "q"},
            "caller": caller}
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01s", "caller": caller, "content": [
        {"type": "web_search_result", "url": "https://a.example", "title": "A", "encrypted_content": "E",
         "page_age": None}]}
    body = {**_anthropic(), "content": [NEW_BLOCKS[0], call, result]}
    content = from_anthropic(body, timestamp=1)["content"]
    assert [block["type"] for block in content] == ["providerBlock", "hostedSearch", "hostedSearch"]
    assert content[1]["query"] == "q" and content[1]["raw"] == call
    assert content[2]["results"] == [{"url": "https://a.example", "title": "A", "pageAge": None}]
    assert content[2]["raw"]["caller"] == caller


def test_a_tool_call_keeps_its_wire_block_with_its_caller() -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"},
           "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_01code"}}
    block = from_anthropic({**_anthropic("tool_use"), "content": [use]}, timestamp=1)["content"][0]
    assert block == {"type": "toolCall", "id": "toolu_1", "name": "get_weather",
                     "arguments": {"city": "Oslo"}, "raw": use}


def test_a_stream_with_unknown_blocks_and_deltas_converts_as_the_sdk_accumulates() -> None:
    future = {"type": "hologram_tool_result_2027", "tool_use_id": "srvtoolu_01h", "content": []}
    body = {**_anthropic(), "content": [{"type": "text", "text": "hello"}, future]}
    events = anthropic_stream_of(body)
    at = next(n for n, e in enumerate(events) if e["type"] == "content_block_stop" and e["index"] == 1)
    unknown = {"type": "content_block_delta", "index": 1, "delta": {"type": "hologram_delta", "x": 1}}
    events.insert(at, unknown)
    message = from_anthropic_stream(events, timestamp=1)
    assert message["stopReason"] == "stop"
    assert message["content"][1] == {"type": "providerBlock", "provider": "anthropic",
                                     "api": "anthropic-messages", "blockType": future["type"], "raw": future}
