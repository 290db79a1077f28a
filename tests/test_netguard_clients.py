"""Sealed, whatever the client: each kind of client, run under the network guard in a fresh network namespace
(only ``lo``) and traced by strace, reaches the fake provider and nothing else.

The client runs in ``netguard_probe.py`` (the fake provider serving, a guard installed, as in a plugin test),
calling the fake provider, then a name and an address off the machine. From strace's record: no ``connect()``
or datagram to an address that is not loopback and no DNS query (port 53, wherever it goes); from the probe:
the fake provider answered, and each call off the machine ended in the guard's ``NetworkBlockedError``, which
the guard recorded (curl, in a child process the guard does not reach: in the refusing proxy of
``FakeProvider.env()``). Where the machine has no network namespaces, strace or curl, the tests skip and
say why.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from netguard_probe import CLIENTS, OFF_MACHINE

PROBE = Path(__file__).with_name("netguard_probe.py")
pytestmark = pytest.mark.slow

TRACED = "connect,sendto,sendmsg,sendmmsg"
ADDRESS = re.compile(
    r"\b(?P<call>connect|sendto|sendmsg|sendmmsg)\(.*?sa_family=AF_INET6?, sin6?_port=htons\((?P<port>\d+)\)"
    r'.*?(?:inet_addr\("(?P<v4>[^"]+)"\)|inet_pton\(AF_INET6, "(?P<v6>[^"]+)")'
)


class Sent(NamedTuple):
    """A ``connect()`` or datagram strace saw, with its destination."""

    call: str
    host: str
    port: int


def _unavailable() -> str | None:
    """Why the clients cannot be sealed and traced here, or None."""
    missing = [tool for tool in ("unshare", "ip", "strace") if shutil.which(tool) is None]
    if not sys.platform.startswith("linux") or missing:
        return f"needs Linux with unshare, ip and strace (missing: {', '.join(missing) or sys.platform})"
    checks = {"unshare -n (a network namespace)": [*_unshare(), "ip", "link", "set", "lo", "up"],
              "strace (ptrace)": ["strace", "-f", "-o", os.devnull, "true"]}
    for what, command in checks.items():
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
        if done.returncode:
            return f"{what} is not allowed here: {done.stderr.strip() or done.returncode}"
    return None


def _unshare() -> list[str]:
    return ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--net", "--map-root-user"]


@pytest.fixture(scope="module")
def sandbox() -> list[str]:
    """The command that runs a program in a fresh network namespace (``lo`` up) under strace."""
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    return [*_unshare(), "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def _probe(sandbox: list[str], client: str, trace: Path) -> dict[str, Any]:
    strace = ["strace", "-f", "-qq", "-o", str(trace), "-e", f"trace={TRACED}"]
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    done = subprocess.run([*sandbox, *strace, sys.executable, str(PROBE), client], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _sent(trace: Path) -> list[Sent]:
    found = (ADDRESS.search(line) for line in trace.read_text(encoding="utf-8").splitlines())
    return [Sent(m["call"], m["v4"] or m["v6"], int(m["port"])) for m in found if m]


def _leaves(sent: Sent) -> bool:
    address = ipaddress.ip_address(sent.host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_loopback or sent.port == 53


@pytest.mark.parametrize("client", [*CLIENTS, "curl"])
def test_the_client_reaches_the_fake_provider_and_nothing_else(
    sandbox: list[str], client: str, tmp_path: Path
) -> None:
    trace = tmp_path / "strace.txt"
    result = _probe(sandbox, client, trace)
    sent = _sent(trace)
    assert [s for s in sent if _leaves(s)] == []
    assert any(s.call == "connect" for s in sent), "strace saw no connect(): the trace proves nothing"
    outcomes = result["outcomes"]
    assert outcomes.pop("127.0.0.1") == "ok"
    assert list(outcomes) == list(OFF_MACHINE)
    if client == "curl":
        assert all("Failed to connect to 127.0.0.1 port 9" in message for _, message in outcomes.values())
        return
    assert all("NetworkBlockedError" in chain for chain, _ in outcomes.values()), outcomes
    refused = " ".join(result["refused"])
    assert [host for host in OFF_MACHINE if f" to {host}:" not in refused] == []
