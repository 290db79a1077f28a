"""The official Node SDKs (``@anthropic-ai/sdk``, ``openai``; pinned in node_support.py) against the fake
provider: a stream request never gets a JSON recording, a miss is explained in the SDK's own exception text,
and a Node suite loads cassettes over the admin API without restarting the server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from node_support import installed, run_client
from server_support import bundled

from replaykit import cassette
from replaykit.resources import data_dir
from replaykit.server import FakeProvider

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def modules() -> Path:
    return installed()


def _request(name: str) -> dict[str, Any]:
    body = cassette.load(bundled(name)).interactions[0].request.json()
    assert isinstance(body, dict)
    body.pop("stream", None)  # the SDK's stream call adds it
    return body


def _served(fake: FakeProvider) -> list[str]:
    return [Path(entry.matched["cassette"]).name for entry in fake.journal if entry.matched]


def test_a_stream_request_never_gets_a_json_recording(serve: Any, modules: Path) -> None:
    fake = serve(data_dir("cassettes") / "anthropic", data_dir("cassettes") / "openai")
    anthropic, openai = fake.base_url("anthropic"), fake.base_url("openai")
    streamed, created, responses = run_client(modules, [
        {"do": "anthropic.stream", "baseURL": anthropic,
         "body": _request("anthropic/web_search_stream.yaml")},
        {"do": "anthropic.create", "baseURL": anthropic, "body": _request("anthropic/web_search.yaml")},
        {"do": "openai.stream", "baseURL": openai, "body": _request("openai/web_search_stream.yaml")},
    ])
    assert streamed["ok"] and streamed["events"][0] == "message_start"
    assert streamed["result"]["stop_reason"] == "end_turn"
    assert created["ok"] and created["result"]["stop_reason"] == "end_turn" and created["events"] == []
    assert responses["ok"] and responses["events"][-1] == "response.completed"
    assert _served(fake) == ["web_search_stream.yaml", "web_search.yaml", "web_search_stream.yaml"]


@pytest.mark.parametrize("sdk", ["anthropic", "openai"])
def test_the_sdk_exception_text_names_the_nearest_interaction_and_the_pointer(
    serve: Any, modules: Path, sdk: str
) -> None:
    name = f"{sdk}/web_search.yaml"
    fake = serve(bundled(name), strict=True)
    body = {**_request(name), "model": "a-model-not-recorded"}
    [refused] = run_client(modules, [{"do": f"{sdk}.create", "baseURL": fake.base_url(sdk), "body": body}])
    assert refused["ok"] is False and refused["status"] == 404
    message = refused["message"]  # the Anthropic SDK shows the error body as JSON: its quotes escaped
    assert f"nearest: {bundled(name)}#0 (refused by: body): /model: sent " in message
    assert "a-model-not-recorded" in message


def test_a_stream_request_to_a_json_recording_is_refused_saying_so(serve: Any, modules: Path) -> None:
    fake = serve(bundled("anthropic/web_search.yaml"))
    [refused] = run_client(modules, [{"do": "anthropic.stream", "baseURL": fake.base_url("anthropic"),
                                      "body": _request("anthropic/web_search.yaml")}])
    assert refused["ok"] is False and refused["status"] == 404
    assert "(refused by: stream): /stream: only in the request sent: true" in refused["message"]


def test_a_node_suite_loads_cassettes_over_the_admin_api_without_a_restart(
    serve: Any, modules: Path, tmp_path: Path
) -> None:
    fake = serve()
    admin, anthropic = f"{fake.url}/__replaykit", fake.base_url("anthropic")
    stub = {"request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages",
                        "body": json.dumps({"model": "m", "max_tokens": 8, "messages": []})},
            "response": {"status": {"code": 200}, "headers": {"content-type": ["application/json"]},
                         "body": {"string": json.dumps({
                             "id": "msg_stub", "type": "message", "role": "assistant", "model": "m",
                             "content": [{"type": "text", "text": "from a stub"}], "stop_reason": "end_turn",
                             "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}})}}}
    results = run_client(modules, [
        {"do": "anthropic.create", "baseURL": anthropic, "body": _request("anthropic/web_search.yaml")},
        {"do": "fetch", "method": "POST", "url": f"{admin}/cassettes",
         "body": {"paths": [str(bundled("anthropic/web_search.yaml"))]}},
        {"do": "anthropic.create", "baseURL": anthropic, "body": _request("anthropic/web_search.yaml")},
        {"do": "fetch", "method": "POST", "url": f"{admin}/reset"},
        {"do": "fetch", "method": "POST", "url": f"{admin}/cassettes",
         "body": {"mode": "add", "cassettes": [{"name": "held", "cassette": bundled(
             "anthropic/web_search_stream.yaml").read_text(encoding="utf-8")}]}},
        {"do": "anthropic.stream", "baseURL": anthropic,
         "body": _request("anthropic/web_search_stream.yaml")},
        {"do": "fetch", "method": "POST", "url": f"{admin}/interactions", "body": stub},
        {"do": "anthropic.create", "baseURL": anthropic,
         "body": {"model": "m", "max_tokens": 8, "messages": []}},
        {"do": "fetch", "method": "GET", "url": f"{admin}/jurnal"},
    ])
    before, loaded, served, reset, added, streamed, stubbed, answered, mistyped = results
    assert before["ok"] is False and before["status"] == 404  # nothing loaded yet
    assert loaded["status"] == 200 and served["ok"] and reset["json"] == {"reset": True}
    listed = [row["cassette"] for row in added["json"]["cassettes"]]
    assert listed == [str(bundled("anthropic/web_search.yaml")), "held"]
    assert streamed["ok"] and streamed["result"]["stop_reason"] == "end_turn"
    assert stubbed["json"]["added"]["cassette"] == "<stubs>"
    assert answered["ok"] and answered["result"]["content"][0]["text"] == "from a stub"
    assert mistyped["status"] == 404 and "no such admin endpoint" in mistyped["json"]["error"]
    assert [entry.status for entry in fake.journal] == [200, 200]  # since the reset; admin calls never


ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guide" / "fake-provider.md"  # the admin API from another language


def test_the_docs_node_admin_client_runs_as_written(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    unmarked = r"(?<!-->\n)```js\n(.*?)```"  # the target skeleton (<!-- readme: target -->) runs elsewhere
    [block] = re.findall(unmarked, PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)
    monkeypatch.chdir(ROOT)  # the example's paths are relative to the server's working directory
    fake = serve()
    done = subprocess.run(["node", "--input-type=module"], input=block, capture_output=True, text=True,
                          timeout=60, check=False, env={**os.environ, "REPLAYKIT_URL": fake.url})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["pong", "[ 'served' ]"]
    assert fake.cassettes() == [] and fake.journal == []  # unloaded, reset


def _recorded_chunks(name: str) -> list[Any]:
    response = cassette.load(bundled(name)).interactions[0].response
    return [event.json() for event in response.events if event.data and event.data.strip() != "[DONE]"]


def test_the_node_openai_sdk_parses_chat_search_replays_as_recorded(serve: Any, modules: Path) -> None:
    plain, stream = "openai/chat_web_search.yaml", "openai/chat_web_search_stream.yaml"
    fake = serve(bundled(plain), bundled(stream))
    created, streamed = run_client(modules, [
        {"do": "openai.chat.create", "baseURL": fake.base_url("openai"), "body": _request(plain)},
        {"do": "openai.chat.stream", "baseURL": fake.base_url("openai"), "body": _request(stream)},
    ])
    assert created["ok"], created
    assert created["result"] == cassette.load(bundled(plain)).interactions[0].response.json()
    assert created["result"]["choices"][0]["message"]["annotations"][0]["type"] == "url_citation"
    assert streamed["ok"], streamed
    assert streamed["result"] == _recorded_chunks(stream)  # chunk for chunk, annotations delta included
    assert set(streamed["events"]) == {"chat.completion.chunk"}
    assert _served(fake) == ["chat_web_search.yaml", "chat_web_search_stream.yaml"]


def _gemini_body() -> dict[str, Any]:
    request = _request("gemini/grounding.yaml")
    config = {"tools": request["tools"]}
    return {"model": "gemini-2.5-flash", "contents": request["contents"], "config": config}


def _without_sdk_fields(result: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key != "sdkHttpResponse"}


def test_google_genai_parses_the_replay_as_the_recording_plain_and_streamed(serve: Any,
                                                                            modules: Path) -> None:
    fake = serve(bundled("gemini/grounding.yaml"), bundled("gemini/grounding_stream.yaml"), repeat=True)
    plain, streamed, from_env = run_client(modules, [
        {"do": "gemini.create", "baseURL": fake.base_url("gemini"), "body": _gemini_body()},
        {"do": "gemini.stream", "baseURL": fake.base_url("gemini"), "body": _gemini_body()},
        {"do": "gemini.create", "body": _gemini_body()},  # GOOGLE_GEMINI_BASE_URL, read by @google/genai
    ], env={"GOOGLE_GEMINI_BASE_URL": fake.base_url("gemini")})
    recorded = cassette.load(bundled("gemini/grounding.yaml")).interactions[0].response.json()
    stream = cassette.load(bundled("gemini/grounding_stream.yaml")).interactions[0].response
    assert plain["ok"] and _without_sdk_fields(plain["result"]) == recorded
    assert streamed["ok"] and [_without_sdk_fields(chunk) for chunk in streamed["result"]] == [
        event.json() for event in stream.events if event.data is not None]
    assert from_env["ok"] and _without_sdk_fields(from_env["result"]) == recorded
    assert _served(fake) == ["grounding.yaml", "grounding_stream.yaml", "grounding.yaml"]


def test_google_genai_on_vertex_express_parses_the_replay_as_the_recording(serve: Any, modules: Path) -> None:
    fake = serve(bundled("vertex/grounding.yaml"), bundled("vertex/grounding_stream.yaml"))
    plain, streamed = run_client(modules, [
        {"do": "vertex.create", "baseURL": fake.base_url("vertex"), "body": _gemini_body()},
        {"do": "vertex.stream", "baseURL": fake.base_url("vertex"), "body": _gemini_body()},
    ])
    recorded = cassette.load(bundled("vertex/grounding.yaml")).interactions[0].response.json()
    stream = cassette.load(bundled("vertex/grounding_stream.yaml")).interactions[0].response
    assert plain["ok"] and _without_sdk_fields(plain["result"]) == recorded
    assert streamed["ok"] and [_without_sdk_fields(chunk) for chunk in streamed["result"]] == [
        event.json() for event in stream.events if event.data is not None]
    assert [entry.route for entry in fake.journal] == ["vertex.generate", "vertex.generate"]
    assert _served(fake) == ["grounding.yaml", "grounding_stream.yaml"]


def test_google_genai_raises_the_recorded_error(serve: Any, modules: Path) -> None:
    fake = serve(bundled("gemini/error_503_unavailable.yaml"))
    (overloaded,) = run_client(modules, [{"do": "gemini.create", "baseURL": fake.base_url("gemini"),
                                          "body": _gemini_body()}])
    assert not overloaded["ok"] and overloaded["status"] == 503 and "UNAVAILABLE" in overloaded["message"]
    assert "The model is overloaded" in overloaded["message"]
