"""The connections under the fake provider: slow clients time out, a cap on open connections, half-closed
clients answered, clients that leave during a delay journaled when they leave, malformed requests answered 400
with one journal line and nothing logged.

Loopback only, bounded in count and time; outcomes are asserted (closed, answered), never latencies.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import select
import socket
import threading
import time
from types import SimpleNamespace
from typing import Any, cast
from unittest import mock

import httpx
import pytest
from server_support import (
    BOUND,
    anthropic_request,
    connect,
    message_cassette,
    post_head,
    raw_exchange,
    read_all,
    stream_cassette,
    stream_request,
    until,
)

from replaykit import contracts
from replaykit.errors import UsageError
from replaykit.server import FakeProvider, Fault, exchange
from replaykit.server.connections import Limits, Server, body_began, carried, half_closed

SLOWLORIS = 50

def _closed_by_server(sock: socket.socket) -> bool:
    """True when the server has closed ``sock`` (end of file or reset waiting to be read)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1 << 16) == b""
    except ConnectionResetError:
        return True


def _post(fake: FakeProvider, text: str = "a") -> int:
    """One request on a new connection; its status."""
    return httpx.post(f"{fake.url}/v1/messages", json=anthropic_request(text), timeout=BOUND).status_code


# ---------------------------------------------------------------- slow clients


def _trickle(socks: list[socket.socket], stop: threading.Event) -> None:
    """Slowloris: each connection sends a header line at a time, never the blank line that ends them."""
    for sock in socks:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    while not stop.wait(0.05):
        for sock in socks:
            with contextlib.suppress(OSError):  # the server closed it
                sock.sendall(b"X-Slow: 1\r\n")


def test_slowloris_connections_are_closed_while_normal_clients_are_served(serve: Any) -> None:
    fake = serve(message_cassette("a"), repeat=True, header_timeout=0.5)
    socks = [connect(fake.url) for _ in range(SLOWLORIS)]
    stop = threading.Event()
    trickler = threading.Thread(target=_trickle, args=(socks, stop))
    trickler.start()
    try:
        statuses = [_post(fake) for _ in range(40)]
        assert until(lambda: all(_closed_by_server(sock) for sock in socks))
    finally:
        stop.set()
        trickler.join()
        for sock in socks:
            sock.close()
    assert statuses == [200] * 40
    assert len(fake.journal) == 40  # the slow connections sent no request: nothing journaled for them


def test_an_idle_connection_is_closed_after_the_header_timeout(serve: Any) -> None:
    fake = serve(message_cassette("a"), header_timeout=0.3)
    with connect(fake.url) as sock:
        assert read_all(sock) == b""  # closed by the server, nothing sent


def test_a_body_that_stops_arriving_is_answered_408_and_journaled(serve: Any) -> None:
    fake = serve(message_cassette("a"), body_timeout=0.3)
    with connect(fake.url) as sock:
        sock.sendall(post_head(100) + b'{"model": ')
        reply = read_all(sock)  # the server answers, then closes
    assert reply.startswith(b"HTTP/1.1 408 ")
    [entry] = fake.journal
    assert (entry.verdict, entry.status, entry.path) == ("timeout", 408, "/v1/messages")
    assert "--body-timeout" in (entry.error or "")
    assert contracts.validate("replaykit.journal-entry", entry.to_json()) == []


def _trickled(url: str, head: bytes) -> bytes:
    """Send ``head``, then its body a byte at a time, never pausing long, until the server closes the
    connection; all the server sent."""
    stop = threading.Event()
    with connect(url) as sock:
        sock.sendall(head)

        def trickle() -> None:
            with contextlib.suppress(OSError):  # the server closed it
                while not stop.wait(0.02):
                    sock.sendall(b" ")

        trickler = threading.Thread(target=trickle)
        trickler.start()
        try:
            return read_all(sock)  # the server answers, then closes
        finally:
            stop.set()
            trickler.join()


@pytest.mark.parametrize("version", ["1.1", "1.0"], ids=["lane", "aiohttp"])  # the lane takes no HTTP/1.0
def test_a_body_trickled_past_its_deadline_is_answered_408_and_journaled(serve: Any, version: str) -> None:
    fake = serve(message_cassette("a"), body_deadline=0.2)  # body_timeout stays 60 s: never reached
    head = post_head(10_000).replace(b"HTTP/1.1", f"HTTP/{version}".encode(), 1)
    reply = _trickled(fake.url, head)
    assert reply.startswith(f"HTTP/{version} 408 ".encode())
    [entry] = fake.journal
    assert (entry.verdict, entry.status, entry.path) == ("timeout", 408, "/v1/messages")
    assert entry.error == ("the request body was not whole 0.2 s after its head; send it at once, or raise "
                           "--body-deadline")
    assert contracts.validate("replaykit.journal-entry", entry.to_json()) == []


