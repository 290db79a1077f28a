"""What an unchanged replay costs per request: parts made once per interaction, sent as prepared bytes.

An unchanged ``fast`` replay that fits one write goes out as :class:`~replaykit.server.plan.Whole` bytes,
straight to the transport: they must be the very bytes aiohttp's own response path writes (a fault that
changes nothing sends the same recording through it), and only a request that can take them gets them.
An unchanged plan shares the parts made once; a plan that faults change has its own. A request body is
parsed when first read: a request whose bytes are the recording's own is answered without parsing it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from unittest import mock

import pytest
from aiohttp.http import HttpVersion, HttpVersion10, HttpVersion11
from server_support import (
    ANTHROPIC,
    SSE_TYPE,
    anthropic_events,
    anthropic_request,
    cassette_of,
    connect,
    message_cassette,
    post_head,
    raw_exchange,
    request,
    stream_cassette,
    stream_interaction,
    stream_request,
    undated,
)

from replaykit.cassette import Cassette, Interaction, Response
from replaykit.routes import classify
from replaykit.server import Timing, matching, streaming
from replaykit.server.exchange import Settings, State, _replay_plan
from replaykit.server.faults import Fault, apply_all
from replaykit.server.matching import Pool, Received, slots_of
from replaykit.server.plan import recorded_whole, replay_headers, unchanged_plan
from replaykit.server.prepared import BATCH_LIMIT, LAST_CHUNK


@pytest.fixture
def prepared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many responses went out as prepared bytes (one item per response, its events)."""
    sent: list[int] = []
    real = streaming.send_whole

    def spy(transport: Any, whole: Any, progress: Any, writer: Any = None) -> bool:
        sent.append(whole.chunks)
        return real(transport, whole, progress, writer)

    monkeypatch.setattr(streaming, "send_whole", spy)
    return sent


def _body(cassette: Cassette) -> bytes:
    """The very request body recorded in the cassette's first interaction."""
    body = cassette.interactions[0].request.body
    assert body is not None
    return body


def _exchange(url: str, body: bytes, *, extra: str = "") -> bytes:
    """One request on a new connection; the response read to the end of its chunked body."""
    with connect(url) as sock:
        sock.sendall(post_head(len(body), extra=extra) + body)
        reply = b""
        while not reply.endswith(LAST_CHUNK):
            data = sock.recv(1 << 16)
            assert data, f"the connection closed mid-response: {reply[:300]!r}"
            reply += data
    return undated(reply)


def _with_headers(**headers: str) -> Cassette:
    cassette = stream_cassette()
    cassette.interactions[0].response.headers.update({name: [value] for name, value in headers.items()})
    return cassette


@pytest.mark.parametrize("headers", [{}, {"server": "recorded/1.0", "date": "Tue, 01 Dec 2026 10:00:00 GMT"}])
def test_a_prepared_response_is_the_bytes_aiohttp_writes(serve: Any, prepared: list[int],
                                                        headers: dict[str, str]) -> None:
    cassette = _with_headers(**headers)
    fast = serve(cassette, repeat=True)
    general = serve(cassette, repeat=True, lane=False)  # aiohttp writes every byte
    ours = _exchange(fast.url, _body(cassette))
    assert prepared == [len(cassette.interactions[0].response.events)]
    theirs = _exchange(general.url, _body(cassette))
    assert len(prepared) == 1  # the other went through aiohttp's response
    assert ours == theirs
    head = ours.partition(b"\r\n\r\n")[0].decode()
    assert head.startswith(f"HTTP/1.1 200 OK\r\ncontent-type: {SSE_TYPE}\r\n")
    lowered = head.lower()
    assert ("server: recorded/1.0" in lowered) is bool(headers) and lowered.count("\r\nserver: ") == 1
    assert ("Date: -" in head) is not bool(headers) and lowered.count("\r\ndate: ") == 1
    assert "Transfer-Encoding: chunked" in head


def _sized_exchange(url: str, body: bytes) -> bytes:
    """One request on a new connection; the response read to the end of its ``Content-Length`` body."""
    with connect(url) as sock:
        sock.sendall(post_head(len(body)) + body)
        reply = b""
        while b"\r\n\r\n" not in reply or len(reply.partition(b"\r\n\r\n")[2]) < _length(reply):
            data = sock.recv(1 << 16)
            assert data, f"the connection closed mid-response: {reply[:300]!r}"
            reply += data
    return undated(reply)


def _length(reply: bytes) -> int:
    found = re.search(rb"\r\nContent-Length: (\d+)\r\n", reply, re.IGNORECASE)
    assert found, f"no Content-Length: {reply[:300]!r}"
    return int(found[1])


