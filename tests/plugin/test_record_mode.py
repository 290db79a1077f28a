"""``--replaykit-record-mode`` (pytest-recording's ``--record-mode`` too) with ``--replaykit-upstream``: a
test records its missing cassette through the recording proxy, then replays it; ``none`` never reaches the
upstream.

The upstream is a fake provider started here, on loopback (or on this machine's own non-loopback address,
for the network guard), serving a bundled cassette: it counts the requests that reach it in its journal.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from replaykit import cassette
from replaykit.errors import UsageError
from replaykit.resources import find_cassette
from replaykit.server import FakeProvider

PLAIN, STREAM = "anthropic/web_search.yaml", "anthropic/web_search_stream.yaml"
INNER = '''
import os
import socket

import pytest
from conftest import recorded_body
from replaykit.resources import find_cassette

ASK = recorded_body(find_cassette("anthropic/web_search.yaml"))
STREAMED = recorded_body(find_cassette("anthropic/web_search_stream.yaml"))


def test_search(client):
    message = client.messages.create(**ASK)
    assert [block.type for block in message.content][1:3] == ["server_tool_use", "web_search_tool_result"]


def test_search_then_stream(client):
    test_search(client)
    with client.messages.stream(**{k: v for k, v in STREAMED.items() if k != "stream"}) as stream:
        assert stream.get_final_message().stop_reason == "end_turn"


@pytest.mark.replaykit("mine/named.yaml")
def test_named(client):
    test_search(client)


@pytest.mark.replaykit("anthropic/web_search.yaml")
def test_bundled(client):
    test_search(client)


def test_the_body_stays_guarded(client):
    test_search(client)
    host, port = os.environ["LEAVE_TO"].rsplit(":", 1)
    socket.create_connection((host, int(port)), timeout=5).close()
'''
RECORDED = Path("cassettes/test_inner/test_search.yaml")
SEARCH, THEN_STREAM, GUARDED = ("test_inner.py::test_search", "test_inner.py::test_search_then_stream",
                                "test_inner.py::test_the_body_stays_guarded")


@pytest.fixture
def upstream() -> Iterator[FakeProvider]:
    with FakeProvider([PLAIN, STREAM], repeat=True) as fake:
        yield fake


@pytest.fixture
def inner(rk: pytest.Pytester) -> pytest.Pytester:
    rk.makepyfile(test_inner=INNER)
    return rk


def _upstream(fake: FakeProvider) -> str:
    return f"--replaykit-upstream=anthropic={fake.url}"


def test_once_records_the_missing_cassette_and_none_replays_it(inner: pytest.Pytester,
                                                               upstream: FakeProvider) -> None:
    first = inner.runpytest(SEARCH, "--replaykit-record-mode=once", _upstream(upstream))
    first.assert_outcomes(passed=1)
    first.stdout.re_match_lines([r"=+ replaykit: what the tests recorded =+",
                                 rf"{SEARCH}: {RECORDED} \(1 recorded, 0 replayed, mode once\)"])
    assert [entry.path for entry in upstream.journal] == ["/v1/messages"]
    tape = cassette.load(inner.path / RECORDED)
    assert (tape.meta.origin, tape.meta.provider, len(tape.interactions)) == ("recorded", "anthropic", 1)
    assert tape.meta.recorded_with.startswith("replaykit ") and "contract_warnings" not in tape.meta.extra
    request = tape.interactions[0].request
    assert request.uri == f"{upstream.url}/v1/messages" and request.header("x-api-key") is None  # redacted
    for args in [[], ["--replaykit-record-mode=once"]]:  # none, the default; once, the cassette there
        again = inner.runpytest(SEARCH, _upstream(upstream), *args)
        again.assert_outcomes(passed=1)
        again.stdout.no_re_match_line(r".*what the tests recorded.*")
        assert len(upstream.journal) == 1, "the cassette was replayed, the upstream not reached"


def test_once_records_a_named_cassette_that_is_nowhere_and_replays_one_found(inner: pytest.Pytester,
                                                                            upstream: FakeProvider) -> None:
    result = inner.runpytest("-k", "named or bundled", "--replaykit-record-mode=once", _upstream(upstream))
    result.assert_outcomes(passed=2)
    result.stdout.re_match_lines([r"test_inner.py::test_named: cassettes/mine/named.yaml \(1 recorded, .*"])
    result.stdout.no_re_match_line(r"test_inner.py::test_bundled: .*")
    assert len(upstream.journal) == 1 and (inner.path / "cassettes/mine/named.yaml").is_file()


NONE = {"default": ([], {}), "option": (["--replaykit-record-mode=none"], {}),
        "pytest-recording's option": (["--record-mode=none"], {}),
        "our --record-mode": (["-p", "no:recording", "--record-mode=none"], {}),
        "environment": ([], {"REPLAYKIT_RECORD_MODE": "none"}),
        "ini": (["-o", "replaykit_record_mode=none"], {})}


@pytest.mark.parametrize("how", list(NONE))
def test_none_never_reaches_the_upstream(inner: pytest.Pytester, upstream: FakeProvider,
                                         monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    args, env = NONE[how]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = inner.runpytest(SEARCH, _upstream(upstream), *args)
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([r"requests no recorded interaction matched \(1\).*",
                                  rf"no cassette was named and the default one, {RECORDED}, does not exist: "
                                  r"record it there with --replaykit-record-mode=once .*"], consecutive=False)
    assert upstream.journal == [] and not (inner.path / RECORDED).exists()


@pytest.mark.parametrize("args", [["--record-mode=once"], ["-p", "no:recording", "--record-mode=once"]],
                         ids=["pytest-recording's --record-mode", "ours, without pytest-recording"])
def test_pytest_recordings_spelling_records_too(inner: pytest.Pytester, upstream: FakeProvider,
                                                args: list[str]) -> None:
    inner.runpytest(SEARCH, _upstream(upstream), *args).assert_outcomes(passed=1)
    assert len(upstream.journal) == 1 and (inner.path / RECORDED).is_file()


def test_new_episodes_records_what_the_cassette_lacks_and_all_records_again(
    inner: pytest.Pytester, upstream: FakeProvider
) -> None:
    path = inner.path / "cassettes/test_inner/test_search_then_stream.yaml"
    path.parent.mkdir(parents=True)
    kept = cassette.load(find_cassette(PLAIN))
    kept.meta.origin = "recorded"  # new_episodes adds to a recording only
    cassette.save(kept, path)
    result = inner.runpytest(THEN_STREAM, "--replaykit-record-mode=new_episodes", _upstream(upstream))
    result.assert_outcomes(passed=1)
    assert [entry.body["stream"] for entry in upstream.journal] == [True]  # only the stream went upstream
    assert [item.response.is_stream for item in cassette.load(path).interactions] == [False, True]
    again = inner.runpytest(THEN_STREAM, "--replaykit-record-mode=all", _upstream(upstream))
    again.assert_outcomes(passed=1)
    again.stdout.re_match_lines([r".*test_search_then_stream.yaml \(2 recorded, 0 replayed, mode all\)"])
    assert len(upstream.journal) == 3 and len(cassette.load(path).interactions) == 2


def test_a_recording_that_fails_fails_the_test(inner: pytest.Pytester) -> None:
    result = inner.runpytest(SEARCH, "--replaykit-record-mode=once",
                             "--replaykit-upstream", "anthropic=http://127.0.0.1:9")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([
        r"the recording failed \(2\); fix: give each provider's API as --replaykit-upstream PROVIDER=URL .*",
        r"  the upstream could not be reached 1 time",
        r"  replaykit record: cannot reach http://127.0.0.1:9: .*",
    ], consecutive=False)
    assert not (inner.path / RECORDED).exists()


def test_bad_settings_are_one_line(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAYKIT_RECORD_MODE", "sometimes")
    result = inner.runpytest(SEARCH, "--replaykit-upstream", "cohere=https://x.example")
    result.assert_outcomes(errors=1)
    result.stdout.re_match_lines([r"E? *REPLAYKIT_RECORD_MODE='sometimes' must be one of once, new \(or "
                                  r"new_episodes\), all, none"])
    monkeypatch.delenv("REPLAYKIT_RECORD_MODE")
    result = inner.runpytest(SEARCH, "--replaykit-upstream", "cohere=https://x.example")
    result.stdout.re_match_lines([r"E? *--replaykit-upstream 'cohere=https://x.example' must be PROVIDER="])


def _own_address() -> str:
    """This machine's address on its default route (a UDP connect sends nothing), if it is not loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.123", 9))
        except OSError:
            pytest.skip("no network interface but loopback")
        address: str = probe.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("no network interface but loopback")
    return address


def test_the_proxy_reaches_its_upstream_and_the_test_body_nothing_but_loopback(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = _own_address()  # not loopback for the guard; the packets stay on this machine
    try:
        remote = FakeProvider([PLAIN], host=address, allow_remote=True).start()
    except UsageError as exc:
        pytest.skip(f"cannot listen on {address}: {exc}")
    try:
        monkeypatch.setenv("LEAVE_TO", f"{address}:{remote.port}")
        result = inner.runpytest(GUARDED, "--replaykit-record-mode=once",
                                 f"--replaykit-upstream=anthropic={remote.url}")
        journal = remote.journal
    finally:
        remote.stop()
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([
        rf"E +replaykit.errors.NetworkBlockedError: replaykit blocked socket.create_connection to "
        rf"{address}:{remote.port}: .*",
        r"network connections refused \(1\); .*",
    ], consecutive=False)
    assert len(journal) == 1, "the recording proxy reached the upstream the guard refuses the test"
    recorded = cassette.load(inner.path / "cassettes/test_inner/test_the_body_stays_guarded.yaml")
    assert recorded.interactions[0].request.uri == f"{remote.url}/v1/messages"
