"""``FakeProvider``: the server (its lane and aiohttp's, :func:`~replaykit.server.app.make_server`) run in a
background thread with its own event loop (uvloop's where installed).

The caller's thread binds the socket (so a busy port fails in ``start()``), the server thread runs the
loop; every mutation from the caller goes through the state's lock. Exceptions raised while handling a
request are stored and re-raised in the caller's thread by :meth:`FakeProvider.check_errors` (and on leaving
the ``with`` block), never swallowed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import TracebackType
from typing import Any

from aiohttp import web

from replaykit import cassette as cassette_mod
from replaykit.cassette import Cassette, Interaction
from replaykit.contracts import Profile, resolve_profile
from replaykit.errors import MatchError, UsageError
from replaykit.netguard import proxy_env
from replaykit.resources import find_cassette
from replaykit.routes import PROVIDERS, base_url_env, base_urls, classify_uri
from replaykit.server import admin
from replaykit.server.app import Settings, State, make_server
from replaykit.server.background import Background, bind, cancel_pending, new_loop
from replaykit.server.connections import BODY_DEADLINE, BODY_TIMEOUT, HEADER_TIMEOUT, MAX_CONNECTIONS, Limits
from replaykit.server.faults import Fault
from replaykit.server.journal import WINDOW, Entry, Journal
from replaykit.server.matching import DEFAULT_VOLATILE, Matcher, Pool, Slot, is_named, near_text, slots_of
from replaykit.server.plan import Timing

__all__ = ["DUMMY_KEY", "CassetteSource", "FakeProvider", "check_host", "declared_profile", "new_loop"]

CassetteSource = str | os.PathLike[str] | Cassette
DUMMY_KEY = "replaykit-dummy-key"
STUBS = "<stubs>"  # the cassette that interactions added one by one (stub()) go to
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


def _sources(cassettes: CassetteSource | Iterable[CassetteSource]) -> list[CassetteSource]:
    if isinstance(cassettes, str | os.PathLike | Cassette):
        return [cassettes]
    return list(cassettes)


def _loaded(cassettes: CassetteSource | Iterable[CassetteSource],
            max_body: int = cassette_mod.MAX_BODY) -> list[tuple[str, Cassette]]:
    """Each cassette named (files, folders of them, or :class:`Cassette` objects) with its label, in order;
    a name is found as the command line finds it (:func:`~replaykit.resources.find_cassette`: as given, else
    among the bundled cassettes); a file's compressed bodies may decode to ``max_body`` bytes at most."""
    loaded: list[tuple[str, Cassette]] = []
    for number, source in enumerate(_sources(cassettes)):
        if isinstance(source, Cassette):
            loaded.append((str(source.path) if source.path else f"<cassette {number}>", source))
            continue
        loaded += [(str(path), cassette_mod.load(path, max_body=max_body))
                   for path in cassette_mod.iter_paths([find_cassette(source)])]
    return loaded


def declared_profile(loaded: Iterable[tuple[str, Cassette]]) -> Profile:
    """The contract profile the cassettes declare (``replaykit: {profile: ...}``), ``strict`` when none does;
    cassettes that declare different ones are a usage error (choose one with ``profile=`` / ``--profile``)."""
    named = {label: tape.meta.extra["profile"] for label, tape in loaded if "profile" in tape.meta.extra}
    if len(set(named.values())) > 1:
        listed = ", ".join(f"{label}: {name}" for label, name in named.items())
        raise UsageError(f"the cassettes declare different contract profiles ({listed}); "
                         "choose one with --profile (profile=...)")
    return resolve_profile(next(iter(named.values()), None))


