"""The lane: plain requests answered on the connection itself, without aiohttp's per-request machinery.

Every client connection starts as a :class:`Lane` (an asyncio protocol). It parses what arrives with llhttp
(:mod:`httptools`) and answers a request there, in one write of prepared bytes, when all of this holds:

- the request is *plain*: HTTP/1.1, kept alive, not ``HEAD``, no ``Expect``, ``Upgrade`` or
  ``Transfer-Encoding``, no header twice (aiohttp answers 400 to a repeated ``Host``...), a head of
  printable ASCII, a target that is a path and an optional query of the characters :data:`_PLAIN_TARGET`
  allows (no ``%``, ``+``, dot segment or fragment: aiohttp reads it the same), a body of at most
  :data:`MAX_BODY` bytes, and nothing pipelined behind it;
- the server's ``answer`` takes it (:func:`~replaykit.server.app.make_server`: not the admin API, no fault
  set, ``fast`` timing); it is journaled from then on;
- its answer is prepared whole (``Plan.whole``, :func:`~replaykit.server.streaming.send_whole`): the bytes
  aiohttp's path writes for it.

Anything else hands the connection to aiohttp's :class:`~replaykit.server.connections.Connection` for good,
with every byte received of the request at hand, which aiohttp parses again: malformed requests, slow
clients, faults, pacing, the admin API, HTTP/1.0 and large bodies are answered as they always were. A
request the lane has begun whose answer is not prepared whole goes over with it (``Connection.carried``):
it is delivered there, never matched twice (and journaled ``client_closed`` if the client leaves first). A
request the server fails to begin goes over too, and meets aiohttp's 500 as it always did.

The lane keeps the connection's limits (:class:`~replaykit.server.connections.Limits`): it counts toward
``max_connections``; a connection that sends no request for ``header_timeout`` after opening or after its
last answer is closed; a head that does not arrive in one piece goes to aiohttp at once, and a body that
arrives after its head waits at most :data:`GRACE` seconds in the lane before it does (aiohttp's
``body_timeout`` then runs, and ``body_deadline`` counts from when the lane took the head). While the kernel
does not take what was written, the lane reads no more.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

import httptools

from replaykit.server import streaming
from replaykit.server.connections import Carried, Server
from replaykit.server.matching import Received
from replaykit.server.plan import Plan
from replaykit.server.streaming import Progress

__all__ = ["GRACE", "MAX_BODY", "MAX_HEADERS", "MAX_LINE", "Begun", "Lane", "LaneServer"]

GRACE = 0.1  # seconds a body may lag behind its head in the lane (httpx writes them apart)
MAX_BODY = 1 << 20  # bytes of body the lane buffers; a longer one goes to aiohttp, which streams it
MAX_LINE = 4096  # bytes of a target or a header line the lane takes (aiohttp's limit is 8190)
MAX_HEADERS = 64  # headers the lane takes (aiohttp's limit is 128)
_METHODS = frozenset({b"GET", b"POST", b"PUT", b"PATCH", b"DELETE", b"OPTIONS"})
_REFUSED_HEADERS = frozenset({"expect", "upgrade", "transfer-encoding"})
_PLAIN_TARGET = re.compile(rb"(?:/[A-Za-z0-9_.~:@-]*)+(?:\?[A-Za-z0-9_.~:@=&,/-]*)?")
_UNPRINTABLE = re.compile(rb"[^\x20-\x7e\t]")


class Begun(Carried, Protocol):
    """A request the server has begun answering (:class:`~replaykit.server.app._Exchange`); it can be carried
    over to aiohttp (:class:`~replaykit.server.connections.Carried`)."""

    @property
    def plan(self) -> Plan:
        """What is to be sent."""

    @property
    def progress(self) -> Progress:
        """How far delivery got."""

    def close(self) -> None:
        """The end of delivery: journal the outcome."""


Answer = Callable[[Received, float], Begun | None]


class LaneServer(Server):
    """The fake provider's server: a :class:`Lane` for each client; ``answer`` begins a plain request (None:
    the general way), given it and :func:`time.perf_counter` when it came."""

    def __init__(self, handler: Any, *, answer: Answer, **options: Any) -> None:
        super().__init__(handler, **options)
        self.answer = answer

    def __call__(self) -> Lane:  # type: ignore[override]  # a protocol of its own, not aiohttp's handler
        return Lane(self)


class Lane(asyncio.Protocol):
    """One client connection while its requests are plain (see the module docstring)."""

    def __init__(self, server: LaneServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.pending: list[bytes] = []  # the bytes of the request at hand
        self.last = 0.0  # loop time of opening or of the last answer
        self.head_at = 0.0  # loop time the head of the request at hand was whole
        self.idle: asyncio.TimerHandle | None = None
        self.grace: asyncio.TimerHandle | None = None
        self._reset()

    def _reset(self) -> None:
        self.url = self.method = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.fields: dict[str, str] = {}  # the headers of a plain head: names lower-cased, each once
        self.body: list[bytes] = []
        self.headed = self.plain = self.open = False
        self.complete = 0

    # ------------------------------------------------------------ the connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Count the connection in (or refuse it over the cap) and start its idle timer."""
        if self.server.refused(transport):
            return
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is one, but not by inheritance
        self.server.lanes.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)  # as aiohttp's handler does
        self.last = self.loop.time()
        self.idle = self.loop.call_at(self.last + self.server.limits.header_timeout, self._idle)

    def _idle(self) -> None:
        due = self.last + self.server.limits.header_timeout
        if self.loop.time() < due or self.pending:
            self.idle = self.loop.call_at(max(due, self.loop.time() + GRACE), self._idle)
        elif self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection."""
        self.server.lanes.discard(self)
        self._stop_timers()

    def eof_received(self) -> bool:
        """The client closed its sending side: every whole request is answered already; close (what was
        written still leaves first). A request not yet whole is gone, as with aiohttp."""
        return False

    def close(self) -> None:
        """The server is stopping: close the connection (a request still arriving is dropped, as aiohttp
        drops one whose handler has not started)."""
        if self.transport is not None:
            self.transport.close()

    def pause_writing(self) -> None:
        """The kernel is not taking what was written: read no more requests until it does."""
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        """Read requests again."""
        if self.transport is not None:
            self.transport.resume_reading()

    def _stop_timers(self) -> None:
        for timer in (self.idle, self.grace):
            if timer is not None:
                timer.cancel()

    # ------------------------------------------------------------ the parser's callbacks

    def on_message_begin(self) -> None:
        self.open = True

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value.rstrip()))  # aiohttp drops the space or tab llhttp leaves after it

    def on_headers_complete(self) -> None:
        self.headed = True
        self.head_at = self.loop.time()
        self.plain = self._plain_head()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.open = False
        self.complete += 1

    def _plain_head(self) -> bool:
        parser, url, headers = self.parser, self.url, self.headers
        self.method = parser.get_method()
        if (parser.get_http_version() != "1.1" or not parser.should_keep_alive()
                or self.method not in _METHODS or len(url) > MAX_LINE or not _PLAIN_TARGET.fullmatch(url)
                or b"/." in url or b"//" in url or len(headers) > MAX_HEADERS):
            return False
        fields = self.fields
        for name, value in headers:
            key = name.decode("latin-1").lower()  # a token (llhttp checked); any other byte fails below
            if key in _REFUSED_HEADERS or key in fields or len(name) + len(value) > MAX_LINE:
                return False
            fields[key] = value.decode("latin-1")
            if key == "content-length" and int(value) > MAX_BODY:  # digits: llhttp checked
                return False
        return not _UNPRINTABLE.search(b"\t".join(text for header in headers for text in header))

    # ------------------------------------------------------------ requests

    def data_received(self, data: bytes) -> None:
        """Take what arrived: answer the request it completes, wait briefly for the rest of a body, or hand
        the connection to aiohttp (see the module docstring)."""
        self.pending.append(data)
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):  # aiohttp answers these as ever
            self._hand_over()
            return
        if not self.complete:
            if not (self.headed and self.plain):
                self._hand_over()
            elif self.grace is None:
                limits = self.server.limits
                wait = min(GRACE, limits.body_timeout, limits.body_deadline)
                self.grace = self.loop.call_later(wait, self._hand_over)
            return
        if self.complete > 1 or self.open or not self.plain:
            self._hand_over()
            return
        self._answer()

    def _answer(self) -> None:
        url = self.url.decode("ascii")
        path, _, query = url.partition("?")
        method = self.method.decode("ascii")
        received = Received.arrived(method, path, query, self.fields, b"".join(self.body))
        try:
            begun = self.server.answer(received, time.perf_counter())
        except Exception:  # nothing begun: aiohttp's path meets it again and answers 500, as it always did
            self._hand_over()
            return
        if begun is None or begun.plan.whole is None:
            self._hand_over(begun)
            return
        self.pending.clear()
        if self.grace is not None:
            self.grace.cancel()
            self.grace = None
        self._reset()
        try:
            streaming.send_whole(self.transport, begun.plan.whole, begun.progress)
        except ConnectionError:
            begun.progress.outcome = "client_closed"
        finally:
            begun.close()
        self.last = self.loop.time()

    def _hand_over(self, begun: Begun | None = None) -> None:
        """Make aiohttp's :class:`~replaykit.server.connections.Connection` the connection's protocol, for
        good, and give it the bytes of the request at hand (and ``begun``, the request begun here)."""
        transport = self.transport
        self._stop_timers()
        self.server.lanes.discard(self)
        if transport is None or transport.is_closing():
            if begun is not None:
                begun.abandon()
            return
        connection = self.server.connection()
        connection.carried = begun
        connection.headed = self.head_at if self.headed and self.open else None  # its body is still coming
        transport.set_protocol(connection)
        connection.connection_made(transport)
        data, self.pending = b"".join(self.pending), []
        if data:
            connection.data_received(data)
