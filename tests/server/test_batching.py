"""Batching in ``fast`` timing: one HTTP chunk per event, framed together into few writes; never held.

Unit tests drive :class:`~replaykit.server.streaming.Wire` over a recording transport,
:func:`~replaykit.server.plan.batches` and a recording framed once per interaction
(:func:`~replaykit.server.plan.recorded_chunks`, :func:`~replaykit.server.plan.recorded_batches`); the
end-to-end tests read what a real client receives, and when.
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
    stream_request,
)

from replaykit.cassette import Cassette
from replaykit.server import FakeProvider, Timing, streaming
from replaykit.server.exchange import State, _replay_plan
from replaykit.server.faults import Fault
from replaykit.server.matching import Pool, slots_of
from replaykit.server.plan import plan_for, recorded_batches, recorded_chunks
from replaykit.server.prepared import BATCH_LIMIT, LAST_CHUNK, Batch, batches, http_chunk
from replaykit.server.seam import Progress
from replaykit.server.streaming import Wire, batched

pytestmark = pytest.mark.both_lanes  # every response the same with the lane and without it


class _Transport:
    """Records each write; ``buffered`` is what the kernel did not take."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False
        self.buffered = 0

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return self.buffered


class _Writer:
    def __init__(self, chunked: bool) -> None:
        self.chunked = chunked
        self.output_size = 0


@pytest.fixture
def transport() -> _Transport:
    return _Transport()


class _Response:
    """What the first batch is written through (aiohttp's response, the headers held): the transport."""

    def __init__(self, transport: _Transport) -> None:
        self.transport = transport

    async def write(self, data: bytes) -> None:
        self.transport.write(data)


def _wire(transport: _Transport) -> Wire:
    return Wire(cast(asyncio.Transport, transport))


def _frame(chunk: bytes) -> bytes:
    return b"".join(http_chunk(chunk))


# ---------------------------------------------------------------- Wire, unit


def test_each_chunk_is_one_write_framed_as_one_http_chunk(transport: _Transport) -> None:
    wire = _wire(transport)
    wire.write(b"event: ping\ndata: {}\n\n")
    wire.write(memoryview(b"x" * 300))
    wire.write(b"")  # an empty chunk would end the body: nothing is written
    assert [w for w in transport.writes if w] == [
        b"16\r\nevent: ping\ndata: {}\n\n\r\n", b"12c\r\n" + b"x" * 300 + b"\r\n"
    ]


def test_output_size_counts_what_reached_the_transport(transport: _Transport) -> None:
    wire = _wire(transport)
    writer = _Writer(chunked=True)
    wire.writer = cast(Any, writer)
    wire.write(b"data: 1\n\n")
    wire.send(b"5\r\nabcde\r\n")
    assert writer.output_size == sum(map(len, transport.writes)) == 14 + 10


def test_an_http_1_0_client_gets_the_events_bare(transport: _Transport) -> None:
    wire = _wire(transport)
    wire.writer = cast(Any, _Writer(chunked=False))
    wire.write(b"data: 1\n\n")
    wire.write(b"data: 2\n\n")
    assert transport.writes == [b"data: 1\n\n", b"data: 2\n\n"]


def test_a_closing_transport_is_a_connection_error(transport: _Transport) -> None:
    transport.closing = True
    with pytest.raises(ConnectionResetError):
        _wire(transport).write(b"data: 1\n\n")
    with pytest.raises(ConnectionResetError):
        _wire(transport).send(b"0\r\n\r\n")


def test_write_reports_a_backlog(transport: _Transport) -> None:
    wire = _wire(transport)
    assert wire.write(b"data: 1\n\n") is False
    transport.buffered = 10
    assert wire.write(b"data: 2\n\n") is True


# ---------------------------------------------------------------- batches: framed together, cut at chunks