class FakeProvider:
    """A loopback fake of the Anthropic, OpenAI, Azure and Cloudflare APIs; see :mod:`replaykit.server`."""

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
        faults: Iterable[Fault | str | Mapping[str, Any]] = (),
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
    ) -> None:
        check_host(host, allow_remote)
        self.host, self._port = host, port
        self._profile = None if profile is None else resolve_profile(profile)
        self._journal_file, self._max_body = journal_file, max_body
        self._tapes: list[tuple[str, Cassette]] = []
        settings = Settings(timing if isinstance(timing, Timing) else Timing.parse(timing), enforce_contracts)
        try:
            pool = Pool((), match_on=list(match_on), volatile=volatile, strict=strict, repeat=repeat)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        limits = Limits(header_timeout, body_timeout, max_connections, body_deadline)
        self._state = State(pool, settings, journal=Journal(journal_bodies, journal_window),
                            limits=limits, watch=watch)
        self._state.host = self
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
        self._state.closing = asyncio.Event()
        self._runner = web.ServerRunner(
            make_server(self._state, admin.answer, access_log=None), handle_signals=False,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
        )
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
            **proxy_env(self._reachable_host()),
        }

    # ------------------------------------------------------------ what is served

    def load(self, cassettes: CassetteSource | Iterable[CassetteSource], *, add: bool = False) -> None:
        """Replace the loaded cassettes (paths, folders or :class:`Cassette` objects; usage starts afresh), or
        with ``add`` load them after the others (usage goes on).

        Traffic is judged by the ``profile`` given to the constructor, else by the one the cassettes declare
        (:func:`declared_profile`). Safe to call while serving (``POST /__replaykit/cassettes`` does).
        """
        loaded = _loaded(cassettes, self._max_body)
        with self._state.lock:
            kept = self._tapes if add else []
            slots = [*self._state.pool.slots] if add else []
            self._install([*kept, *loaded], slots + [s for label, tape in loaded
                                                     for s in slots_of(label, tape.interactions)])

    def _install(self, tapes: list[tuple[str, Cassette]], slots: list[Slot]) -> None:
        """Serve ``slots`` from now on, judged by the profile ``tapes`` declare (call under the lock)."""
        profile = self._profile or declared_profile(tapes)
        self._tapes, self._state.pool.slots = tapes, slots
        self._state.settings = replace(self._state.settings, profile=profile)

    def unload(self, names: Iterable[str] = ()) -> list[str]:
        """Unload the cassettes ``names`` name (as ``x-replaykit-cassette`` does:
        :func:`~replaykit.server.matching.is_named`), every one when none is given; returns the labels
        unloaded."""
        wanted = list(names)
        with self._state.lock:
            labels = list(dict.fromkeys(s.cassette for s in self._state.pool.slots))
            gone = [label for label in labels if not wanted or any(is_named(label, n) for n in wanted)]
            self._install([(label, tape) for label, tape in self._tapes if label not in gone],
                          [slot for slot in self._state.pool.slots if slot.cassette not in gone])
        return gone

    def stub(self, interaction: Interaction) -> dict[str, Any]:
        """Add one interaction to the cassette ``<stubs>`` (after the stubs added before): served as if
        recorded. Returns where it went: ``{cassette, index, line, route}``."""
        with self._state.lock:
            slots = self._state.pool.slots
            index = sum(1 for slot in slots if slot.cassette == STUBS)
            route = classify_uri(interaction.request.method, interaction.request.uri)
            slot = Slot(STUBS, index, interaction, route)
            self._state.pool.slots = [*slots, slot]
        return {**slot.where(), "route": route.name}

    def cassettes(self) -> list[dict[str, Any]]:
        """The cassettes loaded, in order: ``{cassette, interactions, routes}`` each."""
        rows: dict[str, dict[str, Any]] = {}
        with self._state.lock:
            for slot in self._state.pool.slots:
                row = rows.setdefault(slot.cassette, {"cassette": slot.cassette, "interactions": 0,
                                                      "routes": []})
                row["interactions"] += 1
                if slot.route.name not in row["routes"]:
                    row["routes"].append(slot.route.name)
        return list(rows.values())

    @property
    def max_body(self) -> int:
        """The bytes a compressed body of a cassette may decode to (``max_body``)."""
        return self._max_body

    def inject(self, fault: Fault | str | Mapping[str, Any]) -> Fault:
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

    def unused(self, *, session: bool = False) -> list[dict[str, Any]]:
        """Interactions never delivered whole since the last :meth:`reset` (``session=True``: since they were
        loaded, whatever the resets): ``{cassette, index, line, route}`` each."""
        return self._state.unused(session)

    def kill_points(self) -> list[dict[str, Any]]:
        """The kill points reached so far, in order: a response held after its events were sent (``{seq,
        route, events}``) or a tool call held at its announcement (``{tool, id, nth}``); see the ``kill``
        fault (:mod:`replaykit.server.faults`)."""
        with self._state.lock:
            return list(self._state.kill_points)

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
