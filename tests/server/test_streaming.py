"""Streaming: one HTTP chunk per recorded SSE event, at the chosen timing; bodies framed by the server."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import socket
import struct
import time
from types import SimpleNamespace
from typing import Any, cast
from unittest import mock

import httpx
import pytest
from aiohttp.http import HttpVersion11
from recordings import recorded
from server_support import (
    ANTHROPIC,
    anthropic_message,
    anthropic_request,
    cassette_of,
    connect,
    json_interaction,
    post_head,
    raw_exchange,
    stream_cassette,
    stream_request,
)

from replaykit import cassette, sse
from replaykit.cassette import Cassette, Interaction, Response
from replaykit.errors import UsageError
from replaykit.server import FakeProvider, Timing, exchange, streaming
from replaykit.server.plan import WRITE_SIZE, Plan, plan_for, replay_headers
from replaykit.server.prepared import Whole, http_chunk
from replaykit.server.seam import Progress
from replaykit.server.streaming import Wire

pytestmark = pytest.mark.both_lanes  # every response the same with the lane and without it


def _raw_chunks(fake: FakeProvider) -> list[bytes]:
    url = f"{fake.url}/v1/messages"
    with httpx.Client() as client, client.stream("POST", url, json={"stream": True}) as response:
        return list(response.iter_raw())


def test_iter_raw_gets_one_chunk_per_recorded_event(serve: Any) -> None:
    path = recorded("llm-anthropic__web_search_stream.yaml")
    events = cassette.load(path).interactions[0].response.events
    chunks = _raw_chunks(serve(path))
    assert len(chunks) == len(events) == 120
    assert chunks == [event.raw for event in events]  # padding spaces of the real recording kept


def test_chunks_keep_event_boundaries_of_a_synthesized_stream(serve: Any) -> None:
    body = stream_cassette(text_deltas=40)
    chunks = _raw_chunks(serve(body))
    assert chunks == [event.raw for event in body.interactions[0].response.events]
    assert all(len(sse.parse(chunk)) == 1 for chunk in chunks)


def test_a_long_stream_arrives_whole(serve: Any) -> None:
    body = stream_cassette(text_deltas=5000)
    url = f"{serve(body).url}/v1/messages"
    with httpx.Client() as client, client.stream("POST", url, json=stream_request()) as response:
        received = b"".join(response.iter_bytes())
    assert received == body.interactions[0].response.body


@pytest.fixture
def delivered(monkeypatch: pytest.MonkeyPatch) -> list[Plan]:
    """The plans the server begins, in order: what each response was asked to send, and when."""
    plans: list[Plan] = []
    begin = exchange.begin

    def spy(*args: Any) -> Any:  # every request is begun here, in the lane or on aiohttp's path
        begun = begin(*args)
        plans.append(begun.plan)
        return begun

    monkeypatch.setattr(exchange, "begin", spy)
    return plans


def _paced(serve: Any, body: Cassette, timing: str, delivered: list[Plan]) -> list[float]:
    """The offsets (s) the server was asked to honour for ``body``; the chunks arrive one per event, in order.

    No clock is read: on a shared machine measured gaps are noise. ``Timing.offsets`` itself is checked by
    ``test_timing_offsets``; here, that the server plans each response with the timing it was given.
    """
    assert _raw_chunks(serve(body, timing=timing)) == [e.raw for e in body.interactions[0].response.events]
    (plan,) = delivered
    return plan.due


def test_fixed_timing_spaces_the_events(serve: Any, delivered: list[Plan]) -> None:
    due = _paced(serve, stream_cassette(text_deltas=2), "fixed:30", delivered)
    assert due == pytest.approx([0.03 * i for i in range(7)])
    assert not delivered[0].batch  # written event by event, each at its time


def test_recorded_timing_replays_the_offsets(serve: Any, delivered: list[Plan]) -> None:
    offsets = [0, 0, 120, 120, 120, 240]
    due = _paced(serve, stream_cassette(text_deltas=1, offsets=offsets), "recorded", delivered)
    assert due == pytest.approx([0, 0, 0.12, 0.12, 0.12, 0.24])
    assert not delivered[0].batch


def test_fast_timing_ignores_the_offsets(serve: Any, delivered: list[Plan]) -> None:
    body = stream_cassette(text_deltas=1, offsets=[0, 0, 5000, 5000, 5000, 9000])
    assert _paced(serve, body, "fast", delivered) == [0.0] * 6  # the recorded offsets would take 9 s
    assert delivered[0].batch


@pytest.mark.parametrize("text", ["slow", "fixed", "fixed:", "fixed:-1", "fixed:nan", "recorded:5"])
def test_timing_syntax_is_checked(text: str) -> None:
    with pytest.raises(UsageError, match="fast, recorded or fixed:<ms>"):
        Timing.parse(text)


def test_timing_offsets() -> None:
    assert Timing.parse("fixed:10").offsets(3, None) == [0.0, 0.01, 0.02]
    assert Timing.parse("recorded").offsets(3, [5, 10]) == [0.005, 0.01, 0.01]
    assert Timing.parse("recorded").offsets(4, [5, 10, 20]) == [0.005, 0.01, 0.02, 0.02]  # the last one known
    assert Timing.parse("recorded").offsets(2, None) == [0.0, 0.0]
    assert Timing.parse("fast").offsets(2, [100, 200]) == [0.0, 0.0]


def test_non_stream_body_is_served_decoded_with_its_recorded_headers(serve: Any) -> None:
    body = json.dumps(anthropic_message("zipped")).encode()
    headers = {
        "content-type": ["application/json"],
        "content-encoding": ["gzip"],
        "content-length": [str(len(gzip.compress(body)))],
        "request-id": ["req_recorded"],
        "transfer-encoding": ["chunked"],
        "x-custom": ["a", "b"],
    }
    item = Interaction(
        json_interaction(ANTHROPIC, anthropic_request(), {}).request, Response(200, "OK", headers, body)
    )
    fake = serve(cassette_of(item))
    raw = httpx.post(f"{fake.url}/v1/messages", headers={"accept-encoding": "gzip"})
    assert raw.headers.get("content-encoding") is None
    assert raw.headers["content-length"] == str(len(body))
    assert raw.headers["request-id"] == "req_recorded"
    assert raw.headers.get_list("x-custom") == ["a", "b"]
    assert raw.content == body


def test_a_body_is_planned_as_recorded_in_slices_of_at_most_one_write_size() -> None:
    """Up to :data:`WRITE_SIZE` the body is one chunk, the recorded bytes themselves (they leave with the
    body's end in one write); a longer one goes in slices of that size, in order."""
    item = json_interaction(ANTHROPIC, anthropic_request(), {}, headers={"request-id": ["req_1"]})
    response = item.response
    response.body = bytes(range(256)) * (WRITE_SIZE // 256)
    plan = plan_for(response, Timing.parse("fast"), "anthropic")
    assert len(plan.chunks) == 1 and plan.chunks[0] is response.body and plan.length == WRITE_SIZE
    assert plan.stream is False and plan.provider == "anthropic" and plan.headers == replay_headers(response)
    response.body += b"tail"
    sliced = plan_for(response, Timing.parse("fast"), "anthropic").chunks
    assert [bytes(chunk) for chunk in sliced] == [response.body[:WRITE_SIZE], b"tail"]
    response.body = response.body * 2
    sliced = plan_for(response, Timing.parse("fast"), "anthropic").chunks
    assert [len(chunk) for chunk in sliced] == [WRITE_SIZE, WRITE_SIZE, 8]
    assert b"".join(sliced) == response.body


def test_a_recorded_gzip_cassette_is_served_as_plain_json(serve: Any, tmp_path: Any) -> None:
    payload = json.dumps(anthropic_message("from gzip")).encode()
    item = json_interaction(ANTHROPIC, anthropic_request(), {})
    item.response = Response(
        200,
        "OK",
        {"content-type": ["application/json"], "content-encoding": ["gzip"]},
        gzip.compress(payload),
    )
    path = tmp_path / "gz.yaml"
    path.write_text(_vcr_yaml(item), encoding="utf-8")
    served = httpx.post(f"{serve(path).url}/v1/messages")
    assert served.json() == json.loads(payload)
    assert "content-encoding" not in served.headers


def _vcr_yaml(item: Interaction) -> str:
    import yaml

    doc = {
        "version": 1,
        "interactions": [
            {
                "request": {"method": "POST", "uri": item.request.uri, "headers": {}, "body": "{}"},
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": item.response.headers,
                    "body": {"string": item.response.body},
                },
            }
        ],
    }
    return yaml.safe_dump(doc)


# ---------------------------------------------------------------- the wire and the writes, unit

BOUND = 20.0  # seconds a wait may take on a loaded machine before it counts as never ending; not a speed


def _transport(*buffered: int) -> Any:
    """A transport open for writing; ``buffered``: what ``get_write_buffer_size`` says, call after call."""
    transport = mock.Mock()
    transport.is_closing.return_value = False
    transport.get_write_buffer_size.side_effect = list(buffered) or None
    if not buffered:
        transport.get_write_buffer_size.return_value = 0
    return transport


def test_one_byte_the_kernel_did_not_take_is_a_backlog() -> None:
    assert Wire(_transport(1)).send(b"data: 1\n\n") is True
    assert Wire(_transport(0)).send(b"data: 1\n\n") is False


def test_a_wait_off_a_connection_is_a_plain_sleep() -> None:
    asyncio.run(Wire(None).pause(0.001))  # no half-close to watch: it just waits


def test_a_hold_ends_when_the_server_stops_or_the_client_half_closes() -> None:
    async def run() -> None:
        async with asyncio.timeout(BOUND):  # a hold that never ends fails here
            until, closed = asyncio.Event(), asyncio.Event()
            held = asyncio.ensure_future(Wire(None, closed).hold(until))
            await asyncio.sleep(0)
            assert not held.done()
            closed.set()  # the client closed its side; the server is not stopping
            await held
            held = asyncio.ensure_future(Wire(None).hold(until))  # off a connection: only the server's stop
            await asyncio.sleep(0)
            assert not held.done()
            until.set()
            await held

    asyncio.run(run())


def test_flushed_waits_until_the_transport_holds_nothing_back() -> None:
    transport = _transport(5, 2, 0)
    asyncio.run(Wire(transport).flushed())
    assert transport.get_write_buffer_size.call_count == 3
    transport.is_closing.return_value = True  # a closing transport is not waited for
    asyncio.run(Wire(transport).flushed())
    assert transport.get_write_buffer_size.call_count == 3


class _Response:
    """aiohttp's response as :func:`streaming._write_body` uses it: each call recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []

    async def write(self, data: bytes | memoryview) -> None:
        self.calls.append(("write", bytes(data)))

    async def write_eof(self, data: bytes = b"") -> None:
        self.calls.append(("write_eof", bytes(data)))


def _settled(response: _Response) -> tuple[Progress, list[tuple[int, str]]]:
    """A progress, and when it settled: how many calls were made by then, and the outcome."""
    seen: list[tuple[int, str]] = []
    return Progress(on_settle=lambda done: seen.append((len(response.calls), done.outcome))), seen


@pytest.mark.parametrize("end", ["eof", "disconnect"])
def test_a_body_is_settled_before_its_last_bytes_which_end_it(end: str) -> None:
    """The outcome is known before the last bytes leave, and they leave with the body's end; a body cut
    short (a ``disconnect`` fault) settles after (in ``_finish``)."""
    response = _Response()
    plan = Plan(200, [], [b"ab", b"cd", b"ef"], False, length=6, end=cast(Any, end))
    progress, seen = _settled(response)
    asyncio.run(streaming._write_body(cast(Any, response), plan, progress))
    last = ("write_eof" if end == "eof" else "write", b"ef")
    assert response.calls == [("write", b"ab"), ("write", b"cd"), last]
    assert seen == ([(2, "complete")] if end == "eof" else []) and progress.chunks == 3


def test_batches_cut_short_are_not_settled_as_complete() -> None:
    response, transport = _Response(), _transport()
    plan = plan_for(stream_cassette().interactions[0].response, Timing.parse("fast"), "anthropic")
    plan.end = "disconnect"
    progress, seen = _settled(response)
    framed = [(b"1", 1), (b"2", 1), (b"3", 2)]
    asyncio.run(streaming._write_batches(cast(Any, response), Wire(transport), framed, plan, progress))
    assert response.calls == [("write", b"1")] and transport.write.call_args_list == [mock.call(b"2"),
                                                                                     mock.call(b"3")]
    assert seen == [] and progress.chunks == 4


def test_events_cut_short_are_not_settled_as_complete() -> None:
    """Event by event, a stream cut short (here a ``disconnect``) is settled after, in ``_finish``."""
    transport = _transport()
    plan = plan_for(stream_cassette().interactions[0].response, Timing.parse("fixed:0"), "anthropic")
    plan.end = "disconnect"
    seen: list[str] = []
    progress = Progress(on_settle=lambda done: seen.append(done.outcome))
    asyncio.run(streaming._write_events(Wire(transport), plan, progress))
    assert seen == [] and progress.chunks == transport.write.call_count == len(plan.chunks)


def _whole() -> Whole:
    return Whole(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n", True, b"\r\n{}", 2)


def test_a_whole_response_is_written_with_the_date_of_the_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streaming, "time", SimpleNamespace(time=lambda: 784111777.9))
    transport, writer, progress = _transport(), SimpleNamespace(output_size=0), Progress()
    assert streaming.send_whole(transport, _whole(), progress, cast(Any, writer)) is False
    [(data,)] = [call.args for call in transport.write.call_args_list]
    assert data == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n{}"
    assert (progress.outcome, progress.chunks) == ("complete", 2)
    assert writer.output_size == len(data)  # aiohttp then writes no error response over it


def test_a_whole_response_on_aiohttps_path_is_counted_by_its_writer() -> None:
    transport, writer, progress = _transport(), SimpleNamespace(output_size=0), Progress()
    request = SimpleNamespace(version=HttpVersion11, keep_alive=True, method="POST", transport=transport,
                              writer=writer)
    plan = Plan(200, [], [b"{}"], False, length=2, whole=_whole())
    asyncio.run(streaming.deliver(cast(Any, request), plan, asyncio.Event(), progress))
    [(data,)] = [call.args for call in transport.write.call_args_list]
    assert writer.output_size == len(data) and progress.outcome == "complete"


# ---------------------------------------------------------------- ends of a response, end to end


def _aiohttp_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name.startswith("aiohttp")]


def test_a_disconnect_ends_the_connection_journaled_as_disconnected(serve: Any,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    cassette = stream_cassette()
    fake = serve(cassette, faults=["kind=disconnect,after=2"])
    body = json.dumps(stream_request()).encode()
    reply = raw_exchange(fake.url, post_head(len(body)) + body)  # read until the server closes
    events = cassette.interactions[0].response.events
    assert reply.endswith(b"".join(http_chunk(events[1].raw)))  # no final chunk: cut after event 2
    assert [(entry.outcome, entry.chunks) for entry in fake.journal] == [("disconnected", 2)]
    assert _aiohttp_logged(caplog) == []


def test_a_client_that_half_closes_during_a_delay_gets_nothing_and_nothing_is_logged(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    fake = serve(stream_cassette(), faults=["kind=delay_headers,ms=60000"])
    body = json.dumps(stream_request()).encode()
    assert raw_exchange(fake.url, post_head(len(body)) + body, half_close=True) == b""
    assert [entry.outcome for entry in fake.journal] == ["client_closed"]
    assert _aiohttp_logged(caplog) == []


def test_a_held_response_stays_hung_when_its_client_leaves(serve: Any) -> None:
    """A kill point is the outcome for good: the client giving up on the held stream does not make it a
    client that left early."""
    finals: list[Any] = []
    cassette = stream_cassette()
    fake = serve(cassette, faults=["kind=stall,after=2"], watch=finals.append)
    body = json.dumps(stream_request()).encode()
    events = cassette.interactions[0].response.events
    with connect(fake.url) as sock:
        sock.sendall(post_head(len(body)) + body)
        reply = b""
        while not reply.endswith(b"".join(http_chunk(events[1].raw))):
            data = sock.recv(1 << 16)
            assert data, reply
            reply += data
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # leaves with a reset
    deadline = time.monotonic() + BOUND
    while not finals and time.monotonic() < deadline:  # the entry is final once the handler has ended
        time.sleep(0.01)
    assert [(entry.outcome, entry.chunks) for entry in finals] == [("hung", 2)]
