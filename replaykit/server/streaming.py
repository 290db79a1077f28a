"""Write a :class:`~replaykit.server.plan.Plan` to the client through aiohttp's ``StreamResponse``.

**One HTTP chunk per event.** Each recorded SSE event is framed as its own HTTP chunk (``<size in
hex>\r\n<event>\r\n``, the bytes aiohttp's chunked writer produces) and written to the connection's
transport; aiohttp writes the headers and the last chunk and keeps the connection alive. So a client reading
the raw stream (httpx ``iter_raw()``) gets one chunk per recorded event, with its recorded boundaries. With
``recorded`` or ``fixed:<ms>`` timing each chunk is written, and sent, on its own at its time: the recorded
pacing; ``fixed:0`` is one write per event with no waits. When the client reads more slowly than events are
written, delivery waits for the transport to drain. TCP keeps no boundaries: a client that falls more than
one read (64 KiB for httpx) behind a long stream may get an event in two pieces, as from any server.

**Batching in ``fast`` timing** (``Plan.batch``). When nothing waits between events (no delay or stall
fault), the chunks are handed to the transport together, in writes of at most one client read (64 KiB,
:data:`~replaykit.server.plan.BATCH_LIMIT`) that end at chunk boundaries
(:func:`~replaykit.server.plan.batched`), the last one with the body's final chunk. A recording replayed
unchanged is framed once, when first served (``Plan.framed``). A stream with waits in it is written event by
event (:meth:`Wire.write`, the one place an event is written), each chunk sent at once, so no client waits
for bytes the server already has. A client on HTTP/1.0 gets the events bare, one by one (no chunked
encoding; the connection's end ends the body).

A non-stream body goes out through aiohttp's writer with a ``content-length``, in slices of at most 1 MiB.

**An unchanged replay goes out as prepared.** A recording replayed unchanged in ``fast`` timing whose
framed body fits one write (``Plan.whole``, :func:`~replaykit.server.plan.recorded_whole`) is written, head
and body, straight to the transport of an HTTP/1.1 keep-alive request, in the bytes aiohttp would write for
it (the head is built once per interaction; only the ``Date`` line is per second); aiohttp's response
machinery is not involved.

**One write per response whose whole answer is known.** The request's writer is a :class:`Writer`: for a
body, or a batched stream, the headers wait for the first body bytes and leave with them, so a response up
to 64 KiB (headers, events, final chunk) is one write to the socket. A response that waits before its first
bytes sends its headers at once.

**Waits end when the client closes its side.** A delay before the headers, a stall and recorded pacing end
at once when the client closes its sending side (:func:`~replaykit.server.connections.half_closed`): a client
that gives up is journaled when it leaves, not when the wait would have ended. A client that half-closed
after its request gets what needs no wait (see :mod:`~replaykit.server.connections`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from typing import Literal

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import HttpVersion11, StreamWriter

from replaykit.server.connections import half_closed
from replaykit.server.plan import LAST_CHUNK, Batch, Plan, Whole, batched, http_chunk

__all__ = ["Outcome", "Progress", "Wire", "Writer", "deliver", "send_whole"]

Outcome = Literal["pending", "complete", "disconnected", "hung", "client_closed"]


@dataclass(slots=True)
class Progress:
    """How far delivery got: chunks written and the outcome (read by the journal, even after a cancel).

    ``on_settle`` is called once, when the outcome is known but *before* the last bytes leave: a client
    that has its whole response then finds the request in the journal already.
    """

    chunks: int = 0
    outcome: Outcome = "pending"
    on_settle: Callable[[Progress], None] | None = None

    def settle(self, outcome: Outcome) -> None:
        """Set the outcome and call ``on_settle`` (the first time only)."""
        self.outcome = outcome
        callback, self.on_settle = self.on_settle, None
        if callback is not None:
            callback(self)


class Writer(StreamWriter):
    """aiohttp's writer for one response of the fake provider, with two switches set before ``prepare``:

    ``hold``: the headers wait for the body's first bytes and leave in the same write (aiohttp coalesces
    them, as it does for a ``web.Response``); :meth:`release` sends them alone. ``framing``: replaykit
    frames the HTTP chunks itself (:class:`Wire`, :func:`~replaykit.server.plan.batches`); aiohttp still
    announces chunked encoding, ``framed`` says it did, and the body's bytes pass through as they are.
    """

    hold = False
    framing = False
    framed = False

    def enable_chunking(self) -> None:
        """Chunked encoding: aiohttp's framing, or (``framing``) only noted in ``framed``."""
        if self.framing:
            self.framed = True
        else:
            super().enable_chunking()

    def send_headers(self) -> None:
        """Send the headers now, unless ``hold`` keeps them for the first body bytes."""
        if not self.hold:
            super().send_headers()

    def release(self) -> None:
        """Stop holding the headers: send them now if they are still waiting."""
        self.hold = False
        self.send_headers()