def test_an_admin_body_trickled_past_its_deadline_is_answered_408(serve: Any) -> None:
    fake = serve(message_cassette("a"), body_deadline=0.2)
    reply = _trickled(fake.url, post_head(10_000, path="/__replaykit/faults"))
    assert reply.startswith(b"HTTP/1.1 408 ") and b"--body-deadline" in reply
    assert fake.journal == []  # the admin API is never journaled


def _held(fake: FakeProvider) -> socket.socket:
    """A keep-alive connection the server has surely accepted: one request answered on it."""
    sock = connect(fake.url)
    sock.sendall(b"GET /__replaykit/unused HTTP/1.1\r\nHost: x\r\n\r\n")
    assert sock.recv(1 << 16).startswith(b"HTTP/1.1 200 ")
    return sock


def _served(fake: FakeProvider) -> bool:
    try:
        return _post(fake) == 200
    except httpx.TransportError:
        return False


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "aiohttp"])
def test_a_connection_over_the_cap_is_refused_at_once_and_others_are_served(serve: Any, lane: bool) -> None:
    fake = serve(message_cassette("a"), repeat=True, max_connections=3, lane=lane)
    held = [_held(fake) for _ in range(3)]
    try:
        with connect(fake.url) as extra:
            reply = read_all(extra)  # answered and closed without waiting for a request
        assert reply.startswith(b"HTTP/1.1 503 ") and b"--max-connections" in reply
        held.pop().close()
        assert until(lambda: _served(fake))  # once the server has seen it go, a new client is served
    finally:
        for sock in held:
            sock.close()
    assert fake.journal != [] and {e.status for e in fake.journal} == {200}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"header_timeout": 0}, "header_timeout=0 must be a positive number of seconds (--header-timeout)"),
        ({"body_timeout": float("nan")}, "body_timeout=nan must be a positive number of seconds "
                                          "(--body-timeout)"),
        ({"body_timeout": float("inf")}, "body_timeout=inf must be a positive number"),
        ({"body_deadline": -1}, "body_deadline=-1 must be a positive number of seconds (--body-deadline)"),
        ({"header_timeout": True}, "header_timeout=True must be a positive number"),
        ({"header_timeout": "5"}, "header_timeout='5' must be a positive number"),
        ({"max_connections": 0}, "max_connections=0 must be a whole number >= 1 (--max-connections)"),
        ({"max_connections": True}, "max_connections=True must be a whole number >= 1"),
        ({"max_connections": 2.5}, "max_connections=2.5 must be a whole number >= 1"),
        ({"journal_bodies": "some"}, "journal_bodies='some' must be one of head, full"),
    ],
)
def test_bad_limits_are_usage_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        FakeProvider(**options)


def test_the_least_limits_are_accepted() -> None:
    limits = Limits(header_timeout=0.001, body_timeout=1, max_connections=1, body_deadline=0.001)
    assert (limits.header_timeout, limits.body_timeout, limits.max_connections) == (0.001, 1, 1)
    assert limits.body_deadline == 0.001


def _server(cap: int = 256) -> Server:
    """A server as the fake provider makes one (in a running loop), answering nothing."""
    return Server(mock.AsyncMock(), limits=Limits(max_connections=cap), on_malformed=mock.Mock())


def _parsed(reply: bytes) -> tuple[int, dict[str, str], bytes]:
    """The status, headers (names lowercased) and body of an HTTP response with a length."""
    head, _, body = reply.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("ascii").split("\r\n")
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
    assert int(headers["content-length"]) == len(body)
    return int(status_line.split()[1]), headers, body


def test_a_connection_over_the_cap_counting_the_lanes_is_answered_503_and_closed() -> None:
    async def run() -> None:
        server, transport = _server(cap=2), mock.Mock()
        server.lanes.add(mock.Mock())
        assert server.refused(transport) is False
        assert not transport.write.called and not transport.close.called
        server.lanes.add(mock.Mock())
        assert server.refused(transport) is True
        transport.close.assert_called_once_with()
        [reply] = transport.write.call_args.args
        status, headers, body = _parsed(reply)
        assert status == 503 and (headers["connection"], headers["retry-after"]) == ("close", "1")
        assert headers["x-replaykit-error"] == "too many open connections (--max-connections 2)"
        assert body == (b"replaykit: 2 connections are open already (--max-connections 2); "
                        b"retry once one closes\n")

    asyncio.run(run())


