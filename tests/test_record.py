"""``replaykit.record``: the recording proxy, offline, with a loopback fake provider as the upstream.

Record through the proxy, replay the recording: the client sees the same events with the same framing; a
stream reaches the client while the upstream is still sending it; keys never reach the cassette; each mode
does what vcrpy's does; contract violations are kept in the cassette.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import httpx
import pytest

from replaykit import cassette, contracts, sse
from replaykit.cassette import Interaction, stale_temporaries
from replaykit.errors import CassetteError, UsageError
from replaykit.record import WARNINGS, RecordingProxy, capture, recorder
from replaykit.redact import scan_text
from replaykit.resources import find_cassette
from replaykit.server import FakeProvider

STREAM = "anthropic/web_search_stream.yaml"
PLAIN = "anthropic/web_search.yaml"


def recording(name: str) -> Interaction:
    return cassette.load(find_cassette(name)).interactions[0]


def planted_key() -> str:
    """A key of Anthropic's shape, made at run time (never written in a file)."""
    return "sk-ant-api03-" + "Zq7" * 30 + "AA"


@pytest.fixture
def upstream() -> Iterator[FakeProvider]:
    with FakeProvider([STREAM, PLAIN], repeat=True) as fake:
        yield fake


def post(base: str, item: Interaction, **headers: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/messages", content=item.request.body, timeout=30,
                      headers={"content-type": "application/json", **headers})


def raw_events(base: str, item: Interaction) -> tuple[list[bytes], list[bytes]]:
    """The HTTP chunks as the client read them and the events they make."""
    with httpx.Client(timeout=30) as client, client.stream(
            "POST", f"{base}/v1/messages", content=item.request.body,
            headers={"content-type": "application/json"}) as reply:
        assert reply.status_code == 200
        chunks = list(reply.iter_raw())
    return chunks, [event.raw for event in sse.iter_events(chunks)]


# ---------------------------------------------------------------- record, then replay


def test_a_recorded_stream_replays_with_the_same_events_and_framing(upstream: FakeProvider,
                                                                    tmp_path: Path) -> None:
    item, path = recording(STREAM), tmp_path / "new.yaml"
    direct = raw_events(upstream.base_url("anthropic"), item)[1]
    with RecordingProxy(path, upstream=upstream.url, provider="anthropic") as proxy:
        through = raw_events(proxy.base_url(), item)[1]
    assert through == direct == [event.raw for event in item.response.events]
    tape = cassette.load(path)
    [kept] = tape.interactions
    assert tape.meta.origin == "recorded" and tape.meta.provider == "anthropic"
    assert tape.meta.recorded_with is not None and "aiohttp" in tape.meta.recorded_with
    assert kept.request.uri == f"{upstream.url}/v1/messages" and kept.request.body == item.request.body
    assert kept.response.body == item.response.body
    offsets = kept.response.event_offsets_ms or []
    assert len(offsets) == len(item.response.events) and offsets == sorted(offsets)
    with FakeProvider([path]) as replay:
        chunks, replayed = raw_events(replay.base_url("anthropic"), item)
    assert replayed == direct and chunks == [event.raw for event in item.response.events]  # one chunk each


def test_the_anthropic_sdk_records_through_the_proxy(upstream: FakeProvider, tmp_path: Path) -> None:
    body = recording(STREAM).request.json()
    with RecordingProxy(tmp_path / "sdk.yaml", upstream=upstream.url, provider="anthropic") as proxy:
        client = anthropic.Anthropic(base_url=proxy.base_url(), api_key=planted_key(), max_retries=0)
        with client.messages.stream(model=body["model"], max_tokens=body["max_tokens"],
                                    messages=body["messages"], tools=body["tools"]) as stream:
            message = stream.get_final_message()
    assert [block.type for block in message.content][1:3] == ["server_tool_use", "web_search_tool_result"]
    text = (tmp_path / "sdk.yaml").read_text()
    assert planted_key() not in text and scan_text(text) == []
    sent = cassette.load(tmp_path / "sdk.yaml").interactions[0].request
    assert "REDACTED" in (sent.header("x-api-key") or sent.header("authorization") or "")


