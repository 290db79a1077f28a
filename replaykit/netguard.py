"""The network guard: while replaying, refuse every connection that is not loopback, before any DNS lookup.

While a :class:`NetworkGuard` is installed, socket connects, ``create_connection``, the lookups (of
:mod:`socket` and :mod:`_socket`) and uvloop's loop refuse a host that is not loopback (:func:`is_loopback`)
with :class:`~replaykit.errors.NetworkBlockedError`, recorded in :attr:`NetworkGuard.refused`; child processes
get :func:`proxy_env` instead. :func:`unguard_thread` lets the recording proxy's serving thread through. Used
by the pytest plugin and the recording proxy; what is and is not guarded is listed in
docs/architecture/modules.md.
"""

from __future__ import annotations

import _socket
import ipaddress
import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from replaykit.errors import NetworkBlockedError, UsageError
from replaykit.jsondoc import JSON

__all__ = ["DEFAULT_HINT", "NO_PROXY", "REFUSING_PROXY", "NetworkGuard", "is_loopback", "proxy_env",
           "unguard_thread"]

DEFAULT_HINT = "point the client at the fake provider's loopback base URL"
REFUSING_PROXY = "http://127.0.0.1:9"
"""The proxy :func:`proxy_env` names: the discard port on loopback, where nothing normally listens, so a
connection is refused at once (and a discard server there would swallow it: still nothing leaves)."""
NO_PROXY = ("127.0.0.1", "localhost", "::1")
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_LOOKUPS = ("getaddrinfo", "gethostbyname", "gethostbyname_ex")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})
_ABSENT = object()
_THREAD = threading.local()  # .outside: this thread's calls pass every guard (unguard_thread)

_Target = tuple[object, object] | None
"""``(host, port)`` a call would reach (port None for a bare lookup), or None: nothing to judge."""


def is_loopback(host: object) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ``::1`` (IPv4-mapped too, ``[...]`` and ``%zone`` allowed).

    Never resolves a name: any other name, an empty or non-string host is not loopback.
    """
    name = _name(host)
    if name in _LOOPBACK_NAMES:
        return True
    address = _address(name)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address is not None and address.is_loopback


def proxy_env(*hosts: str) -> dict[str, str]:
    """Proxy variables for a child process, which the guard does not reach: ``HTTP_PROXY``, ``HTTPS_PROXY``
    and ``ALL_PROXY`` (and their lower-case forms) name :data:`REFUSING_PROXY`, and ``NO_PROXY`` lists
    loopback (:data:`NO_PROXY`) and ``hosts``, so the child reaches those directly and nothing else."""
    env = {}
    for name in _PROXY_VARIABLES:
        env[name] = env[name.lower()] = REFUSING_PROXY
    env["NO_PROXY"] = env["no_proxy"] = ",".join(dict.fromkeys([*NO_PROXY, *hosts]))
    return env


def unguard_thread() -> None:
    """Let every connection and lookup the calling thread makes pass any guard, for as long as it lives:
    for a thread whose one job is to reach the upstream it was given (the recording proxy's), never for the
    code under test."""
    _THREAD.outside = True


def _text(host: object) -> object:
    return host.decode("ascii", "replace") if isinstance(host, bytes) else host


def _name(host: object) -> str | None:
    """``host`` as a bare lower-case name or address (``[...]`` and ``%zone`` removed); None if not text."""
    text = _text(host)
    return text.strip("[]").split("%")[0].lower() if isinstance(text, str) else None


def _address(name: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """A :func:`_name` as an IP address when it is a numeric one (nothing is resolved), else None."""
    try:
        return ipaddress.ip_address(name or "")
    except ValueError:
        return None


class NetworkGuard:
    """While installed (``with``), refuse non-loopback connections and lookups; ``refused`` lists them.

    ``hint`` ends every refusal message: how to reach the fake provider instead, or turn the guard off.
    """

    def __init__(self, hint: str = DEFAULT_HINT) -> None:
        self.hint = hint
        self.refused: list[str] = []
        self._saved: list[tuple[object, str, object]] = []

    def __enter__(self) -> NetworkGuard:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def install(self) -> None:
        """Patch the socket modules and uvloop's loop (undone by :meth:`uninstall`); once at a time."""
        if self._saved:
            raise UsageError("the network guard is already installed")
        for owner, name, wrapper in [*self._socket_patches(), *self._loop_patches()]:
            self._saved.append((owner, name, vars(owner).get(name, _ABSENT)))
            setattr(owner, name, wrapper)

    def uninstall(self) -> None:
        """Restore what :meth:`install` patched (a no-op when not installed)."""
        while self._saved:
            owner, name, original = self._saved.pop()
            if original is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, original)

    def refuse(self, host: object, port: object, via: str) -> NetworkBlockedError:
        """Record a refusal of ``via`` to ``host:port`` (``port`` None: a lookup) and return the error."""
        host = _text(host)
        shown = f"[{host}]" if isinstance(host, str) and ":" in host else str(host)
        where = shown if port is None else f"{shown}:{port}"
        message = (f"replaykit blocked {via} to {where}: replay runs offline and may reach loopback "
                   f"only (localhost, 127.0.0.0/8, ::1); {self.hint}")
        self.refused.append(message)
        return NetworkBlockedError(message)

    def _check(self, target: _Target, via: str, lookup: bool) -> None:
        if target is not None and not is_loopback(target[0]) and not getattr(_THREAD, "outside", False):
            raise self.refuse(target[0], target[1], _lookup(target[0], via) if lookup else via)

    def _socket_patches(self) -> list[tuple[object, str, object]]:
        cls = socket.socket
        lookups = [(module, name) for module in (socket, _socket) for name in _LOOKUPS]
        return [
            (cls, "connect", self._guard(cls.connect, "socket.connect", _connect_target)),
            (cls, "connect_ex", self._guard(cls.connect_ex, "socket.connect_ex", _connect_target)),
            (socket, "create_connection",
             self._guard(socket.create_connection, "socket.create_connection", _create_connection_target)),
            (_socket, "socket", self._raw_socket(_socket.socket)),
            *[(module, name, self._guard(getattr(module, name), f"{module.__name__}.{name}", _lookup_target,
                                         lookup=True)) for module, name in lookups],
        ]

    def _raw_socket(self, original: type[object]) -> type[Any]:
        """A subclass of the C socket type with ``connect`` and ``connect_ex`` guarded."""
        methods = {name: self._guard(getattr(original, name), f"_socket.socket.{name}", _connect_target)
                   for name in ("connect", "connect_ex")}
        return type(original.__name__, (original,), {"__slots__": (), "__module__": original.__module__,
                                                     **methods})

    def _loop_patches(self) -> list[tuple[Any, str, Any]]:
        patches = []
        for loop in _event_loops():
            where = f"{loop.__module__}.{loop.__qualname__}"
            patches += [(loop, name, self._guard_async(getattr(loop, name), f"{where}.{name}", target,
                                                       lookup=name == "getaddrinfo"))
                        for name, target in _LOOP_TARGETS.items()]
        return patches

    def _guard(
        self, original: Callable[..., object], via: str, target: Callable[..., _Target], lookup: bool = False
    ) -> Callable[..., object]:
        def guarded(*args: object, **kwargs: Any) -> Any:
            self._check(target(*args, **kwargs), via, lookup)
            return original(*args, **kwargs)

        return guarded

    def _guard_async(
        self, original: Callable[..., Any], via: str, target: Callable[..., _Target], lookup: bool = False
    ) -> Callable[..., Coroutine[object, object, object]]:
        async def guarded(*args: object, **kwargs: object) -> object:
            self._check(target(*args, **kwargs), via, lookup)
            return await original(*args, **kwargs)

        return guarded


