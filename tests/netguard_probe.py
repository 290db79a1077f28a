"""One client under replaykit's network guard: ``python netguard_probe.py CLIENT`` (CLIENT: a key of CLIENTS).

``tests/test_netguard_clients.py`` runs it in a network namespace under strace. With the fake provider
serving and a :class:`~replaykit.netguard.NetworkGuard` installed, as in a test that uses the pytest plugin,
the client calls the fake provider, then a name and an address off the machine. Prints JSON:
``{"outcomes": {target: [type names of the exception chain, message] or "ok"}, "refused": [...]}``.
Every client gives up after ``TIMEOUT`` seconds.
"""

from __future__ import annotations

import _socket
import asyncio
import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine
from typing import Any

from replaykit.netguard import NetworkGuard
from replaykit.server import FakeProvider

OFF_MACHINE = ("example.com", "192.0.2.1")  # a name to resolve, and an address (TEST-NET-1, RFC 5737)
TIMEOUT = 2.0


class ChildFailed(Exception):
    """A child process exited with an error."""


def _url(host: str, port: int) -> str:
    return f"http://{host}:{port}/v1/messages"


def _on_uvloop(main: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    import uvloop

    uvloop.run(asyncio.wait_for(main(), TIMEOUT))


# ---------------------------------------------------------------- the clients: each calls host:port once


def socket_create_connection(host: str, port: int) -> None:
    socket.create_connection((host, port), timeout=TIMEOUT).close()


def socket_gethostbyname(host: str, port: int) -> None:
    socket.gethostbyname(host)


def raw_socket_connect(host: str, port: int) -> None:
    sock = _socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT)
        sock.connect((host, port))  # a name: resolved by the C code
    finally:
        sock.close()


def raw_socket_getaddrinfo(host: str, port: int) -> None:
    _socket.getaddrinfo(host, port)


def urllib_request(host: str, port: int) -> None:
    try:
        urllib.request.urlopen(_url(host, port), timeout=TIMEOUT).close()
    except urllib.error.HTTPError as exc:  # the fake provider answered
        exc.close()


def httpx_sync(host: str, port: int) -> None:
    import httpx

    httpx.get(_url(host, port), timeout=TIMEOUT)


def httpx_async_uvloop(host: str, port: int) -> None:
    import httpx

    async def main() -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            await client.get(_url(host, port))

    _on_uvloop(main)


def aiohttp_uvloop(host: str, port: int) -> None:
    import aiohttp

    async def main() -> None:
        async with aiohttp.ClientSession() as session, session.get(_url(host, port)) as response:
            await response.read()

    _on_uvloop(main)


def asyncio_streams(host: str, port: int) -> None:
    asyncio.run(_open_and_close(host, port))


def asyncio_streams_uvloop(host: str, port: int) -> None:
    _on_uvloop(lambda: _open_and_close(host, port))


async def _open_and_close(host: str, port: int) -> None:
    _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), TIMEOUT)
    writer.close()
    await writer.wait_closed()


def uvloop_sock_connect(host: str, port: int) -> None:
    async def main() -> None:
        with socket.socket() as sock:
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, (host, port))

    _on_uvloop(main)


def uvloop_datagram(host: str, port: int) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(asyncio.DatagramProtocol, remote_addr=(host, port))
        transport.close()

    _on_uvloop(main)


def _messages(sdk: Any) -> Any:
    return sdk.messages.create(model="m", max_tokens=1, messages=[{"role": "user", "content": "hi"}])


def _chat(sdk: Any) -> Any:
    return sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


def _sdk(provider: str, call: Callable[[Any], Any], on_uvloop: bool) -> Callable[[str, int], None]:
    """``provider``'s SDK client, sync or async on uvloop, making ``call``; an HTTP status is an answer."""

    def client(host: str, port: int) -> None:
        module = importlib.import_module(provider)
        options = {"base_url": f"http://{host}:{port}", "api_key": "dummy", "max_retries": 0,
                   "timeout": TIMEOUT}
        if not on_uvloop:
            with module.Client(**options) as sdk, contextlib.suppress(module.APIStatusError):
                call(sdk)
            return

        async def main() -> None:
            async with module.AsyncClient(**options) as sdk:
                with contextlib.suppress(module.APIStatusError):
                    await call(sdk)

        _on_uvloop(main)

    return client


def curl(host: str, port: int, env: dict[str, str]) -> None:
    """curl in a child process, which the guard does not reach: only the proxy variables hold it."""
    command = ["curl", "-sS", "-o", os.devnull, "--max-time", str(TIMEOUT), _url(host, port)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT * 5)
    if done.returncode:
        raise ChildFailed(f"curl exited with {done.returncode}: {done.stderr.strip()}")


CLIENTS: dict[str, Callable[[str, int], None]] = {
    **{function.__name__: function for function in [
        socket_create_connection, socket_gethostbyname, raw_socket_connect, raw_socket_getaddrinfo,
        urllib_request, httpx_sync, httpx_async_uvloop, aiohttp_uvloop, asyncio_streams,
        asyncio_streams_uvloop, uvloop_sock_connect, uvloop_datagram,
    ]},
    **{f"{provider}_{mode}": _sdk(provider, call, on_uvloop=mode == "async_uvloop")
       for provider, call in [("anthropic", _messages), ("openai", _chat)]
       for mode in ("sync", "async_uvloop")},
}


# ---------------------------------------------------------------- the run


def _chain(exc: BaseException) -> list[str]:
    """The type names of ``exc`` and the exceptions it was raised from or while handling."""
    names: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(names) < 20:
        names.append(type(current).__name__)
        current = current.__cause__ or current.__context__
    return names


def _outcome(client: Callable[[str, int], None], host: str, port: int) -> Any:
    try:
        client(host, port)
    except Exception as exc:
        return [_chain(exc), str(exc)]
    return "ok"


def main(name: str) -> None:
    without_proxies = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    with FakeProvider() as fake, NetworkGuard() as guard:
        socket.create_connection(("127.0.0.1", fake.port), timeout=TIMEOUT).close()  # strace sees loopback
        env = {**without_proxies, **fake.env()}
        client = CLIENTS.get(name) or (lambda host, port: curl(host, port, env))
        targets = [("127.0.0.1", fake.port), *[(host, 80) for host in OFF_MACHINE]]
        outcomes = {host: _outcome(client, host, port) for host, port in targets}
    print(json.dumps({"outcomes": outcomes, "refused": guard.refused}))


if __name__ == "__main__":
    main(sys.argv[1])
