"""Helpers shared by the fake provider's tests: bundled cassettes, small cassettes in memory."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from replaykit import sse
from replaykit.cassette import Cassette, Interaction, Request, Response
from replaykit.resources import data_dir

BOUND = 20.0  # seconds any awaited outcome may take on a loaded machine; never asserted as a speed
ANTHROPIC = "https://api.anthropic.com/v1/messages"
OPENAI = "https://api.openai.com/v1/responses"
CLOUDFLARE = "https://api.cloudflare.com/client/v4/accounts/0123456789abcdef0123456789abcdef/ai/websearch"
SSE_TYPE = "text/event-stream; charset=utf-8"


def bundled(relative: str) -> Path:
    """A bundled cassette under ``cassettes/``."""
    path = data_dir("cassettes") / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not a bundled cassette; see cassettes/README.md")
    return path


def request(uri: str = ANTHROPIC, body: Any = None, method: str = "POST") -> Request:
    """A recorded request with a JSON body."""
    raw = None if body is None else json.dumps(body).encode()
    return Request(method, uri, {"content-type": ["application/json"]}, raw)


def json_interaction(
    uri: str, body: Any, answer: Any, *, status: int = 200, headers: dict[str, list[str]] | None = None
) -> Interaction:
    """A non-stream JSON interaction."""
    head = {"content-type": ["application/json"], **(headers or {})}
    return Interaction(request(uri, body), Response(status, "", head, json.dumps(answer).encode()))


def stream_interaction(
    uri: str, body: Any, events: Iterable[tuple[str, Any]], offsets: list[float] | None = None
) -> Interaction:
    """A streaming interaction: ``events`` are ``(event name, data)`` pairs."""
    raw = b"".join(sse.encode(json.dumps(data), event=name).raw for name, data in events)
    response = Response(200, "", {"content-type": [SSE_TYPE], "request-id": ["req_stream"]}, raw, offsets)
    return Interaction(request(uri, {**body, "stream": True}), response)


def anthropic_events(text_deltas: int = 3) -> list[tuple[str, Any]]:
    """A small, valid Anthropic Messages stream with ``text_deltas`` text deltas."""
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }
    deltas = [
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"word{i} "}},
        )
        for i in range(text_deltas)
    ]
    return [
        ("message_start", start),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        *deltas,
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": text_deltas},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def anthropic_request(text: str = "hi", model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    """A minimal valid Messages request body."""
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": text}]}


def stream_request(text: str = "hi", model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    """The Messages request body :func:`stream_cassette` recorded: :func:`anthropic_request` asking for a
    stream."""
    return {**anthropic_request(text, model), "stream": True}


def anthropic_message(text: str = "hello", model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    """A minimal valid Messages response body."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }


def cassette_of(*items: Interaction) -> Cassette:
    """A cassette held in memory."""
    return Cassette(list(items))


def stream_cassette(text_deltas: int = 3, offsets: list[float] | None = None) -> Cassette:
    """One Anthropic streaming interaction."""
    return cassette_of(
        stream_interaction(ANTHROPIC, anthropic_request(), anthropic_events(text_deltas), offsets)
    )


def message_cassette(*texts: str) -> Cassette:
    """Anthropic non-stream interactions, one per text, each request saying the same text."""
    return cassette_of(
        *(json_interaction(ANTHROPIC, anthropic_request(t), anthropic_message(t)) for t in texts)
    )


def connect(url: str, timeout: float = 10.0) -> socket.socket:
    """A raw TCP connection to the fake provider at ``url`` (``http://host:port``)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset ends it too)."""
    data = b""
    try:
        while chunk := sock.recv(1 << 16):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def raw_exchange(url: str, data: bytes, *, half_close: bool = False) -> bytes:
    """Send ``data`` on a new connection (then close the sending side when ``half_close``) and return all the
    server sends until it closes the connection."""
    with connect(url) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        return read_all(sock)


def post_head(length: int, path: str = "/v1/messages", extra: str = "") -> bytes:
    """The request line and headers of a JSON POST whose body has ``length`` bytes."""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


def until(condition: Callable[[], bool], bound: float = BOUND) -> bool:
    """Poll ``condition`` until it holds or ``bound`` seconds passed; its last value."""
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


_DATE = re.compile(rb"\r\nDate: [^\r]*")


def undated(response: bytes) -> bytes:
    """``response`` with its ``Date`` header's value masked (``Date: -``): the one part made per second."""
    return _DATE.sub(b"\r\nDate: -", response)


def responses(sock: socket.socket, count: int) -> list[bytes]:
    """``count`` responses read off ``sock``, each to the end of its ``Content-Length`` or chunked body (a
    ``HEAD`` answer has none: read with ``count`` 1 on its own), ``Date`` masked (:func:`undated`)."""
    data, found = b"", []
    while len(found) < count:
        head, blank, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: (\d+)", head)
        bodiless = re.match(rb"HTTP/1\.[01] (1\d\d|204|304) ", head)
        end = (len(head) + 4 if bodiless else len(head) + 4 + int(length.group(1)) if length else
               len(head) + 4 + body.find(b"0\r\n\r\n") + 5 if b"0\r\n\r\n" in body else -1)
        if blank and 0 <= end <= len(data):
            found.append(undated(data[:end]))
            data = data[end:]
            continue
        chunk = sock.recv(1 << 16)
        assert chunk, f"the connection closed mid-response: {data[:300]!r}"
        data += chunk
    return found
