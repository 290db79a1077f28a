"""``replaykit.vcr_config()``: in-process recording with real vcrpy and pytest-recording, against a loopback
fake provider, both ways: what vcrpy records with it loads in replaykit (redacted, ``origin: recorded``, the
same events), and replaykit's cassettes replay under vcrpy with it (httpx and the anthropic SDK).
"""

from __future__ import annotations

import gc
import shutil
import warnings
from pathlib import Path

import anthropic
import httpx
import pytest
import vcr  # type: ignore[import-untyped]

import replaykit
from replaykit import cassette, sse
from replaykit import vcrpy as ours
from replaykit.errors import CassetteError
from replaykit.redact import scan_text
from replaykit.resources import find_cassette
from replaykit.server import FakeProvider

STREAM = "anthropic/web_search_stream.yaml"
UNPATCHED = httpx.HTTPTransport.handle_request  # as imported, before any cassette patches it


def planted_key() -> str:
    """A key of Anthropic's shape, made at run time (never written in a file)."""
    return "sk-ant-api03-" + "Qv4" * 30 + "AA"


def bundled() -> cassette.Interaction:
    return cassette.load(find_cassette(STREAM)).interactions[0]


def stream_with_httpx(base: str) -> list[bytes]:
    item = bundled()
    headers = {"content-type": "application/json", "x-api-key": planted_key()}
    with httpx.Client(timeout=30) as client, client.stream(
            "POST", f"{base}/v1/messages", content=item.request.body, headers=headers) as reply:
        assert reply.status_code == 200
        return list(reply.iter_bytes())


def sdk_stream(base: str) -> list[str]:
    body = bundled().request.json()
    client = anthropic.Anthropic(base_url=base, api_key=planted_key(), max_retries=0)
    with client.messages.stream(model=body["model"], max_tokens=body["max_tokens"], messages=body["messages"],
                                tools=body["tools"]) as stream:
        return [block.type for block in stream.get_final_message().content]


def test_vcrpy_records_with_it_and_replaykit_loads_and_serves_the_recording(tmp_path: Path) -> None:
    path, item = tmp_path / "vcr.yaml", bundled()
    with FakeProvider([STREAM]) as fake:
        base = fake.base_url("anthropic")
        with vcr.use_cassette(str(path), record_mode="once", **replaykit.vcr_config()):
            live = b"".join(stream_with_httpx(base))
    text = path.read_text()
    assert planted_key() not in text and scan_text(text) == []
    tape = cassette.load(path)
    [kept] = tape.interactions
    assert tape.meta.origin == "recorded" and tape.meta.provider == "anthropic"
    assert "vcrpy" in (tape.meta.recorded_with or "") and kept.request.header("x-api-key") == "REDACTED"
    assert [e.raw for e in kept.response.events] == [e.raw for e in item.response.events] == \
        [e.raw for e in sse.parse(live)]
    with vcr.use_cassette(str(path), record_mode="none", **replaykit.vcr_config()) as played:
        again = b"".join(stream_with_httpx(base))  # the fake is gone: vcrpy answers
        assert played.all_played
    assert again == live
    with FakeProvider([path]) as replay:
        assert sdk_stream(replay.base_url("anthropic"))[1:3] == ["server_tool_use", "web_search_tool_result"]


def test_the_anthropic_sdk_records_and_replays_under_vcrpy(tmp_path: Path) -> None:
    path = tmp_path / "sdk.yaml"
    with FakeProvider([STREAM]) as fake:
        base = fake.base_url("anthropic")
        with vcr.use_cassette(str(path), record_mode="once", **replaykit.vcr_config()):
            recorded = sdk_stream(base)
    with vcr.use_cassette(str(path), record_mode="none", **replaykit.vcr_config()) as played:
        assert sdk_stream(base) == recorded and played.all_played
    assert scan_text(path.read_text()) == [] and cassette.load(path).meta.origin == "recorded"


def test_a_replaykit_cassette_replays_under_vcrpy_with_the_sdk(tmp_path: Path) -> None:
    path = tmp_path / "bundled.yaml"
    shutil.copy(find_cassette(STREAM), path)
    with vcr.use_cassette(str(path), record_mode="none", **replaykit.vcr_config()) as played:
        kinds = sdk_stream("https://api.anthropic.com")  # never reached: vcrpy answers from the cassette
        assert played.play_count == 1
    assert kinds[1:3] == ["server_tool_use", "web_search_tool_result"]
    assert path.read_bytes() == find_cassette(STREAM).read_bytes()  # nothing recorded, nothing rewritten


def test_a_request_the_cassette_does_not_hold_is_not_played(tmp_path: Path) -> None:
    path = tmp_path / "bundled.yaml"
    shutil.copy(find_cassette(STREAM), path)
    body = bundled().request.json()
    client = anthropic.Anthropic(base_url="https://api.anthropic.com", api_key="x", max_retries=0)
    with vcr.use_cassette(str(path), record_mode="none", **replaykit.vcr_config()), \
            pytest.raises(anthropic.APIConnectionError) as info:
        # the same request without the stream: replaykit's matching never answers it with a stream
        client.messages.create(model=body["model"], max_tokens=body["max_tokens"], messages=body["messages"])
    assert isinstance(info.value.__cause__, vcr.errors.CannotOverwriteExistingCassetteException)


def test_a_key_that_survives_redaction_is_never_written(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ours, "redact", lambda tape: tape)  # hooks and writer miss the key
    path = tmp_path / "leak.yaml"
    refused = pytest.raises(CassetteError, match="a key survived redaction")
    recorder = vcr.use_cassette(str(path), record_mode="once", **replaykit.vcr_config())
    with FakeProvider([STREAM]) as fake, refused as info, recorder:
        stream_with_httpx(fake.base_url("anthropic"))
    assert not path.exists() and planted_key()[:20] not in str(info.value)
    # vcrpy saves before it unpatches, so a refused save leaves httpx patched until its context is collected:
    # drop every reference to it (the traceback holds its frame) so the next test talks to the network stack
    del info, refused, recorder
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # the connection vcrpy's stub left to the collector
        gc.collect()
    assert httpx.HTTPTransport.handle_request is UNPATCHED


INNER = '''
import os

import httpx
import pytest

import replaykit


@pytest.fixture(scope="module")
def vcr_config():
    return replaykit.vcr_config()


@pytest.mark.vcr
def test_search():
    body = open(os.environ["BODY_FILE"], "rb").read()
    reply = httpx.post(os.environ["BASE"] + "/v1/messages", content=body,
                       headers={"content-type": "application/json", "x-api-key": os.environ["KEY"]})
    assert reply.status_code == 200
'''


@pytest.mark.slow
def test_pytest_recording_records_with_it_and_replays(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_inner=INNER)
    body = pytester.path / "body.json"
    body.write_bytes(bundled().request.body or b"")
    monkeypatch.setenv("BODY_FILE", str(body))
    monkeypatch.setenv("KEY", planted_key())
    with FakeProvider([STREAM]) as fake:
        monkeypatch.setenv("BASE", fake.base_url("anthropic"))
        recording = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--record-mode=once")
        recording.assert_outcomes(passed=1)
    written = pytester.path / "cassettes" / "test_inner" / "test_search.yaml"
    tape = cassette.load(written)
    assert tape.meta.origin == "recorded" and scan_text(written.read_text()) == []
    assert [e.raw for e in tape.interactions[0].response.events] == [e.raw for e in bundled().response.events]
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--record-mode=none").assert_outcomes(passed=1)
