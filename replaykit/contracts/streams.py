"""Streams: every event against the route's stream-event contract, then the provider's sequence rules
(Anthropic: ``message_start`` first, blocks paired by index, ``message_stop`` last; OpenAI:
``sequence_number`` increasing, one terminal event, last; Chat Completions: nothing after ``data: [DONE]``,
which is not JSON and not checked against the chunk contract; Gemini: no terminal event, nothing for a
candidate after its finishReason, nothing after an error chunk)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import ClassVar

from replaykit import jsondoc
from replaykit.contracts.profiles import STRICT, Profile
from replaykit.contracts.registry import Contracts, default
from replaykit.contracts.rules import _is_int
from replaykit.contracts.violations import Violation, received
from replaykit.jsondoc import JSON
from replaykit.redact.shapes import mask
from replaykit.routes import Route
from replaykit.sse import Event

__all__ = ["check_events"]


def _object(value: object) -> JSON:
    """``value`` when it is a JSON object, else ``{}`` (the schema reports the wrong type on its own)."""
    return value if isinstance(value, dict) else {}


class _AnthropicStream:
    """Sequence rules of a Messages stream: message_start first, blocks paired by index, message_stop last."""

    _DELTAS: ClassVar[dict[str, set[str]]] = {
        "text": {"text_delta", "citations_delta"}, "thinking": {"thinking_delta", "signature_delta"},
        "tool_use": {"input_json_delta"}, "server_tool_use": {"input_json_delta"}}

    def __init__(self) -> None:
        self.found: list[Violation] = []
        self.open: dict[int, str] = {}
        self.started = 0
        self.first = True
        self.ended: str | None = None

    def flag(self, index: int, pointer: str, message: str) -> None:
        self.found.append(Violation(pointer, "sequence", message, event=index))

    def feed(self, index: int, data: JSON) -> None:
        kind = data.get("type")
        if self.first and kind != "message_start":
            first = f"the stream starts with {received(kind)}; message_start must come first"
            self.flag(index, "/type", first)
        elif not self.first and kind == "message_start":
            self.flag(index, "/type", "a second message_start; a stream carries one message")
        self.first = False
        if self.ended is not None and kind != "ping":
            self.flag(index, "/type", f"{received(kind)} after {self.ended}; {self.ended} ends the stream")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None and isinstance(data.get("index", 0), int):
            handler(index, data)

    def _on_content_block_start(self, index: int, data: JSON) -> None:
        block, block_type = data.get("index", 0), _object(data.get("content_block")).get("type", "")
        if block in self.open or block != self.started:
            expected = f"the next block is {self.started}"
            self.flag(index, "/index", f"content_block_start for index {block}; {expected}")
        self.open[block] = str(block_type)
        self.started = max(self.started, block + 1)

    def _on_content_block_delta(self, index: int, data: JSON) -> None:
        block = data.get("index", 0)
        if block not in self.open:
            self.flag(index, "/index", f"content_block_delta for block {block}, which is not open")
            return
        delta = _object(data.get("delta")).get("type")
        allowed = self._DELTAS.get(self.open[block])
        if allowed is not None and delta not in allowed:
            block_type = received(self.open[block])
            self.flag(index, "/delta/type", f"{received(delta)} cannot extend a {block_type} block")

    def _on_content_block_stop(self, index: int, data: JSON) -> None:
        if self.open.pop(data.get("index", 0), None) is None:
            self.flag(index, "/index", f"content_block_stop for block {data.get('index')}, which is not open")

    def _on_message_stop(self, index: int, data: JSON) -> None:
        if self.open:
            self.flag(index, "/type", f"message_stop while blocks {sorted(self.open)} are still open")
        self.ended = "message_stop"

    def _on_error(self, index: int, data: JSON) -> None:
        self.ended = "an error event"

    def finish(self, last: int) -> list[Violation]:
        if self.ended is None and not self.first:
            self.flag(last, "", "the stream ends without message_stop (or an error event)")
        return self.found


_OPENAI_TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})


class _OpenAIStream:
    """Sequence rules of a Responses stream: sequence_number strictly increasing; exactly one terminal event,
    and it is last."""

    def __init__(self) -> None:
        self.found: list[Violation] = []
        self.previous: int | None = None
        self.terminal: tuple[int, str] | None = None
        self.first = True

    def feed(self, index: int, data: JSON) -> None:
        self.first = False
        number = data.get("sequence_number")
        if _is_int(number):
            if self.previous is not None and number <= self.previous:
                self.found.append(Violation("/sequence_number", "sequence",
                                            f"{number} does not increase on the previous {self.previous}",
                                            event=index))
            self.previous = number
        if self.terminal is not None:
            late = f"{received(data.get('type'))} after the terminal event {self.terminal[1]!r} (event " \
                   f"{self.terminal[0]})"
            self.found.append(Violation("/type", "sequence", late, event=index))
        if data.get("type") in _OPENAI_TERMINAL and self.terminal is None:
            self.terminal = (index, str(data.get("type")))

    def finish(self, last: int) -> list[Violation]:
        if self.terminal is None and not self.first:
            message = "the stream has no terminal event (response.completed, response.failed, " \
                      "response.incomplete or error)"
            self.found.append(Violation("", "sequence", message, event=last))
        return self.found


class _ChatStream:
    """Sequence rule of a Chat Completions stream: ``data: [DONE]`` (fed as None) ends it, nothing follows."""

    def __init__(self) -> None:
        self.found: list[Violation] = []
        self.done: int | None = None

    def feed(self, index: int, data: JSON | None) -> None:
        if self.done is not None:
            late = f"an event after data: [DONE] (event {self.done}); [DONE] ends the stream"
            self.found.append(Violation("", "sequence", late, event=index))
        elif data is None:
            self.done = index

    def finish(self, last: int) -> list[Violation]:
        return self.found


class _GeminiStream:
    """Sequence rules of a :streamGenerateContent stream (it has no terminal event: the connection's end ends
    it): no chunk for a candidate after the one carrying its finishReason, no chunk after an error chunk."""

    def __init__(self) -> None:
        self.found: list[Violation] = []
        self.finished: dict[object, int] = {}
        self.failed: int | None = None

    def feed(self, index: int, data: JSON) -> None:
        if self.failed is not None:
            late = f"a chunk after the error chunk (event {self.failed}); an error ends the stream"
            self.found.append(Violation("", "sequence", late, event=index))
        if "error" in data:
            self.failed = index if self.failed is None else self.failed
        candidates = data.get("candidates")
        for at, candidate in enumerate(candidates if isinstance(candidates, list) else ()):
            self._candidate(index, at, _object(candidate))

    def _candidate(self, index: int, at: int, candidate: JSON) -> None:
        number = candidate.get("index", 0)
        if number in self.finished:
            late = f"candidate {number} goes on after its finishReason (event {self.finished[number]})"
            self.found.append(Violation(f"/candidates/{at}", "sequence", late, event=index))
        elif candidate.get("finishReason") is not None:
            self.finished[number] = index

    def finish(self, last: int) -> list[Violation]:
        return self.found


_SEQUENCES: dict[str | None, type[_AnthropicStream | _OpenAIStream | _ChatStream | _GeminiStream]] = {
    "anthropic-messages": _AnthropicStream, "openai-chat": _ChatStream, "gemini-generate": _GeminiStream}


def _sequence(route: Route) -> _AnthropicStream | _OpenAIStream | _ChatStream | _GeminiStream:
    return _SEQUENCES.get(route.api, _OpenAIStream)()


def check_events(route: Route, events: Iterable[Event], contracts: Contracts | None = None,
                 profile: Profile = STRICT) -> list[Violation]:
    """Every event of a stream against the route's stream-event contract, then the provider's sequence
    rules (a route that never streams, or no contract covers, gets one ``stream`` violation). The events are
    read one at a time: a long stream need not be held parsed whole."""
    kind = route.contracts.stream_event if route.contracts else None
    if kind is None:
        return [Violation("", "stream", f"{mask(route.name)} does not stream")]
    chosen = contracts or default()
    found: list[Violation] = []
    sequence = _sequence(route)
    last = 0
    for index, event in enumerate(events):
        if event.data is None:
            continue
        if isinstance(sequence, _ChatStream) and event.data.strip() == "[DONE]":
            sequence.feed(index, None)
            continue
        try:
            data = event.json()
        except ValueError as exc:
            found.append(Violation("", "json", _not_json(exc), event=index))
            continue
        found += [replace(v, event=index) for v in chosen.validate(kind, data, profile)]
        if isinstance(data, dict):
            found += _event_name(index, event, data)
            sequence.feed(index, data)
            last = index
    return found + sequence.finish(last)


def _not_json(exc: ValueError) -> str:
    return f"data: {exc}" if isinstance(exc, jsondoc.TooDeep) else "data is not JSON"


def _event_name(index: int, event: Event, data: JSON) -> list[Violation]:
    if event.event is None or data.get("type") in (None, event.event):
        return []
    named = f"the SSE event name is {received(event.event)}"
    return [Violation("/type", "event", f"{named} but the data's type is {received(data.get('type'))}",
                      event=index)]
