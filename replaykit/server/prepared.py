"""Prepared bytes (HTTP wing): HTTP chunk framing, batches of chunks, and a whole response as one write.

A :class:`Whole` is what aiohttp writes for a response, made once per interaction; the lane and aiohttp's
path send it as is. It is checked byte for byte against aiohttp's own output (tests/server/test_wings.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from http import HTTPStatus

from aiohttp.http import SERVER_SOFTWARE

__all__ = ["BATCH_LIMIT", "LAST_CHUNK", "Batch", "Whole", "batches", "http_chunk", "whole"]

# Bytes gathered at most into one write in fast timing: one client read (httpx reads 64 KiB).
BATCH_LIMIT = 64 << 10
LAST_CHUNK = b"0\r\n\r\n"  # the chunk that ends a chunked body
Batch = tuple[bytes, int]  # HTTP chunks framed and joined, and how many they are
Headers = list[tuple[str, str]]


def http_chunk(chunk: bytes | memoryview) -> tuple[bytes | memoryview, ...]:
    """``chunk`` framed as one HTTP/1.1 chunk: size in hex, CRLF, the bytes, CRLF (join the pieces)."""
    return (b"%x\r\n" % len(chunk), chunk, b"\r\n")


def batches(chunks: Iterable[bytes | memoryview], end: bool = False) -> Iterator[Batch]:
    """``chunks`` framed as HTTP chunks (an empty one skipped) and joined, at most :data:`BATCH_LIMIT` bytes
    a batch (a bigger frame alone), each with how many chunks it holds. ``end``: the last batch also holds
    :data:`LAST_CHUNK`, so the body's end leaves in the same write."""
    pieces: list[bytes | memoryview] = []
    size = count = 0
    for chunk in chunks:
        frame = http_chunk(chunk)
        length = len(chunk) + len(frame[0]) + 2
        if pieces and size + length > BATCH_LIMIT:
            yield b"".join(pieces), count
            pieces, size, count = [], 0, 0
        if chunk:
            pieces.extend(frame)
            size += length
        count += 1
    if end:
        pieces.append(LAST_CHUNK)
    if count or end:
        yield b"".join(pieces), count


@dataclass(frozen=True, slots=True)
class Whole:
    """A response as one HTTP/1.1 keep-alive write, in aiohttp's bytes: ``head`` (status line, headers,
    framing, aiohttp's default ``Content-Type``), a ``Date`` line when ``date``, then ``rest`` (aiohttp's
    ``Server`` line unless recorded, the blank line, the body); ``chunks``: the events in it."""

    head: bytes
    date: bool
    rest: bytes
    chunks: int


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what aiohttp refuses in a header (injection)
_REASONS = {status.value: status.phrase for status in HTTPStatus}  # the reason phrases aiohttp sends


def _lines(headers: Headers) -> str:
    return "".join(f"{name}: {value}\r\n" for name, value in headers)


def whole(status: int, headers: Headers, body: Batch, length: int | None) -> Whole | None:
    """``body`` (a stream framed whole, or ``length`` bytes) and its head, as aiohttp writes them; None when
    aiohttp would write no body or refuse a header (then the response goes the general way)."""
    names = {name.lower() for name, _ in headers}
    framing = ("Transfer-Encoding", "chunked") if length is None else ("Content-Length", str(length))
    typed = "content-type" in names or length == 0
    head = [*headers, framing, *([] if typed else [("Content-Type", "application/octet-stream")])]
    rest = [] if "server" in names else [("Server", SERVER_SOFTWARE)]
    unsafe = any(_CONTROL.search(text) for line in head + rest for text in line)
    if status < 200 or status in (204, 304) or unsafe:
        return None
    data, count = body
    status_line = f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
    return Whole((status_line + _lines(head)).encode(), "date" not in names,
                 (_lines(rest) + "\r\n").encode() + data, count)
