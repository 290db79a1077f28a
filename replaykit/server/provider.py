"""``FakeProvider`` (provider wing): lifecycle and addresses of the loopback fake provider.

The caller's thread binds the socket (a busy port fails in ``start()``); a background thread runs the event
loop and the HTTP wing (:func:`~replaykit.server.transport.make_server`), given a :class:`Service` (the seam's
provider). Mutations go through the state's lock; errors raised while serving are re-raised in the caller's
thread by :meth:`FakeProvider.check_errors`. What is served: :mod:`~replaykit.server.catalogue`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType

from aiohttp import web

from replaykit import cassette as cassette_mod
from replaykit.cassette import Interaction
from replaykit.contracts import Profile, resolve_profile
from replaykit.errors import MatchError, UsageError
from replaykit.netguard import proxy_env
from replaykit.routes import PROVIDERS, base_url_env, base_urls
from replaykit.server import admin, exchange
from replaykit.server.background import Background, bind, cancel_pending, new_loop
from replaykit.server.catalogue import CassetteSource, Catalogue, declared_profile
from replaykit.server.connections import BODY_DEADLINE, BODY_TIMEOUT, HEADER_TIMEOUT, MAX_CONNECTIONS, Limits
from replaykit.server.exchange import Arrival, KillPoint, Settings, State
from replaykit.server.faults import Fault
from replaykit.server.journal import WINDOW, Entry, Journal
from replaykit.server.matching import DEFAULT_VOLATILE, Matcher, Pool, near_text
from replaykit.server.plan import Plan, Timing
from replaykit.server.seam import Exchange, Request
from replaykit.server.transport import make_server

__all__ = ["DUMMY_KEY", "CassetteSource", "FakeProvider", "Service", "check_host", "declared_profile",
           "new_loop"]

DUMMY_KEY = "replaykit-dummy-key"
SHUTDOWN_TIMEOUT = 1.0


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse an address that is not loopback unless ``allow_remote``."""
    if host == "localhost":
        return
    try:
        address = ipaddress.ip_address(host)
    except ValueError as exc:
        raise UsageError(f"host={host!r} must be an IP address or localhost (e.g. 127.0.0.1)") from exc
    if not address.is_loopback and not allow_remote:
        raise UsageError(
            f"host={host!r} is not a loopback address: the fake provider would be reachable from "
            "other machines; use 127.0.0.1, or pass --allow-remote (allow_remote=True) on purpose"
        )


class Service:
    """The seam's provider (:class:`~replaykit.server.seam.Provider`): what the HTTP wing asks of ``state``
    and ``catalogue``."""

    def __init__(self, state: State, catalogue: Catalogue) -> None:
        self.state, self.catalogue = state, catalogue

    def handle_request(self, request: Request) -> Exchange:
        """Begin answering a provider request (:func:`~replaykit.server.exchange.handle`)."""
        return exchange.handle(self.state, request)

    async def handle_admin(self, request: Request) -> Plan:
        """Answer the admin API (:func:`~replaykit.server.admin.answer`)."""
        return await admin.answer(request, self.state, self.catalogue)


