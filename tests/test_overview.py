"""``replaykit.overview``: a cassette at a glance; request bodies shown with every secret scrubbed."""

from __future__ import annotations

import json

import pytest
from test_redact import planted

from replaykit import cassette, sse
from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.overview import exchanges, summarize
from replaykit.resources import data_dir
from replaykit.sse import event_type

ANTHROPIC = "https://api.anthropic.com/v1/messages"
JSON_TYPE = {"content-type": ["application/json"]}
SSE_TYPE = {"content-type": ["text/event-stream; charset=utf-8"]}


def _item(body: bytes | None, response: Response, uri: str = ANTHROPIC) -> Interaction:
    return Interaction(Request("POST", uri, dict(JSON_TYPE), body), response)


def test_a_bundled_cassette_in_one_line() -> None:
    tape = cassette.load(data_dir("cassettes") / "anthropic/web_search_stream.yaml")
    about = summarize(tape, "anthropic/web_search_stream.yaml")
    assert (about.provider, about.routes, about.stream, about.origin, about.interactions) == (
        "anthropic", ("anthropic.messages",), True, "synthesized", 1)
    assert about.description == tape.meta.description and about.description.startswith("Streaming twin")


def test_mixed_streams_unknown_routes_and_a_provider_from_the_route() -> None:
    stream = Response(200, "", dict(SSE_TYPE), b"event: ping\ndata: {}\n\n")
    items = [_item(b"{}", stream), _item(b"{}", Response(200, "", dict(JSON_TYPE), b"{}")),
             _item(None, Response(404), "https://example.com/v2/other")]
    about = summarize(Cassette(items, Meta()), "x.yaml")
    assert (about.provider, about.routes, about.stream) == ("anthropic", ("anthropic.messages",
                                                                          "POST /v2/other"), None)
    assert (about.origin, about.description) == (None, None)


def test_each_exchange_says_what_is_sent_and_answered() -> None:
    tape = cassette.load(data_dir("cassettes") / "anthropic/web_search_stream.yaml")
    [seen] = exchanges(tape)
    assert (seen.method, seen.path, seen.route, seen.line) == ("POST", "/v1/messages", "anthropic.messages",
                                                               tape.interactions[0].line)
    assert seen.body_kind == "json" and seen.body == tape.interactions[0].request.json()
    assert (seen.stream, seen.status, seen.content_type) == (True, 200, "text/event-stream")
    assert seen.events[:2] == ("message_start", "content_block_start") and seen.events[-1] == "message_stop"
    assert json.loads(json.dumps(seen.to_json()))["response"]["events"] == list(seen.events)


@pytest.mark.parametrize(("body", "kind", "shown"), [
    (None, "none", None), (b"", "none", None), (b"a=1&b=2", "text", "a=1&b=2"),
    (b"\xff\xfe\x00", "binary", None), (b'{"k": [1]}', "json", {"k": [1]}),
])
def test_request_bodies_of_every_kind(body: bytes | None, kind: str, shown: object) -> None:
    [seen] = exchanges(Cassette([_item(body, Response(200, "", dict(JSON_TYPE), b"{}"))]))
    assert (seen.body_kind, seen.body, seen.body_bytes) == (kind, shown, len(body or b""))


def test_secrets_are_scrubbed_before_anything_is_shown() -> None:
    keys = planted()
    anthropic, openai = keys["anthropic"][0], keys["openai"][0]
    body = json.dumps({"model": "m", "api_key": "hunter2-" + "x" * 20, "note": f"key {openai}"}).encode()
    uri = f"{ANTHROPIC}?key={anthropic}"
    seen = exchanges(Cassette([_item(body, Response(200, "", dict(JSON_TYPE), b"{}"), uri)]))[0].to_json()
    text = json.dumps(seen)
    assert anthropic[8:-4] not in text and openai[8:-4] not in text and "hunter2" not in text
    assert seen["request"]["body"]["model"] == "m"


@pytest.mark.parametrize(("raw", "kind"), [
    (b"event: message_start\ndata: {\"type\": \"other\"}\n\n", "message_start"),
    (b"data: {\"type\": \"response.created\"}\n\n", "response.created"),
    (b"data: [DONE]\n\n", "[DONE]"),
    (b"data: plain text\n\n", "message"),
    (b"data: [1, 2]\n\n", "message"),
])
def test_an_event_type_comes_from_its_field_else_its_data(raw: bytes, kind: str) -> None:
    [event] = sse.parse(raw)
    assert event_type(event) == kind