@pytest.mark.parametrize(
    ("status", "headers", "body"),
    [
        (200, {"content-type": ["application/json"], "request-id": ["req_1"]}, b'{"ok": true}'),
        (200, {}, b"no type recorded"),  # aiohttp's default Content-Type
        (200, {}, b""),  # an empty body gets none
        (599, {"content-type": ["application/json"]}, b"{}"),  # a status with no reason phrase
    ],
)
def test_a_prepared_body_is_the_bytes_aiohttp_writes(serve: Any, prepared: list[int], status: int,
                                                    headers: dict[str, list[str]], body: bytes) -> None:
    recorded = Response(status, "", headers, body)
    cassette = cassette_of(Interaction(request(ANTHROPIC, anthropic_request()), recorded))
    fast = serve(cassette, repeat=True)
    general = serve(cassette, repeat=True, lane=False)  # aiohttp writes every byte
    ours = _sized_exchange(fast.url, _body(cassette))
    assert prepared == [1]
    theirs = _sized_exchange(general.url, _body(cassette))
    assert len(prepared) == 1 and ours == theirs
    assert ours.startswith(f"HTTP/1.1 {status} ".encode()) and ours.endswith(b"\r\n\r\n" + body)
    assert f"\r\nContent-Length: {len(body)}\r\n".encode() in ours


def test_each_response_on_a_kept_alive_connection_is_prepared(serve: Any, prepared: list[int]) -> None:
    cassette = stream_cassette()
    fake = serve(cassette, repeat=True)
    body = _body(cassette)
    with connect(fake.url) as sock:
        for _ in range(3):
            sock.sendall(post_head(len(body)) + body)
            reply = b""
            while not reply.endswith(LAST_CHUNK):
                reply += sock.recv(1 << 16)
    assert len(prepared) == 3
    journaled = [(e.verdict, e.outcome, e.chunks) for e in fake.journal]
    assert journaled == [("served", "complete", prepared[0])] * 3


@pytest.mark.parametrize(
    ("request_line", "extra", "expect"),
    [
        ("POST /v1/messages HTTP/1.0", "", b"HTTP/1.0 200 OK\r\n"),  # no chunked encoding
        ("POST /v1/messages HTTP/1.1", "Connection: close\r\n", b"\r\nConnection: close\r\n"),
    ],
)
def test_a_request_that_cannot_take_it_gets_aiohttps_response(serve: Any, prepared: list[int],
                                                              request_line: str, extra: str,
                                                              expect: bytes) -> None:
    """HTTP/1.0, or a connection the client closes: aiohttp frames the response and ends the connection."""
    cassette = stream_cassette()
    fake = serve(cassette)
    body = _body(cassette)
    head = post_head(len(body), extra=extra).replace(b"POST /v1/messages HTTP/1.1", request_line.encode())
    reply = raw_exchange(fake.url, head + body)  # read until the server closes the connection
    assert expect in reply and prepared == []
    events = cassette.interactions[0].response.events
    assert reply.endswith(events[-1].raw if "1.0" in request_line else LAST_CHUNK)


@pytest.mark.parametrize(
    ("version", "keep_alive", "method", "plain"),
    [
        (HttpVersion11, True, "POST", True),
        (HttpVersion10, True, "POST", False),  # kept alive (Connection: keep-alive), but no chunked encoding
        (HttpVersion11, False, "POST", False),  # Connection: close (the end-to-end test above sends it)
        (HttpVersion11, True, "HEAD", False),  # no body
    ],
)
def test_only_a_plain_request_takes_prepared_bytes(version: HttpVersion, keep_alive: bool, method: str,
                                                   plain: bool) -> None:
    transport = mock.Mock()
    transport.is_closing.return_value = False
    request = SimpleNamespace(version=version, keep_alive=keep_alive, method=method, transport=transport)
    assert streaming._plain(cast(Any, request)) is plain
    transport.is_closing.return_value = True  # the client is gone: aiohttp's path says so
    assert streaming._plain(cast(Any, request)) is False


def test_what_one_write_cannot_carry_is_not_prepared() -> None:
    response = _with_headers().interactions[0].response
    whole = recorded_whole(response, {})
    assert whole is not None and whole.rest.endswith(LAST_CHUNK)
    response.headers["x-bad"] = ["a\nb"]  # aiohttp refuses it (header injection): its path says so
    assert recorded_whole(response, {}) is None
    events = anthropic_events(3)
    events[2][1]["delta"]["text"] = "x" * BATCH_LIMIT  # more than one write
    long = cassette_of(stream_interaction(ANTHROPIC, anthropic_request(), events)).interactions[0].response
    assert recorded_whole(long, {}) is None


def test_a_body_up_to_one_write_is_prepared() -> None:
    response = message_cassette("a").interactions[0].response
    response.body = b"x" * BATCH_LIMIT
    whole = recorded_whole(response, {})
    assert whole is not None and whole.chunks == 1 and whole.rest.endswith(b"\r\n\r\n" + response.body)
    response.body += b"x"
    assert recorded_whole(response, {}) is None


@pytest.mark.parametrize("status", [101, 204, 304])
def test_a_status_without_a_body_is_not_prepared(status: int) -> None:
    """aiohttp sends no body, no length and no type for these: its own path answers them."""
    response = Response(status, "", {"content-type": ["application/json"]}, b"")
    assert recorded_whole(response, {}) is None
    response.status = 200
    assert recorded_whole(response, {}) is not None


