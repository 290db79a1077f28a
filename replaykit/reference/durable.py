"""Durable turns of the reference harness (the target input's ``recovery``): every step of a turn reads
only what is in the state folder, so a process killed anywhere and started again with the same input
continues where the last write left off (the Think / pi harness recovery rules).

It keeps ``transcript.json`` (with its bookkeeping under ``durable``) and ``stream.jsonl`` (the chunks of the
model call in flight) in ``$REPLAYKIT_STATE_DIR``; a model call's end and a tool call's result are each one
atomic write. On a restart it rebuilds the partial message and continues it, reruns or fails a tool call cut
short, and gives up after ``maxAttempts``. The protocol in full is in docs/architecture/reference.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import httpx

from replaykit.jsondoc import JSON
from replaykit.reference import steps, wire
from replaykit.reference.defects import mutant
from replaykit.reference.tools import Tools
from replaykit.replay import ProviderModel
from replaykit.transcript import (
    AssistantMessage,
    ConversionError,
    anthropic_final_body,
    from_anthropic,
    from_chat_stream,
    from_gemini_stream,
    from_openai_stream,
)

__all__ = ["HOOK_ENV", "INTERRUPTED", "Keeper", "Recovery", "StreamRecord", "Unanswered", "merged",
           "partial_message", "read_stream"]

STREAM = "stream.jsonl"
HOOK_ENV = "REPLAYKIT_TOOL_HOOK"
INTERRUPTED = ("interrupted: this call was cut short before it finished and was not run again (its tool is "
               "not declared safe to re-run); decide whether to call it again")
MAX_ROUNDS = 16  # model calls in one turn, at most (as the plain turn)


class _Settings(Protocol):
    @property
    def tools(self) -> list[JSON]: ...
    @property
    def system(self) -> str | None: ...
    @property
    def cwd(self) -> Path: ...


class HarnessRunView(Protocol):
    """What a durable step needs of the harness's run (:class:`replaykit.reference.harness.HarnessRun`)."""

    transcript: JSON | None
    client: httpx.AsyncClient

    @property
    def settings(self) -> _Settings:
        """The run's settings (tools, system, work folder)."""

    def persist(self) -> None:
        """Write the transcript to the store, atomically."""

    async def request(self, transcript: JSON, target: ProviderModel, step: int,
                      record: StreamRecord | None = None) -> AssistantMessage:
        """One request, retried; its events to ``record``."""

    async def subagent(self, prompt: str, target: ProviderModel, step: int) -> str:
        """A delegated sub-task's final text."""


class Unanswered(Exception):
    """The operation settled without an answer; ``reason`` says why (``interrupted``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Recovery:
    """The budget of the input's ``recovery``: attempts, backoff and stall timeout (seconds)."""

    max_attempts: int = 10
    backoff: float = 1.0
    stall: float = 120.0

    @classmethod
    def of(cls, raw: object) -> Recovery | None:
        """The budget of ``recovery`` (None: no durable turns)."""
        if not isinstance(raw, dict):
            return None
        return cls(int(raw.get("maxAttempts", 10)), int(raw.get("backoffMs", 1000)) / 1000,
                   int(raw.get("stallTimeoutMs", 120000)) / 1000)

    def wait(self, attempt: int) -> float:
        """Seconds before recovery ``attempt``: none for the first, then backoffMs doubling (a minute at
        most)."""
        return 0.0 if attempt <= 1 else float(min(self.backoff * 2 ** (attempt - 2), 60.0))


class StreamRecord:
    """The events of model call ``number`` of ``operation``, appended to ``path`` one line each as they
    arrive (each line one ``write``: in the kernel before the next event is read)."""

    def __init__(self, path: Path, number: int, operation: str, stall: float) -> None:
        self.path, self.number, self.operation, self.stall = path, number, operation, stall
        self.fd: int | None = None

    def begin(self) -> None:
        """A new attempt: the file emptied, its header written."""
        self.close()
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self._line({"call": self.number, "operationId": self.operation})

    def append(self, event: JSON) -> None:
        """Keep one event."""
        self._line(event)

    def _line(self, value: JSON) -> None:
        if self.fd is not None:
            os.write(self.fd, (json.dumps(value, ensure_ascii=False) + "\n").encode())

    def close(self) -> None:
        """Close the file (it stays: the commit retires it)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def read_stream(path: Path, number: int, operation: str) -> list[JSON]:
    """The events recorded for call ``number`` of ``operation`` (none when the file is absent, retired or of
    another call; a last line cut short is left out)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    events: list[JSON] = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            break
    if not events or events[0] != {"call": number, "operationId": operation}:
        return []
    return events[1:]


