"""``RecordingProxy``: a recording reverse proxy on loopback, between an application and one upstream API.

Each request is forwarded to ``upstream`` (or one of several, by provider prefix or route) and streamed back
as it arrives, its pieces kept (:class:`~replaykit.record.capture.Capture`) and handed to the recorder
(:mod:`replaykit.record.recorder`) off the path of the bytes. Modes as vcrpy's: ``once``, ``new``, ``all``,
``none``, and ``check`` (the live contract test, writes nothing); replays come from a
:class:`~replaykit.server.FakeProvider` it starts. Only the upstreams' origins are connected to. Called by
``replaykit record``; the modes and rules are in docs/architecture/record.md and docs/jobs/record.md.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from replaykit import cassette as cassettes
from replaykit.cassette import Headers, Request
from replaykit.contracts import Profile, resolve_profile
from replaykit.errors import UsageError
from replaykit.netguard import proxy_env
from replaykit.record.capture import Capture
from replaykit.record.options import MODES, upstream_url
from replaykit.record.recorder import Recorder, RecorderSettings, Tally
from replaykit.record.tape import Tape
from replaykit.routes import PROVIDERS, base_url_env, base_urls, classify
from replaykit.server import FakeProvider, envelopes
from replaykit.server.background import Background, bind, cancel_pending
from replaykit.server.matching import CASSETTE_HEADER, INTERACTION_HEADER, Pool, Received, slots_of
from replaykit.server.plan import HOP_BY_HOP
from replaykit.server.provider import check_host

__all__ = ["MODES", "RecordingProxy", "Tally"]

READ_TIMEOUT = 600.0  # seconds the upstream may pause between two pieces of a response
CONNECT_TIMEOUT = 30.0
WRITE_BUFFER = 4 << 20  # bytes written to a client before the proxy waits for it to read (asyncio: 64 KiB)
READ_BUFFER = 1 << 20  # bytes of an upstream answer read ahead (aiohttp's 64 KiB pauses a long stream often)
# Request headers never forwarded: the connection's own (framing, the proxy's Host), and replaykit's controls.
_NOT_FORWARDED = (HOP_BY_HOP - {"content-encoding"}) | {"host"}


def _upstreams(upstream: str | Mapping[str, str] | None, provider: str | None, mode: str) -> dict[str, str]:
    """``{provider: URL}``, each URL checked (:func:`~replaykit.record.options.upstream_url`)."""
    if not upstream:
        if mode != "none":
            raise UsageError("--upstream URL is required (e.g. https://api.anthropic.com); only --mode none "
                             "replays without one")
        return {}
    if isinstance(upstream, str):
        if provider is None:
            raise UsageError(f"--provider is required with --upstream {upstream!r}: one of "
                             f"{', '.join(PROVIDERS)}")
        return {provider: upstream_url(upstream)}
    unknown = sorted(set(upstream) - set(PROVIDERS))
    if unknown:
        raise UsageError(f"upstream for {unknown[0]!r}: the providers are {', '.join(PROVIDERS)}")
    return {name: upstream_url(url, f"upstream {name}=") for name, url in upstream.items()}


def _headers(pairs: list[tuple[str, str]]) -> Headers:
    out: Headers = {}
    for name, value in pairs:
        out.setdefault(name.lower(), []).append(value)
    return out


class RecordingProxy:
    """A recording reverse proxy on loopback; see :mod:`replaykit.record.proxy`. A context manager, like
    :class:`~replaykit.server.FakeProvider`; ``upstream``: one URL (then ``provider`` says whose API it is) or
    ``{provider: URL}``; ``say`` gets each line worth telling (default: stderr); ``isolate=False``: the
    recorder runs in a thread of this process, not a process of its own."""

    def __init__(self, cassette: str | Path | None, *, upstream: str | Mapping[str, str] | None,
                 provider: str | None = None, mode: str = "once", check: bool = False,
                 host: str = "127.0.0.1", port: int = 0, profile: str | Profile | None = None,
                 say: Callable[[str], None] | None = None, isolate: bool = True) -> None:
        if mode not in MODES:
            raise UsageError(f"--mode {mode!r} must be one of {', '.join(MODES)}")
        if provider is not None and provider not in PROVIDERS:
            raise UsageError(f"--provider {provider!r} must be one of {', '.join(PROVIDERS)}")
        check_host(host, allow_remote=False)
        self.provider, self.mode, self.check = provider, mode, check
        self.upstreams, self.routed = _upstreams(upstream, provider, mode), isinstance(upstream, Mapping)
        self.host, self._port, self.profile = host, port, resolve_profile(profile)
        self.say = say or (lambda line: print(f"replaykit record: {line}", file=sys.stderr, flush=True))
        self.path = None if cassette is None else Path(cassette)
        self.tally = Tally()
        self.tape = self._tape()
        self.replay = self._replay()
        self._pool = self._pinning()
        self.recorder = None if mode == "none" else Recorder(
            RecorderSettings(None if self.tape is None else self.path, provider, self.mode == "new",
                             self.profile),
            tally=self.tally, tape=self.tape, say=self.say, isolate=isolate)
        self._background = Background("replaykit-record", self._setup, self._cleanup,
                                      unguarded=mode != "none")
        self._runner: web.ServerRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        if mode == "none" and self.upstreams:
            given = (", ".join(f"{name}={url}" for name, url in self.upstreams.items()) if self.routed
                     else self.upstreams[str(provider)])
            self.say(f"--mode none only replays: --upstream {given} is ignored; nothing is forwarded")
            self.upstreams = {}

    @property
    def upstream(self) -> str | None:
        """The one upstream every request goes to (None: none, or one per provider)."""
        return None if self.routed or not self.upstreams else next(iter(self.upstreams.values()))

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

    def origins(self) -> dict[str, str]:
        """Where each provider's requests are sent: the proxy, under ``/<provider>`` when it has one upstream
        per provider."""
        return {name: f"{self.url}/{name}" if self.routed else self.url for name in PROVIDERS}

    def base_urls(self) -> dict[str, str]:
        """Each provider's SDK base URL at the proxy (see :func:`replaykit.routes.base_urls`)."""
        return {name: base_urls(origin)[name] for name, origin in self.origins().items()}

    def base_url(self, provider: str | None = None) -> str:
        """The base URL to give ``provider``'s SDK (default: the proxy's ``provider``)."""
        name = provider or self.provider
        if name not in PROVIDERS:
            raise UsageError(f"provider={name!r} must be one of {', '.join(PROVIDERS)}")
        return self.base_urls()[name]

    def env(self) -> dict[str, str]:
        """The target protocol's base URL variables at the proxy, and the proxy variables that keep a child
        process from anything else (:func:`replaykit.netguard.proxy_env`); no keys: the child's own go
        upstream."""
        return {**base_url_env(self.origins()), **proxy_env(self.host)}

    def problems(self) -> list[str]:
        """Why this run failed, if it did: contract errors under ``check``, a key that survived redaction, an
        upstream that could not be reached."""
        tally, why = self.tally, []
        if self.check and tally.errors:
            why.append(f"{tally.errors} contract error{'s' * (tally.errors != 1)}")
        if self.tape is not None and self.tape.refused:
            why.append("a key survived redaction (the cassette was not written past it)")
        if tally.failed:
            why.append(f"the upstream could not be reached {tally.failed} time{'s' * (tally.failed != 1)}")
        return why

    # ------------------------------------------------------------ one exchange

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        self.tally.requests += 1
        forwarded = [(k, v) for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED]
        provider, prefix = self._provider(request)
        path, path_qs = request.path[len(prefix):], request.path_qs[len(prefix):]
        pins = self._pins(request, path, body)
        if pins is not None:
            assert self.replay is not None  # modes none and new: a replay source was started
            self.tally.replayed += 1
            if pins:  # replaykit's own choice replaces any the client made
                forwarded = [(k, v) for k, v in forwarded if not k.lower().startswith("x-replaykit-")]
            headers = [*forwarded, *pins.items()]
            return await self._pipe(request, self.replay.url, path_qs, headers, body, None)
        origin = self.upstreams.get(provider or "")
        if origin is None:
            why = (f"no upstream was given for {provider}'s API" if provider else
                   f"{path}: no provider's route; send it to the proxy's base URL of its provider")
            return self._unreachable(provider, why)
        recorded = Request(request.method, origin + path_qs, _headers(forwarded), body or None)
        return await self._pipe(request, origin, path_qs, forwarded, body, recorded, provider)

    def _provider(self, request: web.BaseRequest) -> tuple[str | None, str]:
        """Whose API ``request`` is for, and the path prefix that said so (``/openai``; not forwarded)."""
        if not self.routed:
            return self.provider, ""
        first = request.path.split("/", 2)[1]
        if first in PROVIDERS:
            return first, f"/{first}"
        return classify(request.method, request.path).provider or self.provider, ""

    def _pins(self, request: web.BaseRequest, path: str, body: bytes) -> dict[str, str] | None:
        """None when the request goes upstream; else the headers that choose what replays it: none in mode
        ``none`` (the fake provider chooses), in mode ``new`` the interaction recorded for it."""
        if self.mode == "none":
            return {}
        if self._pool is None:
            return None
        query = parse_qs(request.query_string, keep_blank_values=True) if request.query_string else {}
        headers = {k.lower(): v for k, v in request.headers.items()}
        received = Received.build(request.method, path, query, headers, body, classify(request.method, path))
        slot = self._pool.match(received).slot
        if slot is None:
            return None
        return {CASSETTE_HEADER: Path(slot.cassette).name, INTERACTION_HEADER: str(slot.index)}

    async def _pipe(self, request: web.BaseRequest, origin: str, path_qs: str, headers: list[tuple[str, str]],
                    body: bytes, recorded: Request | None, provider: str | None = None) -> web.StreamResponse:
        """Send the request to ``origin`` + ``path_qs`` and stream its answer back, captured when ``recorded``
        is given."""
        assert self._session is not None
        try:
            upstream = await self._session.request(request.method, origin + path_qs,
                                                   headers=CIMultiDict(headers), data=body or None,
                                                   allow_redirects=False)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return self._unreachable(provider, f"cannot reach {origin}: {type(exc).__name__}: {exc}")
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

    def _unreachable(self, provider: str | None, why: str) -> web.Response:
        self.tally.failed += 1
        message = f"replaykit record: {why}"
        self.say(message)
        reply = envelopes.error_reply(provider or self.provider, 502, message=message,
                                      headers={"x-replaykit-error": message.encode("ascii", "replace")
                                               .decode()[:500]})
        return web.Response(status=502, body=reply.body, headers=reply.headers)

    def _broken(self, request: web.BaseRequest, exc: BaseException) -> None:
        self.tally.incomplete += 1
        self.say(f"{request.method} {request.path}: not recorded: the exchange broke off "
                 f"({type(exc).__name__}: {exc})")
        if request.transport is not None:
            request.transport.close()  # the client sees the body end early, as the upstream's did
