"""Connections (HTTP wing): aiohttp's low-level server with the limits a real provider has.

:class:`Limits` holds the header and body timeouts, the body deadline and the cap on open connections;
:class:`Connection` (aiohttp's ``RequestHandler``) adds half-closed clients answered and malformed requests
answered by ``on_malformed``; :class:`Server` counts connections, lanes included. Reads aiohttp internals
(``_messages``, ``_waiter``, ``_current_request``, ``_manager``): aiohttp is pinned below the next minor
version in pyproject.toml, and tests/server/test_aiohttp_pin.py fails on a version not known here.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from aiohttp import web
from aiohttp.http import RawRequestMessage
from aiohttp.web_protocol import RequestHandler

from replaykit.errors import UsageError
from replaykit.server.seam import Exchange

__all__ = ["AIOHTTP_KNOWN", "BODY_DEADLINE", "BODY_TIMEOUT", "HEADER_TIMEOUT", "MAX_CONNECTIONS",
           "Connection", "Handler", "Limits", "Malformed", "Server", "body_began", "carried", "half_closed"]

AIOHTTP_KNOWN = ((3, 10), (3, 14))  # the aiohttp versions whose internals Connection reads (pyproject: <3.15)
HEADER_TIMEOUT = 60.0
BODY_TIMEOUT = 60.0
BODY_DEADLINE = 300.0
MAX_CONNECTIONS = 256

Malformed = Callable[[web.BaseRequest, str], web.StreamResponse]
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class Limits:
    """Timeouts (seconds) and the cap on open connections; see the module docstring."""

    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    max_connections: int = MAX_CONNECTIONS
    body_deadline: float = BODY_DEADLINE

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "body_deadline"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise UsageError(f"{name}={value!r} must be a positive number of seconds "
                                 f"(--{name.replace('_', '-')})")
        cap = self.max_connections
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise UsageError(f"max_connections={cap!r} must be a whole number >= 1 (--max-connections)")


class Closing(Protocol):
    """A connection the server can close (a lane)."""

    def close(self) -> None:
        """Close it."""


def _refusal(cap: int) -> bytes:
    """The 503 a connection over the cap gets before it is closed."""
    body = (f"replaykit: {cap} connections are open already (--max-connections {cap}); "
            "retry once one closes\n").encode()
    head = ("HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\nretry-after: 1\r\n"
            f"x-replaykit-error: too many open connections (--max-connections {cap})\r\n\r\n")
    return head.encode() + body


class Connection(RequestHandler):
    """One client connection: aiohttp's, plus half-close and quiet malformed requests."""

    __slots__ = ("_on_malformed", "_open", "_server", "began", "carried", "gated", "half_closed", "headed")

    def __init__(self, manager: Server, *, on_malformed: Malformed, open_in: set[Connection],
                 **options: Any) -> None:
        super().__init__(manager, **options)
        self._server = manager
        self._on_malformed = on_malformed
        self.gated = False  # counted against ``max_connections`` here (no lane did it)
        self._open = open_in  # where the connection is counted while its transport is open
        self.half_closed = asyncio.Event()
        self.carried: Exchange | None = None  # what the lane began for the request it hands over, if anything
        self.headed: float | None = None  # loop time the lane took the head of a request handed over unread
        self.began: tuple[web.BaseRequest, float] | None = None  # the latest request's :func:`body_began`

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.gated and self._server.refused(transport):
            self._manager = None  # never served: aiohttp's connection_lost has nothing to undo
            self._force_close = True
            return
        super().connection_made(transport)
        self._open.add(self)

    def eof_received(self) -> bool:  # type: ignore[override]  # asyncio's is ``-> bool | None``; aiohttp's None
        """The client closed its sending side: keep the connection to answer a request it sent whole (True:
        the transport stays open for writing; the connection ends after that answer); otherwise close it, as
        aiohttp does."""
        if self._manager is None or not self._answering_whole_request():
            return False
        self.half_closed.set()
        self.close()
        return True

    def _answering_whole_request(self) -> bool:
        """True when the latest request came whole and is not answered yet. Reads aiohttp's internals
        (:data:`AIOHTTP_KNOWN`): parsed requests queue in ``_messages``; ``_waiter`` is set while none is
        handled."""
        if self._messages:
            return self._messages[-1][1].is_eof()
        if self._waiter is not None:
            return False
        request = self._current_request
        return request is None or request.content.is_eof()

    def connection_lost(self, exc: BaseException | None) -> None:
        """The connection is gone (it no longer counts toward ``max_connections``, though aiohttp keeps it
        until its handler ends): a request the lane began and handed over, never handled, is abandoned."""
        self._open.discard(self)
        super().connection_lost(exc)
        begun, self.carried = self.carried, None
        if begun is not None:
            begun.abandon()

    def data_received(self, data: bytes) -> None:
        """Parse ``data`` as aiohttp does; a parse error in the body of the request being handled also ends
        that body (aiohttp's C parser only queues the error as a next request, and the body waits on)."""
        super().data_received(data)
        request = self._current_request
        if request is None or not self._messages:
            return
        error, body = self._messages[-1][0], request.content
        if not isinstance(error, RawRequestMessage) and not body.is_eof() and body.exception() is None:
            body.set_exception(web.RequestPayloadError(error.message))

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A request aiohttp could not parse (400) is answered by ``on_malformed``, nothing logged; any other
        error as aiohttp does."""
        if status != 400:
            return super().handle_error(request, status, exc, message)
        response = self._on_malformed(request, message or str(exc))
        response.force_close()
        return response


class Server(web.Server):
    """aiohttp's low-level server under ``limits``, its connections each a :class:`Connection`.

    A client's connection starts in a protocol of replaykit's own (``lanes``, :mod:`~replaykit.server.lane`),
    which counts it against ``max_connections`` (:meth:`refused`) and may hand it over to a
    :class:`Connection` (:meth:`connection`) that takes its place in the count (``handed``, while it is
    open); lanes are closed with aiohttp's connections."""

    def __init__(self, handler: Handler, *, limits: Limits, on_malformed: Malformed, **options: Any) -> None:
        super().__init__(handler, keepalive_timeout=limits.header_timeout, **options)
        self.limits = limits
        self._on_malformed = on_malformed
        self.lanes: set[Closing] = set()
        self.handed: set[Connection] = set()

    def __call__(self) -> Connection:
        """Without the lane: each client on a :class:`Connection` from the start, counted there."""
        connection = self.connection()
        connection.gated = True
        return connection

    def connection(self) -> Connection:
        """A new :class:`Connection`, to be made the protocol of a transport."""
        return Connection(self, loop=self._loop, on_malformed=self._on_malformed, open_in=self.handed,
                          **self._kwargs)

    def refused(self, transport: asyncio.BaseTransport) -> bool:
        """True, after answering 503 and closing ``transport``, when ``max_connections`` are open already."""
        cap = self.limits.max_connections
        if len(self.handed) + len(self.lanes) < cap:
            return False
        cast(asyncio.WriteTransport, transport).write(_refusal(cap))  # uvloop's: one, not by inheritance
        transport.close()
        return True

    def pre_shutdown(self) -> None:
        """Close the idle connections, and the lanes (each answer a lane writes is whole: none is cut)."""
        super().pre_shutdown()
        for lane in list(self.lanes):
            lane.close()


def carried(request: web.BaseRequest) -> Exchange | None:
    """What the lane began for ``request`` when it handed its connection over (given once), else None."""
    protocol = request.protocol
    if not isinstance(protocol, Connection) or protocol.carried is None:
        return None
    begun, protocol.carried = protocol.carried, None
    return begun


def body_began(request: web.BaseRequest) -> float:
    """The loop time the head of ``request`` came, from which its body's deadline counts: when the lane took
    it, for the request it handed over with its connection, else when this was first asked for ``request``
    (aiohttp starts the handler once the head is parsed; the server's dispatch asks for every request:
    :func:`~replaykit.server.transport.make_server`)."""
    protocol = request.protocol
    if not isinstance(protocol, Connection):
        return asyncio.get_running_loop().time()
    if protocol.began is None or protocol.began[0] is not request:
        headed, protocol.headed = protocol.headed, None
        protocol.began = (request, asyncio.get_running_loop().time() if headed is None else headed)
    return protocol.began[1]


def half_closed(request: web.BaseRequest) -> asyncio.Event | None:
    """Set when the client of ``request`` has closed its sending side; None off a :class:`Connection`."""
    protocol = request.protocol
    return protocol.half_closed if isinstance(protocol, Connection) else None
