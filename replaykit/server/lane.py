"""The lane (HTTP wing): plain requests answered on the connection itself, in prepared bytes.

Each connection starts as a :class:`Lane`, which parses with llhttp (:mod:`httptools`). The rules for what
it answers live here, in one place: a plain head (:meth:`Lane._plain_head`), not the admin API, nothing
pipelined, and an answer the provider prepared whole (``Plan.whole``). Anything else hands the connection to
aiohttp's :class:`~replaykit.server.connections.Connection` for good, with the request begun, if any.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from typing import Any, cast

import httptools

from replaykit.server import streaming
from replaykit.server.connections import Handler, Server
from replaykit.server.seam import Exchange, Provider, Request, is_admin

__all__ = ["GRACE", "MAX_BODY", "MAX_HEADERS", "MAX_LINE", "Lane", "LaneServer"]

GRACE = 0.1  # seconds a body may lag behind its head in the lane (httpx writes them apart)
MAX_BODY = 1 << 20  # bytes of body the lane buffers; a longer one goes to aiohttp, which streams it
MAX_LINE = 4096  # bytes of a target or a header line the lane takes (aiohttp's limit is 8190)
MAX_HEADERS = 64  # headers the lane takes (aiohttp's limit is 128)
_METHODS = frozenset({b"GET", b"POST", b"PUT", b"PATCH", b"DELETE", b"OPTIONS"})
_REFUSED_HEADERS = frozenset({"expect", "upgrade", "transfer-encoding"})
_PLAIN_TARGET = re.compile(rb"(?:/[A-Za-z0-9_.~:@-]*)+(?:\?[A-Za-z0-9_.~:@=&,/-]*)?")
_UNPRINTABLE = re.compile(rb"[^\x20-\x7e\t]")


class LaneServer(Server):
    """The server with the lane: a :class:`Lane` for each client, asking ``provider`` to begin a plain
    request."""

    def __init__(self, handler: Handler, *, provider: Provider, **options: Any) -> None:
        super().__init__(handler, **options)
        self.provider = provider

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
        if is_admin(path):  # the admin API is answered by aiohttp
            self._hand_over()
            return
        method = self.method.decode("ascii")
        request = Request(method, path, query, self.fields, b"".join(self.body), time.perf_counter())
        try:
            begun = self.server.provider.handle_request(request)
        except Exception:  # nothing begun: aiohttp's path meets it again and answers 500, as it always did
            self._hand_over()
            return
        if begun.plan.whole is None:  # not prepared whole: delivered by aiohttp
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

    def _hand_over(self, begun: Exchange | None = None) -> None:
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
