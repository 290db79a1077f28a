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
    BOUND,
    anthropic_request,
    connect,
    message_cassette,
    post_head,
    read_all,
    stream_cassette,
    stream_request,
    undated,
    until,
)

from replaykit.server import exchange, lane, streaming
from replaykit.server.connections import Connection, Limits
from replaykit.server.lane import Lane
from replaykit.server.prepared import BATCH_LIMIT, LAST_CHUNK, Whole
from replaykit.server.seam import Progress


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


def _responses(sock: socket.socket, count: int) -> list[bytes]:
    """``count`` responses read off ``sock``, each to the end of its ``Content-Length`` or chunked body."""
    data, found = b"", []
    while len(found) < count:
        head, blank, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: (\d+)", head)
        end = (len(head) + 4 + int(length.group(1)) if length else
               len(head) + 4 + body.find(LAST_CHUNK) + len(LAST_CHUNK) if LAST_CHUNK in body else -1)
        if blank and 0 <= end <= len(data):
            found.append(undated(data[:end]))
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
    general = serve(cassette, repeat=True, lane=False)  # aiohttp writes every byte
    body = _body(cassette)
    ours = _one(fake.url, post_head(len(body)) + body)
    assert laned == [len(cassette.interactions[0].response.events) or 1] and handed == []
    theirs = _one(general.url, post_head(len(body)) + body)
    assert handed == [] and len(laned) == 1
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
    general = serve(cassette, repeat=True, lane=False)  # aiohttp's request parser
    body = _body(cassette)
    request = post_head(len(body), extra="X-Replaykit-Cassette: elsewhere \t\r\n") + body
    ours, theirs = (re.findall(rb"\r\nx-replaykit-error: ([^\r]*)", _one(fake.url, request)),
                    re.findall(rb"\r\nx-replaykit-error: ([^\r]*)", _one(general.url, request)))
    assert handed == [True]  # matched in the lane (its 404 is not prepared whole); aiohttp's own, no lane
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
        assert until(lambda: handed == [False])
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
        assert until(lambda: handed == [False])
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


def test_a_request_handed_over_but_never_handled_is_journaled_when_its_client_leaves(
    serve: Any, handed: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Connection, "data_received", lambda self, data: None)  # aiohttp never reads it
    cassette = message_cassette("a" * BATCH_LIMIT)  # answered by aiohttp: carried over
    fake = serve(cassette)
    body = _body(cassette)
    with connect(fake.url) as sock:
        sock.sendall(post_head(len(body)) + body)
        assert until(lambda: handed == [True])
    assert until(lambda: len(fake.journal) == 1)
    [entry] = fake.journal
    assert (entry.verdict, entry.outcome) == ("served", "client_closed")
    assert len(fake.unused()) == 1  # given back: the next request gets it


