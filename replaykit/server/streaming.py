"""Write a :class:`~replaykit.server.plan.Plan` to the client through aiohttp's ``StreamResponse``.

**One write per event.** Each recorded SSE event is its own ``write`` to the connection's transport, framed
as its own HTTP chunk (``<size in hex>\\r\\n<event>\\r\\n``, the bytes aiohttp's chunked writer produces,
framed here in one step instead of aiohttp's four Python calls per write). aiohttp still writes the headers
and the last chunk and keeps the connection alive. So a client reading the raw stream (httpx
``iter_raw()``) gets exactly one chunk per recorded event, with its recorded boundaries, and with
``recorded`` or ``fixed:<ms>`` timing, with its recorded pacing: each chunk is sent as soon as it is written.
(A client that falls behind a long stream may read several events, or part of one, in one read, batched or
not.) When the client reads more slowly than events are written, delivery waits for the transport to drain.

**Batching in ``fast`` timing** (``Plan.batch``). While chunks are written one after another, the socket is
corked (``TCP_CORK``, Linux), so the kernel may send several chunks in one packet instead of ~50 small
ones. Each event is still its own write and its own HTTP chunk. A batch is flushed before it would pass
:data:`BATCH_LIMIT` bytes, well under the size at which the kernel sends a segment on its own: every packet
ends at a chunk boundary, as when each chunk is sent at once. Everything written is flushed (the socket
uncorked) before the server waits for any reason: a delay or stall fault, a client too slow to drain, the
end of the response, a disconnect fault, a hang. So no client ever waits for bytes the server already
wrote. ``recorded`` and ``fixed:<ms>`` timing are not batched, nor are bodies that are not streams; where
``TCP_CORK`` does not exist, each chunk is sent as soon as it is written.

A non-stream body goes out through aiohttp's writer with a ``content-length``, in slices of at most 1 MiB.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from replaykit.server.plan import Plan

__all__ = ["BATCH_LIMIT", "CORK", "Outcome", "Progress", "Wire", "deliver"]

Outcome = Literal["pending", "complete", "disconnected", "hung", "client_closed"]
CORK: int | None = getattr(socket, "TCP_CORK", None)
BATCH_LIMIT = 16 << 10  # bytes gathered at most before a flush (see Wire._gather)


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


class Wire:
    """The connection under one streamed response: HTTP chunk framing, back-pressure and the cork.

    ``batch`` asks for the cork (:data:`CORK`); without it, or where the platform has none, :meth:`hold`
    and :meth:`flush` do nothing and every write is sent at once.
    """

    __slots__ = ("corked", "held", "sock", "transport", "writer")

    def __init__(self, transport: asyncio.Transport | None, batch: bool) -> None:
        self.transport = transport
        self.writer: AbstractStreamWriter | None = None
        self.sock: Any = None
        if batch and CORK is not None and self.transport is not None:
            self.sock = self.transport.get_extra_info("socket")
        self.corked = False
        self.held = 0

    def _cork(self, on: bool) -> None:
        with suppress(OSError):  # the client left and the socket is closed: nothing is held any more
            self.sock.setsockopt(socket.IPPROTO_TCP, CORK, int(on))
        self.corked = on

    def hold(self) -> None:
        """Let the kernel gather what is written next into fewer packets (until :meth:`flush`)."""
        if self.sock is not None and not self.corked:
            self._cork(True)

    def flush(self) -> None:
        """Send everything written so far now: called before any wait."""
        self.held = 0
        if self.corked:
            self._cork(False)

    def write(self, chunk: bytes | memoryview) -> bool:
        """Write ``chunk`` as one HTTP chunk (an empty one is skipped: it would end the body).

        An HTTP/1.0 client gets no chunked encoding (aiohttp closes the connection to end the body): the
        event is then written bare.

        Returns True when the kernel did not take everything written (the client reads more slowly than
        events are written): then call :meth:`drain`.
        """
        transport = self.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        if chunk:
            framed = self.writer is None or getattr(self.writer, "chunked", True)
            frame = b"".join((b"%x\r\n" % len(chunk), chunk, b"\r\n")) if framed else bytes(chunk)
            size = len(frame)
            if self.sock is not None and (not self.corked or self.held + size > BATCH_LIMIT):
                self._gather(size)
            self.held += size
            transport.write(frame)
            if self.writer is not None:
                self.writer.output_size += size
        return transport.get_write_buffer_size() > 0

    def _gather(self, size: int) -> None:
        """Start a batch for a frame of ``size`` bytes, flushing the one that would pass the limit.

        A batch stays under :data:`BATCH_LIMIT`, well under the size at which the kernel sends a segment
        on its own, so every packet ends at a chunk boundary, as when each chunk is sent at once. A frame
        over the limit is sent on its own, at once.
        """
        self.flush()
        if size <= BATCH_LIMIT:
            self.hold()

    async def drain(self) -> None:
        """Flush, then wait while the transport is over its high-water mark."""
        self.flush()
        if self.writer is not None:
            await self.writer.drain()

    async def sleep(self, delay: float) -> None:
        """Flush, then wait ``delay`` seconds; later writes are gathered again."""
        self.flush()
        await asyncio.sleep(delay)


async def _start(request: web.Request, plan: Plan, wire: Wire) -> web.StreamResponse:
    if plan.head_delay:
        await asyncio.sleep(plan.head_delay)
    response = web.StreamResponse(status=plan.status)
    for name, value in plan.headers:
        response.headers.add(name, value)
    if plan.length is not None:
        response.content_length = plan.length
    wire.hold()  # the headers are gathered with the first events
    wire.writer = await response.prepare(request)  # writes the headers, before any event
    if wire.writer is not None and wire.corked:
        wire.held = wire.writer.output_size
    return response


async def _write_body(response: web.StreamResponse, plan: Plan, progress: Progress) -> None:
    for index, chunk in enumerate(plan.chunks):
        if index == len(plan.chunks) - 1 and plan.end == "eof":
            progress.settle("complete")
        await response.write(chunk)  # aiohttp's writer: a body with a content-length, drained as it goes
        progress.chunks += 1


async def _write_all(response: web.StreamResponse, wire: Wire, plan: Plan, progress: Progress) -> None:
    if not plan.stream:
        await _write_body(response, plan, progress)
        return
    loop = asyncio.get_running_loop()
    start = loop.time()
    timed = plan.timed
    last = len(plan.chunks) - 1 if plan.end == "eof" else -1
    for index, chunk in enumerate(plan.chunks):
        if timed and (delay := start + plan.due[index] - loop.time()) > 0:
            await wire.sleep(delay)
        if index == last:
            progress.settle("complete")
        backlog = wire.write(chunk)
        progress.chunks += 1
        if backlog:
            await wire.drain()


async def _finish(
    request: web.Request, response: web.StreamResponse, wire: Wire, plan: Plan, closing: asyncio.Event,
    progress: Progress,
) -> None:
    if plan.end == "eof":
        progress.settle("complete")
        if wire.transport is not None and wire.transport.get_write_buffer_size():
            wire.flush()  # write_eof waits for the transport to drain
        await response.write_eof()  # the final flush is deliver's
        return
    wire.flush()
    if plan.end == "disconnect":
        progress.settle("disconnected")
    else:
        progress.settle("hung")
        await closing.wait()  # until the client gives up (the handler is cancelled) or the server stops
    if request.transport is not None:
        request.transport.close()  # flushes what was written, then FIN without the final chunk


async def deliver(
    request: web.Request, plan: Plan, closing: asyncio.Event, progress: Progress
) -> web.StreamResponse:
    """Send ``plan``; ``progress`` says how far it got, also when the client leaves.

    A client that goes away is not an error: the outcome says ``client_closed`` and aiohttp, finding the
    connection closed, finishes quietly. A cancelled handler (the client left during a wait) re-raises.
    The socket is never left corked: a kept-alive connection serves its next response unbatched unless
    that response asks for batching too.
    """
    response: web.StreamResponse | None = None
    wire = Wire(request.transport, plan.batch and plan.stream)
    try:
        response = await _start(request, plan, wire)
        await _write_all(response, wire, plan, progress)
        await _finish(request, response, wire, plan, closing, progress)
    except ConnectionError:
        progress.outcome = "client_closed"
    except asyncio.CancelledError:
        if progress.outcome != "hung":
            progress.outcome = "client_closed"
        raise
    finally:
        wire.flush()
    return response if response is not None else web.StreamResponse()
