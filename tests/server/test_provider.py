"""``FakeProvider``'s lifecycle: loopback only, start / stop, loading, env, errors re-raised in the test."""

from __future__ import annotations

import asyncio
import shutil
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from recordings import recorded
from server_support import anthropic_request, message_cassette, stream_cassette, stream_request

from replaykit.cassette import Request
from replaykit.errors import CassetteError, UsageError
from replaykit.netguard import REFUSING_PROXY
from replaykit.resources import data_dir
from replaykit.server import DUMMY_KEY, FakeProvider, Received, provider
from replaykit.server.provider import check_host


@pytest.mark.parametrize("host", ["10.0.0.1", "0.0.0.0", "::", "192.168.1.20"])
def test_a_non_loopback_host_is_refused(host: str) -> None:
    with pytest.raises(UsageError, match="not a loopback address"):
        FakeProvider(host=host)


def test_allow_remote_lifts_the_refusal() -> None:
    check_host("0.0.0.0", allow_remote=True)
    check_host("::1", allow_remote=False)
    check_host("localhost", allow_remote=False)
    with pytest.raises(UsageError, match="must be an IP address or localhost"):
        check_host("example.com", allow_remote=False)


def test_start_and_stop(tmp_path: Path) -> None:
    fake = FakeProvider(message_cassette("a"))
    assert not fake.running and fake.port == 0
    fake.start()
    try:
        assert fake.running and fake.port > 0
        assert httpx.post(f"{fake.url}/v1/messages").status_code == 200
        with pytest.raises(UsageError, match="already running"):
            fake.start()
    finally:
        fake.stop()
    assert not fake.running
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{fake.url}/v1/messages")
    fake.stop()  # stopping twice is harmless


def test_a_busy_port_fails_in_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        fake = FakeProvider(port=taken.getsockname()[1])
        with pytest.raises(UsageError, match=r"cannot listen on 127\.0\.0\.1"):
            fake.start()
    assert not fake.running


def test_ipv6_loopback(serve: Any) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        fake = serve(message_cassette("six"), host="::1")
    except UsageError as exc:
        pytest.skip(f"IPv6 loopback unavailable: {exc}")
    assert fake.url.startswith("http://[::1]:")
    assert httpx.post(f"{fake.url}/v1/messages").json()["content"][0]["text"] == "six"


def test_stop_ends_a_stalled_response(serve: Any) -> None:
    fake = serve(stream_cassette(), faults=["kind=stall,after=1"])
    received: list[bytes] = []
    failure: list[BaseException] = []

    def client() -> None:
        try:
            url = f"{fake.url}/v1/messages"
            with httpx.Client(timeout=30) as session, session.stream("POST", url, json=stream_request()) as r:
                received.extend(r.iter_raw())
        except httpx.HTTPError as exc:
            failure.append(exc)

    thread = threading.Thread(target=client)
    thread.start()
    while not fake.journal:
        threading.Event().wait(0.01)
    fake.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert len(received) == 1 and failure  # the client saw the stream end early, not a hang


def test_errors_in_the_server_thread_are_re_raised_in_the_caller() -> None:
    def broken(received: Received, recorded: Request) -> bool:
        raise RuntimeError("matcher bug")

    fake = FakeProvider(message_cassette("a"), match_on=[broken])
    with pytest.raises(RuntimeError, match="matcher bug"), fake:
        response = httpx.post(f"{fake.url}/v1/messages", json=anthropic_request())
        assert response.status_code == 500
        assert "RuntimeError: matcher bug" in response.headers["x-replaykit-error"]
        assert response.headers["x-should-retry"] == "false"
        assert fake.journal[0].verdict == "error"
    fake.check_errors()  # raised once, then forgotten


def test_check_errors_raises_the_first_error(serve: Any) -> None:
    calls: list[int] = []

    def broken(received: Received, recorded: Request) -> bool:
        calls.append(1)
        raise KeyError(len(calls))

    fake = serve(message_cassette("a"), match_on=[broken])
    httpx.post(f"{fake.url}/v1/messages")
    httpx.post(f"{fake.url}/v1/messages")
    with pytest.raises(KeyError, match="1"):
        fake.check_errors()
    fake.check_errors()


