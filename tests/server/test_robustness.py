"""Hostile or unusual requests are served, journaled and written out without crashing the server."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import anthropic_request, message_cassette, stream_cassette, stream_request

from replaykit import sse

pytestmark = pytest.mark.both_lanes  # every response the same with the lane and without it


def _raw_post(url: str, body: bytes, version: str = "1.1") -> bytes:
    host, port = url.removeprefix("http://").split(":")
    head = (f"POST /v1/messages HTTP/{version}\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head + body)
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    return data


def test_a_lone_surrogate_in_a_request_is_journaled_and_written(serve: Any, tmp_path: Path) -> None:
    fake = serve(stream_cassette())
    body = json.dumps({**anthropic_request(), "note": "\ud800"}).encode()  # ASCII: "\\ud800" on the wire
    httpx.post(f"{fake.url}/v1/messages", content=body).read()
    fake.write_journal(tmp_path / "journal.jsonl")
    lines = (tmp_path / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["body"]["note"] == "\ud800"


def test_a_body_nested_too_deep_to_parse_is_served_like_any_non_json_body(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    response = httpx.post(f"{fake.url}/v1/messages", content=b"[" * 100_000 + b"]" * 100_000)
    assert response.status_code == 200
    [entry] = fake.journal
    assert isinstance(entry.body, str)  # kept as text, like any body that is not JSON
    assert [v["message"] for v in entry.request_violations] == [
        "the request body is empty, not JSON, or nested deeper than 128 levels"]


def test_a_stream_event_nested_too_deep_is_replayed_and_journaled_as_not_json(serve: Any) -> None:
    deep = sse.encode("[" * 100_000 + "]" * 100_000, event="message_start").raw
    tape = stream_cassette()
    tape.interactions[0].response.body = deep + tape.interactions[0].response.body
    fake = serve(tape, enforce_contracts=True)
    response = httpx.post(f"{fake.url}/v1/messages", json=stream_request())
    assert response.status_code == 200 and response.content.startswith(deep)
    [entry] = fake.journal
    assert {"keyword": "json", "message": "data: JSON nested deeper than 128 levels", "event": 0}.items() \
        <= entry.response_violations[0].items()


def test_an_http_1_0_client_gets_the_events_without_chunk_framing(serve: Any) -> None:
    fake = serve(stream_cassette())
    reply = _raw_post(fake.url, json.dumps(stream_request()).encode(), version="1.0")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and b"transfer-encoding" not in head.lower()
    recorded = stream_cassette().interactions[0].response.body
    assert body == recorded
    assert sse.parse(body)[0].type == "message_start"


def test_a_request_body_over_aiohttp_s_default_limit_is_served(serve: Any) -> None:
    fake = serve(stream_cassette())
    body = {**stream_request(), "messages": [{"role": "user", "content": "x" * (3 << 20)}]}
    raw = json.dumps(body).encode()
    response = httpx.post(f"{fake.url}/v1/messages", content=raw, timeout=30)
    assert response.status_code == 200
    entry = fake.journal[0]  # received whole; the journal keeps its head, length and digest
    assert (entry.body_bytes, entry.body_sha256) == (len(raw), hashlib.sha256(raw).hexdigest())
    assert entry.body_truncated and raw.decode().startswith(entry.body)


def test_expect_100_continue_is_answered_before_the_body(serve: Any) -> None:
    """curl sends ``Expect: 100-continue`` for bodies over 1 MiB and waits for the interim answer."""
    fake = serve(stream_cassette())
    body = json.dumps(stream_request()).encode()
    head = (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n" % len(body))
    with socket.create_connection(("127.0.0.1", fake.port), timeout=0.5) as sock:
        sock.sendall(head)
        assert sock.recv(1 << 16).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")  # a timeout if never sent
        sock.sendall(body)
        sock.settimeout(5)
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK\r\n") and data.endswith(b"\r\n0\r\n\r\n")
    assert fake.journal[0].body == stream_request()
