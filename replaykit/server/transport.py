"""The HTTP wing's entry: :func:`make_server` builds the server that reads requests and asks the provider.

Every request becomes a :class:`~replaykit.server.seam.Request` handed to the
:class:`~replaykit.server.seam.Provider` (``handle_request``, or ``handle_admin`` under ``/__replaykit/``);
the plan it gets back is delivered by :mod:`~replaykit.server.streaming`. With ``lane`` (the default) plain
requests are answered by :mod:`~replaykit.server.lane`; without, aiohttp writes every byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from aiohttp import web
from aiohttp.http import HttpProcessingError, RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from replaykit.server.connections import Limits, Server, body_began, carried
from replaykit.server.lane import LaneServer
from replaykit.server.seam import Exchange, Plan, Provider, Request, Unreadable, is_admin
from replaykit.server.streaming import Writer, deliver

__all__ = ["MAX_BODY", "body_here", "make_server", "read_body", "request_of"]

MAX_BODY = 1 << 30  # bytes a request body may have


async def _read_some(request: web.BaseRequest, limits: Limits, due: float) -> bytes:
    """The next bytes of the body, waiting at most ``body_timeout`` seconds and never past ``due`` (loop
    time: the body's deadline)."""
    content = request.content
    try:
        if content.is_eof():  # the rest of the body is here already: no wait, no timer
            return await content.readany()
        paused = asyncio.get_running_loop().time() + limits.body_timeout
        async with asyncio.timeout_at(min(paused, due)):
            return await content.readany()
    except TimeoutError:
        raise _late(limits, due <= paused) from None
    except (web.RequestPayloadError, HttpProcessingError) as exc:
        raise Unreadable(400, "malformed", f"the request body is malformed: {exc}") from None


def _late(limits: Limits, deadline: bool) -> Unreadable:
    """Why a body being read was given up: its ``deadline`` came first, or it paused too long (decided by
    which bound the timer was set to: a timer may fire a tick before its time)."""
    if deadline:
        return Unreadable(408, "timeout", f"the request body was not whole {limits.body_deadline:g} s after "
                                          "its head; send it at once, or raise --body-deadline")
    return Unreadable(408, "timeout", f"no byte of the request body came for {limits.body_timeout:g} s; send "
                                      "the body without pausing, or raise --body-timeout")


def body_here(request: web.BaseRequest) -> bytes | None:
    """The whole body when all of it has arrived (as it mostly has: taken in one read, no wait, no timer),
    else None; a broken or oversized body as :func:`read_body` says."""
    content = request.content
    if not content.is_eof():
        return None
    try:
        body = content.read_nowait()
    except (web.RequestPayloadError, HttpProcessingError) as exc:
        raise Unreadable(400, "malformed", f"the request body is malformed: {exc}") from None
    if len(body) >= MAX_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=len(body))
    return body


async def read_body(request: web.BaseRequest, limits: Limits) -> bytes:
    """The whole body, each read waiting at most ``body_timeout`` seconds and all of it arrived within
    ``body_deadline`` seconds of the head (:class:`Unreadable` past either, or when its framing is broken);
    over :data:`MAX_BODY` bytes, aiohttp's 413."""
    body = body_here(request)
    if body is not None:
        return body
    due = body_began(request) + limits.body_deadline
    parts: list[bytes] = []
    size = 0
    while chunk := await _read_some(request, limits, due):
        size += len(chunk)
        if size >= MAX_BODY:
            raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=size)
        parts.append(chunk)
    return b"".join(parts)


def request_of(request: web.BaseRequest, body: bytes, started: float,
               unreadable: Unreadable | None = None) -> Request:
    """aiohttp's ``request`` with ``body`` as the seam's :class:`Request` (repeated headers joined with
    ``, ``; the lane takes no request with one)."""
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return Request(request.method, request.path, request.query_string, headers, body, started,
                   request.remote, unreadable)