def partial_message(events: list[JSON], target: ProviderModel, timestamp: int) -> AssistantMessage | None:
    """The message a cut stream had sent so far: finished blocks and the text received (its trailing
    whitespace trimmed: a continued message cannot end with it); a tool call whose input never finished
    streaming is dropped. None when nothing is worth keeping."""
    if target.api == "anthropic-messages":
        try:
            body = anthropic_final_body(events)
        except ConversionError:
            return None
        done = {event.get("index") for event in events if event.get("type") == "content_block_stop"}
        content = [block for index, block in enumerate(body["content"])
                   if index in done or block.get("type") == "text"]
        message = from_anthropic({**body, "content": content, "stop_reason": "end_turn"}, timestamp=timestamp)
    else:  # Responses, Chat, Gemini: the text received; a function call is kept only in a finished stream
        convert = {"openai-chat": from_chat_stream, "gemini-generate": from_gemini_stream}.get(
            target.api, from_openai_stream)
        chunks = [event for event in events if event.get("type") != "[DONE]"]  # Chat's end (wire._DONE)
        try:
            message = convert(chunks, timestamp=timestamp, provider=target.provider)
        except ConversionError:
            return None
        message["content"] = [block for block in message["content"] if block["type"] == "text"]
    blocks = [block for block in message["content"] if block["type"] != "text" or block["text"].strip()]
    if blocks and blocks[-1]["type"] == "text":
        blocks[-1] = {**blocks[-1], "text": blocks[-1]["text"].rstrip()}
    if not blocks:
        return None
    kept = cast(JSON, {**message, "content": blocks, "stopReason": "stop", "partial": True})
    kept.pop("errorMessage", None)
    return cast(AssistantMessage, kept)


def merged(partial: JSON, more: JSON) -> JSON:
    """``more`` (the model's continuation) folded into ``partial``: one message, its text run on."""
    content, rest = list(partial["content"]), list(more["content"])
    if content and rest and content[-1]["type"] == "text" and rest[0]["type"] == "text":
        first, joined = rest.pop(0), content.pop()
        citations = [*(joined.get("citations") or []), *(first.get("citations") or [])]
        block = {**joined, **first, "text": joined["text"] + first["text"]}
        if citations:
            block["citations"] = citations
        content.append(block)
    out = {**more, "content": [*content, *rest], "timestamp": partial["timestamp"]}
    out.pop("partial", None)
    return out


