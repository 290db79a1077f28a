"""``RecordingProxy``: a recording reverse proxy on loopback, between an application and one upstream API.

An application points its base URL at the proxy (:meth:`RecordingProxy.base_url`, as at the fake
provider); each request is forwarded to ``upstream`` + its path and query, and the response is streamed back
as it arrives (each piece written to the client as soon as it is read; nothing waits for the end), while its
pieces are kept with the time each came (:class:`~replaykit.record.capture.Capture`). When the response is
over, the capture is handed to the recorder (:mod:`replaykit.record.recorder`), a process of its own, off
the path of the bytes: there a stream is cut into SSE events (each timed by the piece that completed it) and
the interaction is redacted, scanned for keys, checked against its contracts and added to the cassette
(:class:`~replaykit.record.tape.Tape`).

Modes, as vcrpy's record modes (https://vcrpy.readthedocs.io/en/latest/usage.html#record-modes):

- ``once``: record into a new cassette; an existing file is refused (choose ``new``, ``all`` or ``none``);
- ``new``: a request recorded in the cassette (same method, path, query and canonical JSON body, volatile
  fields aside: :class:`replaykit.server.matching.Pool` with ``strict``) is replayed, once per recording;
  any other is forwarded and recorded, added after what the file held (vcrpy's ``new_episodes``);
- ``all``: forward and record everything; the file is replaced by the new recording;
- ``none``: forward nothing: the cassette is served as ``replaykit serve`` serves it.

Replays come from a :class:`~replaykit.server.FakeProvider` on loopback, started by the proxy, holding the
cassette as it was when the proxy started; in ``new`` mode each replayed request is pinned to the interaction
chosen (``x-replaykit-cassette``, ``x-replaykit-interaction``). ``check=True`` forwards everything, checks
every exchange against the contracts and writes nothing: the live contract test.

Only the upstream's origin is ever connected to (and the proxy's own fake provider on loopback): redirects
are passed to the client, never followed; proxy variables of the environment are ignored. An upstream that
cannot be reached gets the client a 502 in the provider's error envelope, with ``x-replaykit-error``. An
exchange that does not end (the client left, the upstream broke the stream) is not recorded.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from replaykit import cassette as cassettes
from replaykit.cassette import Headers, Request
from replaykit.contracts import Profile, resolve_profile
from replaykit.errors import UsageError
from replaykit.record.capture import Capture
from replaykit.record.recorder import Recorder, Settings, Tally
from replaykit.record.tape import Tape
from replaykit.routes import PROVIDERS, base_urls, classify
from replaykit.server import FakeProvider, envelopes
from replaykit.server.background import Background, bind, cancel_pending
from replaykit.server.matching import CASSETTE_HEADER, INTERACTION_HEADER, Pool, Received, slots_of
from replaykit.server.plan import HOP_BY_HOP
from replaykit.server.runner import check_host

__all__ = ["MODES", "RecordingProxy", "Tally"]

MODES = ("once", "new", "all", "none")
READ_TIMEOUT = 600.0  # seconds the upstream may pause between two pieces of a response
CONNECT_TIMEOUT = 30.0
WRITE_BUFFER = 4 << 20  # bytes written to a client before the proxy waits for it to read (asyncio: 64 KiB)
READ_BUFFER = 1 << 20  # bytes of an upstream answer read ahead (aiohttp's 64 KiB pauses a long stream often)
# Request headers never forwarded: the connection's own (framing, the proxy's Host), and replaykit's controls.
_NOT_FORWARDED = (HOP_BY_HOP - {"content-encoding"}) | {"host"}


def _upstream(url: str | None, mode: str) -> str | None:
    """The upstream base URL, checked: http(s), a host, no query or fragment (None only in mode none)."""
    if url is None:
        if mode != "none":
            raise UsageError("--upstream URL is required (e.g. https://api.anthropic.com); only --mode none "
                             "replays without one")
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise UsageError(f"--upstream {url!r} must be an http(s) URL with a host and no query, e.g. "
                         "https://api.anthropic.com")
    return url.rstrip("/")


def _headers(pairs: list[tuple[str, str]]) -> Headers:
    out: Headers = {}
    for name, value in pairs:
        out.setdefault(name.lower(), []).append(value)
    return out


class RecordingProxy:
    """A recording reverse proxy on loopback; see :mod:`replaykit.record.proxy`. A context manager, like
    :class:`~replaykit.server.FakeProvider`; ``say`` gets each line worth telling (default: stderr);
    ``isolate=False``: the recorder runs in a thread of this process, not a process of its own."""

    def __init__(self, cassette: str | Path | None, *, upstream: str | None, provider: str,
                 mode: str = "once", check: bool = False, host: str = "127.0.0.1", port: int = 0,
                 profile: str | Profile | None = None, say: Callable[[str], None] | None = None,
                 isolate: bool = True) -> None:
        if mode not in MODES:
            raise UsageError(f"--mode {mode!r} must be one of {', '.join(MODES)}")
        if provider not in PROVIDERS:
            raise UsageError(f"--provider {provider!r} must be one of {', '.join(PROVIDERS)}")
        check_host(host, allow_remote=False)
        self.upstream, self.provider, self.mode, self.check = _upstream(upstream, mode), provider, mode, check
        self.host, self._port, self.profile = host, port, resolve_profile(profile)
        self.say = say or (lambda line: print(f"replaykit record: {line}", file=sys.stderr, flush=True))
        self.path = None if cassette is None else Path(cassette)
        self.tally = Tally()
        self.tape = self._tape()
        self.replay = self._replay()
        self._pool = self._pinning()
        self.recorder = None if self.upstream is None else Recorder(
            Settings(None if self.tape is None else self.path, provider, self.mode == "new", self.profile),
            tally=self.tally, tape=self.tape, say=self.say, isolate=isolate)
        self._background = Background("replaykit-record", self._setup, self._cleanup)
        self._runner: web.ServerRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------ what is recorded, what is replayed

    def _tape(self) -> Tape | None:
        if self.check:
            if self.mode in ("new", "none"):
                raise UsageError(f"--check forwards every request; it cannot --mode {self.mode}")
            return None
        if self.path is None:
            raise UsageError("--cassette FILE is required (only --check records nothing)")
        if self.mode == "once" and self.path.exists():
            raise UsageError(f"{self.path}: already exists and --mode once records only into a new cassette; "
                             "use --mode new to add to it, all to record it again, none to replay it")
        if self.mode == "none":
            if not self.path.is_file():
                raise UsageError(f"{self.path}: no such cassette; --mode none only replays an existing one")
            return None
        return Tape(self.path, self.provider, keep=self.mode == "new", say=self.say)

    def _replay(self) -> FakeProvider | None:
        """The fake provider replaying the cassette as it was at start (modes new and none)."""
        if self.path is None or self.mode not in ("new", "none") or not self.path.is_file():
            return None
        tape = cassettes.load(self.path)
        return FakeProvider([tape], host="127.0.0.1", profile=self.profile, allow_remote=False)

    def _pinning(self) -> Pool | None:
        """In mode new, which recorded interaction answers a request (None: it goes upstream)."""
        if self.mode != "new" or self.replay is None or self.path is None:
            return None
        loaded = cassettes.load(self.path)
        return Pool(slots_of(str(self.path), loaded.interactions), strict=True)

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if kind is None:
            self.check_errors()

    def start(self) -> RecordingProxy:
        """Bind the socket and serve in a background thread; returns ``self``."""
        if self._background.running:
            raise UsageError("the recording proxy is already running; call stop() first")
        if self.recorder is not None and self.recorder.started:
            raise UsageError("a recording proxy records once; make a new RecordingProxy to record again")
        sock = bind(self.host, self._port)
        self._port = sock.getsockname()[1]
        try:
            if self.recorder is not None:
                self.recorder.start()
            if self.replay is not None:
                self.replay.start()
            self._background.start(sock)
        except BaseException:
            sock.close()
            if self.recorder is not None:
                self.recorder.stop()
            raise
        return self

    async def _setup(self, sock: socket.socket) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT)
        self._session = aiohttp.ClientSession(timeout=timeout, trust_env=False, auto_decompress=True,
                                              skip_auto_headers=("User-Agent", "Accept-Encoding"),
                                              read_bufsize=READ_BUFFER)
        server = web.Server(self._handle, handler_cancellation=True, access_log=None)
        self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    async def _cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
        await cancel_pending()

    def stop(self) -> None:
        """Stop serving, then finish recording: every exchange completed is checked and written."""
        if self._background.stop():
            self._runner = self._session = None
        if self.recorder is not None:
            self.recorder.stop()
        if self.replay is not None:
            self.replay.stop()

    def check_errors(self) -> None:
        """Re-raise, in this thread, the first error raised while recording (writing the cassette...)."""
        kept = [] if self.recorder is None else self.recorder.errors
        errors, kept[:] = list(kept), []
        if self.replay is not None:
            self.replay.check_errors()
        if errors:
            raise errors[0]

    # ------------------------------------------------------------ addresses

    @property
    def url(self) -> str:
        """``http://host:port`` of the running proxy."""
        return f"http://[{self.host}]:{self._port}" if ":" in self.host else f"http://{self.host}:{self._port}"

    def base_urls(self) -> dict[str, str]:
        """Each provider's SDK base URL at the proxy (see :func:`replaykit.routes.base_urls`)."""
        return base_urls(self.url)

    def base_url(self) -> str:
        """The base URL to give the ``provider``'s SDK."""
        return self.base_urls()[self.provider]

    # ------------------------------------------------------------ one exchange

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        self.tally.requests += 1
        forwarded = [(k, v) for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED]
        pins = self._pins(request, body)
        if pins is not None:
            assert self.replay is not None  # modes none and new: a replay source was started
            self.tally.replayed += 1
            if pins:  # replaykit's own choice replaces any the client made
                forwarded = [(k, v) for k, v in forwarded if not k.lower().startswith("x-replaykit-")]
            return await self._pipe(request, self.replay.url, [*forwarded, *pins.items()], body, None)
        assert self.upstream is not None
        uri = self.upstream + request.path_qs
        recorded = Request(request.method, uri, _headers(forwarded), body or None)
        return await self._pipe(request, self.upstream, forwarded, body, recorded)

    def _pins(self, request: web.BaseRequest, body: bytes) -> dict[str, str] | None:
        """None when the request goes upstream; else the headers that choose what replays it: none in mode
        ``none`` (the fake provider chooses), in mode ``new`` the interaction recorded for it."""
        if self.upstream is None:
            return {}
        if self._pool is None:
            return None
        query = parse_qs(request.query_string, keep_blank_values=True) if request.query_string else {}
        headers = {k.lower(): v for k, v in request.headers.items()}
        received = Received.build(request.method, request.path, query, headers, body,
                                  classify(request.method, request.path))
        slot = self._pool.match(received).slot
        if slot is None:
            return None
        return {CASSETTE_HEADER: Path(slot.cassette).name, INTERACTION_HEADER: str(slot.index)}

    async def _pipe(self, request: web.BaseRequest, origin: str, headers: list[tuple[str, str]], body: bytes,
                    recorded: Request | None) -> web.StreamResponse:
        """Send the request to ``origin`` and stream its answer back, captured when ``recorded`` is given."""
        assert self._session is not None
        try:
            upstream = await self._session.request(request.method, origin + request.path_qs,
                                                   headers=CIMultiDict(headers), data=body or None,
                                                   allow_redirects=False)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return self._unreachable(origin, exc)
        try:
            return await self._relay(request, upstream, recorded)
        finally:
            upstream.release()

    async def _relay(self, request: web.BaseRequest, upstream: aiohttp.ClientResponse,
                     recorded: Request | None) -> web.StreamResponse:
        kept = [(k, v) for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP]
        capture = None if recorded is None else Capture(recorded, upstream.status, upstream.reason or "",
                                                        _headers(kept))
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason,
                                      headers=CIMultiDict(kept))
        if request.transport is not None:  # a client a little behind does not hold the upstream back
            request.transport.set_write_buffer_limits(high=WRITE_BUFFER)
        await response.prepare(request)
        try:
            async for piece in upstream.content.iter_any():
                await response.write(piece)
                if capture is not None:
                    capture.feed(piece)
            await response.write_eof()
        except (aiohttp.ClientError, ConnectionError, TimeoutError) as exc:
            self._broken(request, exc)
            return response
        except asyncio.CancelledError:
            self.tally.incomplete += 1  # the client left: nothing to record
            raise
        if capture is not None and self.recorder is not None:
            self.recorder.take(capture)
        return response

    def _unreachable(self, origin: str, exc: BaseException) -> web.Response:
        self.tally.failed += 1
        message = f"replaykit record: cannot reach {origin}: {type(exc).__name__}: {exc}"
        self.say(message)
        reply = envelopes.error_reply(self.provider, 502, message=message,
                                      headers={"x-replaykit-error": message.encode("ascii", "replace")
                                               .decode()[:500]})
        return web.Response(status=502, body=reply.body, headers=reply.headers)

    def _broken(self, request: web.BaseRequest, exc: BaseException) -> None:
        self.tally.incomplete += 1
        self.say(f"{request.method} {request.path}: not recorded: the exchange broke off "
                 f"({type(exc).__name__}: {exc})")
        if request.transport is not None:
            request.transport.close()  # the client sees the body end early, as the upstream's did
