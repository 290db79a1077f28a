"""The lane is one option: every response is the same, byte for byte (``Date`` aside), with the lane and
without it (``lane=False``: aiohttp writes every byte). This is what keeps the prepared bytes
(:class:`~replaykit.server.prepared.Whole`) in agreement with aiohttp: every bundled interaction, and
responses shaped to find where they could part (statuses, recorded ``Server`` / ``Date`` headers, no
``Content-Type``, an empty body, a stream over one write), requests the lane hands over, and the admin API.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from server_support import (
    ANTHROPIC,
    anthropic_message,
    anthropic_request,
    cassette_of,
    connect,
    json_interaction,
    message_cassette,
    responses,
    stream_cassette,
)

from replaykit import cassette as cassette_mod
from replaykit.cassette import Cassette, Interaction
from replaykit.resources import data_dir
from replaykit.server import FakeProvider
from replaykit.server.prepared import BATCH_LIMIT

_ID = re.compile(rb"(req_|msg_|chatcmpl-|resp_)[A-Za-z0-9]+|[0-9a-f]{8}-[0-9a-f-]{27}")


def _both(serve: Any, *cassettes: Any, **options: Any) -> tuple[FakeProvider, FakeProvider]:
    return serve(*cassettes, repeat=True, **options), serve(*cassettes, repeat=True, lane=False, **options)


def _exchange(fake: FakeProvider, requests: list[bytes]) -> list[bytes]:
    """The responses to ``requests``, sent one after the other on one keep-alive connection."""
    found = []
    with connect(fake.url) as sock:
        for data in requests:
            sock.sendall(data)
            found += responses(sock, 1)
    return found


def _request(method: str, target: str, body: bytes, extra: str = "", version: str = "1.1") -> bytes:
    head = (f"{method} {target} HTTP/{version}\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n")
    return head.encode() + body


def _recorded(label: str, index: int, item: Interaction) -> bytes:
    """The request ``item`` recorded, choosing it by replaykit's headers."""
    parts = urlsplit(item.request.uri)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    chosen = f"x-replaykit-cassette: {label}\r\nx-replaykit-interaction: {index}\r\n"
    return _request(item.request.method, target, bytes(item.request.body or b""), chosen)


def _bundled() -> list[tuple[str, Cassette]]:
    return [(str(path), cassette_mod.load(path)) for path in cassette_mod.iter_paths([data_dir("cassettes")])]


def test_every_bundled_interaction_is_the_same_bytes_with_and_without_the_lane(serve: Any) -> None:
    tapes = _bundled()
    lane, general = _both(serve, *(tape for _, tape in tapes))
    sent = [_recorded(label, index, item) for label, tape in tapes
            for index, item in enumerate(tape.interactions)]
    ours, theirs = _exchange(lane, sent), _exchange(general, sent)
    assert len(ours) == len(sent) > 50
    for number, (mine, aiohttp_bytes) in enumerate(zip(ours, theirs, strict=True)):
        assert mine == aiohttp_bytes, f"request {number}: {sent[number][:200]!r}"
    assert all(entry.verdict == "served" for entry in (*lane.journal, *general.journal))


def _shaped(status: int, headers: dict[str, list[str]], body: bytes = b"{}") -> Cassette:
    item = json_interaction(ANTHROPIC, anthropic_request(), anthropic_message(), status=status)
    item.response.headers = headers
    item.response.body = body
    return cassette_of(item)


SHAPES = {
    "299 (no reason phrase)": _shaped(299, {"content-type": ["application/json"]}),
    "201": _shaped(201, {"content-type": ["application/json"]}),
    "204 (no body)": _shaped(204, {}, b""),
    "404 recorded": _shaped(404, {"content-type": ["application/json"]}),
    "no content-type": _shaped(200, {}),
    "empty body, no content-type": _shaped(200, {}, b""),
    "recorded server and date": _shaped(200, {"server": ["cloudflare"], "content-type": ["application/json"],
                                              "date": ["Mon, 01 Jan 2024 00:00:00 GMT"]}),
    "repeated header": _shaped(200, {"content-type": ["application/json"], "set-cookie": ["a=1", "b=2"]}),
    "body over one write": _shaped(200, {"content-type": ["application/json"]}, b"x" * (BATCH_LIMIT + 1)),
    "stream": stream_cassette(),
    "stream over one write": stream_cassette(text_deltas=2000),
}


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_each_shape_of_response_is_the_same_bytes_with_and_without_the_lane(serve: Any,
                                                                           shape: Cassette) -> None:
    lane, general = _both(serve, shape)
    body = bytes(shape.interactions[0].request.body or b"")
    sent = [_request("POST", "/v1/messages", body)] * 2
    assert _exchange(lane, sent) == _exchange(general, sent)


REQUESTS = {
    "HTTP/1.0": _request("POST", "/v1/messages", json.dumps(anthropic_request("a")).encode(), version="1.0"),
    "a query": _request("POST", "/v1/messages?beta=true", json.dumps(anthropic_request("a")).encode()),
    "connection: close": _request("POST", "/v1/messages", json.dumps(anthropic_request("a")).encode(),
                                  "Connection: close\r\n"),
    "admin": _request("GET", "/__replaykit/unused", b""),
    "admin, unknown": _request("GET", "/__replaykit/nothing", b""),
    "admin, bad body": _request("POST", "/__replaykit/faults", b"[{"),
}


@pytest.mark.parametrize("data", REQUESTS.values(), ids=REQUESTS.keys())
def test_requests_the_lane_hands_over_are_the_same_bytes_with_and_without_it(serve: Any, data: bytes) -> None:
    lane, general = _both(serve, message_cassette("a"))
    assert _exchange(lane, [data]) == _exchange(general, [data])


def test_an_unmatched_request_is_the_same_bytes_but_its_ids(serve: Any) -> None:
    lane, general = _both(serve, message_cassette("a"))
    sent = [_request("POST", "/v1/responses", b'{"model": "x"}')]
    ours, theirs = _exchange(lane, sent), _exchange(general, sent)
    assert _ID.sub(b"ID", ours[0]) == _ID.sub(b"ID", theirs[0]) and ours[0].startswith(b"HTTP/1.1 404 ")
