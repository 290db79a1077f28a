"""The network guard: only loopback is reachable while a replaykit test runs; nothing is resolved or sent.

Every check runs above a :class:`Tripwire`, so a guard that let a call through fails the test (``Tripped``)
instead of reaching the network.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from tripwire import Tripped, Tripwire

from replaykit.errors import ReplaykitError, UsageError
from replaykit.pytest_plugin import NetworkBlockedError, NetworkGuard, is_loopback

ALLOW = r"--replaykit-allow-network \(ini replaykit_allow_network = true, env REPLAYKIT_ALLOW_NETWORK=1\)"


@pytest.fixture
def guard(tripwire: Tripwire) -> Iterator[NetworkGuard]:
    with NetworkGuard() as installed:
        yield installed


@pytest.mark.parametrize(
    "host",
    ["localhost", "LocalHost", "localhost.", "127.0.0.1", "127.8.9.10", "::1", "[::1]", "::ffff:127.0.0.1",
     b"127.0.0.1", "::1%lo"],
)
def test_loopback_hosts(host: object) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host", ["example.com", "localhost.example.com", "10.0.0.1", "128.0.0.1", "0.0.0.0", "::", "::2",
             "::ffff:10.0.0.1", "", None, 2130706433]
)
def test_other_hosts(host: object) -> None:
    assert not is_loopback(host)


def test_a_name_is_refused_before_any_lookup(guard: NetworkGuard, tripwire: Tripwire) -> None:
    refused = rf"blocked socket.create_connection to example.com:443: .*{ALLOW}"
    with pytest.raises(NetworkBlockedError, match=refused):
        socket.create_connection(("example.com", 443), timeout=1)
    lookup = r"blocked a DNS lookup \(socket.getaddrinfo\) to example.com:443"
    with pytest.raises(NetworkBlockedError, match=lookup):
        socket.getaddrinfo("example.com", 443)
    assert tripwire.reached == []
    assert len(guard.refused) == 2


def test_an_address_is_refused_before_connecting(guard: NetworkGuard, tripwire: Tripwire) -> None:
    with pytest.raises(NetworkBlockedError, match=r"blocked socket.create_connection to 10.0.0.1:80: "):
        socket.create_connection(("10.0.0.1", 80), timeout=1)
    with socket.socket() as sock:
        with pytest.raises(NetworkBlockedError, match=r"blocked socket.connect to 10.0.0.1:80: "):
            sock.connect(("10.0.0.1", 80))
        with pytest.raises(NetworkBlockedError, match=r"blocked socket.connect_ex to 10.0.0.1:80: "):
            sock.connect_ex(("10.0.0.1", 80))
    assert tripwire.reached == []
    assert [line.split(":")[0] for line in guard.refused] == [
        "replaykit blocked socket.create_connection to 10.0.0.1",
        "replaykit blocked socket.connect to 10.0.0.1",
        "replaykit blocked socket.connect_ex to 10.0.0.1",
    ]


def test_asyncio_clients_are_refused_before_any_lookup(guard: NetworkGuard, tripwire: Tripwire) -> None:
    with pytest.raises(NetworkBlockedError, match=r"example\.com:443"):
        asyncio.run(asyncio.open_connection("example.com", 443))
    assert tripwire.reached == []


def test_the_error_is_a_refused_connection() -> None:
    error = NetworkGuard().refuse("2001:db8::1", 443, "socket.connect")
    assert isinstance(error, ReplaykitError) and isinstance(error, ConnectionRefusedError)
    assert str(error).startswith("replaykit blocked socket.connect to [2001:db8::1]:443: ")


def test_loopback_and_local_sockets_pass(guard: NetworkGuard, tripwire: Tripwire, tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        with socket.socket() as sock:
            assert sock.connect_ex(("localhost", port)) == 0
    assert socket.getaddrinfo(None, 0, flags=socket.AI_PASSIVE)
    with pytest.raises(Tripped):  # a numeric address needs no lookup: the guard lets the tripwire see it
        socket.getaddrinfo("10.0.0.1", 80)
    with socket.socket(socket.AF_UNIX) as sock, pytest.raises(FileNotFoundError):
        sock.connect(str(tmp_path / "absent.sock"))
    assert guard.refused == []


def test_uninstall_restores_the_socket_module() -> None:
    before = [vars(socket.socket).get("connect"), socket.create_connection, socket.getaddrinfo]
    guard = NetworkGuard()
    with guard:
        assert socket.create_connection is not before[1]
        with pytest.raises(UsageError, match="already installed"):
            guard.install()
    assert [vars(socket.socket).get("connect"), socket.create_connection, socket.getaddrinfo] == before
    assert "connect" not in vars(socket.socket)


INNER = '''
import socket

import pytest

ORIGINAL = (socket.socket.connect, socket.socket.connect_ex, socket.create_connection, socket.getaddrinfo)


def current():
    return (socket.socket.connect, socket.socket.connect_ex, socket.create_connection, socket.getaddrinfo)


def test_uncaught(tripwire, replaykit):
    socket.create_connection(("example.com", 443), timeout=1)


@pytest.mark.replaykit
def test_swallowed_by_the_code_under_test(tripwire):
    for address in [("10.0.0.1", 80), ("example.com", 443)]:
        try:
            socket.create_connection(address, timeout=1)
        except OSError:
            pass


def test_an_sdk_pointed_at_the_real_api(tripwire, replaykit, monkeypatch):
    import anthropic

    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)  # the SDK's own connection must be the one refused
    with anthropic.Anthropic(base_url="https://api.anthropic.com", api_key="dummy", max_retries=0) as sdk:
        with pytest.raises(anthropic.APIConnectionError):
            sdk.messages.create(model="m", max_tokens=1, messages=[{"role": "user", "content": "hi"}])


def test_guard_off(replaykit):
    assert current() == ORIGINAL


def test_restored_after_the_replaykit_tests():
    assert current() == ORIGINAL
'''
TRIPWIRE = (Path(__file__).parent / "tripwire.py").read_text(encoding="utf-8")
INNER_FIXTURE = '''
@pytest.fixture
def tripwire(monkeypatch):
    from tripwire import Tripwire
    return Tripwire().install(monkeypatch)
'''


@pytest.fixture
def inner(rk: pytest.Pytester) -> pytest.Pytester:
    rk.makepyfile(test_inner=INNER, tripwire=TRIPWIRE)
    (rk.path / "conftest.py").write_text((rk.path / "conftest.py").read_text() + INNER_FIXTURE)
    return rk


def test_refusals_fail_the_test(inner: pytest.Pytester) -> None:
    result = inner.runpytest("-rA", "--tb=short")
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.re_match_lines(
        [
            r"_+ test_uncaught _+",
            r"E +replaykit.pytest_plugin.NetworkBlockedError: replaykit blocked socket.create_connection "
            r"to example.com:443: a replaykit test runs offline and may reach loopback only "
            r"\(localhost, 127.0.0.0/8, ::1\); point the client at replaykit.base_url\(...\) or "
            rf"replaykit.env\(\), or allow the network with {ALLOW}",
            r"-+ Captured replaykit call -+",
            r"network connections refused \(1\); fix: point the client at replaykit.base_url.*",
            r"_+ test_swallowed_by_the_code_under_test _+",
            r"network connections refused \(2\); .*",
            r"  replaykit blocked socket.create_connection to 10.0.0.1:80: .*",
            r"  replaykit blocked socket.create_connection to example.com:443: .*",
            r"_+ test_an_sdk_pointed_at_the_real_api _+",
            r"network connections refused \(1\); .*",
            r"  replaykit blocked socket.create_connection to api.anthropic.com:443: .*",
            r"_+ test_guard_off _+",
        ]
    )
    result.stdout.re_match_lines([r"PASSED test_inner.py::test_restored_after_the_replaykit_tests"])
    result.stdout.no_re_match_line(r".*(Tripped|reached the layer below).*")


@pytest.mark.parametrize("how", ["option", "env", "ini"])
def test_the_guard_can_be_turned_off(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    args = ["-k", "guard_off or restored"]
    if how == "option":
        args.append("--replaykit-allow-network")
    elif how == "env":
        monkeypatch.setenv("REPLAYKIT_ALLOW_NETWORK", "1")
    else:
        args += ["-o", "replaykit_allow_network=true"]
    inner.runpytest(*args).assert_outcomes(passed=2)