def test_load_replaces_the_cassettes(serve: Any, tmp_path: Path) -> None:
    fake = serve(message_cassette("old"))
    fake.load([message_cassette("new")])
    assert httpx.post(f"{fake.url}/v1/messages").json()["content"][0]["text"] == "new"
    fake.load(recorded("pydantic-ai__anthropic_web_search_tool.yaml").parent)  # a folder of cassettes
    assert len(fake.unused()) > 5


def test_load_reports_missing_and_broken_cassettes(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such cassette file or folder"):
        FakeProvider(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\ninteractions: [\n", encoding="utf-8")
    with pytest.raises(CassetteError, match=r"broken\.yaml"):
        FakeProvider(str(broken))


def test_a_name_not_found_here_is_a_bundled_cassette(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no cassettes/ here: both are the bundled cassettes, as serve finds them
    fake = FakeProvider(["anthropic/web_search.yaml", "cassettes/anthropic/web_search_stream.yaml"])
    bundled = data_dir("cassettes") / "anthropic"
    assert [row["cassette"] for row in fake.cassettes()] == [str(bundled / "web_search.yaml"),
                                                             str(bundled / "web_search_stream.yaml")]
    (tmp_path / "anthropic").mkdir()
    shutil.copy(bundled / "web_search_stream.yaml", tmp_path / "anthropic" / "web_search.yaml")
    fake.load("anthropic/web_search.yaml")  # a file where you are comes first
    assert [row["cassette"] for row in fake.cassettes()] == ["anthropic/web_search.yaml"]


def test_env_and_base_urls(serve: Any) -> None:
    fake = serve()
    env = fake.env()
    assert env["ANTHROPIC_BASE_URL"] == fake.base_url("anthropic") == fake.url
    assert env["OPENAI_BASE_URL"] == f"{fake.url}/v1"
    assert env["REPLAYKIT_AZURE_BASE_URL"] == f"{fake.url}/openai/v1"
    assert env["REPLAYKIT_WEBSEARCH_BASE_URL"] == f"{fake.url}/client/v4"
    assert env["AZURE_OPENAI_ENDPOINT"] == fake.url
    assert {env[k] for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY")} == {DUMMY_KEY}
    with pytest.raises(UsageError, match="provider='cohere' must be one of"):
        fake.base_url("cohere")


def test_env_sends_everything_but_the_server_to_a_refusing_proxy() -> None:
    env = FakeProvider().env()  # nothing to start: the proxy variables do not depend on the port
    assert {env[name] for name in ("HTTP_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")} == {REFUSING_PROXY}
    assert env["NO_PROXY"] == env["no_proxy"] == "127.0.0.1,localhost,::1"
    every = FakeProvider(host="0.0.0.0", allow_remote=True).env()  # clients still use 127.0.0.1
    assert every["NO_PROXY"] == "127.0.0.1,localhost,::1"
    remote = FakeProvider(host="192.0.2.7", allow_remote=True).env()
    assert remote["no_proxy"] == "127.0.0.1,localhost,::1,192.0.2.7"


def test_reset_forgets_journal_counters_and_faults(serve: Any) -> None:
    fake = serve(message_cassette("a"), faults=["status=500,nth=2"])
    httpx.post(f"{fake.url}/v1/messages")
    fake.reset()
    assert fake.journal == [] and fake.faults == [] and len(fake.unused()) == 1
    assert [httpx.post(f"{fake.url}/v1/messages").status_code for _ in range(2)] == [200, 404]


def test_the_server_loop_is_uvloop_where_installed() -> None:
    uvloop = pytest.importorskip("uvloop")
    with FakeProvider(stream_cassette()) as fake:
        assert isinstance(fake._background.loop, uvloop.Loop)


def test_without_uvloop_asyncio_serves_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    body = stream_cassette()
    with FakeProvider(body, repeat=True) as fake:
        default = httpx.post(f"{fake.url}/v1/messages", json=stream_request()).content
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now fails, as on Windows
    loop = provider.new_loop()
    try:
        assert isinstance(loop, asyncio.BaseEventLoop)  # uvloop's Loop is not one
    finally:
        loop.close()
    with FakeProvider(body, repeat=True) as fake:
        assert fake._background.loop is not None and "uvloop" not in type(fake._background.loop).__module__
        served = httpx.post(f"{fake.url}/v1/messages", json=stream_request()).content
        assert served == default == body.interactions[0].response.body