class Wire:
    """The connection under one streamed response: HTTP chunk framing and back-pressure."""

    __slots__ = ("ended", "half_closed", "transport", "writer")

    def __init__(self, transport: asyncio.Transport | None, closed: asyncio.Event | None = None,
                 writer: AbstractStreamWriter | None = None) -> None:
        self.transport = transport
        self.writer = writer
        self.half_closed = closed
        self.ended = False  # the body's final chunk was written

    @property
    def chunked(self) -> bool:
        """False for an HTTP/1.0 client: no chunked encoding (the connection's end ends the body)."""
        writer = self.writer
        if isinstance(writer, Writer):
            return writer.framed
        return writer is None or bool(getattr(writer, "chunked", True))

    def send(self, data: bytes | memoryview) -> bool:
        """Write ``data`` (already framed) to the transport; True when the kernel did not take it all."""
        transport = self.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        transport.write(data)
        if self.writer is not None:
            self.writer.output_size += len(data)
        return transport.get_write_buffer_size() > 0

    def write(self, chunk: bytes | memoryview) -> bool:
        """Send ``chunk`` as one HTTP chunk (bare to an HTTP/1.0 client; an empty one is skipped: it would
        end the body). True when the kernel did not take it all: then call :meth:`drain`."""
        return self.send(b"".join(http_chunk(chunk)) if chunk and self.chunked else chunk)

    async def pause(self, seconds: float) -> None:
        """Wait ``seconds``; ConnectionResetError as soon as the client closes its sending side."""
        closed = self.half_closed
        if closed is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await closed.wait()
        if closed.is_set():
            raise ConnectionResetError("the client closed its side of the connection")

    async def hold(self, until: asyncio.Event) -> None:
        """Wait until ``until`` is set or the client closes its sending side."""
        events = [until] if self.half_closed is None else [until, self.half_closed]
        waiters = [asyncio.ensure_future(event.wait()) for event in events]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def flushed(self) -> None:
        """Wait until every byte written is with the kernel (the transport holds none back): what a held
        response (a ``kill`` fault) has sent is then exactly what the client can read."""
        transport = self.transport
        while transport is not None and not transport.is_closing() and transport.get_write_buffer_size():
            await asyncio.sleep(0.001)

    async def drain(self) -> None:
        """Wait while the transport is over its high-water mark."""
        if self.writer is not None:
            await self.writer.drain()


async def _start(request: web.BaseRequest, plan: Plan, wire: Wire) -> web.StreamResponse:
    if plan.head_delay:
        await wire.pause(plan.head_delay)
    response = web.StreamResponse(status=plan.status, headers=plan.headers)
    if plan.length is not None:
        response.content_length = plan.length
    elif request.version < HttpVersion11:  # HTTP/1.0 has no chunks: the body ends where the connection does
        response.force_close()
    writer = request.writer
    if isinstance(writer, Writer):  # the headers wait for the first bytes when these follow at once
        writer.framing, writer.hold = True, not plan.stream or (plan.batch and not plan.timed)
    wire.writer = await response.prepare(request)  # the headers, sent now or held for the first bytes
    return response


async def _write_body(response: web.StreamResponse, plan: Plan, progress: Progress) -> None:
    last = len(plan.chunks) - 1 if plan.end == "eof" else -1
    for index, chunk in enumerate(plan.chunks):
        if index == last:
            progress.settle("complete")
        if index == last and isinstance(chunk, bytes):
            await response.write_eof(chunk)  # with the headers, when held: a whole body in one write
        else:
            await response.write(chunk)  # aiohttp's writer: a body with a content-length, drained as it goes
        progress.chunks += 1


async def _write_batches(
    response: web.StreamResponse, wire: Wire, framed: list[Batch], plan: Plan, progress: Progress
) -> None:
    last = len(framed) - 1 if plan.end == "eof" else -1
    for index, (data, count) in enumerate(framed):
        if index == last:
            progress.settle("complete")  # before the last bytes leave
        if index == 0:
            await response.write(data)  # with the held headers: one write
        elif wire.send(data):
            await wire.drain()
        progress.chunks += count
    wire.ended = last >= 0


