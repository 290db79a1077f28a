"""Durable turns of the reference harness, piece by piece: the partial message rebuilt from a cut stream,
the continuation folded into it, the stream record (only the call in flight is read back), the backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _pytest.outcomes import Failed

from replaykit.reference.durable import (
    INTERRUPTED,
    Keeper,
    Recovery,
    StreamRecord,
    Unanswered,
    merged,
    partial_message,
    read_stream,
)
from replaykit.replay import ProviderModel

ANTHROPIC = ProviderModel("anthropic", "anthropic-messages", "claude-sonnet-4-6", max_tokens=1024)
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


# ---------------------------------------------------------------- the keeper's rules, and the mutant of each


@dataclass
class _Run:
    """The part of the harness's run a durable step uses: requests answered at once, writes counted."""

    tmp: Path
    tools: list[dict[str, Any]] = field(default_factory=list)
    transcript: dict[str, Any] | None = field(default_factory=lambda: {"version": 1, "messages": []})
    client: Any = None
    writes: int = 0
    requests: int = 0

    @property
    def settings(self) -> SimpleNamespace:
        return SimpleNamespace(tools=self.tools, system=None, cwd=self.tmp)

    def persist(self) -> None:
        self.writes += 1

    async def request(self, transcript: Any, target: Any, step: int, record: Any = None) -> Any:
        self.requests += 1
        return {"role": "assistant", "content": [{"type": "text", "text": "Done."}], "provider": "anthropic",
                "api": "anthropic-messages", "model": "m", "usage": {}, "stopReason": "stop", "timestamp": 2}

    async def subagent(self, prompt: str, target: Any, step: int) -> str:
        return ""


def _keeper(tmp: Path, **run: Any) -> tuple[Keeper, _Run]:
    tmp.mkdir(exist_ok=True)
    host = _Run(tmp, **run)
    return Keeper(host, Recovery(1, 0.0, 1.0), "s", tmp, lambda step: ANTHROPIC), host


def _partial_kept(tmp: Path) -> None:
    keeper, host = _keeper(tmp)
    keeper.keep_partial(partial_message([HEAD, *_text(0, "I recall", stop=False)], ANTHROPIC, 5))
    assert [m.get("partial") for m in host.transcript["messages"]] == [True]  # type: ignore[index]


def _cut_call_reported(tmp: Path) -> None:
    rerun = {"type": "function", "name": "web_search", "parameters": {}, "recovery": "rerun"}
    keeper, host = _keeper(tmp, tools=[{"type": "function", "name": "read", "parameters": {}}, rerun])
    keeper.book["running"] = {"toolu_1": "read", "toolu_2": "web_search"}
    keeper.report_cut_calls()
    messages = host.transcript["messages"]  # type: ignore[index]
    assert len(messages) == 1
    result = messages[0]
    assert (result["toolCallId"], result["isError"], result["content"][0]["text"]) == ("toolu_1", True,
                                                                                       INTERRUPTED)
    assert keeper.book["running"] == {"toolu_2": "web_search"}  # left to run again


def _budget_enforced(tmp: Path) -> None:
    keeper, _ = _keeper(tmp)
    keeper.book.update(operations={"op": {"receipt": {}, "status": "running"}}, attempts=1)
    with pytest.raises(Unanswered):
        asyncio.run(keeper.recover("op", ANTHROPIC))
    assert keeper.book["operations"]["op"] == {"receipt": {}, "status": "unanswered", "reason": "interrupted"}


def _submit_once(tmp: Path) -> None:
    keeper, host = _keeper(tmp)
    step = {"prompt": "Hi", "provider": "anthropic", "model": "m", "operationId": "op-1"}
    asyncio.run(keeper.step(0, step))
    asyncio.run(keeper.step(1, step))
    assert host.requests == 1
    assert keeper.receipts[0] == keeper.receipts[1] and keeper.receipts[0]["operationId"] == "op-1"


KILLED_HERE: dict[str, Callable[[Path], None]] = {
    "partial-dropped-on-recovery": _partial_kept,
    "tool-rerun-without-opt-in": _cut_call_reported,
    "recovery-unbounded": _budget_enforced,
    "duplicate-submit-requests": _submit_once,
}


@pytest.mark.parametrize("name", sorted(KILLED_HERE))
def test_each_recovery_rule_holds_and_fails_on_its_mutant(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REPLAYKIT_MUTANT", raising=False)
    KILLED_HERE[name](tmp_path / "reference")
    monkeypatch.setenv("REPLAYKIT_MUTANT", name)
    with pytest.raises((AssertionError, Failed)):
        KILLED_HERE[name](tmp_path / "mutant")
