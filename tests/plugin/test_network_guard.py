"""The network guard in the plugin: installed for every replaykit test, its refusals fail the test, and the
options turn it off. The guard itself (``replaykit.netguard``) is unit-tested in ``tests/test_netguard.py``.

Every inner test runs above a :class:`Tripwire`, so a guard that let a call through fails the test
(``Tripped``) instead of reaching the network.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ALLOW = r"--replaykit-allow-network \(ini replaykit_allow_network = true, env REPLAYKIT_ALLOW_NETWORK=1\)"


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
            r"E +replaykit.errors.NetworkBlockedError: replaykit blocked socket.create_connection "
            r"to example.com:443: replay runs offline and may reach loopback only "
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
