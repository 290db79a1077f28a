"""Parse and serialize ``text/event-stream`` exactly as the WHATWG HTML spec defines it.

Every block becomes an :class:`Event` that keeps its original bytes in ``raw``, so
``serialize(parse(body)) == body`` byte for byte; fields follow the spec's interpretation steps, and a last
block without its blank line is kept with ``terminated=False``. :class:`Parser` is incremental and yields
exactly the events of a whole-body :func:`parse`. Used by cassettes, the fake provider, the converters and the
recorder; the rules and why no library is used are in docs/architecture/modules.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from replaykit import jsondoc

__all__ = ["Event", "Parser", "count", "encode", "event_type", "iter_events", "parse", "serialize"]

# A block: non-empty lines, each with its line end, then a blank line. Atomic groups keep a CRLF whole.
_BLOCK = re.compile(rb"(?:[^\r\n]+(?>\r\n|\r|\n))*(?>\r\n|\r|\n)")
_LINE_END = re.compile(r"\r\n|\r|\n")
# Where a block may end: a line end right after another (or at the start of the pending bytes).
_TWO_ENDS = re.compile(rb"(?>\r\n|\r|\n)(?>\r\n|\r|\n)")
_BOM = b"\xef\xbb\xbf"
_CR = 0x0D
_CR_BYTE = b"\r"
_LINE_END_BYTES = (0x0A, 0x0D)


@dataclass(frozen=True, slots=True)
class Event:
    """One block of an event stream.

    ``event`` is the ``event:`` field (``None`` when absent: the spec's default type is ``message``);
    ``data`` the joined ``data:`` lines, or ``None`` when the block had none (not dispatched);
    ``id`` this block's own ``id:`` field and ``last_event_id`` the stream's last event ID after it;
    ``raw`` the block's exact bytes including its terminating blank line.
    """

    raw: bytes
    data: str | None = None
    event: str | None = None
    id: str | None = None
    retry: int | None = None
    comments: tuple[str, ...] = ()
    terminated: bool = True
    last_event_id: str = ""

    @property
    def type(self) -> str:
        """The dispatched event type (``message`` when no ``event:`` field or an empty one)."""
        return self.event or "message"

    @property
    def dispatched(self) -> bool:
        """True when a spec-conforming client fires this block: it has data and its blank line."""
        return self.data is not None and self.terminated

    def json(self) -> Any:
        """``data`` parsed as JSON (padding whitespace allowed); raises ``ValueError`` if it is not, or if it
        nests deeper than :data:`replaykit.jsondoc.MAX_DEPTH`.

        Parsed afresh on every call, so a caller that edits the result cannot change the event.
        """
        if self.data is None:
            raise ValueError("event has no data")
        return jsondoc.loads(self.data)


def event_type(event: Event) -> str:
    """An SSE event's type: its ``event:`` field, else the ``type`` of its JSON data, else ``message``
    (``[DONE]`` for OpenAI's end-of-stream sentinel)."""
    if event.event:
        return event.event
    data = (event.data or "").strip()
    if data == "[DONE]":
        return data
    try:
        parsed = event.json()
    except ValueError:
        return "message"
    found = parsed.get("type") if isinstance(parsed, dict) else None
    return found if isinstance(found, str) else "message"


def _fields(raw: bytes, skip: int, terminated: bool, last_id: str) -> tuple[Event, str]:
    """Interpret one block's lines after ``skip`` bytes (the spec's steps); also return the last event ID."""
    data: list[str] = []
    comments: list[str] = []
    event = ident = None
    retry = None
    text = raw[skip:].decode("utf-8", errors="replace")
    for line in text.split("\n") if "\r" not in text else _LINE_END.split(text):
        if not line:
            continue
        if line[0] == ":":
            comments.append(line[1:].removeprefix(" "))
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            ident = last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    joined = "\n".join(data) if data else None
    return Event(raw, joined, event, ident, retry, tuple(comments), terminated, last_id), last_id


class Parser:
    """Incremental parser: ``feed(chunk)`` returns the events that chunk completed, ``close()`` the rest."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._buffer = bytearray()
        self._last_id = ""
        self._skip: int | None = None  # length of a leading BOM, once the stream's first bytes are known
        self._checked = 0  # the pending bytes before this hold no block end

    def feed(self, chunk: bytes) -> list[Event]:
        """Add bytes; return every block finished so far."""
        self._buffer += chunk
        return self._blocks(final=False)

    def close(self) -> list[Event]:
        """End of stream: return what is pending (a block without its blank line comes unterminated)."""
        events = self._blocks(final=True)
        if self._buffer:
            events.append(self._event(bytes(self._buffer), terminated=False))
        self._reset()  # ready for another stream
        return events

    def _blocks(self, final: bool) -> list[Event]:
        if self._skip is None and not self._bom_known(final):
            return []
        if not final and not self._may_end():
            return []
        buffer, events, start = self._buffer, [], 0
        plain = _CR_BYTE not in buffer
        while (end := _block_end(buffer, start + (self._skip or 0), plain)) >= 0:
            if not final and end == len(buffer) and buffer[-1] == _CR:
                break  # a CR at the very end may be the first half of a CRLF
            events.append(self._event(bytes(buffer[start:end]), terminated=True))
            start = end
        del buffer[:start]
        self._checked = len(buffer)
        return events

    def _may_end(self) -> bool:
        """Cheap test that a block may be complete, so a long block fed in small chunks is scanned once."""
        head = self._skip or 0
        if len(self._buffer) > head and self._buffer[head] in _LINE_END_BYTES:
            return True  # a blank line right away
        resume = max(head, self._checked - 2)
        if _CR_BYTE not in self._buffer:
            found = self._buffer.find(b"\n\n", resume) >= 0
        else:
            found = _TWO_ENDS.search(self._buffer, resume) is not None
        self._checked = len(self._buffer)
        return found

    def _bom_known(self, final: bool) -> bool:
        if len(self._buffer) < len(_BOM) and _BOM.startswith(self._buffer) and not final:
            return False  # these bytes may yet become a BOM
        self._skip = len(_BOM) if self._buffer.startswith(_BOM) else 0
        return True

    def _event(self, raw: bytes, terminated: bool) -> Event:
        event, self._last_id = _fields(raw, self._skip or 0, terminated, self._last_id)
        self._skip = 0  # only the stream's first block can start with a BOM
        return event


def _block_end(buffer: bytes | bytearray, at: int, plain: bool) -> int:
    """Where the block starting at ``at`` ends (after its blank line), or -1; ``plain``: the buffer holds no
    CR, so a line ends with LF and a blank line follows two LFs in a row (found without a pattern)."""
    if not plain:
        match = _BLOCK.match(buffer, at)
        return match.end() if match else -1
    if buffer[at : at + 1] == b"\n":
        return at + 1
    found = buffer.find(b"\n\n", at)
    return found + 2 if found >= 0 else -1


def parse(body: bytes | str) -> list[Event]:
    """Parse a whole stream body into its blocks."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    parser = Parser()
    return parser.feed(data) + parser.close()


def count(body: bytes) -> int:
    """How many events :func:`parse` finds in ``body``, without building them (several times faster)."""
    blocks, start, skip, plain = 0, 0, len(_BOM) if body.startswith(_BOM) else 0, _CR_BYTE not in body
    while (end := _block_end(body, start + skip, plain)) >= 0:
        blocks, start, skip = blocks + 1, end, 0
    return blocks + (start < len(body))


def iter_events(chunks: Iterable[bytes]) -> Iterator[Event]:
    """Events of a stream that arrives as ``chunks``, each yielded as soon as its block is complete."""
    parser = Parser()
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.close()


def serialize(events: Iterable[Event]) -> bytes:
    """The exact bytes of ``events`` (their ``raw``), in order."""
    return b"".join(event.raw for event in events)


def encode(
    data: str | None = None,
    event: str | None = None,
    comments: Iterable[str] = (),
    *,
    id: str | None = None,
    retry: int | None = None,
) -> Event:
    """Build a new, canonically framed event (LF line ends, one blank line after it).

    Raises ``ValueError`` for what the format cannot carry: a line break in ``event``, ``id`` or a
    comment, a CR in ``data`` (LF separates its ``data:`` lines), a NUL in ``id``, a negative ``retry``.
    """
    notes = tuple(comments)
    _check_encodable(data, event, id, notes, retry)
    lines = [f": {note}" for note in notes]
    lines += [f"{name}: {value}" for name, value in (("event", event), ("id", id), ("retry", retry))
              if value is not None]
    if data is not None:
        lines += [f"data: {part}" for part in data.split("\n")]
    return parse(("\n".join(lines) + "\n\n").encode("utf-8"))[0]


def _check_encodable(
    data: str | None, event: str | None, ident: str | None, comments: tuple[str, ...], retry: int | None
) -> None:
    single = [("event", event), ("id", ident), *(("comment", note) for note in comments)]
    for name, value in single:
        if value is not None and ("\n" in value or "\r" in value):
            raise ValueError(f"{name}={value!r} must not contain a line break")
    if ident is not None and "\0" in ident:
        raise ValueError(f"id={ident!r} must not contain NUL: a client would ignore it")
    if data is not None and "\r" in data:
        raise ValueError(f"data={data[:60]!r} must not contain CR: separate its lines with LF")
    if retry is not None and retry < 0:
        raise ValueError(f"retry={retry!r} must not be negative")
