"""The connections under the fake provider: slow clients time out, a cap on open connections, half-closed
clients answered, clients that leave during a delay journaled when they leave, malformed requests answered 400
with one journal line and nothing logged.

Loopback only, bounded in count and time; outcomes are asserted (closed, answered), never latencies.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from server_support import (
    anthropic_request,
    connect,
    message_cassette,
    post_head,
    raw_exchange,
    read_all,
    stream_cassette,
    stream_request,
)

from replaykit import contracts
from replaykit.errors import UsageError
from replaykit.server import FakeProvider, Fault

SLOWLORIS = 50
BOUND = 20.0  # seconds any awaited outcome may take on a loaded machine; never asserted as a speed


def _until(condition: Callable[[], bool], bound: float = BOUND) -> bool:
    """Poll ``condition`` until it holds or ``bound`` seconds passed; its last value."""
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


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
        assert _until(lambda: all(_closed_by_server(sock) for sock in socks))
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


def test_a_connection_over_the_cap_is_refused_at_once_and_others_are_served(serve: Any) -> None:
    fake = serve(message_cassette("a"), repeat=True, max_connections=3)
    held = [_held(fake) for _ in range(3)]
    try:
        with connect(fake.url) as extra:
            reply = read_all(extra)  # answered and closed without waiting for a request
        assert reply.startswith(b"HTTP/1.1 503 ") and b"--max-connections" in reply
        held.pop().close()
        assert _until(lambda: _served(fake))  # once the server has seen it go, a new client is served
    finally:
        for sock in held:
            sock.close()
    assert fake.journal != [] and {e.status for e in fake.journal} == {200}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"header_timeout": 0}, "header_timeout=0 must be a positive number"),
        ({"body_timeout": float("nan")}, "body_timeout=nan must be a positive number"),
        ({"max_connections": 0}, "max_connections=0 must be a whole number >= 1"),
        ({"journal_bodies": "some"}, "journal_bodies='some' must be one of head, full"),
    ],
)
def test_bad_limits_are_usage_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        FakeProvider(**options)


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
    assert _until(lambda: len(fake.journal) == 1)
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