async def _write_events(wire: Wire, plan: Plan, progress: Progress) -> None:
    if isinstance(wire.writer, Writer):
        wire.writer.release()  # the events go to the transport: the headers first
    loop = asyncio.get_running_loop()
    start, timed = loop.time(), plan.timed
    last = len(plan.chunks) - 1 if plan.end == "eof" else -1
    for index, chunk in enumerate(plan.chunks):
        if timed and (delay := start + plan.due[index] - loop.time()) > 0:
            await wire.pause(delay)
        if index == last:
            progress.settle("complete")
        backlog = wire.write(chunk)
        progress.chunks += 1
        if backlog:
            await wire.drain()


async def _write_all(response: web.StreamResponse, wire: Wire, plan: Plan, progress: Progress) -> None:
    if not plan.stream:
        await _write_body(response, plan, progress)
    elif wire.chunked and (framed := batched(plan)) is not None:
        await _write_batches(response, wire, framed, plan, progress)
    else:
        await _write_events(wire, plan, progress)


async def _finish(
    request: web.BaseRequest, response: web.StreamResponse, wire: Wire, plan: Plan, closing: asyncio.Event,
    progress: Progress,
) -> None:
    if plan.end == "eof":
        progress.settle("complete")
        await response.write_eof(LAST_CHUNK if wire.chunked and plan.stream and not wire.ended else b"")
        return
    if isinstance(wire.writer, Writer):
        wire.writer.release()  # nothing was written (a stream cut before its first event): the headers alone
    if plan.end == "disconnect":
        progress.settle("disconnected")
    else:
        await wire.flushed()  # a kill point: the events sent are with the kernel before the hold is known
        progress.settle("hung")
        await wire.hold(closing)  # until the client gives up or the server stops
    if request.transport is not None:
        request.transport.close()  # flushes what was written, then FIN without the final chunk


class _Sent(web.StreamResponse):
    """What the handler returns for a response it wrote itself (:func:`send_whole`): aiohttp finds it
    sent and ended, and keeps the connection alive."""

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        """Nothing to prepare: the response is on the wire."""
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        """Nothing to end: the body's final chunk went with it."""

    @property
    def keep_alive(self) -> bool:
        """Always: it is only sent to a keep-alive request."""
        return True


_SENT = _Sent()  # stateless: one for every response sent whole


@functools.lru_cache(maxsize=2)
def _date_line(second: int) -> bytes:
    """The ``Date`` header line for ``second`` (seconds since the epoch), as aiohttp writes it."""
    return f"Date: {formatdate(second, usegmt=True)}\r\n".encode()


def _plain(request: web.BaseRequest) -> bool:
    """True when ``request`` takes a response as prepared: HTTP/1.1, kept alive, not ``HEAD``, its
    connection open."""
    transport = request.transport
    return (request.version == HttpVersion11 and request.keep_alive and request.method != "HEAD"
            and transport is not None and not transport.is_closing())


def send_whole(transport: asyncio.Transport | None, whole: Whole, progress: Progress,
               writer: AbstractStreamWriter | None = None) -> bool:
    """Write ``whole`` (head, ``Date``, body) to ``transport`` in one write, settled before it leaves (on
    aiohttp's path, or the lane's: :mod:`~replaykit.server.lane`); True when the kernel did not take it all
    (then wait for it to drain). ConnectionResetError when the client has closed the connection."""
    data = b"".join((whole.head, _date_line(int(time.time())) if whole.date else b"", whole.rest))
    progress.settle("complete")
    backlog = Wire(transport, writer=writer).send(data)
    progress.chunks += whole.chunks
    return backlog


async def deliver(
    request: web.BaseRequest, plan: Plan, closing: asyncio.Event, progress: Progress
) -> web.StreamResponse:
    """Send ``plan``; ``progress`` says how far it got, also when the client leaves.

    A client that goes away is not an error: the outcome says ``client_closed`` and aiohttp, finding the
    connection closed, finishes quietly. A cancelled handler (the client left during a wait) re-raises.
    """
    response: web.StreamResponse | None = None
    try:
        if plan.whole is not None and _plain(request):
            if send_whole(request.transport, plan.whole, progress, request.writer):
                await request.writer.drain()
            return _SENT
        wire = Wire(request.transport, half_closed(request))
        response = await _start(request, plan, wire)
        await _write_all(response, wire, plan, progress)
        await _finish(request, response, wire, plan, closing, progress)
    except ConnectionError:
        progress.outcome = "client_closed"
        if request.transport is not None:
            request.transport.close()  # a client that only half-closed gets nothing more
    except asyncio.CancelledError:
        if progress.outcome != "hung":
            progress.outcome = "client_closed"
        raise
    return response if response is not None else web.StreamResponse()
