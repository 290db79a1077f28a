"""A test double beneath the network guard: a non-loopback lookup or connection that gets past the guard is
recorded and refused here, so a broken guard makes a test fail instead of sending traffic.

Install it before the guard (request the ``tripwire`` fixture before ``replaykit``); the guard then wraps it.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["LOOPBACK", "Tripped", "Tripwire"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
PATCHED = ((socket, "getaddrinfo"), (socket, "create_connection"), (socket.socket, "connect"),
           (socket.socket, "connect_ex"))


class Tripped(AssertionError):
    """A lookup or connection reached the layer below the guard."""


def _host(name: str, args: tuple[Any, ...]) -> Any:
    if name == "getaddrinfo":
        return args[0]
    if name == "create_connection":
        return args[0][0]
    sock, address = args[0], args[1]
    inet = sock.family in (socket.AF_INET, socket.AF_INET6)
    return address[0] if inet and isinstance(address, tuple) else None


class Tripwire:
    """Records ``(function, host)`` of each non-loopback call reaching it; raises :class:`Tripped`."""

    def __init__(self) -> None:
        self.reached: list[tuple[str, Any]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> Tripwire:
        """Wrap the socket functions (``monkeypatch`` undoes it)."""
        for owner, name in PATCHED:
            monkeypatch.setattr(owner, name, self._wrap(getattr(owner, name), name))
        return self

    def _wrap(self, original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            host = _host(name, args)
            if host is not None and host not in LOOPBACK:
                self.reached.append((name, host))
                raise Tripped(f"{name} reached the layer below the guard for {host!r}")
            return original(*args, **kwargs)

        return wrapper