@pytest.mark.parametrize("kind", ["stream", "body"])
def test_an_unchanged_plan_is_the_recording_for_its_provider(kind: str) -> None:
    """Headers, length, events (views into the recorded body) and the whole response; a plan for an equal
    timing or another provider shares them, each plan naming its own provider."""
    cassette = stream_cassette() if kind == "stream" else message_cassette("a")
    response, memo = cassette.interactions[0].response, {}
    plan = unchanged_plan(response, Timing.parse("fast"), "anthropic", memo)
    assert plan.stream is response.is_stream and plan.provider == "anthropic"
    assert plan.headers == replay_headers(response) and b"".join(plan.chunks) == response.body
    assert plan.whole is not None and plan.whole.chunks == len(plan.chunks)
    if kind == "stream":
        assert plan.length is None and len(plan.chunks) == len(response.events)
        assert all(isinstance(chunk, memoryview) and chunk.obj is response.body for chunk in plan.chunks)
    else:
        assert plan.length == len(response.body) and plan.chunks == [response.body]
    again = unchanged_plan(response, Timing.parse("fast"), "openai", memo)
    assert again.provider == "openai" and again.chunks is plan.chunks and again.whole is plan.whole


def _state(cassette: Cassette, timing: str = "fast") -> tuple[State, Any]:
    slot = slots_of("c", cassette.interactions)[0]
    return State(Pool([slot]), Settings(Timing.parse(timing))), slot


def test_unchanged_plans_share_the_parts_made_once() -> None:
    state, slot = _state(stream_cassette())
    first, second = _replay_plan(state, slot, []), _replay_plan(state, slot, [])
    assert first is not second and first.notes is not second.notes
    assert first.chunks is second.chunks and first.framed is second.framed and first.whole is second.whole
    assert first.whole is not None and first.headers is second.headers


def test_a_faulted_plan_changes_its_own_parts_only() -> None:
    state, slot = _state(stream_cassette())
    unchanged = _replay_plan(state, slot, [])
    events = len(unchanged.chunks)
    faults = [Fault.parse("kind=drop_terminal")]
    faulted = _replay_plan(state, slot, faults)
    assert [applied for _, applied in apply_all(faulted, faults)] == [True]
    assert len(faulted.chunks) == events - 1 and faulted.whole is None and faulted.framed is None
    again = _replay_plan(state, slot, [])
    assert len(again.chunks) == events and again.chunks is unchanged.chunks and again.whole is not None


def test_unchanged_parts_follow_the_timing() -> None:
    state, slot = _state(stream_cassette())
    assert _replay_plan(state, slot, []).whole is not None
    state.settings = Settings(Timing.parse("fixed:5"))
    timed = _replay_plan(state, slot, [])
    assert timed.whole is None and timed.framed is None and timed.timed


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The request bodies parsed as JSON (the recordings' own are parsed by the cassette model)."""
    parsed: list[bytes] = []
    real = matching.body_json

    def spy(body: bytes | None) -> Any:
        parsed.append(body or b"")
        return real(body)

    monkeypatch.setattr(matching, "body_json", spy)
    return parsed


def test_a_request_with_the_recordings_bytes_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = _parses(monkeypatch)
    cassette = stream_cassette()
    slot = slots_of("c", cassette.interactions)[0]
    pool = Pool([slot], repeat=True)
    route = classify("POST", "/v1/messages")
    same = Received.build("POST", "/v1/messages", {}, {}, _body(cassette), route)
    assert pool.match(same).slot is slot and parsed == []
    other = json.dumps({**stream_request(), "max_tokens": 7}).encode()
    differs = Received.build("POST", "/v1/messages", {}, {}, other, route)
    match = pool.match(differs)
    assert match.slot is slot and [row["pointer"] for row in match.diff] == ["/max_tokens"]
    assert differs.json["max_tokens"] == 7 and parsed == [other]  # parsed once: matcher, diff and reader
    plain = Received.build("POST", "/v1/messages", {}, {}, json.dumps(anthropic_request()).encode(), route)
    assert pool.match(plain).slot is None and "stream" not in plain.json  # a stream only for a stream


def test_a_served_request_with_the_recordings_bytes_is_never_parsed(serve: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cassette = stream_cassette()
    # the request contract's verdict parses a body the first time this process sees it (then it is cached
    # by the body's hash, replaykit.server.verdicts): seen once on another server before counting
    _exchange(serve(cassette).url, _body(cassette))
    parsed = _parses(monkeypatch)
    fake = serve(cassette, repeat=True)
    for _ in range(2):
        _exchange(fake.url, _body(cassette))
    assert [entry.verdict for entry in fake.journal] == ["served"] * 2 and parsed == []


def test_the_journal_file_has_the_body_never_parsed_for_matching(serve: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = _parses(monkeypatch)
    cassette = stream_cassette()
    fake = serve(cassette, journal_file=tmp_path / "journal.jsonl")
    _exchange(fake.url, _body(cassette))
    fake.stop()
    line = json.loads((tmp_path / "journal.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert line["body"] == json.loads(_body(cassette)) and line["verdict"] == "served"
    assert parsed == [_body(cassette)]  # once, for the file
