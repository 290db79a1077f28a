"""Durable turns of the reference harness, piece by piece: the partial message rebuilt from a cut stream,
the continuation folded into it, the stream record (only the call in flight is read back), the backoff."""

from __future__ import annotations

from pathlib import Path

from replaykit.reference.durable import Recovery, StreamRecord, merged, partial_message, read_stream
from replaykit.replay import Target

ANTHROPIC = Target("anthropic", "anthropic-messages", "claude-sonnet-4-6", max_tokens=1024)
HEAD = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                             "model": "claude-sonnet-4-6", "content": [], "stop_reason": None,
                                             "usage": {"input_tokens": 10, "output_tokens": 1}}}


def _text(index: int, *pieces: str, stop: bool = True) -> list[dict[str, object]]:
    events: list[dict[str, object]] = [{"type": "content_block_start", "index": index,
                                        "content_block": {"type": "text", "text": ""}}]
    events += [{"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
               for p in pieces]
    return events + ([{"type": "content_block_stop", "index": index}] if stop else [])


def _tool(index: int, *pieces: str, stop: bool) -> list[dict[str, object]]:
    start = {"type": "content_block_start", "index": index,
             "content_block": {"type": "tool_use", "id": f"toolu_{index}", "name": "read", "input": {}}}
    deltas = [{"type": "content_block_delta", "index": index,
               "delta": {"type": "input_json_delta", "partial_json": p}} for p in pieces]
    return [start, *deltas, *([{"type": "content_block_stop", "index": index}] if stop else [])]


def test_a_cut_stream_keeps_its_text_and_finished_calls_and_drops_an_unfinished_call() -> None:
    events = [HEAD, *_text(0, "I recall ", "it was "), *_tool(1, '{"path": "a.md"}', stop=True),
              *_tool(2, '{"path": "no', stop=False)]
    message = partial_message(events, ANTHROPIC, 5)
    assert message is not None
    blocks = message["content"]
    assert [block["type"] for block in blocks] == ["text", "toolCall"]
    assert blocks[0] == {"type": "text", "text": "I recall it was "}
    assert blocks[1]["arguments"] == {"path": "a.md"}
    assert message["stopReason"] == "stop" and message.get("partial") is True  # type: ignore[typeddict-item]


def test_a_partial_message_ending_in_text_ends_without_whitespace() -> None:
    message = partial_message([HEAD, *_text(0, "I recall ", stop=False)], ANTHROPIC, 5)
    assert message is not None and message["content"] == [{"type": "text", "text": "I recall"}]


def test_a_stream_cut_before_any_content_keeps_nothing() -> None:
    assert partial_message([HEAD, *_text(0, stop=False)], ANTHROPIC, 5) is None
    assert partial_message([HEAD, *_tool(0, '{"pa', stop=False)], ANTHROPIC, 5) is None
    assert partial_message([], ANTHROPIC, 5) is None


def test_the_continuation_is_folded_into_the_partial_message() -> None:
    partial = {"role": "assistant", "content": [{"type": "text", "text": "It was released"}], "partial": True,
               "timestamp": 1, "stopReason": "stop"}
    cited = {"type": "text", "text": " in 2024.", "citations": [{"url": "u"}]}
    more = {"role": "assistant", "content": [cited, {"type": "text", "text": "Done."}], "timestamp": 2,
            "stopReason": "stop", "responseId": "msg_2"}
    folded = merged(partial, more)
    joined = {"type": "text", "text": "It was released in 2024.", "citations": [{"url": "u"}]}
    assert folded["content"] == [joined, {"type": "text", "text": "Done."}]
    assert folded["timestamp"] == 1 and folded["responseId"] == "msg_2" and "partial" not in folded


def test_only_the_record_of_the_call_in_flight_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "stream.jsonl"
    record = StreamRecord(path, 3, "op-1", 1.0)
    record.begin()
    record.append({"type": "message_start"})
    record.append({"type": "ping"})
    record.close()
    assert read_stream(path, 3, "op-1") == [{"type": "message_start"}, {"type": "ping"}]
    assert read_stream(path, 4, "op-1") == []  # a record retired by the commit of call 3
    assert read_stream(path, 3, "op-2") == []
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"type": "content_blo')  # a line cut by the kill
    assert len(read_stream(path, 3, "op-1")) == 2
    record.begin()  # a retried attempt starts the record afresh
    record.close()
    assert read_stream(path, 3, "op-1") == []
    assert read_stream(tmp_path / "absent.jsonl", 1, "op-1") == []


def test_recovery_budget_and_backoff() -> None:
    assert Recovery.of(None) is None
    recovery = Recovery.of({"maxAttempts": 2, "backoffMs": 500})
    assert recovery == Recovery(2, 0.5, 120.0)
    assert [recovery.wait(n) for n in (1, 2, 3, 4)] == [0.0, 0.5, 1.0, 2.0]
    assert Recovery(backoff=40).wait(5) == 60.0