def test_a_handed_over_connection_counts_while_open_and_not_after_its_client_leaves() -> None:
    """aiohttp keeps a closed connection among its own until its handler task ends: the cap does not wait
    for that."""
    async def run() -> None:
        server = _server(cap=1)
        connection = server.connection()
        connection.connection_made(mock.Mock())  # its handler task starts, waiting for a request
        refused = mock.Mock()
        assert server.refused(refused) is True and refused.close.called
        connection.connection_lost(None)
        admitted = mock.Mock()
        assert server.refused(admitted) is False and not admitted.close.called
        await asyncio.sleep(0)

    asyncio.run(run())


def test_what_the_lane_began_is_carried_once_and_only_on_a_connection() -> None:
    async def run() -> None:
        connection = _server().connection()
        request = SimpleNamespace(protocol=connection)
        assert carried(request) is None and half_closed(request) is connection.half_closed
        connection.carried = begun = object()
        assert carried(request) is begun and carried(request) is None  # given once
        elsewhere = SimpleNamespace(protocol=SimpleNamespace(carried=begun, half_closed=asyncio.Event()))
        assert carried(elsewhere) is None and half_closed(elsewhere) is None

    asyncio.run(run())


def test_the_head_time_the_lane_took_is_one_requests_and_kept_for_it() -> None:
    async def run() -> None:
        connection = _server().connection()
        connection.headed = 5.0  # the lane took the head, then handed the connection over
        first, second = (cast(Any, SimpleNamespace(protocol=connection)) for _ in range(2))
        assert body_began(first) == 5.0 and body_began(first) == 5.0  # the dispatch's, then read_body's
        now = asyncio.get_running_loop().time()
        assert body_began(second) >= now and connection.headed is None
        assert body_began(cast(Any, SimpleNamespace(protocol=object()))) >= now

    asyncio.run(run())


# ---------------------------------------------------------------- clients that close their side


@pytest.mark.parametrize(("make", "sent"), [(lambda: message_cassette("a"), anthropic_request("a")),
                                            (stream_cassette, stream_request())])
def test_a_client_that_half_closes_after_its_request_gets_its_response(
    serve: Any, make: Any, sent: dict[str, Any]
) -> None:
    fake = serve(make())
    body = json.dumps(sent).encode()
    reply = raw_exchange(fake.url, post_head(len(body)) + body, half_close=True)
    head, _, rest = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert rest.endswith(b"0\r\n\r\n") if b"chunked" in head else b'"text": "a"' in rest
    [entry] = fake.journal
    assert (entry.verdict, entry.outcome) == ("served", "complete")