def test_a_stream_reaches_the_client_before_the_upstream_has_sent_it_all(tmp_path: Path) -> None:
    item = recording(STREAM)
    with FakeProvider([STREAM], faults=["kind=stall,after=3,ms=4000"]) as slow, \
            RecordingProxy(tmp_path / "s.yaml", upstream=slow.url, provider="anthropic") as proxy:
        started, seen = time.monotonic(), []
        with httpx.Client(timeout=30) as client, client.stream(
                "POST", f"{proxy.base_url()}/v1/messages", content=item.request.body) as reply:
            for chunk in reply.iter_raw():
                seen.append(chunk)
                if len(list(sse.iter_events(seen))) >= 3:
                    break
            waited = time.monotonic() - started
            upstream_done = [entry.outcome for entry in slow.journal if entry.outcome == "complete"]
    assert [e.raw for e in sse.iter_events(seen)][:3] == [e.raw for e in item.response.events[:3]]
    assert upstream_done == [] and waited < 3.0  # the upstream holds the rest back for 4 s
    assert proxy.tally.recorded == 0 and proxy.tally.incomplete == 1  # the client left: nothing recorded


def test_no_key_reaches_the_cassette(upstream: FakeProvider, tmp_path: Path) -> None:
    key, path = planted_key(), tmp_path / "keys.yaml"
    with RecordingProxy(path, upstream=upstream.url, provider="anthropic") as proxy:
        reply = post(proxy.base_url(), recording(PLAIN), **{"x-api-key": key,
                                                           "authorization": f"Bearer {key}",
                                                           "x-custom-trace": f"token {key}"})
    assert reply.status_code == 200
    text = path.read_text()
    assert key not in text and key[:20] not in text and scan_text(text) == []
    headers = cassette.load(path).interactions[0].request.headers
    assert headers["x-api-key"] == ["REDACTED"] and headers["authorization"] == ["Bearer REDACTED"]