@pytest.mark.parametrize("sizes", [[9, 10, 0, 11], [BATCH_LIMIT // 3] * 7, [5, BATCH_LIMIT, 5], [0], []])
def test_batches_hold_every_chunk_framed_in_order(sizes: list[int]) -> None:
    chunks = [bytes([65 + i % 26]) * size for i, size in enumerate(sizes)]
    framed = list(batches(chunks))
    assert b"".join(data for data, _ in framed) == b"".join(_frame(c) for c in chunks if c)
    assert sum(count for _, count in framed) == len(chunks)


def test_a_batch_ends_before_it_would_pass_the_limit() -> None:
    chunk = b"x" * (BATCH_LIMIT // 3)
    framed = list(batches([chunk] * 7))
    assert [count for _, count in framed] == [2, 2, 2, 1]
    assert all(len(data) == count * len(_frame(chunk)) <= BATCH_LIMIT for data, count in framed)


def test_a_chunk_over_the_limit_is_a_batch_alone() -> None:
    big = b"x" * BATCH_LIMIT
    framed = list(batches([b"data: 1\n\n", big, b"data: 2\n\n"]))
    assert framed == [(_frame(b"data: 1\n\n"), 1), (_frame(big), 1), (_frame(b"data: 2\n\n"), 1)]


_HALF = BATCH_LIMIT // 2


@pytest.mark.parametrize(
    ("frames", "counts"),
    [
        ([_HALF, _HALF], [2]),  # exactly the limit: one batch
        ([_HALF, _HALF + 1], [1, 1]),  # one byte over: two
        ([_HALF] * 4, [2, 2]),  # a batch after a cut starts empty, and is filled to the limit again
    ],
)
def test_a_batch_is_filled_up_to_the_limit_exactly(frames: list[int], counts: list[int]) -> None:
    chunks = [b"x" * (size - 8) for size in frames]  # 4 hex digits of size, 2 CRLFs: a frame of ``size``
    assert [len(_frame(chunk)) for chunk in chunks] == frames
    framed = list(batches(chunks))
    assert [count for _, count in framed] == counts
    assert all(len(data) <= BATCH_LIMIT for data, _ in framed)


@pytest.mark.parametrize("timing", ["fast", "fixed:0"])  # in batches, event by event
def test_the_outcome_is_settled_before_the_last_bytes_leave(transport: _Transport, timing: str) -> None:
    """A client that acts on the last event finds the request journaled as complete already."""
    response = _sized_stream([30000] * 6).interactions[0].response
    plan = plan_for(response, Timing.parse(timing), "anthropic")
    seen: list[int] = []
    progress = Progress(on_settle=lambda _: seen.append(len(transport.writes)))
    asyncio.run(streaming._write_all(cast(Any, _Response(transport)), _wire(transport), plan, progress))
    assert len(transport.writes) > 2 and seen == [len(transport.writes) - 1]
    assert progress.outcome == "complete" and progress.chunks == len(plan.chunks)


def _slot(cassette: Cassette) -> Any:
    return slots_of("c", cassette.interactions)[0]


def _chunks(slot: Any) -> list[bytes | memoryview]:
    """The slot's recorded events, framed once per interaction (in ``slot.memo``)."""
    return recorded_chunks(slot.interaction.response.body, slot.memo)


def _batches(slot: Any) -> list[Batch] | None:
    return recorded_batches(slot.interaction.response.body, slot.memo)


def test_a_slot_frames_its_stream_once_per_body() -> None:
    slot = _slot(stream_cassette())
    first = _batches(slot)
    assert first == list(batches(_chunks(slot), end=True))
    assert _batches(slot) is not first and _batches(slot)[0][0] is first[0][0]  # cached, a new list
    response = slot.interaction.response
    response.body = response.body + b"event: ping\ndata: {}\n\n"
    assert _batches(slot)[-1][0].endswith(_frame(b"event: ping\ndata: {}\n\n") + LAST_CHUNK)


def test_slot_chunks_are_the_events_of_the_current_body() -> None:
    first, second = stream_cassette(1).interactions[0], stream_cassette(2).interactions[0]
    slot = slots_of("mem", [first])[0]
    chunks = _chunks(slot)
    assert [bytes(c) for c in chunks] == [e.raw for e in first.response.events]
    chunks.clear()  # the caller's list: the slot keeps its own
    assert len(_chunks(slot)) == len(first.response.events)
    first.response.body = second.response.body  # a new body gets its own views
    assert [bytes(c) for c in _chunks(slot)] == [e.raw for e in second.response.events]


@pytest.mark.parametrize("count", [3, 16, 40])
def test_a_stream_goes_in_writes_of_one_client_read_cut_at_events(count: int) -> None:
    """One batch (one write, the final chunk with it) up to 64 KiB framed; a longer stream in batches of at
    most 64 KiB, each ending at an event, the last with the final chunk."""
    cassette = _sized_stream([4000] * count)
    response = cassette.interactions[0].response
    plan = plan_for(response, Timing.parse("fast"), "anthropic")
    framed = batched(plan)
    assert framed is not None and framed == _batches(_slot(cassette))
    whole = sum(len(_frame(event.raw)) for event in response.events) + len(LAST_CHUNK)
    assert len(framed) == (1 if whole <= BATCH_LIMIT else -(-whole // BATCH_LIMIT))
    assert all(len(data) <= BATCH_LIMIT for data, _ in framed)
    framed_events = b"".join(_frame(e.raw) for e in response.events)
    assert b"".join(data for data, _ in framed) == framed_events + LAST_CHUNK
    ends = {sum(len(_frame(e.raw)) for e in response.events[:n]) for n in range(len(response.events) + 1)}
    cut = 0
    for data, _ in framed[:-1]:
        cut += len(data)
        assert cut in ends  # a batch ends where an event's chunk ends


def test_a_stream_that_waits_is_not_batched() -> None:
    response = stream_cassette().interactions[0].response
    plan = plan_for(response, Timing.parse("fast"), "anthropic")
    assert batched(plan) is not None
    plan.due[-1] = 0.5  # a stall before the last event
    assert batched(plan) is None


@pytest.mark.parametrize(
    ("timing", "faults", "framed"),
    [("fast", [], True), ("recorded", [], False), ("fast", ["kind=delay_headers,ms=0"], False)],
)
def test_only_an_unchanged_fast_replay_is_sent_framed(timing: str, faults: list[str], framed: bool) -> None:
    slot = _slot(stream_cassette())
    state = State(Pool([slot]))
    state.settings = type(state.settings)(Timing.parse(timing))
    plan = _replay_plan(state, slot, [Fault.parse(spec) for spec in faults])
    assert (plan.framed is not None) is framed


def test_a_plan_framed_once_is_sent_as_framed() -> None:
    """An unchanged ``fast`` replay goes in the batches framed when it was first served, not framed anew."""
    slot = _slot(stream_cassette())
    plan = _replay_plan(State(Pool([slot])), slot, [])
    assert plan.framed is not None and batched(plan) is plan.framed


def test_only_fast_streams_are_batched() -> None:
    stream = stream_cassette().interactions[0].response
    body = json_interaction(ANTHROPIC, anthropic_request(), {}).response
    assert plan_for(stream, Timing.parse("fast"), "anthropic").batch
    assert not plan_for(stream, Timing.parse("recorded"), "anthropic").batch
    assert not plan_for(stream, Timing.parse("fixed:5"), "anthropic").batch
    assert not plan_for(stream, Timing.parse("fixed:0"), "anthropic").batch  # one write per event, no waits
    assert not plan_for(body, Timing.parse("fast"), "anthropic").batch


# ---------------------------------------------------------------- end to end, on a real socket


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(10, read=2)) as http:
        yield http


@pytest.mark.parametrize("fault", ["kind=stall,after=2", "kind=stall,after=2,ms=5000"])
def test_events_before_a_stall_are_not_held(serve: Any, client: httpx.Client, fault: str) -> None:
    body = stream_cassette()
    fake = serve(body, faults=[fault])
    with client.stream("POST", f"{fake.url}/v1/messages", json=stream_request()) as response:
        chunks = response.iter_raw()
        first = [next(chunks), next(chunks)]  # a read timeout (2 s) if they were held for the stall
    assert first == [event.raw for event in body.interactions[0].response.events[:2]]


def test_headers_before_a_delayed_event_are_not_held(serve: Any, client: httpx.Client) -> None:
    fake = serve(stream_cassette(), faults=["kind=delay_events,ms=5000"])
    with client.stream("POST", f"{fake.url}/v1/messages", json=stream_request()) as response:
        assert response.status_code == 200


def _raw_exchange(port: int, count: int) -> list[bytes]:
    """``count`` requests on one kept-alive connection; each response's bytes after its headers."""
    request = json.dumps(stream_request()).encode()
    message = (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%b" % (len(request), request))
    bodies = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for _ in range(count):
            sock.sendall(message)
            data = b""
            while not data.endswith(b"\r\n0\r\n\r\n"):
                data += sock.recv(1 << 16)
            bodies.append(data.partition(b"\r\n\r\n")[2])
    return bodies


def test_framed_once_and_framed_as_written_give_the_same_bytes(serve: Any) -> None:
    body = stream_cassette(text_deltas=40)
    plain = serve(body, repeat=True)
    faulted = serve(body, repeat=True, faults=["kind=delay_headers,ms=0"])  # a fault: framed as written
    assert _raw_exchange(plain.port, 2) == _raw_exchange(faulted.port, 2)
    assert [entry.faults != [] for entry in faulted.journal] == [True, True]


def test_a_kept_alive_connection_serves_each_response_whole(serve: Any, client: httpx.Client) -> None:
    body = stream_cassette()
    fake = serve(body, repeat=True)
    for _ in range(3):
        with client.stream("POST", f"{fake.url}/v1/messages", json=stream_request()) as response:
            assert list(response.iter_raw()) == [e.raw for e in body.interactions[0].response.events]


def _sized_stream(sizes: list[int]) -> Cassette:
    """A stream whose text deltas carry ``sizes`` characters each."""
    events = anthropic_events(len(sizes))
    for (_, data), size in zip(events[2 : 2 + len(sizes)], sizes, strict=True):
        data["delta"]["text"] = "x" * size
    return cassette_of(stream_interaction(ANTHROPIC, anthropic_request(), events))


@pytest.mark.parametrize("fault", [[], ["kind=delay_headers,ms=0"]])
def test_a_slow_client_gets_a_long_stream_whole(serve: Any, fault: list[str]) -> None:
    """The client reads more slowly than the server writes: delivery waits for the transport to drain,
    framed once (no fault) or framed as written (a fault), and every byte arrives in order."""
    body = _sized_stream([4000] * 500)
    fake = serve(body, faults=fault)
    url = f"{fake.url}/v1/messages"
    with httpx.Client(timeout=10) as http, http.stream("POST", url, json=stream_request()) as response:
        received = b"".join(response.iter_raw(4096))
    assert received == body.interactions[0].response.body


def _server_backlog(fake: FakeProvider) -> int:
    """Bytes the server's transports hold because the kernel would not take them (white-box)."""
    runner = fake._runner
    assert runner is not None and runner.server is not None
    sizes = [h.transport.get_write_buffer_size() for h in runner.server.connections if h.transport]
    return max(sizes, default=0)


@pytest.mark.parametrize("fault", [[], ["kind=delay_headers,ms=0"]])
def test_a_client_that_does_not_read_holds_the_server_back(serve: Any, fault: list[str]) -> None:
    """Back-pressure: the server waits for the transport to drain instead of buffering an 8 MB stream."""
    fake = serve(_sized_stream([4000] * 2000), faults=fault)
    request = json.dumps(stream_request()).encode()
    with socket.socket() as slow:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", fake.port))
        slow.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%b" % (len(request), request))
        deadline, peak = time.monotonic() + 10, 0
        while peak == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
            peak = _server_backlog(fake)
        time.sleep(0.2)  # the server has had time to write everything, were it not waiting
        peak = max(peak, _server_backlog(fake))
        assert 0 < peak < 1 << 20, peak
        assert fake.journal == []  # still being delivered


def test_iter_raw_gets_one_chunk_per_event_across_batches(serve: Any, client: httpx.Client) -> None:
    """Several batches, the whole body under the 64 KiB httpx reads at once (a longer stream can be cut
    by a read wherever the client falls behind, batched or not): no batch may end inside an event."""
    body = _sized_stream([880] * 60)
    events = body.interactions[0].response.events
    assert sum(len(e.raw) + 10 for e in events) < BATCH_LIMIT - 1000  # one write: headers, events, end
    fake = serve(body, repeat=True)
    for _ in range(10):
        with client.stream("POST", f"{fake.url}/v1/messages", json=stream_request()) as response:
            assert list(response.iter_raw()) == [event.raw for event in events]


# ---------------------------------------------------------------- one write per response, at the transport


@pytest.fixture
def socket_writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every write the server makes to a socket transport (on asyncio's own loop, whose transports can be
    watched; uvloop's are compiled), in order."""
    from asyncio import selector_events

    from replaykit.server import background

    writes: list[bytes] = []
    real = selector_events._SelectorSocketTransport.write

    def write(self: Any, data: Any) -> None:
        writes.append(bytes(data))
        real(self, data)

    monkeypatch.setattr(background, "new_loop", asyncio.new_event_loop)
    monkeypatch.setattr(selector_events._SelectorSocketTransport, "write", write)
    return writes


def _one_response(url: str, body: dict[str, Any]) -> bytes:
    """A raw HTTP/1.1 exchange on a fresh keep-alive connection: the whole response, read to its end."""
    payload = json.dumps(body).encode()
    with socket.create_connection(url.removeprefix("http://").split(":"), timeout=10) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))
        data = b""
        while not (data.endswith(LAST_CHUNK) or (b"content-length" in data.lower() and data.endswith(b"}"))):
            data += sock.recv(1 << 16)
        return data


@pytest.mark.parametrize("faults", [[], ["kind=delay_headers,ms=0"]], ids=["prepared", "aiohttp's path"])
@pytest.mark.parametrize("kind", ["json", "stream"])
def test_a_whole_response_is_one_write(serve: Any, socket_writes: list[bytes], kind: str,
                                       faults: list[str]) -> None:
    """Headers, body and final chunk in one write to the socket (a response under 64 KiB, nothing waits),
    prepared or through aiohttp's response (a fault that changes nothing sends it there)."""
    from server_support import message_cassette

    cassette, body = (message_cassette("a"), anthropic_request()) if kind == "json" else (
        stream_cassette(), stream_request())
    fake = serve(cassette, repeat=True, faults=faults)
    for _ in range(3):  # the first and later requests on the interaction (framed once, then reused)
        socket_writes.clear()
        reply = _one_response(fake.url, body)
        assert socket_writes == [reply], [len(w) for w in socket_writes]
    assert reply.startswith(b"HTTP/1.1 200")


def test_a_long_stream_goes_in_writes_of_one_read_cut_at_events(serve: Any,
                                                                socket_writes: list[bytes]) -> None:
    cassette = _sized_stream([5000] * 40)  # ~200 KB framed
    events = cassette.interactions[0].response.events
    fake = serve(cassette)
    reply = _one_response(fake.url, stream_request())
    head = reply.index(b"\r\n\r\n") + 4
    assert b"".join(socket_writes) == reply and len(socket_writes) == 4
    assert socket_writes[0][:head] == reply[:head] and len(socket_writes[0]) > head  # headers with events
    ends = {head + sum(len(_frame(e.raw)) for e in events[:n]) for n in range(len(events) + 1)}
    cut = 0
    for data in socket_writes[:-1]:
        cut += len(data)
        assert cut in ends and len(data) <= BATCH_LIMIT + head
    assert socket_writes[-1].endswith(_frame(events[-1].raw) + LAST_CHUNK)


def test_a_timed_stream_still_goes_event_by_event(serve: Any, socket_writes: list[bytes]) -> None:
    cassette = stream_cassette()
    fake = serve(cassette, timing="fixed:0")
    reply = _one_response(fake.url, stream_request())
    events = cassette.interactions[0].response.events
    assert b"".join(socket_writes) == reply
    assert socket_writes[1:] == [_frame(e.raw) for e in events] + [LAST_CHUNK]  # the headers first, alone


@pytest.mark.parametrize("connection", [b"keep-alive", b"close"])
def test_an_http_1_0_stream_ends_with_the_connection(serve: Any, connection: bytes) -> None:
    """HTTP/1.0 has no chunked framing: a stream's body is delimited by the close, even when the client
    asked to keep the connection alive (else it would wait for the end forever)."""
    fake = serve(stream_cassette())
    payload = json.dumps(stream_request()).encode()
    with socket.create_connection(fake.url.removeprefix("http://").split(":"), timeout=10) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.0\r\nHost: x\r\nConnection: %b\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
                     % (connection, len(payload), payload))
        data = b""
        while chunk := sock.recv(1 << 16):  # a socket timeout here is the defect
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200")
    last = body.rstrip(b"\n").rpartition(b"\n\n")[2]
    assert last.startswith(b"event: message_stop\n") and body.endswith(b"\n\n")
    assert b"transfer-encoding" not in head.lower()