class Keeper:
    """Durable steps over a :class:`~replaykit.reference.harness.HarnessRun` whose store is ``state``."""

    def __init__(self, run: HarnessRunView, recovery: Recovery, scenario: str, state: Path,
                 target_of: Callable[[JSON], ProviderModel]) -> None:
        self.run, self.recovery, self.scenario, self.state = run, recovery, scenario, state
        self.target_of = target_of
        self.receipts: list[JSON] = []

    @property
    def book(self) -> JSON:
        """The bookkeeping kept in the transcript (``durable``)."""
        transcript = cast(JSON, self.run.transcript)
        book: JSON = transcript.setdefault("durable", {})
        for key, empty in (("operations", {}), ("running", {}), ("streams", 0), ("attempts", 0)):
            book.setdefault(key, empty)
        return book

    def commit(self) -> None:
        """One atomic write of the transcript and its bookkeeping."""
        self.run.persist()

    # ------------------------------------------------------------ a step: submit, recover, drive, settle

    async def step(self, index: int, step: JSON) -> None:
        """Run one step as an operation (see the module docstring); :class:`Unanswered` when it settles so."""
        op = str(step.get("operationId") or f"{self.scenario}-{index}")
        operations, target = self.book["operations"], self.target_of(step)
        known = operations.get(op)
        if known is not None and known["status"] != "running" and not mutant("duplicate-submit-requests"):
            self.receipts.append(known["receipt"])  # the same receipt; nothing is sent again
            return
        if known is None or known["status"] != "running":
            self.submit(op, step, known)
        self.receipts.append(operations[op]["receipt"])
        if known is not None and known["status"] == "running":
            await self.recover(op, target)
        tools = Tools(self.run.settings.tools, self.run.settings.cwd,
                      lambda prompt: self.run.subagent(prompt, target, index), self.run.client)
        try:
            await self.drive(op, target, index, tools)
        finally:
            await tools.close()
        self.settle(op, "done")

    def submit(self, op: str, step: JSON, known: JSON | None) -> None:
        """Make the submission durable before the model runs: the user message and the operation."""
        transcript, book = cast(JSON, self.run.transcript), self.book
        steps.rebuild_system(transcript, self.run.settings.system, self.run.settings.tools, wire.now_ms())
        receipt = known["receipt"] if known else {"operationId": op, "accepted": True,
                                                  "timestamp": wire.now_ms()}
        book["operations"][op] = {"receipt": receipt, "status": "running"}
        book.update(current=op, start=len(transcript["messages"]), attempts=0, running={})
        transcript["messages"].append({"role": "user", "content": step["prompt"], "timestamp": wire.now_ms()})
        self.commit()

    def settle(self, op: str, status: str, reason: str | None = None) -> None:
        """The operation settled: ``done``, or ``unanswered`` with ``reason``."""
        book = self.book
        book["operations"][op].update({"status": status, **({"reason": reason} if reason else {})})
        book["current"] = None
        self.commit()

    # ------------------------------------------------------------ recovery

    async def recover(self, op: str, target: ProviderModel) -> None:
        """An interruption of ``op`` (a restart finding it running, or a stall): count it against the budget,
        keep the partial message, settle the tool calls cut short; then back off."""
        book = self.book
        book["attempts"] += 1
        if book["attempts"] > self.recovery.max_attempts and not mutant("recovery-unbounded"):
            self.settle(op, "unanswered", "interrupted")
            raise Unanswered("interrupted")
        number = book["streams"] + 1
        events = read_stream(self.state / STREAM, number, op)
        if events:
            self.keep_partial(partial_message(events, target, wire.now_ms()))
            book["streams"] = number
        self.report_cut_calls()
        self.commit()
        (self.state / STREAM).unlink(missing_ok=True)
        await asyncio.sleep(self.recovery.wait(book["attempts"]))

    def keep_partial(self, partial: AssistantMessage | None) -> None:
        """Keep the partial message (folded into one kept earlier): the model is asked to continue it."""
        messages = cast(JSON, self.run.transcript)["messages"]
        if partial is None or mutant("partial-dropped-on-recovery"):
            return
        if messages and messages[-1].get("partial"):
            partial = cast(AssistantMessage, {**merged(messages.pop(), cast(JSON, partial)), "partial": True})
        messages.append(partial)

    def report_cut_calls(self) -> None:
        """Tool calls started and not finished: left to run again (``recovery: rerun``), else failed."""
        running: dict[str, str] = self.book["running"]
        rerun = {tool.get("name") for tool in self.run.settings.tools if tool.get("recovery") == "rerun"}
        for call_id, name in list(running.items()):
            if name in rerun or mutant("tool-rerun-without-opt-in"):
                continue
            del running[call_id]
            cast(JSON, self.run.transcript)["messages"].append({
                "role": "toolResult", "toolCallId": call_id, "toolName": name,
                "content": [{"type": "text", "text": INTERRUPTED}], "isError": True,
                "timestamp": wire.now_ms()})

    # ------------------------------------------------------------ the turn, from whatever is stored

    async def drive(self, op: str, target: ProviderModel, step: int, tools: Tools) -> None:
        """Call the model and run tools until the turn ends, each time from the stored transcript."""
        messages = cast(JSON, self.run.transcript)["messages"]
        for _ in range(MAX_ROUNDS):
            at = next((i for i in range(len(messages) - 1, self.book.get("start", 0) - 1, -1)
                       if messages[i]["role"] == "assistant"), None)
            if at is not None and not messages[at].get("partial"):
                last = messages[at]
                answered = {m.get("toolCallId") for m in messages[at + 1:] if m["role"] == "toolResult"}
                pending = [b for b in last["content"] if b["type"] == "toolCall" and b["id"] not in answered]
                if pending and last["stopReason"] == "toolUse":
                    for call in pending:
                        await self.tool_call(call, tools)
                    continue
                if at == len(messages) - 1 and last["stopReason"] != "pauseTurn":
                    return
            await self.model_call(op, target, step)

    async def model_call(self, op: str, target: ProviderModel, step: int) -> None:
        """One model call, its chunks recorded; at its end the message and the stream's retirement are one
        write (a continuation is folded into the partial message it continues)."""
        transcript, book = cast(JSON, self.run.transcript), self.book
        number = book["streams"] + 1
        record = StreamRecord(self.state / STREAM, number, op, self.recovery.stall)
        try:
            message = cast(JSON, await self.run.request(transcript, target, step, record))
        except wire.Stalled:
            record.close()
            await self.recover(op, target)
            return
        finally:
            record.close()
        messages = transcript["messages"]
        if messages and messages[-1].get("partial"):
            message = merged(messages.pop(), message)
        messages.append(steps.checked_citations(transcript, cast(AssistantMessage, message)))
        book.update(streams=number, attempts=0)
        self.commit()
        (self.state / STREAM).unlink(missing_ok=True)

    async def tool_call(self, call: JSON, tools: Tools) -> None:
        """Record the call, announce it, run it; its result and the end of its record in one write."""
        book = self.book
        book["running"][call["id"]] = call["name"]
        self.commit()
        await self.announce(call)
        result = await tools.call(cast(Any, call))
        del book["running"][call["id"]]
        cast(JSON, self.run.transcript)["messages"].append(result)
        book["attempts"] = 0
        self.commit()

    async def announce(self, call: JSON) -> None:
        """POST the call to ``$REPLAYKIT_TOOL_HOOK`` (when set) and wait for the answer: where a scenario's
        kill at a tool call holds it."""
        hook = os.environ.get(HOOK_ENV)
        if not hook:
            return
        with contextlib.suppress(httpx.HTTPError):
            await self.run.client.post(hook, json={"name": call["name"], "id": call["id"]},
                                       timeout=httpx.Timeout(None))
