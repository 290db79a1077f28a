"""Delivery (HTTP wing): a :class:`~replaykit.server.seam.Plan` written through aiohttp's ``StreamResponse``.

One HTTP chunk per recorded event; in ``fast`` timing the chunks go in batches of one client read; a
prepared :class:`~replaykit.server.prepared.Whole` goes in one write. :class:`Writer` holds the headers for
the first body bytes; waits end when the client half-closes. The design: docs/architecture/server.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from email.utils import formatdate

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import HttpVersion11, StreamWriter

from replaykit.server.connections import half_closed
from replaykit.server.prepared import LAST_CHUNK, Batch, Whole, batches, http_chunk
from replaykit.server.seam import Plan, Progress

__all__ = ["Wire", "Writer", "batched", "deliver", "send_whole"]


def batched(plan: Plan) -> list[Batch] | None:
    """The batches ``plan`` is sent in when it is a stream in ``fast`` timing that never waits (the last one
    ending the body when the plan ends with ``eof``); None when it goes event by event."""
    if not plan.batch or plan.timed:
        return None
    return plan.framed if plan.framed is not None else list(batches(plan.chunks, plan.end == "eof"))


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
    request: web.BaseRequest, plan: Plan, closing: asyncio.Event, progress: Progress, prepared: bool = True
) -> web.StreamResponse:
    """Send ``plan``; ``progress`` says how far it got, also when the client leaves. ``prepared``: a
    ``plan.whole`` goes as is to a plain request (else aiohttp writes every byte).

    A client that goes away is not an error: the outcome says ``client_closed`` and aiohttp, finding the
    connection closed, finishes quietly. A cancelled handler (the client left during a wait) re-raises.
    """
    response: web.StreamResponse | None = None
    try:
        if prepared and plan.whole is not None and _plain(request):
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
