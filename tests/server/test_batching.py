"""Batching in ``fast`` timing: one write and one HTTP chunk per event, the socket never corked during a wait.

Unit tests drive :class:`~replaykit.server.streaming.Wire` over a recording transport; the end-to-end tests
read the server-side socket's ``TCP_CORK`` while the server waits (white-box: through the aiohttp runner).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest
from server_support import (
    ANTHROPIC,
    anthropic_events,
    anthropic_request,
    cassette_of,
    json_interaction,
    stream_cassette,
    stream_interaction,
)

from replaykit.cassette import Cassette
from replaykit.server import FakeProvider, Timing, streaming
from replaykit.server.plan import plan_for
from replaykit.server.streaming import BATCH_LIMIT, Wire

Log = list[tuple[str, Any]]
needs_cork = pytest.mark.skipif(streaming.CORK is None, reason="TCP_CORK is Linux only")


class _Socket:
    def __init__(self, log: Log) -> None:
        self.log = log

    def setsockopt(self, level: int, name: int, value: int) -> None:
        self.log.append(("cork", value))


class _Transport:
    """Records writes and cork changes in order; ``buffered`` is what the kernel did not take."""

    def __init__(self) -> None:
        self.log: Log = []
        self.closing = False
        self.buffered = 0

    def get_extra_info(self, name: str) -> Any:
        return _Socket(self.log) if name == "socket" else None

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        self.log.append(("write", bytes(data)))

    def get_write_buffer_size(self) -> int:
        return self.buffered


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> _Transport:
    monkeypatch.setattr(streaming, "CORK", 3)  # the logic is the same wherever the option exists
    return _Transport()


def _wire(transport: _Transport, batch: bool = True) -> Wire:
    return Wire(cast(asyncio.Transport, transport), batch)


def _batches(log: Log) -> list[list[int]]:
    """Sizes of the frames written between two uncorks."""
    batches: list[list[int]] = [[]]
    for kind, value in log:
        if kind == "write":
            batches[-1].append(len(value))
        elif value == 0:
            batches.append([])
    return [batch for batch in batches if batch]


# ---------------------------------------------------------------- Wire, unit


def test_each_chunk_is_one_write_framed_as_one_http_chunk(transport: _Transport) -> None:
    wire = _wire(transport)
    wire.write(b"event: ping\ndata: {}\n\n")
    wire.write(memoryview(b"x" * 300))
    wire.write(b"")  # an empty chunk would end the body: skipped
    writes = [value for kind, value in transport.log if kind == "write"]
    assert writes == [b"16\r\nevent: ping\ndata: {}\n\n\r\n", b"12c\r\n" + b"x" * 300 + b"\r\n"]


def test_a_closing_transport_is_a_connection_error(transport: _Transport) -> None:
    transport.closing = True
    with pytest.raises(ConnectionResetError):
        _wire(transport).write(b"data: 1\n\n")


def test_write_reports_a_backlog(transport: _Transport) -> None:
    wire = _wire(transport)
    assert wire.write(b"data: 1\n\n") is False
    transport.buffered = 10
    assert wire.write(b"data: 2\n\n") is True


def test_small_chunks_are_gathered_until_a_flush(transport: _Transport) -> None:
    wire = _wire(transport)
    for _ in range(3):
        wire.write(b"data: 1\n\n")
    assert [kind for kind, _ in transport.log] == ["cork", "write", "write", "write"]
    wire.flush()
    assert transport.log[0] == ("cork", 1) and transport.log[-1] == ("cork", 0)


def test_a_batch_is_flushed_before_it_would_pass_the_limit(transport: _Transport) -> None:
    wire = _wire(transport)
    chunk = b"x" * (BATCH_LIMIT // 3)
    for _ in range(7):
        wire.write(chunk)
    wire.flush()
    batches = _batches(transport.log)
    assert [len(batch) for batch in batches] == [2, 2, 2, 1]
    assert all(sum(batch) <= BATCH_LIMIT for batch in batches)


def test_a_chunk_over_the_limit_is_sent_alone_and_at_once(transport: _Transport) -> None:
    wire = _wire(transport)
    wire.write(b"data: 1\n\n")
    wire.write(b"x" * BATCH_LIMIT)
    wire.write(b"data: 2\n\n")
    wire.flush()
    kinds = [(kind, value if kind == "cork" else len(value)) for kind, value in transport.log]
    big = BATCH_LIMIT + len(f"{BATCH_LIMIT:x}") + 4
    assert kinds == [("cork", 1), ("write", 14), ("cork", 0), ("write", big), ("cork", 1), ("write", 14),
                     ("cork", 0)]


def test_without_batching_nothing_is_corked(transport: _Transport) -> None:
    wire = _wire(transport, batch=False)
    wire.hold()
    for _ in range(3):
        wire.write(b"data: 1\n\n")
    wire.flush()
    assert [kind for kind, _ in transport.log] == ["write"] * 3


def test_waits_flush_first(transport: _Transport) -> None:
    wire = _wire(transport)

    async def waits() -> None:
        wire.write(b"data: 1\n\n")
        await wire.sleep(0)
        assert transport.log[-1] == ("cork", 0)
        wire.write(b"data: 2\n\n")  # gathered again
        await wire.drain()
        assert transport.log[-1] == ("cork", 0)

    asyncio.run(waits())
    assert [value for kind, value in transport.log if kind == "cork"] == [1, 0, 1, 0]


def test_only_fast_streams_are_batched() -> None:
    stream = stream_cassette().interactions[0].response
    body = json_interaction(ANTHROPIC, anthropic_request(), {}).response
    assert plan_for(stream, Timing.parse("fast"), "anthropic").batch
    assert not plan_for(stream, Timing.parse("recorded"), "anthropic").batch
    assert not plan_for(stream, Timing.parse("fixed:5"), "anthropic").batch
    assert not plan_for(body, Timing.parse("fast"), "anthropic").batch


# ---------------------------------------------------------------- end to end, on a real socket


def _corks(fake: FakeProvider) -> list[int]:
    """``TCP_CORK`` of each server-side connection (white-box: the aiohttp runner's connections)."""
    runner = fake._runner
    assert runner is not None and runner.server is not None
    socks = [h.transport.get_extra_info("socket") for h in runner.server.connections if h.transport]
    return [s.getsockopt(socket.IPPROTO_TCP, streaming.CORK) for s in socks]


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as http:
        yield http


@needs_cork
@pytest.mark.parametrize("fault", ["kind=stall,after=2", "kind=stall,after=2,ms=5000"])
def test_events_before_a_stall_are_not_held(serve: Any, client: httpx.Client, fault: str) -> None:
    fake = serve(stream_cassette(), faults=[fault])
    with client.stream("POST", f"{fake.url}/v1/messages") as response:
        chunks = response.iter_raw()
        next(chunks), next(chunks)
        assert _corks(fake) == [0]


@needs_cork
def test_headers_before_a_delayed_event_are_not_held(serve: Any, client: httpx.Client) -> None:
    fake = serve(stream_cassette(), faults=["kind=delay_events,ms=5000"])
    with client.stream("POST", f"{fake.url}/v1/messages") as response:
        assert response.status_code == 200
        assert _corks(fake) == [0]


@needs_cork
def test_a_kept_alive_connection_is_left_uncorked(serve: Any, client: httpx.Client) -> None:
    body = stream_cassette()
    fake = serve(body, repeat=True)
    for _ in range(2):
        with client.stream("POST", f"{fake.url}/v1/messages") as response:
            assert list(response.iter_raw()) == [e.raw for e in body.interactions[0].response.events]
        assert _corks(fake) == [0]


def _sized_stream(sizes: list[int]) -> Cassette:
    """A stream whose text deltas carry ``sizes`` characters each."""
    events = anthropic_events(len(sizes))
    for (_, data), size in zip(events[2 : 2 + len(sizes)], sizes, strict=True):
        data["delta"]["text"] = "x" * size
    return cassette_of(stream_interaction(ANTHROPIC, anthropic_request(), events))


def _server_backlog(fake: FakeProvider) -> bool:
    runner = fake._runner
    assert runner is not None and runner.server is not None
    return any(h.transport.get_write_buffer_size() for h in runner.server.connections if h.transport)


@needs_cork
def test_the_socket_is_uncorked_while_a_slow_client_drains(serve: Any) -> None:
    fake = serve(_sized_stream([4000] * 2000))
    request = json.dumps(anthropic_request()).encode()
    with socket.socket() as slow:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", fake.port))
        slow.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%b" % (len(request), request))
        deadline = time.monotonic() + 10
        while not _server_backlog(fake) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _server_backlog(fake), "the server never had to wait for this client"
        time.sleep(0.05)  # the server is waiting for the transport to drain: it cannot go on
        assert _corks(fake) == [0]


def test_iter_raw_gets_one_chunk_per_event_across_batches(serve: Any, client: httpx.Client) -> None:
    """Several batches, the whole body under the 64 KiB httpx reads at once (a longer stream can be cut
    by a read wherever the client falls behind, batched or not): no batch may end inside an event."""
    body = _sized_stream([880] * 60)
    events = body.interactions[0].response.events
    assert 3 * BATCH_LIMIT < sum(len(e.raw) + 10 for e in events) < (64 << 10) - 1000
    fake = serve(body, repeat=True)
    for _ in range(10):
        with client.stream("POST", f"{fake.url}/v1/messages") as response:
            assert list(response.iter_raw()) == [event.raw for event in events]
