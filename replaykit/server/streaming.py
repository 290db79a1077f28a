"""Write a :class:`~replaykit.server.plan.Plan` to the client with aiohttp's low-level ``StreamResponse``.

One ``write()`` per chunk: a recorded SSE event goes out as one HTTP chunk, flushed before the next one
(``write`` drains), so a client reading the raw stream sees the events with their recorded boundaries and,
with ``recorded`` timing, their recorded pacing. A non-stream body goes out with a ``content-length``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

from replaykit.server.plan import Plan

__all__ = ["Outcome", "Progress", "deliver"]

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


async def _wait_until(loop: asyncio.AbstractEventLoop, when: float) -> None:
    delay = when - loop.time()
    if delay > 0:
        await asyncio.sleep(delay)


async def _start(request: web.Request, plan: Plan) -> web.StreamResponse:
    if plan.head_delay:
        await asyncio.sleep(plan.head_delay)
    response = web.StreamResponse(status=plan.status)
    for name, value in plan.headers:
        response.headers.add(name, value)
    if plan.length is not None:
        response.content_length = plan.length
    await response.prepare(request)
    if plan.stream and (plan.timed or plan.end != "eof" or not plan.chunks):
        await response.write(b"")  # send the headers now, as a provider does before its first event
    return response


async def _write_all(response: web.StreamResponse, plan: Plan, progress: Progress) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    timed = plan.timed
    last = len(plan.chunks) - 1 if plan.end == "eof" else -1
    for index, chunk in enumerate(plan.chunks):
        if timed:
            await _wait_until(loop, start + plan.due[index])
        if index == last:
            progress.settle("complete")
        await response.write(chunk)
        progress.chunks += 1


async def _finish(
    request: web.Request, response: web.StreamResponse, plan: Plan, closing: asyncio.Event, progress: Progress
) -> None:
    if plan.end == "eof":
        progress.settle("complete")
        await response.write_eof()
    elif plan.end == "disconnect":
        progress.settle("disconnected")
        if request.transport is not None:
            request.transport.close()  # flushes what was written, then FIN without the final chunk
    else:
        progress.settle("hung")
        await closing.wait()  # until the client gives up (the handler is cancelled) or the server stops
        if request.transport is not None:
            request.transport.close()


async def deliver(
    request: web.Request, plan: Plan, closing: asyncio.Event, progress: Progress
) -> web.StreamResponse:
    """Send ``plan``; ``progress`` says how far it got, also when the client leaves.

    A client that goes away is not an error: the outcome says ``client_closed`` and aiohttp, finding the
    connection closed, finishes quietly. A cancelled handler (the client left during a wait) re-raises.
    """
    response = web.StreamResponse()
    try:
        response = await _start(request, plan)
        await _write_all(response, plan, progress)
        await _finish(request, response, plan, closing, progress)
    except ConnectionError:
        progress.outcome = "client_closed"
    except asyncio.CancelledError:
        if progress.outcome != "hung":
            progress.outcome = "client_closed"
        raise
    return response
