"""The network guard: while replaying, refuse every connection that is not loopback, before any DNS lookup.

While a :class:`NetworkGuard` is installed (``with NetworkGuard(): ...``), four entry points of the
:mod:`socket` module refuse a host that is not loopback (``localhost``, 127.0.0.0/8, ``::1``, also
IPv4-mapped) with :class:`~replaykit.errors.NetworkBlockedError`, before the original function runs, so no
name is resolved and no packet leaves the machine:

- ``socket.socket.connect`` and ``connect_ex`` (``AF_INET`` / ``AF_INET6`` only: Unix sockets pass);
- ``socket.create_connection``, before it looks the name up;
- ``socket.getaddrinfo``: a name, or an address that is not loopback. A numeric address asked with
  ``AI_PASSIVE`` (binding a local server to ``0.0.0.0`` or ``::``) needs no lookup and passes, and so does
  ``host=None``.

asyncio, httpx, aiohttp, urllib and the provider SDKs all come down to these. Each refusal is recorded in
:attr:`NetworkGuard.refused` (so a caller that swallows the error is still found out). The patches are
process-wide while installed (every thread); :meth:`NetworkGuard.uninstall` puts the originals back. What
does not go through them is not guarded: datagrams sent with ``sendto`` without ``connect``, and resolvers
that speak DNS themselves (c-ares through ``aiodns``); their connections are still refused.

Hosts are judged by :func:`is_loopback`, with :mod:`ipaddress`: a name is never resolved to decide.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from replaykit.errors import NetworkBlockedError, UsageError

__all__ = ["DEFAULT_HINT", "NetworkGuard", "is_loopback"]

DEFAULT_HINT = "point the client at the fake provider's loopback base URL"
_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})
_ABSENT = object()


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
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> NetworkGuard:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def install(self) -> None:
        """Patch the socket module (undone by :meth:`uninstall`); a guard is installed once at a time."""
        if self._saved:
            raise UsageError("the network guard is already installed")
        cls = socket.socket
        patches = [
            (cls, "connect", self._connect(cls.connect, "socket.connect")),
            (cls, "connect_ex", self._connect(cls.connect_ex, "socket.connect_ex")),
            (socket, "create_connection", self._create_connection(socket.create_connection)),
            (socket, "getaddrinfo", self._getaddrinfo(socket.getaddrinfo)),
        ]
        for owner, name, wrapper in patches:
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
        """Record a refusal of ``via`` to ``host:port`` and return the error to raise."""
        host = _text(host)
        shown = f"[{host}]" if isinstance(host, str) and ":" in host else str(host)
        message = (f"replaykit blocked {via} to {shown}:{port}: replay runs offline and may reach loopback "
                   f"only (localhost, 127.0.0.0/8, ::1); {self.hint}")
        self.refused.append(message)
        return NetworkBlockedError(message)

    def _check(self, host: object, port: object, via: str) -> None:
        if not is_loopback(host):
            raise self.refuse(host, port, via)

    def _connect(self, original: Callable[..., Any], via: str) -> Callable[..., Any]:
        def connect(sock: socket.socket, address: Any) -> Any:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
                self._check(address[0], address[1] if len(address) > 1 else "?", via)
            return original(sock, address)

        return connect

    def _create_connection(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def create_connection(address: tuple[Any, ...], *args: Any, **kwargs: Any) -> Any:
            self._check(address[0], address[1], "socket.create_connection")
            return original(address, *args, **kwargs)

        return create_connection

    def _getaddrinfo(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if host is not None and not is_loopback(host) and not _binds(host, args, kwargs):
                raise self.refuse(host, port, _lookup(host))
            return original(host, port, *args, **kwargs)

        return getaddrinfo


def _binds(host: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A numeric address asked with ``AI_PASSIVE`` (``getaddrinfo``'s 4th optional argument): a bind."""
    flags = args[3] if len(args) > 3 else kwargs.get("flags", 0)
    return _address(_name(host)) is not None and isinstance(flags, int) and bool(flags & socket.AI_PASSIVE)


def _lookup(host: object) -> str:
    return "socket.getaddrinfo" if _address(_name(host)) is not None else "a DNS lookup (socket.getaddrinfo)"