def test_a_key_that_survives_redaction_refuses_the_write(upstream: FakeProvider, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    monkeypatch.setattr(capture, "redact", lambda tape: tape)  # a redactor that misses the key
    path = tmp_path / "leak.yaml"
    with RecordingProxy(path, upstream=upstream.url, provider="anthropic", say=said.append,
                        isolate=False) as proxy:  # the recorder in this process: it sees the patch
        post(proxy.base_url(), recording(PLAIN), **{"x-api-key": planted_key()})
    assert not path.exists() and proxy.tape is not None and proxy.tape.refused
    assert any("refusing to write" in line and "x-api-key" in line for line in said)
    assert not any(planted_key()[:24] in line for line in said)  # masked: only an excerpt


# ---------------------------------------------------------------- modes


def test_once_refuses_an_existing_cassette(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("version: 1\ninteractions: []\n")
    with pytest.raises(UsageError, match=r"already exists.*--mode new"):
        RecordingProxy(path, upstream="http://127.0.0.1:9", provider="anthropic")
    assert path.read_text() == "version: 1\ninteractions: []\n"


def test_new_replays_what_is_recorded_and_records_what_is_not(upstream: FakeProvider, tmp_path: Path) -> None:
    path, plain, stream = tmp_path / "spy.yaml", recording(PLAIN), recording(STREAM)
    with RecordingProxy(path, upstream=upstream.url, provider="anthropic") as proxy:
        first = post(proxy.base_url(), plain)
    assert len(upstream.journal) == 1
    with RecordingProxy(path, upstream=upstream.url, provider="anthropic", mode="new") as proxy:
        again = post(proxy.base_url(), plain)
        fresh = raw_events(proxy.base_url(), stream)[1]
    assert again.json() == first.json() and len(upstream.journal) == 2  # only the stream went upstream
    assert fresh == [event.raw for event in stream.response.events]
    assert (proxy.tally.replayed, proxy.tally.recorded) == (1, 1)
    kept = cassette.load(path).interactions
    assert [item.response.is_stream for item in kept] == [False, True]


def test_all_records_again_and_none_only_replays(upstream: FakeProvider, tmp_path: Path) -> None:
    path, plain = tmp_path / "again.yaml", recording(PLAIN)
    for _ in range(2):
        with RecordingProxy(path, upstream=upstream.url, provider="anthropic", mode="all") as proxy:
            post(proxy.base_url(), plain)
    assert len(cassette.load(path).interactions) == 1 and len(upstream.journal) == 2
    with RecordingProxy(path, upstream=None, provider="anthropic", mode="none") as proxy:
        replayed = post(proxy.base_url(), plain)
        missing = post(proxy.base_url(), recording(STREAM))
    assert replayed.status_code == 200 and len(upstream.journal) == 2
    assert missing.status_code == 404 and "no recorded interaction" in missing.headers["x-replaykit-error"]
    assert len(cassette.load(path).interactions) == 1


@pytest.mark.parametrize("given", ["url", "per provider"])
def test_none_forwards_nothing_whatever_upstream_is_given(upstream: FakeProvider, tmp_path: Path,
                                                          given: str) -> None:
    path, plain, said = tmp_path / "kept.yaml", recording(PLAIN), []
    cassette.save(cassette.load(find_cassette(PLAIN)), path)
    url = upstream.url if given == "url" else {"anthropic": upstream.url, "openai": upstream.url}
    with RecordingProxy(path, upstream=url, provider="anthropic", mode="none", say=said.append) as proxy:
        replayed = post(proxy.base_url(), plain)
        missing = post(proxy.base_url(), recording(STREAM))  # not in the cassette
    assert upstream.journal == [] and (proxy.tally.replayed, proxy.tally.recorded) == (2, 0)
    assert replayed.status_code == 200 and replayed.json() == plain.response.json()
    assert missing.status_code == 404, "an unmatched request is answered as replaykit serve answers it"
    assert missing.headers["x-replaykit-error"].startswith("replaykit: no recorded interaction for POST")
    assert "kept.yaml#0 (refused by: stream" in missing.headers["x-replaykit-error"]  # the near miss
    shown = upstream.url if given == "url" else f"anthropic={upstream.url}, openai={upstream.url}"
    assert said == [f"--mode none only replays: --upstream {shown} is ignored; nothing is forwarded"]
    assert cassette.load(path).interactions == cassette.load(find_cassette(PLAIN)).interactions


def test_one_upstream_per_provider_is_chosen_by_the_base_url_and_the_route(tmp_path: Path) -> None:
    plain, path = recording(PLAIN), tmp_path / "two.yaml"
    with FakeProvider([PLAIN], repeat=True) as anthropic_api, FakeProvider([PLAIN]) as other_api, \
            RecordingProxy(path, upstream={"anthropic": anthropic_api.url, "openai": other_api.url},
                           isolate=False) as proxy:
        assert proxy.base_urls()["openai"] == f"{proxy.url}/openai/v1"
        assert post(proxy.base_urls()["anthropic"], plain).status_code == 200  # /anthropic/v1/messages
        assert post(proxy.url, plain).status_code == 200  # no prefix: its route says anthropic
        no_upstream = post(proxy.base_urls()["cloudflare"], plain)
    assert [entry.path for entry in anthropic_api.journal] == ["/v1/messages", "/v1/messages"]
    assert other_api.journal == [] and no_upstream.status_code == 502
    assert "no upstream was given for cloudflare's API" in no_upstream.headers["x-replaykit-error"]
    tape = cassette.load(path)
    assert tape.meta.provider == "anthropic" and len(tape.interactions) == 2
    assert tape.interactions[0].request.uri == f"{anthropic_api.url}/v1/messages"


def test_usage_errors_are_refused_before_anything_runs(tmp_path: Path) -> None:
    cases = [({"upstream": None}, "--upstream URL is required"),
             ({"upstream": "ftp://example.com"}, "must be an http"),
             ({"mode": "none"}, "no such cassette"),
             ({"check": True, "mode": "new"}, "--check forwards every request"),
             ({"host": "0.0.0.0"}, "not a loopback address")]
    for options, message in cases:
        settings = {"upstream": "http://127.0.0.1:9", "provider": "anthropic", **options}
        with pytest.raises(UsageError, match=message):
            RecordingProxy(tmp_path / "x.yaml", **settings)  # type: ignore[arg-type]


def test_an_unreachable_upstream_gets_a_502_in_the_providers_envelope(tmp_path: Path) -> None:
    said: list[str] = []
    with RecordingProxy(tmp_path / "u.yaml", upstream="http://127.0.0.1:9", provider="anthropic",
                        say=said.append) as proxy:
        reply = post(proxy.base_url(), recording(PLAIN))
    assert reply.status_code == 502 and reply.json()["type"] == "error"
    assert "cannot reach http://127.0.0.1:9" in reply.headers["x-replaykit-error"]
    assert proxy.tally.failed == 1 and not (tmp_path / "u.yaml").exists()


# ---------------------------------------------------------------- contracts


def test_contract_violations_are_warned_and_kept_in_the_cassette(upstream: FakeProvider,
                                                                tmp_path: Path) -> None:
    plain, said, path = recording(PLAIN), [], tmp_path / "bad.yaml"
    body = plain.request.json()
    body["messages"][0]["content"] = [{"type": "text", "text": "hi", "internal_id": 7}]  # not on the wire
    plain.request.body = __import__("json").dumps(body).encode()
    with RecordingProxy(path, upstream=upstream.url, provider="anthropic", say=said.append) as proxy:
        assert post(proxy.base_url(), plain).status_code == 200
    tape = cassette.load(path)
    [line] = tape.meta.extra[WARNINGS]
    assert line.startswith("interactions[0] request /messages/0/content/0/internal_id")
    assert any(text.startswith("contract error: interactions[0] request /messages/0") for text in said)
    assert proxy.tally.errors == 1 and proxy.tally.recorded == 1
    document = __import__("yaml").safe_load(path.read_text())
    assert contracts.validate("replaykit.cassette", document) == []


def test_capture_times_each_event_as_it_completes() -> None:
    item = recording(STREAM)
    taken = capture.Capture(item.request, 200, "OK", item.response.headers)
    body = item.response.body
    for at in range(0, len(body), 97):  # pieces that cut events anywhere
        taken.feed(body[at:at + 97])
    kept = taken.interaction()
    assert kept.response.body == body and len(kept.response.event_offsets_ms or []) == sse.count(body)
    plain = capture.Capture(item.request, 200, "OK", {"content-type": ["application/json"]})
    plain.feed(b"{}")
    assert plain.interaction().response.event_offsets_ms is None


# ---------------------------------------------------------------- the recorder process


def wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_checks_and_writes_run_in_a_recorder_process_that_writes_while_recording(
        upstream: FakeProvider, tmp_path: Path) -> None:
    path = tmp_path / "live.yaml"
    with RecordingProxy(path, upstream=upstream.url, provider="anthropic") as proxy:
        assert proxy.recorder is not None and proxy.recorder.pid not in (None, os.getpid())
        post(proxy.base_url(), recording(PLAIN))
        wait_for(path.exists)  # written while the proxy still serves, not only when it stops
        assert len(cassette.load(path).interactions) == 1 and proxy.tally.recorded == 1
        raw_events(proxy.base_url(), recording(STREAM))
    assert len(cassette.load(path).interactions) == 2 and proxy.tally.checked == 2


def test_a_recorder_that_dies_is_reported_and_leaves_its_last_whole_write(upstream: FakeProvider,
                                                                          tmp_path: Path) -> None:
    said: list[str] = []
    path = tmp_path / "died.yaml"
    proxy = RecordingProxy(path, upstream=upstream.url, provider="anthropic", say=said.append).start()
    try:
        assert post(proxy.base_url(), recording(PLAIN)).status_code == 200
        assert proxy.recorder is not None and proxy.recorder.pid is not None
        wait_for(lambda: proxy.recorder is not None and proxy.recorder.written == 1)
        os.kill(proxy.recorder.pid, signal.SIGKILL)
        wait_for(lambda: any("recorder stopped unexpectedly" in line for line in said))
        assert post(proxy.base_url(), recording(PLAIN)).status_code == 200  # forwarding goes on
    finally:
        proxy.stop()
    with pytest.raises(CassetteError, match=r"recorder stopped unexpectedly \(exit code -9\).*"
                                            r"holds its last complete write \(1 interactions\)"):
        proxy.check_errors()
    assert len(cassette.load(path).interactions) == 1 and stale_temporaries(path) == []


def test_the_recorder_paces_its_writes_to_a_tenth_of_its_time() -> None:
    assert recorder._due(100.0, 0.01) == 100.0 + recorder.FLUSH_INTERVAL  # a quick write: every 0.5 s
    assert recorder._due(100.0, 2.0) == pytest.approx(120.0)  # a 2 s rewrite: not again for 20 s


def test_the_recorder_writes_when_due_while_captures_keep_coming(tmp_path: Path) -> None:
    item = recording(PLAIN)
    tasks_out, tasks_in = multiprocessing.Pipe(duplex=False)
    results_out, results_in = multiprocessing.Pipe(duplex=False)
    tasks_in.send(recorder.RecorderSettings(tmp_path / "busy.yaml", "anthropic", False, contracts.STRICT))
    for _ in range(8):  # all waiting before the recorder starts (small: the pipe holds them): never a lull
        taken = capture.Capture(item.request, 200, "OK", {"content-type": ["application/json"]})
        taken.feed(b'{"type": "message"}')
        tasks_in.send(taken)
    tasks_in.send(None)
    recorder.serve(tasks_out, results_in)
    said = []
    while results_out.poll():
        said.append(results_out.recv())
    wrote = [message for message in said if message[0] == "wrote"]
    assert wrote[0] == ("wrote", 1) and wrote[-1] == ("wrote", 8)  # the first write did not wait for a lull


def test_a_proxy_records_once(upstream: FakeProvider, tmp_path: Path) -> None:
    proxy = RecordingProxy(tmp_path / "once.yaml", upstream=upstream.url, provider="anthropic")
    with proxy:
        pass
    with pytest.raises(UsageError, match="records once"):
        proxy.start()


def test_a_script_without_a_main_guard_records(tmp_path: Path) -> None:
    script = tmp_path / "app.py"  # run as __main__, no `if __name__ == "__main__":`: never run again
    script.write_text("from replaykit.record import RecordingProxy\n"
                      "up = 'http://127.0.0.1:9'\n"
                      "with RecordingProxy('out.yaml', upstream=up, provider='anthropic') as p:\n"
                      "    print('serving', p.recorder.pid is not None)\n")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout == "serving True\n", done.stderr


def test_a_recorder_that_cannot_start_says_why_with_keys_masked(upstream: FakeProvider, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    python = tmp_path / "broken-python"  # an interpreter that dies at once, its exception on stderr
    python.write_text(f"#!/bin/sh\necho 'Traceback (most recent call last):' >&2\n"
                      f"echo 'RuntimeError: boom {planted_key()}' >&2\nexit 1\n")
    python.chmod(0o755)
    monkeypatch.setattr(recorder.sys, "executable", str(python))
    said: list[str] = []
    path = tmp_path / "never.yaml"
    with pytest.raises(CassetteError, match=r"exit code 1: RuntimeError: boom .*\) after 0 exchanges"), \
            RecordingProxy(path, upstream=upstream.url, provider="anthropic", say=said.append) as proxy:
        wait_for(lambda: bool(said))
        assert post(proxy.base_url(), recording(PLAIN)).status_code == 200  # forwarding goes on
    assert not any(planted_key()[:20] in line for line in said) and not path.exists()