def test_a_client_that_half_closes_an_admin_request_gets_its_answer(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    reply = raw_exchange(fake.url, b"GET /__replaykit/unused HTTP/1.1\r\nHost: x\r\n\r\n", half_close=True)
    assert reply.startswith(b"HTTP/1.1 200 ") and b'"index": 0' in reply


def _payload(whole: bool) -> Any:
    return SimpleNamespace(is_eof=lambda: whole)


@pytest.mark.parametrize(
    ("queued", "expect"),
    [
        ([True], True),
        ([False], False),
        ([False, True], True),
        ([True, False], False),
        ([True, True, False], False),  # the latest one parsed decides
    ],
)
def test_a_half_close_keeps_the_connection_when_the_latest_request_queued_is_whole(
    queued: list[bool], expect: bool
) -> None:
    async def run() -> None:
        connection = _server().connection()
        connection._messages.extend((mock.Mock(), _payload(whole)) for whole in queued)
        assert connection._answering_whole_request() is expect

    asyncio.run(run())


@pytest.mark.parametrize(("current", "waiting", "expect"), [(None, False, True), (True, False, True),
                                                            (False, False, False), (None, True, False)])
def test_a_half_close_keeps_the_connection_only_for_a_whole_request_in_hand(
    current: bool | None, waiting: bool, expect: bool
) -> None:
    """Nothing queued: a request being handled keeps it if its body is whole; none (and no wait for one:
    an answer is being finished) keeps it too; waiting for a request, the client is gone."""

    async def run() -> None:
        connection = _server().connection()
        if current is not None:
            connection._current_request = cast(Any, SimpleNamespace(content=_payload(current)))
        if waiting:
            connection._waiter = asyncio.get_running_loop().create_future()
        assert connection._answering_whole_request() is expect

    asyncio.run(run())


@pytest.mark.parametrize(
    ("fault", "outcome"),
    [
        (Fault("delay_headers", ms=60_000), "client_closed"),
        (Fault("stall", after=1), "hung"),
        (Fault("stall", after=1, ms=60_000), "client_closed"),
    ],
)
def test_a_client_that_leaves_during_a_wait_is_journaled_when_it_leaves(
    serve: Any, fault: Fault, outcome: str
) -> None:
    fake = serve(stream_cassette(), faults=[fault])
    body = json.dumps(stream_request()).encode()
    with connect(fake.url) as sock:
        sock.sendall(post_head(len(body)) + body)
        time.sleep(0.2)
    # the wait is a minute long: an entry within the bound was made when the client left
    assert until(lambda: len(fake.journal) == 1)
    assert fake.journal[0].outcome == outcome


# ---------------------------------------------------------------- malformed requests

MALFORMED = {
    "bad request line": b"GARBAGE\r\n\r\n",
    "bad header": b"POST /v1/messages HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n",
    "bad content-length": b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    "bad chunk size": b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"zz\r\nab\r\n0\r\n\r\n",
    "a good request and garbage in one packet": (b"GET /__replaykit/unused HTTP/1.1\r\nHost: x\r\n\r\n"
                                                 b"GARBAGE\r\n\r\n"),
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_request_is_answered_400_with_one_journal_line_and_no_log(
    serve: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], raw: bytes
) -> None:
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    fake = serve(message_cassette("a"))
    reply = raw_exchange(fake.url, raw)
    assert reply.count(b" 400 Bad Request\r\n") == 1
    [entry] = fake.journal
    assert (entry.verdict, entry.status) == ("malformed", 400)
    assert entry.error and "\n" not in entry.error
    assert entry.error.startswith("the request could not be parsed: Invalid ")  # the parser's own words
    assert contracts.validate("replaykit.journal-entry", entry.to_json()) == []
    assert [r.getMessage() for r in caplog.records if r.name.startswith("aiohttp")] == []
    assert capfd.readouterr().err == ""


def test_a_bad_chunk_after_the_headers_is_answered_400_and_journaled_with_its_path(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fake = serve(message_cassette("a"))
    with connect(fake.url) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                     b"Expect: 100-continue\r\n\r\n")
        assert sock.recv(1 << 16).startswith(b"HTTP/1.1 100 ")  # the handler is reading the body
        sock.sendall(b"zz\r\nab\r\n0\r\n\r\n")
        reply = read_all(sock)
    assert reply.startswith(b"HTTP/1.1 400 ")
    [entry] = fake.journal
    assert (entry.verdict, entry.status, entry.path, entry.provider) == ("malformed", 400, "/v1/messages",
                                                                         "anthropic")
    assert entry.error.startswith("the request body is malformed: Invalid character in chunk size")
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_garbage_on_a_kept_alive_connection_is_answered_400_and_journaled(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    fake = serve(message_cassette("a"))
    with _held(fake) as sock:  # a request answered: garbage now is not the first thing on the connection
        sock.sendall(b"GARBAGE\r\n\r\n")
        assert read_all(sock).startswith(b"HTTP/1.0 400 Bad Request\r\n")
    assert [(e.verdict, e.status, e.method) for e in fake.journal] == [("malformed", 400, "UNKNOWN")]
    assert [r.getMessage() for r in caplog.records if r.name.startswith("aiohttp")] == []


def test_an_error_in_the_handler_is_answered_500_as_aiohttp_does(
    serve: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    boom = RuntimeError("boom")

    def broken(state: Any, request: Any) -> Any:
        raise boom

    monkeypatch.setattr(exchange, "handle", broken)
    caplog.set_level(logging.ERROR, logger="aiohttp")
    fake = serve(message_cassette("a"), faults=["kind=delay_headers,ms=0"])  # aiohttp's path, not the lane
    body = json.dumps(anthropic_request("a")).encode()
    reply = raw_exchange(fake.url, post_head(len(body)) + body)
    assert reply.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert reply.endswith(b"500 Internal Server Error\n\nServer got itself in trouble")
    assert [record.exc_info[1] for record in caplog.records if record.exc_info] == [boom]
