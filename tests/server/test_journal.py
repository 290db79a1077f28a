"""The journal: every entry valid against its contract, secrets redacted, over HTTP and as JSON Lines."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import (
    ANTHROPIC,
    anthropic_message,
    anthropic_request,
    cassette_of,
    json_interaction,
    message_cassette,
    stream_cassette,
    stream_request,
)

from replaykit import contracts
from replaykit.errors import UsageError
from replaykit.redact import SECRET_HEADERS, redact_header
from replaykit.server import FakeProvider, Fault
from replaykit.server.exchange import _timestamp
from replaykit.server.journal import BODY_HEAD, Entry, Journal


def _session(fake: FakeProvider) -> None:
    """One request of every verdict and outcome."""
    url = f"{fake.url}/v1/messages"
    fake.inject(Fault("status", nth=1, status=429))
    httpx.post(url, json=anthropic_request())  # fault
    httpx.post(url, content=b"not json")  # served (the message)
    fake.inject(Fault("disconnect", nth=3, after=2))
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(url, json=stream_request())  # served, disconnected
    httpx.post(url, json=stream_request())  # served (the stream)
    httpx.post(url, json={"x": 1})  # unmatched
    httpx.post(f"{fake.url}/nowhere?a=1&a=2")  # unmatched, no provider


def test_every_entry_validates_against_the_contract(serve: Any) -> None:
    fake = serve(message_cassette("a"), stream_cassette())
    _session(fake)
    journal = fake.journal
    assert [e.verdict for e in journal] == ["fault", "served", "served", "served", "unmatched", "unmatched"]
    assert [e.outcome for e in journal] == [
        "complete",
        "complete",
        "disconnected",
        "complete",
        "complete",
        "complete",
    ]
    for entry in journal:
        assert contracts.validate("replaykit.journal-entry", entry.to_json()) == [], entry.seq
    assert journal[1].body == "not json" and journal[5].query == {"a": ["1", "2"]}


def test_the_contract_catches_a_broken_entry(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    httpx.post(f"{fake.url}/v1/messages")
    entry = fake.journal[0].to_json()
    broken = [
        {**entry, "verdict": "maybe"},
        {**entry, "seq": 0},
        {k: v for k, v in entry.items() if k != "path"},
        {**entry, "matched": {"cassette": "c", "index": -1, "line": None}},
        {**entry, "extra": 1},
    ]
    for bad in broken:
        assert contracts.validate("replaykit.journal-entry", bad) != []


def test_the_journal_scrubs_exactly_what_the_redactor_scrubs(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    sent = {name: "Basic " + "dXNlcjpw" + "YXNzd29yZA==" for name in SECRET_HEADERS}
    httpx.post(f"{fake.url}/v1/messages", headers={**sent, "x-trace": "kept"})
    headers = fake.journal[0].headers
    assert {name: headers[name] for name in SECRET_HEADERS} == {name: redact_header(name, value)
                                                               for name, value in sent.items()}
    assert "proxy-authorization" in SECRET_HEADERS and headers["proxy-authorization"] == "Basic REDACTED"
    assert headers["x-trace"] == "kept"


def test_secret_headers_are_redacted(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    key = "sk-ant-" + "api03-" + "Q" * 20
    httpx.post(
        f"{fake.url}/v1/messages",
        headers={"x-api-key": key, "authorization": "Bearer " + key, "x-trace": "kept"},
    )
    headers = fake.journal[0].headers
    assert headers["x-api-key"] == "REDACTED" and headers["authorization"] == "Bearer REDACTED"
    assert headers["x-trace"] == "kept"
    assert key not in json.dumps(fake.journal[0].to_json())


def test_admin_endpoints(serve: Any) -> None:
    fake = serve(message_cassette("a", "b"))
    httpx.post(f"{fake.url}/v1/messages")
    over_http = httpx.get(f"{fake.url}/__replaykit/journal").json()
    assert over_http == [e.to_json() for e in fake.journal]
    for path in ("journal", "unused"):  # a readiness probe (curl -I) is answered, and not journaled
        assert httpx.head(f"{fake.url}/__replaykit/{path}").status_code == 200
    assert len(fake.journal) == 1
    assert [u["index"] for u in httpx.get(f"{fake.url}/__replaykit/unused").json()] == [1]
    added = httpx.post(f"{fake.url}/__replaykit/faults", json=[{"kind": "status", "status": 500}])
    assert added.json() == [{"kind": "status", "status": 500}]
    assert httpx.post(f"{fake.url}/v1/messages").status_code == 500
    bad = httpx.post(f"{fake.url}/__replaykit/faults", json={"kind": "explode"})
    assert bad.status_code == 400 and "kind='explode'" in bad.json()["error"]
    assert httpx.post(f"{fake.url}/__replaykit/reset").json() == {"reset": True}
    assert fake.journal == [] and fake.faults == []
    assert httpx.post(f"{fake.url}/v1/messages").json()["content"][0]["text"] == "a"  # counters reset too
    assert fake.journal[0].seq == 1


def test_write_jsonl(serve: Any, tmp_path: Path) -> None:
    fake = serve(message_cassette("a"))
    httpx.post(f"{fake.url}/v1/messages")
    httpx.post(f"{fake.url}/v1/messages")
    path = tmp_path / "out" / "journal.jsonl"
    fake.write_journal(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [e.to_json() for e in fake.journal]
    assert sorted(p.name for p in path.parent.iterdir()) == ["journal.jsonl"]


def test_write_jsonl_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text("old\n", encoding="utf-8")
    journal = Journal()
    journal.append(Entry(1, "t", None, "r", "GET", "/", {}, {}, None))

    def fail(*_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(UsageError, match="cannot write the journal: disk full"):
        journal.write_jsonl(path)
    assert path.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["journal.jsonl"]


def test_an_unwritable_journal_path_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(UsageError, match=r"cannot write the journal: .*writable folder"):
        Journal().write_jsonl(blocker / "journal.jsonl")


def test_concurrent_requests_get_distinct_sequence_numbers(serve: Any) -> None:
    fake = serve(message_cassette(*"abcdefghijklmnop"))
    barrier = threading.Barrier(8)

    def client() -> None:
        barrier.wait()
        with httpx.Client() as session:
            for _ in range(2):
                session.post(f"{fake.url}/v1/messages")

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    journal = fake.journal
    assert sorted(e.seq for e in journal) == list(range(1, 17))
    assert sorted(e.matched["index"] for e in journal if e.matched) == list(range(16))
    assert fake.unused() == []


def test_journal_entries_keep_arrival_order() -> None:
    journal = Journal()
    for seq in (2, 3, 1):
        journal.append(Entry(seq, "t", None, "r", "GET", "/", {}, {}))
    assert [e.seq for e in journal.entries()] == [1, 2, 3]


@pytest.mark.parametrize(("make", "sent"), [(lambda: message_cassette("a"), anthropic_request()),
                                            (stream_cassette, stream_request())])
def test_the_entry_is_journaled_before_the_client_has_its_response(
    serve: Any, monkeypatch: pytest.MonkeyPatch, make: Any, sent: dict[str, Any]
) -> None:
    from replaykit.server import exchange as app

    late_close = app._Exchange.close

    def slow_close(self: Any) -> None:
        threading.Event().wait(0.3)  # the handler is slow to finish after the last byte left
        late_close(self)

    monkeypatch.setattr(app._Exchange, "close", slow_close)
    fake = serve(make())
    assert httpx.post(f"{fake.url}/v1/messages", json=sent).status_code == 200
    entry = fake.journal[0]  # already there, with its final outcome
    assert (entry.verdict, entry.outcome, entry.status) == ("served", "complete", 200)
    assert fake.unused() == []


def test_times_are_utc_iso_8601_to_the_millisecond(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    before = datetime.now(UTC) - timedelta(milliseconds=1)
    httpx.post(f"{fake.url}/v1/messages", json=anthropic_request())
    after = datetime.now(UTC)
    stamp = fake.journal[0].time
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    assert before <= datetime.fromisoformat(stamp.replace("Z", "+00:00")) <= after


@pytest.mark.parametrize(
    ("now", "text"),
    [(0.0, "1970-01-01T00:00:00.000Z"), (1764680645.9999, "2025-12-02T13:04:05.999Z"),
     (1764680646.0004, "2025-12-02T13:04:06.000Z")],
)
def test_a_timestamp_never_rounds_into_the_next_second(now: float, text: str) -> None:
    assert _timestamp(now) == text


# ---------------------------------------------------------------- the journal file: an append-only log


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_journal_file_gets_each_entry_as_it_completes(serve: Any, tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    fake = serve(message_cassette("a", "b"), journal_file=path)
    httpx.post(f"{fake.url}/v1/messages", json=anthropic_request("a"))
    assert _lines(path) == [e.to_json() for e in fake.journal]  # written and flushed while serving
    httpx.post(f"{fake.url}/nowhere")
    assert [e["verdict"] for e in _lines(path)] == ["served", "unmatched"]
    for entry in _lines(path):
        assert contracts.validate("replaykit.journal-entry", entry) == []


def test_the_journal_file_starts_empty_and_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text('{"an old": "session"}\n', encoding="utf-8")
    stale = [tmp_path / ".journal.jsonl.k3j_9xz2.tmp", tmp_path / ".replaykit-journal-check.ab12cd34"]
    kept = [tmp_path / ".other.jsonl.k3j_9xz2.tmp", tmp_path / "journal.jsonl.bak", tmp_path / "notes.txt"]
    for file in stale + kept:
        file.write_bytes(b"x" * 1000)
    with FakeProvider(message_cassette("a"), journal_file=path):
        assert path.read_text(encoding="utf-8") == ""
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in [path, *kept])


def test_an_unwritable_journal_file_fails_at_start(tmp_path: Path) -> None:
    fake = FakeProvider(message_cassette("a"), journal_file=tmp_path)
    with pytest.raises(UsageError, match=r"is a folder; give a file path"):
        fake.start()
    assert not fake.running


def test_a_hung_request_is_in_the_journal_file_after_stop(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    fake = FakeProvider(stream_cassette(), journal_file=path, faults=[Fault("stall", after=1)]).start()
    with httpx.stream("POST", f"{fake.url}/v1/messages", json=stream_request()) as response:
        next(response.iter_raw())
        fake.stop()
    assert [(e["outcome"], e["verdict"]) for e in _lines(path)] == [("hung", "served")]


# ---------------------------------------------------------------- request bodies in the journal


def _big_request(size: int) -> dict[str, Any]:
    return anthropic_request("é" + "x" * size)


def test_a_big_body_is_journaled_cut_with_its_length_and_digest(serve: Any) -> None:
    sent = _big_request(200_000)
    raw = json.dumps(sent).encode()
    fake = serve(cassette_of(json_interaction(ANTHROPIC, sent, anthropic_message())), strict=True)
    assert httpx.post(f"{fake.url}/v1/messages", content=raw).status_code == 200  # matched on the whole body
    [entry] = fake.journal
    assert entry.verdict == "served" and entry.body_truncated
    assert (entry.body_bytes, entry.body_sha256) == (len(raw), hashlib.sha256(raw).hexdigest())
    assert isinstance(entry.body, str) and raw.decode().startswith(entry.body)
    assert len(entry.body.encode()) <= BODY_HEAD
    assert contracts.validate("replaykit.journal-entry", entry.to_json()) == []


def test_a_small_body_is_journaled_whole_with_its_length_and_digest(serve: Any) -> None:
    fake = serve(message_cassette("a"))
    raw = json.dumps(anthropic_request("a")).encode()
    httpx.post(f"{fake.url}/v1/messages", content=raw)
    [entry] = fake.journal
    assert (entry.body, entry.body_truncated) == (anthropic_request("a"), False)
    assert (entry.body_bytes, entry.body_sha256) == (len(raw), hashlib.sha256(raw).hexdigest())


def test_journal_bodies_full_keeps_every_byte(serve: Any) -> None:
    sent = _big_request(200_000)
    fake = serve(message_cassette("a"), journal_bodies="full")
    httpx.post(f"{fake.url}/v1/messages", json=sent)
    [entry] = fake.journal
    assert (entry.body, entry.body_truncated) == (sent, False)


# ---------------------------------------------------------------- an entry on one line


def _entry(**fields: Any) -> Entry:
    return Entry(3, "t", "anthropic", "anthropic.messages", "POST", "/v1/messages", {}, {}, **fields)


def test_an_entry_on_one_line_says_what_answered() -> None:
    served = _entry(verdict="served", status=200, stream=True, outcome="complete",
                    matched={"cassette": "a.yaml", "index": 0, "line": 3},
                    diff=[{"pointer": "/model", "change": "changed", "received": "m", "recorded": "n"}])
    assert served.summary() == ('#3 POST /v1/messages 200 served a.yaml#0 (stream); the body differs: '
                                '/model: sent "m", recorded "n"')
    near = {"cassette": "a.yaml", "index": 1, "line": 9, "route": "r", "failed": ["stream"], "diff": []}
    unmatched = _entry(verdict="unmatched", status=404, outcome="complete", error="none passes\n(stream)",
                       near_misses=[near])
    assert unmatched.summary() == ("#3 POST /v1/messages 404 unmatched: none passes (stream); nearest: "
                                   "a.yaml#1 (refused by: stream)")
    faulted = _entry(verdict="fault", status=529, outcome="client_closed",
                     faults=[{"kind": "status", "applied": True}, {"kind": "stall", "applied": False}])
    assert faulted.summary() == "#3 POST /v1/messages 529 fault (client_closed); faults: status"


# ---------------------------------------------------------------- the window in memory, the whole file


def test_the_window_keeps_the_last_entries_and_the_file_every_one(serve: Any, tmp_path: Path) -> None:
    log = tmp_path / "journal.jsonl"
    fake = serve(message_cassette("a"), repeat=True, journal_window=3, journal_file=log)
    for _ in range(7):
        assert httpx.post(f"{fake.url}/v1/messages", json=anthropic_request()).status_code == 200
    assert [entry.seq for entry in fake.journal] == [5, 6, 7] and fake.journal_dropped == 4
    admin = httpx.get(f"{fake.url}/__replaykit/journal")
    assert [entry["seq"] for entry in admin.json()] == [5, 6, 7]
    headers = admin.headers
    assert (headers["x-replaykit-journal-dropped"], headers["x-replaykit-journal-window"]) == ("4", "3")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted({line["seq"] for line in lines}) == list(range(1, 8))
    assert all(line["body"] == anthropic_request() for line in lines)
    fake.reset()
    assert (fake.journal, fake.journal_dropped) == ([], 0)


def test_the_window_drops_the_oldest_and_keeps_seq_order() -> None:
    journal = Journal(window=3)
    for seq in (1, 3, 2, 5, 4, 6):
        journal.append(Entry(seq, "t", None, "r", "GET", "/", {}, {}))
    assert [e.seq for e in journal.entries()] == [4, 5, 6] and journal.dropped == 3


@pytest.mark.parametrize("window", [0, -1, True, 2.5])
def test_a_window_must_be_a_count(window: Any) -> None:
    with pytest.raises(UsageError, match="journal_window"):
        Journal(window=window)


def test_an_entry_keeps_the_request_bytes_not_a_parsed_copy() -> None:
    raw = json.dumps(anthropic_request()).encode()
    entry = Entry(1, "t", None, "r", "POST", "/", {}, {}, raw)
    assert entry.raw is raw and entry.body == anthropic_request() and entry.to_json()["body"] == entry.body