def _event_loops() -> list[type[Any]]:
    """The event loops that resolve and connect without the socket module: uvloop's, where installed."""
    try:
        import uvloop
    except ImportError:  # Windows: uvloop does not exist there
        return []
    return [uvloop.Loop]


# ---------------------------------------------------------------- what each guarded call would reach


def _inet(address: object) -> _Target:
    """An ``AF_INET`` / ``AF_INET6`` address tuple as ``(host, port)``; None for anything else."""
    if not isinstance(address, tuple | list) or not address:
        return None
    return address[0], address[1] if len(address) > 1 else "?"


def _connect_target(sock: Any, address: object, *args: object) -> _Target:
    return _inet(address) if sock.family in (socket.AF_INET, socket.AF_INET6) else None


def _create_connection_target(address: tuple[object, ...], *args: object, **kwargs: object) -> _Target:
    return address[0], address[1]


def _lookup_target(host: object, port: object = None, *args: object, **kwargs: object) -> _Target:
    return None if host is None or _binds(host, args, kwargs) else (host, port)


def _loop_lookup(loop: object, host: object, port: object, **kwargs: object) -> _Target:
    return _lookup_target(host, port, **kwargs)


def _loop_connection(loop: object, factory: object, host: object = None, port: object = None,
                     *args: object, **kwargs: object) -> _Target:
    return None if host is None else (host, port)


def _loop_datagram(loop: object, factory: object, local_addr: object = None, remote_addr: object = None,
                   **kwargs: object) -> _Target:
    return _inet(remote_addr)


_LOOP_TARGETS: dict[str, Callable[..., _Target]] = {
    "getaddrinfo": _loop_lookup,
    "create_connection": _loop_connection,
    "create_datagram_endpoint": _loop_datagram,
}


def _binds(host: object, args: tuple[object, ...], kwargs: JSON) -> bool:
    """A numeric address asked with ``AI_PASSIVE`` (``getaddrinfo``'s 4th optional argument): a bind."""
    flags = args[3] if len(args) > 3 else kwargs.get("flags", 0)
    return _address(_name(host)) is not None and isinstance(flags, int) and bool(flags & socket.AI_PASSIVE)


def _lookup(host: object, via: str) -> str:
    return via if _address(_name(host)) is not None else f"a DNS lookup ({via})"