class FakeProvider:
    """A loopback fake of the Anthropic, OpenAI, Azure and Cloudflare APIs; see :mod:`replaykit.server`.
    ``lane=False`` serves every request through aiohttp (the same bytes; no fast path)."""

    def __init__(
        self,
        cassettes: CassetteSource | Iterable[CassetteSource] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        timing: str | Timing = "fast",
        strict: bool = False,
        enforce_contracts: bool = False,
        allow_remote: bool = False,
        match_on: Iterable[str | Matcher] = (),
        volatile: Iterable[str] = DEFAULT_VOLATILE,
        repeat: bool = False,
        faults: Iterable[Fault | str | Mapping[str, object]] = (),
        profile: str | Profile | None = None,
        journal_file: str | os.PathLike[str] | None = None,
        journal_bodies: str = "head",
        journal_window: int = WINDOW,
        header_timeout: float = HEADER_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
        body_deadline: float = BODY_DEADLINE,
        max_body: int = cassette_mod.MAX_BODY,
        watch: Callable[[Entry], None] | None = None,
        lane: bool = True,
    ) -> None:
        check_host(host, allow_remote)
        self.host, self._port, self.lane = host, port, lane
        self._journal_file = journal_file
        settings = Settings(timing if isinstance(timing, Timing) else Timing.parse(timing), enforce_contracts)
        try:
            pool = Pool((), match_on=list(match_on), volatile=volatile, strict=strict, repeat=repeat)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        limits = Limits(header_timeout, body_timeout, max_connections, body_deadline)
        self._state = State(pool, settings, journal=Journal(journal_bodies, journal_window),
                            limits=limits, watch=watch)
        judged = None if profile is None else resolve_profile(profile)
        self._catalogue = Catalogue(self._state, judged, max_body)
        self._background = Background("replaykit-fake-provider", self._setup, self._cleanup,
                                      self._state.journal.close_log)
        self._runner: web.ServerRunner | None = None
        self.load(cassettes)
        for fault in faults:
            self.inject(fault)

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if kind is None:
            self.check_errors()

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._background.running

    def start(self) -> FakeProvider:
        """Bind the socket and start serving in a background thread; returns ``self``."""
        if self._background.running:
            raise UsageError("the fake provider is already running; call stop() first")
        sock = bind(self.host, self._port)
        self._port = sock.getsockname()[1]
        self._background.start(sock)
        return self

    async def _setup(self, sock: socket.socket) -> None:
        if self._journal_file is not None:
            self._state.journal.open_log(self._journal_file)
        closing = self._state.closing = asyncio.Event()
        service = Service(self._state, self._catalogue)
        server = make_server(service, self._state.limits, closing, lane=self.lane, access_log=None)
        self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=SHUTDOWN_TIMEOUT)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    async def _cleanup(self) -> None:
        self._state.closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
        await cancel_pending()

    def stop(self) -> None:
        """Stop serving: stalled responses end, in-flight ones get a moment, then the thread exits."""
        if self._background.stop():
            self._runner = None

    # ------------------------------------------------------------ addresses

    @property
    def port(self) -> int:
        """The bound port (the one asked for until :meth:`start`)."""
        return self._port

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server."""
        host = self._reachable_host()
        return f"http://[{host}]:{self._port}" if ":" in host else f"http://{host}:{self._port}"

    def _reachable_host(self) -> str:
        """The host clients connect to: loopback for a server bound to every interface."""
        return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)

    def base_urls(self) -> dict[str, str]:
        """Each provider's SDK base URL (see :func:`replaykit.routes.base_urls`)."""
        return base_urls(self.url)

    def base_url(self, provider: str) -> str:
        """The base URL to give ``provider``'s SDK: anthropic, openai, azure or cloudflare."""
        urls = self.base_urls()
        if provider not in urls:
            raise UsageError(f"provider={provider!r} must be one of {', '.join(PROVIDERS)}")
        return urls[provider]

    def env(self) -> dict[str, str]:
        """Environment variables pointing a harness at this server, with dummy keys, and the proxy
        variables of :func:`replaykit.netguard.proxy_env`: it reaches this server and nothing else."""
        return {
            **base_url_env(dict.fromkeys(PROVIDERS, self.url)),
            "ANTHROPIC_API_KEY": DUMMY_KEY,
            "OPENAI_API_KEY": DUMMY_KEY,
            "AZURE_OPENAI_API_KEY": DUMMY_KEY,
            "GEMINI_API_KEY": DUMMY_KEY,
            "GOOGLE_API_KEY": DUMMY_KEY,
            "GOOGLE_CLOUD_ACCESS_TOKEN": DUMMY_KEY,  # Vertex AI's bearer token
            "GOOGLE_CLOUD_PROJECT": "replaykit-project",
            "GOOGLE_CLOUD_LOCATION": "us-central1",
            **proxy_env(self._reachable_host()),
        }

    # ------------------------------------------------------------ what is served

    def load(self, cassettes: CassetteSource | Iterable[CassetteSource], *, add: bool = False) -> None:
        """Replace the loaded cassettes (paths, folders or :class:`~replaykit.cassette.Cassette` objects;
        usage starts afresh), or with ``add`` load them after the others (usage goes on).

        Traffic is judged by the ``profile`` given to the constructor, else by the one the cassettes declare
        (:func:`declared_profile`). Safe to call while serving (``POST /__replaykit/cassettes`` does).
        """
        self._catalogue.load(cassettes, add=add)

    def unload(self, names: Iterable[str] = ()) -> list[str]:
        """Unload the cassettes ``names`` name (as ``x-replaykit-cassette`` does:
        :func:`~replaykit.server.matching.is_named`), every one when none is given; returns the labels
        unloaded."""
        return self._catalogue.unload(names)

    def stub(self, interaction: Interaction) -> dict[str, object]:
        """Add one interaction to the cassette ``<stubs>`` (after the stubs added before): served as if
        recorded. Returns where it went: ``{cassette, index, line, route}``."""
        return self._catalogue.stub(interaction)

    def cassettes(self) -> list[dict[str, object]]:
        """The cassettes loaded, in order: ``{cassette, interactions, routes}`` each."""
        return self._catalogue.listed()

    @property
    def max_body(self) -> int:
        """The bytes a compressed body of a cassette may decode to (``max_body``)."""
        return self._catalogue.max_body

    def inject(self, fault: Fault | str | Mapping[str, object]) -> Fault:
        """Add a fault (a :class:`Fault`, a ``--fault`` spec string or a mapping); returns it."""
        if isinstance(fault, str):
            fault = Fault.parse(fault)
        elif not isinstance(fault, Fault):
            fault = Fault.from_dict(fault)
        with self._state.lock:
            self._state.faults.append(fault)
        return fault

    @property
    def faults(self) -> list[Fault]:
        """The faults declared so far."""
        with self._state.lock:
            return list(self._state.faults)

    @property
    def settings(self) -> Settings:
        """Timing, contract enforcement and the contract profile."""
        return self._state.settings

    @property
    def limits(self) -> Limits:
        """The header and body timeouts and the cap on open connections."""
        return self._state.limits

    @property
    def journal_bodies(self) -> str:
        """How much of each request body the journal keeps: ``head`` (64 KiB) or ``full``."""
        return self._state.journal.bodies

    # ------------------------------------------------------------ what happened

    @property
    def journal(self) -> list[Entry]:
        """One entry per request received so far, in arrival order: the last ``journal_window`` of them
        (``journal_dropped`` counts the others; ``journal_file`` gets every one)."""
        return self._state.journal.entries()

    @property
    def journal_dropped(self) -> int:
        """How many entries left the journal's window since the start or the last reset."""
        return self._state.journal.dropped

    def write_journal(self, path: str | os.PathLike[str]) -> None:
        """Write the journal as JSON Lines, atomically: a snapshot (``journal_file`` is the log written as
        requests complete)."""
        self._state.journal.write_jsonl(path)

    def reset(self) -> None:
        """Forget the journal, the counters, the faults, and which interactions were served."""
        self._state.reset()

    def unused(self, *, session: bool = False) -> list[dict[str, object]]:
        """Interactions never delivered whole since the last :meth:`reset` (``session=True``: since they were
        loaded, whatever the resets): ``{cassette, index, line, route}`` each."""
        return self._state.unused(session)

    def kill_points(self) -> list[KillPoint]:
        """The kill points reached so far, in order: a response held after its events were sent (``{seq,
        route, events}``) or a tool call held at its announcement (``{tool, id, nth}``); see the ``kill``
        fault (:mod:`replaykit.server.faults`)."""
        with self._state.lock:
            return list(self._state.kill_points)

    def settled(self, timeout: float = 5.0) -> bool:
        """Wait until every request received is in the journal: one whose client left mid-answer (its target
        ended) is journaled only once the server has seen it go. False when ``timeout`` seconds (a bound on
        a hang, not a wait) pass first."""
        return self._state.settled(timeout)

    def when_received(self, route: str, nth: int, action: Callable[[], None]) -> Callable[[], None]:
        """Call ``action`` once the ``nth`` request on ``route`` (a route or provider name, as faults select
        it; counted since the last :meth:`reset`) has arrived, before it is answered: in the server thread,
        under the provider's lock (quick, and never calling back into the provider), or here at once when it
        has arrived already. Returns the function that withdraws it. No polling: the arrival takes it."""
        return self._state.when_received(Arrival(route, nth, action))

    @property
    def tool_hook(self) -> str:
        """The URL a target announces its tool calls to (``POST``, ``{name, id}``): where a ``kill`` fault
        with ``tool`` holds one."""
        return f"{self.url}/__replaykit/tool-calls"

    def unmatched(self) -> list[Entry]:
        """Journal entries of requests no recorded interaction matched (with their near misses)."""
        return [entry for entry in self.journal if entry.verdict == "unmatched"]

    def check_errors(self) -> None:
        """Re-raise, in this thread, the first exception raised while serving (and forget them all)."""
        with self._state.lock:
            errors, self._state.errors[:] = list(self._state.errors), []
        if errors:
            raise errors[0]

    def check(self, *, unused: bool = False) -> None:
        """Raise the server's errors, then :class:`MatchError` for unmatched requests (and unused ones)."""
        self.check_errors()
        problems = [_describe_unmatched(entry) for entry in self.unmatched()]
        if unused:
            problems += [
                f"interaction {u['cassette']}#{u['index']} on {u['route']} was never served"
                for u in self.unused()
            ]
        if problems:
            raise MatchError("; ".join(problems))


def _describe_unmatched(entry: Entry) -> str:
    near = " | ".join(near_text(miss) for miss in entry.near_misses)
    return f"request {entry.seq} {entry.method} {entry.path}: {entry.error}" + (
        f"; near misses: {near}" if near else ""
    )
