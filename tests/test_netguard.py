"""replaykit.netguard: while the guard is installed only loopback is reachable; nothing is resolved or sent.

Every check runs above a :class:`Floor` standing in for the socket functions beneath the guard: it records
each call that reaches it and raises :class:`Reached` for one that would touch the network, so a guard that
let a call through fails the test instead of sending traffic, and "refused before anything connects" is
``floor.calls == []``.
"""

from __future__ import annotations

import _socket
import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from replaykit.errors import NetworkBlockedError, ReplaykitError, UsageError
from replaykit.netguard import (
    DEFAULT_HINT,
    NO_PROXY,
    REFUSING_PROXY,
    NetworkGuard,
    is_loopback,
    proxy_env,
    unguard_thread,
)
from replaykit.provenance import classify
from replaykit.server.background import Background

LOOKUPS = ("getaddrinfo", "gethostbyname", "gethostbyname_ex")
CONNECTS = ("connect", "connect_ex")
LOOP_METHODS = ("getaddrinfo", "create_connection", "create_datagram_endpoint")
ENTRY_POINTS = ((socket.socket, "connect", "connect"), (socket.socket, "connect_ex", "connect_ex"),
                (socket, "create_connection", "create_connection"),
                *[(socket, name, name) for name in LOOKUPS],
                *[(_socket, name, f"_socket.{name}") for name in LOOKUPS])
LOOPBACK = frozenset({"127.0.0.1", "127.8.9.10", "localhost", "::1"})  # the floor's own list: no is_loopback
NUMERIC = frozenset({"0.0.0.0", "::", "10.0.0.1", "2001:db8::1"})  # getaddrinfo answers these without DNS


class Reached(AssertionError):
    """A call that would touch the network reached the layer below the guard."""


