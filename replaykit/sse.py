"""Parse and serialize ``text/event-stream`` exactly as the WHATWG HTML spec defines it.

Every block of the stream (the lines up to a blank line) becomes an :class:`Event` that keeps its
original bytes in ``raw``, so ``serialize(parse(body)) == body`` byte for byte. Comment-only blocks
(``: ping``) are kept too; they are not *dispatched* (``data is None``). A last block without its
blank line is kept with ``terminated=False``, which ``replaykit verify`` reports as a framing problem.

:class:`Parser` is incremental: feed it any split of the bytes (mid-line, mid-UTF-8 character) and it
yields exactly the events of a whole-body :func:`parse`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "Parser", "encode", "parse", "serialize"]

_LINE = re.compile(rb"\r\n|\r|\n")
_BLOCK_END = re.compile(rb"(\r\n|\r|\n)(\r\n|\r|\n)")
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Event:
    """One block of an event stream.

    ``event`` is the ``event:`` field (``None`` when absent: the spec's default type is ``message``);
    ``data`` the joined ``data:`` lines, or ``None`` when the block had none (not dispatched);
    ``raw`` the block's exact bytes including its terminating blank line.
    """

    raw: bytes
    data: str | None = None
    event: str | None = None
    id: str | None = None
    retry: int | None = None
    comments: tuple[str, ...] = ()
    terminated: bool = True
    _json: list[Any] = field(default_factory=list, repr=False, compare=False)

    @property
    def type(self) -> str:
        """The dispatched event type (``message`` when no ``event:`` field)."""
        return self.event or "message"

    def json(self) -> Any:
        """``data`` parsed as JSON (padding whitespace allowed); raises ``ValueError`` if it is not."""
        if self.data is None:
            raise ValueError("event has no data")
        if not self._json:
            self._json.append(json.loads(self.data))
        return self._json[0]


def _field(line: str) -> tuple[str, str]:
    name, sep, value = line.partition(":")
    if sep and value.startswith(" "):
        value = value[1:]
    return name, value


def _build(raw: bytes, terminated: bool) -> Event:
    text = raw.decode("utf-8", errors="replace")
    data: list[str] = []
    comments: list[str] = []
    event = ident = None
    retry = None
    for line in _LINE.split(text.encode("utf-8")):
        if not line:
            continue
        decoded = line.decode("utf-8")
        if decoded.startswith(":"):
            comments.append(decoded[1:].removeprefix(" "))
            continue
        name, value = _field(decoded)
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            ident = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    joined = "\n".join(data) if data else None
    return Event(raw, joined, event, ident, retry, tuple(comments), terminated)


class Parser:
    """Incremental parser: ``feed(chunk)`` returns the events completed by that chunk."""

    def __init__(self) -> None:
        self._buffer = b""
        self._started = False

    def feed(self, chunk: bytes) -> list[Event]:
        """Add bytes; return every block finished so far."""
        self._buffer += chunk
        if not self._started:
            if len(self._buffer) < len(_BOM) and _BOM.startswith(self._buffer):
                return []
            self._started = True
        events: list[Event] = []
        start = 0
        for match in _BLOCK_END.finditer(self._buffer):
            end = match.end()
            if match.group(2) == b"\r" and end == len(self._buffer):
                break  # a CR at the very end may be the first half of CRLF
            if match.group(1) == b"\r" and match.group(2) == b"\n":
                continue  # "\r\n" is one line end, not two
            events.append(_build(self._buffer[start:end], True))
            start = end
        self._buffer = self._buffer[start:]
        return events

    def close(self) -> list[Event]:
        """End of stream: a pending block without its blank line is returned unterminated."""
        rest, self._buffer = self._buffer, b""
        if not rest:
            return []
        if _BLOCK_END.fullmatch(rest[-2:]) or rest.endswith((b"\r\n\r\n", b"\n\n", b"\r\r")):
            return [_build(rest, True)]
        if not rest.strip(b"\r\n"):
            return [_build(rest, True)]
        return [_build(rest, False)]


def parse(body: bytes | str) -> list[Event]:
    """Parse a whole stream body into its blocks."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    parser = Parser()
    return parser.feed(data) + parser.close()


def serialize(events: Iterable[Event]) -> bytes:
    """The exact bytes of ``events`` (their ``raw``), in order."""
    return b"".join(event.raw for event in events)


def encode(data: str | None = None, event: str | None = None, comments: Iterable[str] = ()) -> Event:
    """Build a new, canonically framed event (LF line ends, one blank line after it)."""
    lines: list[str] = [f": {comment}" for comment in comments]
    if event is not None:
        lines.append(f"event: {event}")
    if data is not None:
        lines.extend(f"data: {part}" for part in data.split("\n"))
    raw = ("\n".join(lines) + "\n\n").encode("utf-8")
    return _build(raw, True)


def iter_events(chunks: Iterable[bytes]) -> Iterator[Event]:
    """Events of a stream that arrives as ``chunks``."""
    parser = Parser()
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.close()