def _response(plan: Plan) -> web.Response:
    """A plan of one body (an admin answer, a refusal) as aiohttp's response."""
    return web.Response(status=plan.status, body=b"".join(plan.chunks), headers=plan.headers)


def _continue(request: web.BaseRequest) -> None:
    """Answer ``Expect: 100-continue`` before the body is read, as aiohttp's router would (curl sends it for
    bodies over 1 MiB and would otherwise wait a second before sending the body)."""
    transport = request.transport
    expects = request.version >= (1, 1) and request.headers.get("Expect", "").lower() == "100-continue"
    if expects and transport is not None and not transport.is_closing():
        transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")


class _Dispatch:
    """aiohttp's handler for every request: provider requests and the admin API, through ``provider``."""

    def __init__(self, provider: Provider, limits: Limits, closing: asyncio.Event, prepared: bool) -> None:
        self.provider, self.limits, self.closing, self.prepared = provider, limits, closing, prepared

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        body_began(request)  # taken now, whether or not the body is read
        _continue(request)
        if is_admin(request.path):
            return await self._admin(request)
        exchange = carried(request)
        if exchange is None:
            exchange = await self._begin(request)
            if exchange is None:
                return web.StreamResponse()  # refused: the answer is written and the connection closed
        try:
            return await deliver(request, exchange.plan, self.closing, exchange.progress, self.prepared)
        finally:
            exchange.close()

    async def _read(self, request: web.BaseRequest) -> Request:
        started = time.perf_counter()
        try:
            return request_of(request, await read_body(request, self.limits), started)
        except Unreadable as unreadable:
            return request_of(request, b"", started, unreadable)

    async def _begin(self, request: web.BaseRequest) -> Exchange | None:
        received = await self._read(request)
        exchange = self.provider.handle_request(received)
        if received.unreadable is None:
            return exchange
        response = _response(exchange.plan)  # refused: answered, and the rest of the body never read
        response.force_close()
        with contextlib.suppress(ConnectionError):
            await response.prepare(request)
            await response.write_eof()
        request.protocol.force_close()
        return None

    async def _admin(self, request: web.BaseRequest) -> web.StreamResponse:
        return _response(await self.provider.handle_admin(await self._read(request)))

    def malformed(self, request: web.BaseRequest, message: str) -> web.StreamResponse:
        """Answer a request aiohttp could not parse: journaled ``malformed`` by the provider."""
        unreadable = Unreadable(400, "malformed", f"the request could not be parsed: {message}")
        plan = self.provider.handle_request(request_of(request, b"", time.perf_counter(), unreadable)).plan
        response = _response(plan)
        response.force_close()
        return response


def make_server(provider: Provider, limits: Limits, closing: asyncio.Event, *, lane: bool = True,
                **options: object) -> Server:
    """The server answering for ``provider`` under ``limits`` (``closing``: set when it stops; held answers
    end). ``options`` go to aiohttp's connection handler (``access_log``...). Built in the loop that runs it.

    No ``web.Application``: it has nothing to offer a server of five routes but its router and middlewares,
    which cost about a tenth of each request.
    """
    loop = asyncio.get_running_loop()
    dispatch = _Dispatch(provider, limits, closing, prepared=lane)

    def build(message: RawRequestMessage, payload: StreamReader, protocol: RequestHandler,
              writer: object, task: asyncio.Task[None]) -> web.BaseRequest:
        # replaykit's writer in place of aiohttp's: one write per response whose whole answer is known
        ours = Writer(protocol, loop)
        return web.BaseRequest(message, payload, protocol, ours, task, loop, client_max_size=MAX_BODY)

    if lane:
        return LaneServer(dispatch, provider=provider, limits=limits, on_malformed=dispatch.malformed,
                          request_factory=build, handler_cancellation=True, **options)
    return Server(dispatch, limits=limits, on_malformed=dispatch.malformed, request_factory=build,
                  handler_cancellation=True, **options)

