"""Under pytest-xdist each worker runs its own session server on its own port; the tests pass."""

from __future__ import annotations

import pytest

INNER = '''
import os

import pytest
from conftest import post, recorded_body


@pytest.mark.parametrize("n", range(4))
@pytest.mark.replaykit(cassettes=["anthropic/web_search.yaml"])
def test_replay(replaykit, replaykit_server, n):
    url = replaykit.base_url("anthropic") + "/v1/messages"
    status, body = post(url, recorded_body(replaykit.cassettes[0]))
    assert (status, body["stop_reason"]) == (200, "end_turn")
    assert [e.seq for e in replaykit.journal] == [1]
    worker = os.environ["PYTEST_XDIST_WORKER"]
    with open(os.path.join(os.environ["PORTS"], worker), "a") as out:
        out.write(f"{replaykit_server.port}\\n")
'''


def test_two_workers(rk: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    rk.makepyfile(test_inner=INNER)
    ports = rk.mkdir("ports")
    monkeypatch.setenv("PORTS", str(ports))
    result = rk.runpytest_subprocess("-n", "2", "--dist", "load")
    result.assert_outcomes(passed=4)
    seen = {path.name: set(path.read_text().split()) for path in ports.iterdir()}
    assert sorted(seen) == ["gw0", "gw1"]
    assert all(len(found) == 1 for found in seen.values())  # one session server per worker
    assert seen["gw0"] != seen["gw1"]