def _host(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The host a call that reached the floor would go to (None: not an Internet address)."""
    short = name.rsplit(".", 1)[-1]
    if name.startswith("uvloop."):
        return _loop_host(short, args, kwargs)
    if short in LOOKUPS:
        return args[0]
    if short == "create_connection":
        return args[0][0]
    sock, address = args[0], args[1]
    return address[0] if sock.family in (socket.AF_INET, socket.AF_INET6) else None


def _loop_host(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if name == "getaddrinfo":
        return args[1]
    if name == "create_connection":
        return kwargs.get("host", args[2] if len(args) > 2 else None)
    remote = kwargs.get("remote_addr")
    return remote[0] if remote else None


class Floor:
    """Stands in beneath the guard: records ``(function, host)`` of every call; refuses network ones."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> Floor:
        for owner, name, label in ENTRY_POINTS:
            monkeypatch.setattr(owner, name, self._wrap(getattr(owner, name), label))
        raw, loop = _socket.socket, uvloop.Loop
        below = {name: self._wrap(getattr(raw, name), f"_socket.{name}") for name in CONNECTS}
        monkeypatch.setattr(_socket, "socket", type("socket", (raw,), below))
        for name in LOOP_METHODS:
            monkeypatch.setattr(loop, name, self._wrap_async(getattr(loop, name), f"uvloop.{name}"))
        return self

    def _wrap(self, original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def below(*args: Any, **kwargs: Any) -> Any:
            self._reach(name, args, kwargs)
            return original(*args, **kwargs)

        return below

    def _wrap_async(self, original: Callable[..., Any], name: str) -> Callable[..., Any]:
        async def below(*args: Any, **kwargs: Any) -> Any:
            self._reach(name, args, kwargs)
            return await original(*args, **kwargs)

        return below

    def _reach(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        host = _host(name, args, kwargs)
        self.calls.append((name, host))
        numeric = name.endswith("getaddrinfo") and host in NUMERIC
        if host is not None and host not in LOOPBACK and not numeric:
            raise Reached(f"{name} reached the layer below the guard for {host!r}")


@pytest.fixture
def floor(monkeypatch: pytest.MonkeyPatch) -> Floor:
    return Floor().install(monkeypatch)


@pytest.fixture
def guard(floor: Floor) -> Iterator[NetworkGuard]:
    with NetworkGuard("use the fake provider") as installed:
        yield installed


def _snapshot() -> list[Any]:
    methods = vars(socket.socket)
    return [methods.get("connect"), methods.get("connect_ex"), socket.create_connection,
            *[getattr(module, name) for module in (socket, _socket) for name in LOOKUPS], _socket.socket,
            *[vars(uvloop.Loop).get(name) for name in LOOP_METHODS]]


# ---------------------------------------------------------------- which hosts are loopback


@pytest.mark.parametrize(
    "host",
    ["localhost", "LocalHost", "localhost.", "127.0.0.1", "127.8.9.10", "127.255.255.254", "::1", "[::1]",
     "::ffff:127.0.0.1", b"127.0.0.1", b"localhost", "::1%lo"],
)
def test_loopback_hosts(host: object) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host", ["example.com", "localhost.example.com", "my-localhost", "10.0.0.1", "128.0.0.1", "0.0.0.0", "::",
             "::2", "::ffff:10.0.0.1", "2001:db8::1", "", "[]", None, 2130706433, b"example.com"]
)
def test_other_hosts_without_resolving_them(host: object, floor: Floor) -> None:
    assert not is_loopback(host)
    assert floor.calls == []  # judged by its text alone: no lookup


# ---------------------------------------------------------------- every entry point refuses


def _connect(host: str, port: int) -> Any:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        return sock.connect((host, port))


def _connect_ex(host: str, port: int) -> Any:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        return sock.connect_ex((host, port))


def _raw(method: str) -> Callable[[str, int], Any]:
    """A call of ``method`` on the C socket type (``_socket.socket``)."""

    def call(host: str, port: int) -> Any:
        sock = _socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            return getattr(sock, method)((host, port))
        finally:
            sock.close()

    return call


LOOP_CALLS: dict[str, Callable[[asyncio.AbstractEventLoop, str, int], Any]] = {
    "getaddrinfo": lambda loop, host, port: loop.getaddrinfo(host, port),
    "create_connection": lambda loop, host, port: loop.create_connection(asyncio.Protocol, host, port),
    "create_datagram_endpoint": lambda loop, host, port: loop.create_datagram_endpoint(
        asyncio.DatagramProtocol, remote_addr=(host, port)),
}


def _on_uvloop(method: str) -> Callable[[str, int], Any]:
    """A call of ``method`` on uvloop's event loop, which resolves and connects without the socket module."""

    async def call(host: str, port: int) -> Any:
        return await LOOP_CALLS[method](asyncio.get_running_loop(), host, port)

    return lambda host, port: uvloop.run(call(host, port))


ENTRIES: dict[str, Callable[[str, int], Any]] = {
    "socket.connect": _connect,
    "socket.connect_ex": _connect_ex,
    "socket.create_connection": lambda host, port: socket.create_connection((host, port), timeout=1),
    "socket.getaddrinfo": lambda host, port: socket.getaddrinfo(host, port),
    "socket.gethostbyname": lambda host, port: socket.gethostbyname(host),
    "socket.gethostbyname_ex": lambda host, port: socket.gethostbyname_ex(host),
    "_socket.getaddrinfo": lambda host, port: _socket.getaddrinfo(host, port),
    "_socket.gethostbyname": lambda host, port: _socket.gethostbyname(host),
    "_socket.socket.connect": _raw("connect"),
    "_socket.socket.connect_ex": _raw("connect_ex"),
    **{f"uvloop.Loop.{method}": _on_uvloop(method) for method in LOOP_METHODS},
}


def _via(entry: str, host: str) -> str:
    if entry.endswith(LOOKUPS) and host not in NUMERIC:
        return f"a DNS lookup ({entry})"
    return entry


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize(("host", "shown"), [("example.com", "example.com"), ("10.0.0.1", "10.0.0.1"),
                                             ("2001:db8::1", "[2001:db8::1]"), ("0.0.0.0", "0.0.0.0")])
def test_every_entry_point_refuses_before_anything_connects(
    entry: str, host: str, shown: str, guard: NetworkGuard, floor: Floor
) -> None:
    where = shown if "gethostbyname" in entry else f"{shown}:443"  # a bare lookup has no port
    expected = (f"replaykit blocked {_via(entry, host)} to {where}: replay runs offline and may reach "
                "loopback only (localhost, 127.0.0.0/8, ::1); use the fake provider")
    with pytest.raises(NetworkBlockedError) as caught:
        ENTRIES[entry](host, 443)
    assert str(caught.value) == expected
    assert floor.calls == []
    assert guard.refused == [expected]


def test_a_byte_name_is_refused_before_any_lookup(guard: NetworkGuard, floor: Floor) -> None:
    lookup = r"blocked a DNS lookup \(socket.getaddrinfo\) to example.com:80: "
    with pytest.raises(NetworkBlockedError, match=lookup):
        socket.getaddrinfo(b"example.com", 80)
    assert floor.calls == []


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_asyncio_is_refused_before_any_lookup(
    run: Callable[[Any], Any], guard: NetworkGuard, floor: Floor
) -> None:
    with pytest.raises(NetworkBlockedError, match=r"example\.com:443"):
        run(asyncio.open_connection("example.com", 443))
    with pytest.raises(NetworkBlockedError, match=r"10\.0\.0\.1:443"):
        run(asyncio.open_connection("10.0.0.1", 443))
    assert floor.calls == []
    assert len(guard.refused) == 2


# ---------------------------------------------------------------- what passes


def test_loopback_forms_pass(guard: NetworkGuard, floor: Floor) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        socket.create_connection(("localhost", port), timeout=5).close()
        with socket.socket() as sock:
            assert sock.connect_ex(("localhost", port)) == 0
        with socket.socket() as sock:
            sock.connect(("127.0.0.1", port))
        with socket.socket() as sock:  # 127/8 is loopback: refused by the kernel (no listener), not the guard
            assert isinstance(sock.connect_ex(("127.8.9.10", port)), int)
    with socket.socket(socket.AF_INET6) as sock:  # ::1, listened on or not: the kernel answers
        assert isinstance(sock.connect_ex(("::1", port)), int)
    assert socket.getaddrinfo("localhost", port) and socket.getaddrinfo("::1", port)
    assert {name for name, _ in floor.calls} == {"connect", "connect_ex", "create_connection", "getaddrinfo",
                                                 "_socket.getaddrinfo"}  # socket.getaddrinfo calls it
    assert {host for _, host in floor.calls} <= LOOPBACK
    assert guard.refused == []


async def _loopback_on_the_loop(port: int) -> None:
    loop = asyncio.get_running_loop()
    assert await loop.getaddrinfo("localhost", port)
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.close()
    transport, _ = await loop.create_datagram_endpoint(asyncio.DatagramProtocol, remote_addr=("::1", port))
    transport.close()


def test_loopback_passes_the_c_socket_and_uvloop(guard: NetworkGuard, floor: Floor) -> None:
    assert socket.gethostbyname("localhost") and _socket.gethostbyname_ex("127.0.0.1")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        raw = _socket.socket(socket.AF_INET)
        try:
            raw.connect(("127.0.0.1", port))
        finally:
            raw.close()
        uvloop.run(_loopback_on_the_loop(port))
    assert len(floor.calls) >= 6 and {host for _, host in floor.calls} <= LOOPBACK
    assert guard.refused == []


def test_the_c_socket_type_is_subclassed_not_replaced() -> None:
    original = _socket.socket
    with NetworkGuard():
        assert _socket.socket is not original and _socket.socket.__base__ is original
        assert socket.socket.__base__ is original  # the socket module's class is untouched


def test_binding_lookups_and_local_sockets_pass(guard: NetworkGuard, floor: Floor, tmp_path: Path) -> None:
    assert socket.getaddrinfo(None, 0, flags=socket.AI_PASSIVE)
    assert socket.getaddrinfo("0.0.0.0", 0, flags=socket.AI_PASSIVE)  # a local server binding all interfaces
    assert socket.getaddrinfo("::", 0, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    with pytest.raises(NetworkBlockedError):  # a name still needs DNS, passive or not
        socket.getaddrinfo("example.com", 0, flags=socket.AI_PASSIVE)
    with socket.socket(socket.AF_UNIX) as sock, pytest.raises(FileNotFoundError):
        sock.connect(str(tmp_path / "absent.sock"))
    lookups = [(name, host) for host in (None, "0.0.0.0", "::")
               for name in ("getaddrinfo", "_socket.getaddrinfo")]  # socket.getaddrinfo calls _socket's
    assert floor.calls == [*lookups, ("connect", None)]
    assert len(guard.refused) == 1


# ---------------------------------------------------------------- refusals are recorded


def test_refusals_are_recorded_even_when_swallowed(guard: NetworkGuard, floor: Floor) -> None:
    for address in [("10.0.0.1", 80), ("example.com", 443)]:
        with contextlib.suppress(OSError):  # the code under test hides the error: the guard still knows
            socket.create_connection(address, timeout=1)
    assert [line.split(": ")[0] for line in guard.refused] == [
        "replaykit blocked socket.create_connection to 10.0.0.1:80",
        "replaykit blocked socket.create_connection to example.com:443",
    ]
    assert floor.calls == []


def test_the_error_is_a_refused_connection() -> None:
    guard = NetworkGuard()
    error = guard.refuse("2001:db8::1", 443, "socket.connect")
    assert isinstance(error, ReplaykitError) and isinstance(error, ConnectionRefusedError)
    assert str(error).startswith("replaykit blocked socket.connect to [2001:db8::1]:443: ")
    assert str(error).endswith("; " + DEFAULT_HINT)
    assert guard.refused == [str(error)]
    info = classify(error)
    assert (info.code, info.provenance) == ("TRANSPORT_ERROR", "transport")


# ---------------------------------------------------------------- an unguarded thread


def _in_a_thread(call: Callable[[], Any], unguarded: bool) -> BaseException | None:
    """What ``call()`` raised in a new thread (that first called ``unguard_thread`` when ``unguarded``)."""
    raised: list[BaseException] = []

    def run() -> None:
        if unguarded:
            unguard_thread()
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return raised[0] if raised else None


def test_an_unguarded_thread_passes_and_no_other_does(guard: NetworkGuard, floor: Floor) -> None:
    def leave() -> None:
        socket.create_connection(("10.0.0.1", 443))

    assert isinstance(_in_a_thread(leave, unguarded=True), Reached)  # the guard let it through
    assert floor.calls == [("create_connection", "10.0.0.1")] and guard.refused == []
    assert isinstance(_in_a_thread(leave, unguarded=False), NetworkBlockedError)
    with pytest.raises(NetworkBlockedError):  # the thread that installed the guard
        leave()
    assert len(guard.refused) == 2 and len(floor.calls) == 1


@pytest.mark.parametrize("unguarded", [True, False])
def test_a_background_loop_unguarded_resolves_in_unguarded_threads(guard: NetworkGuard, floor: Floor,
                                                                   unguarded: bool) -> None:
    async def setup(sock: socket.socket) -> None:  # a lookup in a thread of the loop's executor
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, socket.gethostbyname, "example.com")

    async def cleanup() -> None:
        pass

    server = Background("probe", setup, cleanup, unguarded=unguarded)
    with pytest.raises(Reached if unguarded else NetworkBlockedError):
        server.start(socket.create_server(("127.0.0.1", 0)))
    assert floor.calls == ([("gethostbyname", "example.com")] if unguarded else [])


# ---------------------------------------------------------------- install and restore


def test_uninstall_restores_the_socket_module() -> None:
    before = _snapshot()
    guard = NetworkGuard()
    with guard:
        assert all(now is not then for now, then in zip(_snapshot(), before, strict=True))
        with pytest.raises(UsageError, match="already installed"):
            guard.install()
    assert _snapshot() == before
    assert "connect" not in vars(socket.socket) and "connect_ex" not in vars(socket.socket)
    assert _socket.socket is socket.socket.__base__
    assert not set(LOOP_METHODS) & set(vars(uvloop.Loop))
    guard.uninstall()  # a second uninstall changes nothing
    assert _snapshot() == before


@pytest.mark.parametrize("failure", [RuntimeError("the test failed"), KeyboardInterrupt()])
def test_the_originals_come_back_after_an_error(failure: BaseException, floor: Floor) -> None:
    before = _snapshot()  # the floor's functions: whatever was installed beneath comes back
    with pytest.raises(type(failure)), NetworkGuard():
        assert _snapshot() != before
        raise failure
    assert _snapshot() == before
    with pytest.raises(NetworkBlockedError), NetworkGuard():
        socket.create_connection(("example.com", 443))
    assert _snapshot() == before
    socket.getaddrinfo("localhost", 80)  # the guard is gone: the floor sees the call again
    assert floor.calls == [("getaddrinfo", "localhost"), ("_socket.getaddrinfo", "localhost")]


# ---------------------------------------------------------------- child processes


def test_proxy_env_sends_a_child_to_a_refusing_proxy() -> None:
    env = proxy_env("192.0.2.7", "localhost")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        assert env[name] == env[name.lower()] == REFUSING_PROXY == "http://127.0.0.1:9"
    assert env["NO_PROXY"] == env["no_proxy"] == "127.0.0.1,localhost,::1,192.0.2.7"
    assert proxy_env()["NO_PROXY"] == ",".join(NO_PROXY)
    assert len(env) == 8
