"""The lane: a plain request is answered on the connection itself, in the bytes aiohttp's path writes; every
other request hands the connection to aiohttp, which answers as it always did, and a request the lane began
is delivered there once, never matched twice.

Each condition that keeps a request out of the lane is shown to matter: the request is handed over (a spy on
``Lane._hand_over``) and still answered as before. Loopback only; no latency is asserted.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from server_support import (
    anthropic_request,
    connect,
    message_cassette,
    post_head,
    read_all,
    stream_cassette,
    stream_request,
)

from replaykit.server import lane, streaming
from replaykit.server.lane import Lane
from replaykit.server.plan import BATCH_LIMIT, LAST_CHUNK

_DATE = re.compile(rb"\r\nDate: [^\r]*")
BOUND = 20.0  # seconds an awaited outcome may take on a loaded machine; never asserted as a speed


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One item per connection handed to aiohttp: whether a request begun in the lane went with it."""
    seen: list[bool] = []
    real = Lane._hand_over

    def spy(self: Lane, begun: Any = None) -> None:
        seen.append(begun is not None)
        real(self, begun)

    monkeypatch.setattr(Lane, "_hand_over", spy)
    return seen


@pytest.fixture
def laned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item per response the lane wrote (its events)."""
    sent: list[int] = []
    real = streaming.send_whole

    def spy(transport: Any, whole: Any, progress: Any, writer: Any = None) -> bool:
        if writer is None:  # aiohttp's path passes its writer
            sent.append(whole.chunks)
        return real(transport, whole, progress, writer)

    monkeypatch.setattr(streaming, "send_whole", spy)
    return sent


def _until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + BOUND
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _responses(sock: socket.socket, count: int) -> list[bytes]:
    """``count`` responses read off ``sock``, each to the end of its ``Content-Length`` or chunked body."""
    data, found = b"", []
    while len(found) < count:
        head, blank, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: (\d+)", head)
        end = (len(head) + 4 + int(length.group(1)) if length else
               len(head) + 4 + body.find(LAST_CHUNK) + len(LAST_CHUNK) if LAST_CHUNK in body else -1)
        if blank and 0 <= end <= len(data):
            found.append(_DATE.sub(b"\r\nDate: -", data[:end]))
            data = data[end:]
            continue
        chunk = sock.recv(1 << 16)
        assert chunk, f"the connection closed mid-response: {data[:300]!r}"
        data += chunk
    return found


def _response(sock: socket.socket) -> bytes:
    """One response read off ``sock``."""
    return _responses(sock, 1)[0]


def _body(cassette: Any) -> bytes:
    body = cassette.interactions[0].request.body
    assert body is not None
    return bytes(body)


def _one(url: str, data: bytes) -> bytes:
    with connect(url) as sock:
        sock.sendall(data)
        return _response(sock)


def _untyped() -> Any:
    cassette = message_cassette("a")
    cassette.interactions[0].response.headers.pop("content-type")
    return cassette


@pytest.mark.parametrize("make", [stream_cassette, lambda: message_cassette("a"), _untyped],
                         ids=["stream", "json", "no content-type"])
def test_a_plain_request_is_answered_in_the_lane_with_the_bytes_aiohttp_writes(
    serve: Any, laned: list[int], handed: list[bool], make: Callable[[], Any]
) -> None:
    cassette = make()
    fake = serve(cassette, repeat=True)
    general = serve(cassette, repeat=True, faults=["kind=delay_headers,ms=0"])  # aiohttp's response path
    body = _body(cassette)
    ours = _one(fake.url, post_head(len(body)) + body)
    assert laned == [len(cassette.interactions[0].response.events) or 1] and handed == []
    theirs = _one(general.url, post_head(len(body)) + body)
    assert handed == [False] and len(laned) == 1
    assert ours == theirs and ours.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nContent-Type: application/octet-stream\r\n" in ours or make is not _untyped
    journaled = [(e.verdict, e.outcome, e.status, e.chunks, e.body_sha256) for e in (*fake.journal,
                                                                                    *general.journal)]
    assert journaled[0] == journaled[1] and journaled[0][:3] == ("served", "complete", 200)


def test_a_chunked_request_body_goes_to_aiohttp(serve: Any, laned: list[int], handed: list[bool]) -> None:
    cassette = stream_cassette()
    fake = serve(cassette)
    body = _body(cassette)
    chunked = post_head(0).replace(b"Content-Length: 0", b"Transfer-Encoding: chunked")
    reply = _one(fake.url, chunked + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    assert handed == [False] and laned == []
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and fake.unused() == []


def test_requests_on_one_connection_stay_in_the_lane_until_one_is_not_plain(
    serve: Any, laned: list[int], handed: list[bool]
) -> None:
    cassette = stream_cassette()
    fake = serve(cassette, repeat=True)
    body = _body(cassette)
    with connect(fake.url) as sock:
        replies = []
        for extra in ("", "", "Expect: 100-continue\r\n", ""):
            sock.sendall(post_head(len(body), extra=extra) + body)
            replies.append(_response(sock))
    assert len(laned) == 2 and handed == [False]  # from the third request on, aiohttp's connection
    assert replies[2].startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert replies[0] == replies[1] == replies[3]
    assert [e.verdict for e in fake.journal] == ["served"] * 4


_NOT_PLAIN = {
    "HTTP/1.0": lambda head: head.replace(b"HTTP/1.1", b"HTTP/1.0"),
    "Connection: close": lambda head: head + b"Connection: close\r\n",
    "Expect": lambda head: head + b"Expect: 100-continue\r\n",
    "Upgrade header": lambda head: head + b"Upgrade: websocket\r\n",
    "upgrade": lambda head: head + b"Connection: upgrade\r\nUpgrade: websocket\r\n",  # llhttp stops there
    "percent in the query": lambda head: head.replace(b"/v1/messages", b"/v1/messages?beta=%74rue"),
    "plus in the query": lambda head: head.replace(b"/v1/messages", b"/v1/messages?q=a+b"),
    "dot segment": lambda head: head.replace(b"/v1/messages", b"/v1/./messages"),
    "double slash": lambda head: head.replace(b"/v1/messages", b"/v1//messages"),
    "absolute target": lambda head: head.replace(b"/v1/messages", b"http://127.0.0.1/v1/messages"),
    "non-ASCII header": lambda head: head + "X-Note: caf\u00e9\r\n".encode(),
    "control character": lambda head: head + b"X-Note: a\x01b\r\n",
    "long header": lambda head: head + b"X-Note: " + b"a" * lane.MAX_LINE + b"\r\n",
    "long target": lambda head: head.replace(b"/v1/messages", b"/v1/messages?q=" + b"a" * lane.MAX_LINE),
    "many headers": lambda head: head + b"".join(b"X-%d: 1\r\n" % i for i in range(lane.MAX_HEADERS)),
    "admin path": lambda head: head.replace(b"POST /v1/messages", b"POST /__replaykit/reset"),
    "HEAD": lambda head: head.replace(b"POST ", b"HEAD "),
    "repeated Host": lambda head: head + b"Host: 127.0.0.1\r\n",  # aiohttp: 400
    "repeated header": lambda head: head + b"X-Note: a\r\nx-note: b\r\n",
}


@pytest.mark.parametrize("change", list(_NOT_PLAIN), ids=list(_NOT_PLAIN))
def test_a_request_that_is_not_plain_goes_to_aiohttp(serve: Any, laned: list[int], handed: list[bool],
                                                     change: str) -> None:
    cassette = stream_cassette()
    fake = serve(cassette, repeat=True)
    body = _body(cassette)
    head = _NOT_PLAIN[change](post_head(len(body)).removesuffix(b"\r\n")) + b"\r\n"
    with connect(fake.url) as sock:
        sock.sendall(head + body)
        reply = read_all(sock) if b"HTTP/1.0" in head or b"close" in head else sock.recv(1 << 16)
    assert handed == [False] and laned == []
    assert re.match(rb"HTTP/1\.[01] \d{3} ", reply)  # answered by aiohttp, whatever it answers


def test_a_repeated_host_is_answered_400_as_aiohttp_does(serve: Any, laned: list[int]) -> None:
    cassette = stream_cassette()
    fake = serve(cassette, repeat=True)
    body = _body(cassette)
    reply = _one(fake.url, post_head(len(body), extra="Host: 127.0.0.1\r\n") + body)
    assert reply.startswith(b"HTTP/1.0 400 ") and laned == []
    assert [e.verdict for e in fake.journal] == ["malformed"] and fake.unused() != []


def test_the_whitespace_after_a_header_value_is_not_part_of_it_as_with_aiohttp(
    serve: Any, laned: list[int], handed: list[bool]
) -> None:
    cassette = stream_cassette()
    fake = serve(cassette, repeat=True)
    general = serve(cassette, repeat=True, faults=["kind=delay_headers,ms=0"])  # aiohttp's request parser
    body = _body(cassette)
    request = post_head(len(body), extra="X-Replaykit-Cassette: elsewhere \t\r\n") + body
    ours, theirs = (re.findall(rb"\r\nx-replaykit-error: ([^\r]*)", _one(fake.url, request)),
                    re.findall(rb"\r\nx-replaykit-error: ([^\r]*)", _one(general.url, request)))
    assert handed == [True, False]  # matched in the lane (its 404 is not prepared whole), then in aiohttp
    assert ours == theirs and b"x-replaykit-cassette: 'elsewhere' names no cassette" in ours[0]


def test_a_body_over_the_lanes_bound_goes_to_aiohttp(serve: Any, laned: list[int],
                                                     handed: list[bool]) -> None:
    fake = serve(stream_cassette(), repeat=True)
    body = json.dumps({**stream_request(), "pad": "a" * lane.MAX_BODY}).encode()
    reply = _one(fake.url, post_head(len(body)) + body)
    assert handed == [False] and laned == []
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")  # the padding is a body difference, still served


def test_pipelined_requests_go_to_aiohttp_and_are_answered_in_order(serve: Any, laned: list[int],
                                                                   handed: list[bool]) -> None:
    fake = serve(message_cassette("a", "b"))
    first, second = (json.dumps(anthropic_request(text)).encode() for text in "ab")
    with connect(fake.url) as sock:
        sock.sendall(post_head(len(first)) + first + post_head(len(second)) + second)
        replies = _responses(sock, 2)
    assert handed == [False] and laned == []
    assert [json.loads(r.partition(b"\r\n\r\n")[2])["content"][0]["text"] for r in replies] == ["a", "b"]


def test_a_head_that_arrives_in_pieces_goes_to_aiohttp(serve: Any, laned: list[int],
                                                       handed: list[bool]) -> None:
    cassette = stream_cassette()
    fake = serve(cassette)
    body = _body(cassette)
    head = post_head(len(body))
    with connect(fake.url) as sock:
        sock.sendall(head[:20])
        assert _until(lambda: handed == [False])
        sock.sendall(head[20:] + body)
        assert _response(sock).startswith(b"HTTP/1.1 200 OK\r\n")
    assert laned == []


def test_a_body_that_lags_behind_its_head_waits_in_the_lane(serve: Any, laned: list[int], handed: list[bool],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane, "GRACE", BOUND)  # the wait never runs out in this test
    cassette = stream_cassette()
    fake = serve(cassette)
    body = _body(cassette)
    with connect(fake.url) as sock:
        sock.sendall(post_head(len(body)))
        time.sleep(0.05)  # as httpx sends them: the head, then the body
        sock.sendall(body)
        assert _response(sock).startswith(b"HTTP/1.1 200 OK\r\n")
    assert len(laned) == 1 and handed == []


def test_a_body_that_lags_too_long_goes_to_aiohttp_with_what_came(serve: Any, laned: list[int],
                                                                  handed: list[bool],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane, "GRACE", 0.01)
    cassette = stream_cassette()
    fake = serve(cassette)
    body = _body(cassette)
    with connect(fake.url) as sock:
        sock.sendall(post_head(len(body)) + body[:10])
        assert _until(lambda: handed == [False])
        sock.sendall(body[10:])
        assert _response(sock).startswith(b"HTTP/1.1 200 OK\r\n")
    assert laned == [] and [e.verdict for e in fake.journal] == ["served"]


@pytest.mark.parametrize(
    ("make", "options", "sent", "answer"),
    [
        (lambda: message_cassette("a" * BATCH_LIMIT), {}, None, (200, "served")),  # longer than one write
        (lambda: stream_cassette(text_deltas=3000), {}, None, (200, "served")),  # longer than one write
        (stream_cassette, {"enforce_contracts": True}, b"{}", (400, "invalid")),  # an answer made per request
    ],
    ids=["long json", "long stream", "refused"],
)
def test_a_request_begun_in_the_lane_is_delivered_by_aiohttp_once(
    serve: Any, laned: list[int], handed: list[bool], make: Callable[[], Any], options: dict[str, Any],
    sent: bytes | None, answer: tuple[int, str],
) -> None:
    cassette = make()
    fake = serve(cassette, **options)  # one interaction, served once: a second match would answer 404
    body = sent or _body(cassette)
    reply = _one(fake.url, post_head(len(body)) + body)
    assert handed == [True] and laned == []
    assert reply.startswith(b"HTTP/1.1 %d " % answer[0])
    assert [(e.seq, e.status, e.verdict, e.outcome) for e in fake.journal] == [(1, *answer, "complete")]
    assert (fake.unused() == []) is (answer[1] == "served")


def test_a_fault_or_paced_timing_keeps_requests_out_of_the_lane(serve: Any, laned: list[int],
                                                                handed: list[bool]) -> None:
    cassette = stream_cassette()
    body = _body(cassette)
    for fake in (serve(cassette, repeat=True, faults=["kind=delay_headers,ms=0"]),
                 serve(cassette, repeat=True, timing="fixed:0")):
        assert _one(fake.url, post_head(len(body)) + body).startswith(b"HTTP/1.1 200 OK\r\n")
    assert handed == [False, False] and laned == []  # handed over before anything was begun


def test_lane_connections_count_toward_the_cap(serve: Any, laned: list[int]) -> None:
    cassette = stream_cassette()
    fake = serve(cassette, repeat=True, max_connections=2)
    body = _body(cassette)
    held = [connect(fake.url) for _ in range(2)]
    try:
        for sock in held:
            sock.sendall(post_head(len(body)) + body)
            assert _response(sock).startswith(b"HTTP/1.1 200 OK\r\n")
        assert len(laned) == 2
        with connect(fake.url) as extra:
            assert read_all(extra).startswith(b"HTTP/1.1 503 ")
    finally:
        for sock in held:
            sock.close()


def test_a_lane_connection_idle_after_its_answer_is_closed(serve: Any, laned: list[int]) -> None:
    cassette = stream_cassette()
    fake = serve(cassette, repeat=True, header_timeout=0.3)
    body = _body(cassette)
    with connect(fake.url) as sock:
        sock.sendall(post_head(len(body)) + body)
        assert _response(sock).startswith(b"HTTP/1.1 200 OK\r\n")
        assert read_all(sock) == b""  # closed by the server once idle, nothing more sent
    assert len(laned) == 1


def test_stopping_the_server_closes_lane_connections(serve: Any, laned: list[int]) -> None:
    cassette = stream_cassette()
    fake = serve(cassette, repeat=True)
    body = _body(cassette)
    with connect(fake.url) as sock:
        sock.sendall(post_head(len(body)) + body)
        assert _response(sock).startswith(b"HTTP/1.1 200 OK\r\n")
        stopper = threading.Thread(target=fake.stop)
        stopper.start()
        assert read_all(sock) == b""
        stopper.join(BOUND)
    assert len(laned) == 1 and not stopper.is_alive()


def test_a_lane_reads_nothing_more_while_the_kernel_takes_nothing() -> None:
    server = mock.Mock()
    server.refused.return_value = False
    server.limits.header_timeout = 60.0
    transport = mock.Mock()
    transport.get_extra_info.return_value = None

    async def run() -> None:
        protocol = Lane(server)
        protocol.connection_made(transport)
        protocol.pause_writing()
        transport.pause_reading.assert_called_once_with()
        protocol.resume_writing()
        transport.resume_reading.assert_called_once_with()
        protocol.connection_lost(None)

    asyncio.run(run())
