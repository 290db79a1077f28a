"""Interop with vcrpy, both ways, over loopback only.

* a cassette replaykit writes replays under vcrpy with httpx (a JSON body and an SSE body), and under the
  Anthropic SDK (the real recorded stream, re-saved by replaykit);
* cassettes vcrpy records from httpx (gzip / deflate / br bodies stored as ``!!binary``, an SSE body, plain
  text) load in replaykit, decoded; re-saved by replaykit they replay under vcrpy to the same bytes.

``python tests/test_vcrpy_interop.py`` rewrites the committed vcrpy fixture
``tests/data/cassette/vcrpy_httpx_encodings.yaml`` the same way.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from pathlib import Path

import anthropic
import brotli  # type: ignore[import-untyped]
import httpx
import vcr  # type: ignore[import-untyped]
import yaml
from pytest_httpserver import HTTPServer
from recordings import recorded

from replaykit import cassette, sse
from replaykit.cassette import Cassette, Interaction, Meta, Request, Response

FIXTURE = Path(__file__).resolve().parent / "data" / "cassette" / "vcrpy_httpx_encodings.yaml"
NOWHERE = "http://127.0.0.1:9"  # a closed port: if vcrpy failed to intercept, nothing leaves the machine
ENCODERS: dict[str, Callable[[bytes], bytes]] = {"gzip": gzip.compress, "deflate": zlib.compress,
                                                  "br": brotli.compress}
STREAM = (b'event: message_start\ndata: {"n": 0}   \n\n: ping\n\n'
          b'event: content_block_delta\r\ndata: {"n": 1}\r\n\r\n'
          b'data: {"n": 2}\n\n')


def name_of(uri: str) -> str:
    return uri.rsplit("/", 1)[1]


def payload(name: str) -> bytes:
    return json.dumps({"encoding": name, "text": "héllo " * 20}).encode()


def serve(server: HTTPServer) -> None:
    """The loopback origin vcrpy records from."""
    for name, encode in ENCODERS.items():
        server.expect_request(f"/v1/{name}").respond_with_data(
            encode(payload(name)), headers={"content-encoding": name}, content_type="application/json")
    stream = server.expect_request("/v1/stream", method="POST")
    stream.respond_with_data(STREAM, content_type="text/event-stream")
    server.expect_request("/v1/plain").respond_with_data(b"plain text", content_type="text/plain")


def fetch_all(base: str) -> dict[str, httpx.Response]:
    with httpx.Client(base_url=base) as client:
        responses = {name: client.get(f"/v1/{name}") for name in (*ENCODERS, "plain")}
        responses["stream"] = client.post("/v1/stream", json={"stream": True})
    return responses


def record(server: HTTPServer, path: Path) -> dict[str, httpx.Response]:
    serve(server)
    with vcr.VCR(record_mode="all").use_cassette(str(path)):
        return fetch_all(server.url_for("/").rstrip("/"))


def replay(path: Path, base: str) -> dict[str, httpx.Response]:
    with vcr.VCR(record_mode="none").use_cassette(str(path)):
        return fetch_all(base)


# ---------------------------------------------------------------- vcrpy writes, replaykit reads


def test_vcrpy_recording_loads_decoded(httpserver: HTTPServer, tmp_path: Path) -> None:
    path = tmp_path / "vcr.yaml"
    live = record(httpserver, path)
    raw = yaml.safe_load(path.read_text())
    stored = {name_of(i["request"]["uri"]): i["response"]["body"]["string"] for i in raw["interactions"]}
    assert all(isinstance(stored[name], bytes) for name in ENCODERS)  # the premise: !!binary, still encoded
    loaded = {name_of(i.request.uri): i for i in cassette.load(path).interactions}
    for name in ENCODERS:
        assert loaded[name].response.body == payload(name) == live[name].content
        assert loaded[name].response.json() == live[name].json()
    stream = loaded["stream"]
    assert stream.response.body == STREAM and stream.request.json() == {"stream": True}
    assert [e.raw for e in stream.response.events] == [e.raw for e in sse.parse(live["stream"].content)]
    assert loaded["plain"].response.body == b"plain text"


def bodies(path: Path) -> dict[str, bytes]:
    return {name_of(item.request.uri): item.response.body for item in cassette.load(path).interactions}


def test_the_committed_vcrpy_fixture_matches_a_new_recording(httpserver: HTTPServer, tmp_path: Path) -> None:
    record(httpserver, tmp_path / "fresh.yaml")
    assert bodies(FIXTURE) == bodies(tmp_path / "fresh.yaml")


def test_vcrpy_recording_resaved_by_replaykit_replays_alike(httpserver: HTTPServer, tmp_path: Path) -> None:
    live = record(httpserver, tmp_path / "vcr.yaml")
    resaved = cassette.load(tmp_path / "vcr.yaml")
    for item in resaved.interactions:
        item.request.uri = NOWHERE + item.request.uri.split("/", 3)[3].join(["/", ""])
    cassette.save(resaved, tmp_path / "ours.yaml")
    replayed = replay(tmp_path / "ours.yaml", NOWHERE)
    for name, response in live.items():
        assert replayed[name].status_code == response.status_code
        assert replayed[name].content == response.content
        assert replayed[name].headers.get("content-type") == response.headers.get("content-type")
        assert "content-encoding" not in replayed[name].headers


# ---------------------------------------------------------------- replaykit writes, vcrpy replays


def ours() -> Cassette:
    message = {"type": "message", "content": [{"type": "text", "text": "héllo"}]}
    def typed(kind: str) -> dict[str, list[str]]:
        return {"content-type": [kind]}

    items = [
        Interaction(Request("GET", f"{NOWHERE}/v1/plain"),
                    Response(200, "OK", typed("text/plain"), b"plain text")),
        Interaction(Request("GET", f"{NOWHERE}/v1/gzip"),
                    Response(200, "OK", typed("application/json"), json.dumps(message).encode())),
        Interaction(Request("POST", f"{NOWHERE}/v1/stream", typed("application/json"), b'{"stream": true}'),
                    Response(200, "OK", typed("text/event-stream"), STREAM, [0.0, 5.0, 9.0, 20.0])),
    ]
    return Cassette(items, Meta(origin="synthesized", provider="anthropic"))


def test_replaykit_cassette_replays_under_vcrpy_with_httpx(tmp_path: Path) -> None:
    path = tmp_path / "ours.yaml"
    cassette.save(ours(), path)
    player = vcr.VCR(record_mode="none")
    with player.use_cassette(str(path)) as played, httpx.Client(base_url=NOWHERE) as client:
        plain = client.get("/v1/plain")
        json_response = client.get("/v1/gzip")
        with client.stream("POST", "/v1/stream", json={"stream": True}) as streamed:
            chunks = list(streamed.iter_bytes())
        assert played.all_played
    assert plain.text == "plain text"
    assert json_response.json() == {"type": "message", "content": [{"type": "text", "text": "héllo"}]}
    assert b"".join(chunks) == STREAM
    assert [e.json()["n"] for e in sse.iter_events(chunks) if e.dispatched] == [0, 1, 2]
    assert streamed.headers["content-type"] == "text/event-stream"


def test_recorded_stream_resaved_replays_through_the_anthropic_sdk(tmp_path: Path) -> None:
    loaded = cassette.load(recorded("llm-anthropic__web_search_stream.yaml"))
    [item] = loaded.interactions
    item.request.uri = f"{NOWHERE}/v1/messages"
    cassette.save(loaded, tmp_path / "resaved.yaml")
    request = item.request.json()
    client = anthropic.Anthropic(base_url=NOWHERE, api_key="test-" + "dummy", max_retries=0)
    with vcr.VCR(record_mode="none").use_cassette(str(tmp_path / "resaved.yaml")), client.messages.stream(
            model=request["model"], max_tokens=request["max_tokens"], messages=request["messages"],
            tools=request["tools"]) as stream:
        message = stream.get_final_message()
    kinds = [block.type for block in message.content]
    assert kinds[:2] == ["server_tool_use", "web_search_tool_result"] and "text" in kinds
    assert message.stop_reason == "end_turn"


def _write_fixture() -> None:
    """Regenerate the committed vcrpy fixture from a loopback recording."""
    with HTTPServer(host="127.0.0.1", port=0) as server:
        FIXTURE.unlink(missing_ok=True)
        record(server, FIXTURE)
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    _write_fixture()