def test_a_request_the_server_fails_to_begin_gets_aiohttps_500(serve: Any, handed: list[bool],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug in the server")

    monkeypatch.setattr(exchange, "begin", broken)
    cassette = stream_cassette()
    fake = serve(cassette)
    body = _body(cassette)
    with connect(fake.url) as sock:
        sock.sendall(post_head(len(body)) + body)
        assert sock.recv(1 << 16).startswith(b"HTTP/1.1 500 ")  # as before the lane: aiohttp's answer
    assert handed == [False]


def test_a_fault_or_paced_timing_hands_the_request_over_begun(serve: Any, laned: list[int],
                                                              handed: list[bool]) -> None:
    cassette = stream_cassette()
    body = _body(cassette)
    for fake in (serve(cassette, repeat=True, faults=["kind=delay_headers,ms=0"]),
                 serve(cassette, repeat=True, timing="fixed:0")):
        assert _one(fake.url, post_head(len(body)) + body).startswith(b"HTTP/1.1 200 OK\r\n")
    assert handed == [True, True] and laned == []  # begun in the lane, its answer not prepared whole


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


# ---------------------------------------------------------------- a Lane alone (mocks; no socket, no timing)


class _Begun:
    """A request the provider began (:func:`replaykit.server.exchange.begin`); its answer whole or not."""

    def __init__(self, whole: Whole | None) -> None:
        self.plan = mock.Mock(whole=whole)
        self.progress = Progress()
        self.closed = 0

    def close(self) -> None:
        self.closed += 1

    def abandon(self) -> None:
        self.progress.outcome = "client_closed"
        self.close()


_WHOLE = Whole(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", False, b"\r\nok", 1)


def _server(*begun: _Begun, refused: bool = False) -> mock.Mock:
    """A :class:`~replaykit.server.lane.LaneServer` whose provider begins ``begun`` in turn (then fails: the
    general way), noting each request in ``received``."""
    server = mock.Mock(lanes=set(), limits=Limits(header_timeout=60.0, body_timeout=60.0), received=[])
    server.refused.return_value = refused
    answers = iter(begun)

    def answer(received: Any) -> _Begun:
        server.received.append(received)
        begun = next(answers, None)
        if begun is None:
            raise RuntimeError("nothing begun")
        return begun

    server.provider.handle_request.side_effect = answer
    return server


def _transport(closing: bool = False, sock: socket.socket | None = None) -> mock.Mock:
    transport = mock.Mock()
    transport.is_closing.return_value = closing
    transport.get_write_buffer_size.return_value = 0
    transport.get_extra_info.side_effect = lambda name: sock if name == "socket" else None
    return transport


def _in_loop(test: Callable[[], Any]) -> None:
    """Run ``test`` (a coroutine function) in an event loop of its own: a Lane takes the running loop."""
    asyncio.run(test())


def _handed_over(server: mock.Mock, transport: mock.Mock) -> bytes | None:
    """The bytes the lane gave aiohttp's connection, or None when it did not hand the connection over."""
    if not transport.set_protocol.called:
        return None
    connection = server.connection.return_value
    transport.set_protocol.assert_called_once_with(connection)
    connection.connection_made.assert_called_once_with(transport)
    return b"".join(call.args[0] for call in connection.data_received.call_args_list)


def test_a_lane_reads_nothing_more_while_the_kernel_takes_nothing() -> None:
    server, transport = _server(), _transport()

    async def run() -> None:
        protocol = Lane(server)
        protocol.connection_made(transport)
        protocol.pause_writing()
        transport.pause_reading.assert_called_once_with()
        protocol.resume_writing()
        transport.resume_reading.assert_called_once_with()
        protocol.connection_lost(None)

    _in_loop(run)


def test_a_lane_is_counted_while_open_and_a_refused_one_never() -> None:
    server, refused = _server(), _server(refused=True)

    async def run() -> None:
        protocol, other = Lane(server), Lane(refused)
        protocol.connection_made(_transport())
        other.connection_made(_transport())
        assert server.lanes == {protocol} and refused.lanes == set()
        protocol.connection_lost(None)
        other.connection_lost(None)  # nothing was started for it: nothing to stop
        assert server.lanes == set()

    _in_loop(run)


def test_a_lane_keeps_tcp_connections_alive_as_aiohttp_does() -> None:
    async def run(sock: socket.socket) -> None:
        Lane(_server()).connection_made(_transport(sock=sock))

    with socket.socket() as sock:
        asyncio.run(run(sock))
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)


def test_the_idle_timer_counts_from_opening_then_from_each_answer() -> None:
    server, transport, clock = _server(_Begun(_WHOLE)), _transport(), mock.Mock()

    async def run() -> None:
        protocol = Lane(server)
        protocol.loop = clock
        clock.time.return_value = 100.0
        protocol.connection_made(transport)  # header_timeout: 60
        assert clock.call_at.call_args == mock.call(160.0, protocol._idle)
        clock.time.return_value = 130.0
        protocol.data_received(b"GET /v1/models HTTP/1.1\r\n\r\n")
        assert transport.write.called and server.received[0].path == "/v1/models"
        clock.time.return_value = 160.0
        protocol._idle()  # due at 190 now
        assert clock.call_at.call_args == mock.call(190.0, protocol._idle) and not transport.close.called
        clock.time.return_value = 190.0
        protocol._idle()
        transport.close.assert_called_once_with()

    _in_loop(run)


def test_the_idle_timer_leaves_a_request_at_hand_to_its_body_wait() -> None:
    server, transport, clock = _server(), _transport(), mock.Mock()

    async def run() -> None:
        protocol = Lane(server)
        protocol.loop = clock
        clock.time.return_value = 100.0
        protocol.connection_made(transport)
        protocol.data_received(post_head(5))  # its body yet to come
        assert clock.call_later.called and not transport.set_protocol.called
        clock.time.return_value = 170.0
        protocol._idle()
        assert clock.call_at.call_args == mock.call(170.0 + lane.GRACE, protocol._idle)
        assert not transport.close.called

    _in_loop(run)


def test_a_body_handed_over_unread_counts_its_deadline_from_when_the_lane_took_its_head() -> None:
    server, transport, clock = _server(), _transport(), mock.Mock()
    server.limits = Limits(body_deadline=0.05)

    async def run() -> None:
        protocol = Lane(server)
        protocol.loop = clock
        clock.time.return_value = 100.0
        protocol.connection_made(transport)
        clock.time.return_value = 100.5
        protocol.data_received(post_head(5))  # its body yet to come
        assert clock.call_later.call_args == mock.call(0.05, protocol._hand_over)  # the wait: the deadline
        clock.time.return_value = 100.55
        protocol._hand_over()
        assert server.connection.return_value.headed == 100.5

    _in_loop(run)


def test_a_request_handed_over_whole_leaves_no_deadline_behind() -> None:
    server, transport = _server(), _transport()

    async def run() -> None:
        protocol = Lane(server)
        protocol.connection_made(transport)
        protocol.data_received(post_head(2, extra="Expect: 100-continue\r\n") + b"{}")  # not plain, whole
        assert server.connection.return_value.headed is None

    _in_loop(run)


_GET = b"GET /v1/models HTTP/1.1\r\n\r\n"  # no header: two in a row are told apart by their count only


@pytest.mark.parametrize("data", [post_head(5)[:20], post_head(5, extra="Expect: 100-continue\r\n"),
                                  _GET + _GET[:10], _GET * 2],
                         ids=["head in pieces", "not plain, its body to come", "the next request begun",
                              "two requests"])
def test_what_the_lane_cannot_take_goes_to_aiohttp_at_once(data: bytes) -> None:
    server, transport = _server(), _transport()

    async def run() -> None:
        protocol = Lane(server)
        protocol.connection_made(transport)
        protocol.data_received(data)
        assert _handed_over(server, transport) == data and server.received == []  # not after a wait

    _in_loop(run)


_AT_THE_LIMITS = {
    "target": (b"/v1/messages?q=" + b"a" * (lane.MAX_LINE - 15), b"", b"{}"),
    "headers": (b"/v1/messages", b"".join(b"X-%d: 1\r\n" % i for i in range(lane.MAX_HEADERS - 2)), b"{}"),
    "header line": (b"/v1/messages", b"X-Note: " + b"a" * (lane.MAX_LINE - 6) + b"\r\n", b"{}"),
    "body": (b"/v1/messages", b"", b"a" * lane.MAX_BODY),
}


@pytest.mark.parametrize("limit", list(_AT_THE_LIMITS), ids=list(_AT_THE_LIMITS))
def test_a_request_at_the_lanes_limits_is_the_lanes(limit: str) -> None:
    target, extra, body = _AT_THE_LIMITS[limit]
    data = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n%s" % (target, len(body), extra, body)
    server, transport = _server(_Begun(_WHOLE)), _transport()

    async def run() -> None:
        protocol = Lane(server)
        protocol.connection_made(transport)
        protocol.data_received(data)
        assert _handed_over(server, transport) is None and len(server.received) == 1
        transport.write.assert_called_once()

    _in_loop(run)


def test_each_request_is_read_as_aiohttp_reads_it_and_waits_for_its_own_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lane, "GRACE", 0.0)  # a body that lags behind its head goes over at the next turn
    server, transport = _server(_Begun(_WHOLE)), _transport()
    body = json.dumps(stream_request()).encode()
    second = post_head(len(body))

    async def run() -> None:
        protocol = Lane(server)
        protocol.connection_made(transport)
        for piece in (post_head(len(body), "/v1/messages?beta=true&x="), body[:7], body[7:20], body[20:]):
            protocol.data_received(piece)  # no turn of the loop in between: the pieces of one arrival
        received = server.received[0]
        assert (received.method, received.path, received.query) == ("POST", "/v1/messages", "beta=true&x=")
        assert received.body == body and received.headers["content-length"] == str(len(body))
        protocol.data_received(second)
        protocol.data_received(body[:7])
        for _ in range(1000):
            if transport.set_protocol.called:
                break
            await asyncio.sleep(0.001)
        assert _handed_over(server, transport) == second + body[:7] and len(server.received) == 1

    _in_loop(run)


@pytest.mark.parametrize("whole", [_WHOLE, None], ids=["whole", "not whole"])
def test_a_request_begun_when_the_client_is_gone_is_journaled_client_closed(whole: Whole | None) -> None:
    begun = _Begun(whole)
    server, transport = _server(begun), _transport(closing=True)

    async def run() -> None:
        protocol = Lane(server)
        protocol.connection_made(transport)
        protocol.data_received(b"GET /v1/models HTTP/1.1\r\n\r\n")

    _in_loop(run)
    assert (begun.progress.outcome, begun.closed) == ("client_closed", 1)
    assert not transport.write.called and not transport.set_protocol.called
