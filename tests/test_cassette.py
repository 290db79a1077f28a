"""replaykit.cassette: layouts read, bodies exposed, fingerprint, atomic saves, the cache, every bad input."""

from __future__ import annotations

import base64
import gzip
import hashlib
import itertools
import json
import os
import re
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import brotli  # type: ignore[import-untyped]
import pytest
import yaml
from _pytest.monkeypatch import MonkeyPatch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from recordings import RECORDED, RECORDINGS

from replaykit import cassette, sse
from replaykit.cassette import Cassette, Interaction, Meta, Request, Response, model, read, yamlio
from replaykit.errors import CassetteError, UsageError

DATA = Path(__file__).resolve().parent / "data" / "cassette"

JSON_BODY = {"type": "message", "content": [{"type": "text", "text": "héllo"}]}
STREAM = (b"event: message_start\ndata: {\"type\":\"message_start\"}   \n\n"
          b": ping\n\n"
          b"event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n")


def write(folder: Path, text: str | bytes, name: str = "c.yaml") -> Path:
    path = folder / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def one(response: str, request: str = "    method: POST\n    uri: http://127.0.0.1:9/v1/messages\n") -> str:
    """A version-1 cassette with one interaction; ``response`` is the indented body of ``response:``."""
    return f"version: 1\ninteractions:\n- request:\n{request}  response:\n{response}"


def stream_cassette() -> Cassette:
    request = Request("POST", "http://127.0.0.1:9/v1/messages", {"content-type": ["application/json"]},
                      json.dumps({"stream": True}).encode())
    response = Response(200, "OK", {"content-type": ["text/event-stream"]}, STREAM, [0.0, 12.5, 30])
    return Cassette([Interaction(request, response)], Meta(origin="synthesized", provider="anthropic"))


# ---------------------------------------------------------------- layouts


def test_stock_vcrpy_text_bodies(tmp_path: Path) -> None:
    text = one("    status: {code: 200, message: OK}\n    headers: {Content-Type: [application/json]}\n"
               f"    body: {{string: '{json.dumps(JSON_BODY)}'}}\n",
               "    method: POST\n    uri: http://127.0.0.1:9/v1/messages\n    body: '{\"a\": 1}'\n"
               "    headers: {content-type: [application/json]}\n")
    loaded = cassette.load(write(tmp_path, text))
    [item] = loaded.interactions
    assert item.request.json() == {"a": 1} and item.request.body == b'{"a": 1}'
    assert item.response.json() == JSON_BODY
    assert (item.response.status, item.response.reason, item.response.header("content-type")) == (
        200, "OK", "application/json")
    assert item.line == 3 and loaded.path == tmp_path / "c.yaml"


@pytest.mark.parametrize(("encoding", "encode"), [
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send it
    ("br", brotli.compress),
    ("gzip, br", lambda b: brotli.compress(gzip.compress(b))),
])
def test_binary_bodies_with_content_encoding_are_decoded(tmp_path: Path, encoding: str, encode: Any) -> None:
    raw = json.dumps(JSON_BODY).encode()
    blob = base64.encodebytes(encode(raw)).decode().replace("\n", "")
    text = one("    status: {code: 200, message: OK}\n    headers:\n"
               f"      Content-Encoding: ['{encoding}']\n      content-type: [application/json]\n"
               f"    body:\n      string: !!binary |\n        {blob}\n")
    [item] = cassette.load(write(tmp_path, text)).interactions
    assert item.response.body == raw
    assert item.response.json() == JSON_BODY


def test_text_body_that_is_compressed_bytes() -> None:
    """vcrpy stores compressed bytes as text when they happen to be UTF-8 (br of an empty body is ";")."""
    raw = b""
    compressed = brotli.compress(raw)
    assert compressed.decode("utf-8") == ";"  # the premise: these bytes are valid UTF-8
    doc = {"version": 1, "interactions": [{
        "request": {"method": "GET", "uri": "http://127.0.0.1:9/", "body": None, "headers": {}},
        "response": {"status": {"code": 200, "message": "OK"}, "headers": {"content-encoding": ["br"]},
                     "body": {"string": compressed.decode()}}}]}
    [item] = cassette.loads(yaml.safe_dump(doc)).interactions
    assert item.response.body == raw


def test_pydantic_ai_parsed_body_layout(tmp_path: Path) -> None:
    text = one("    status:\n      code: 200\n      message: OK\n    headers:\n      content-type:\n"
               "      - application/json\n    parsed_body:\n      type: message\n      text: “quoted”\n",
               "    method: POST\n    uri: http://127.0.0.1:9/v1/messages\n    parsed_body:\n      model: m\n"
               "      temperature: 1.0\n")
    [item] = cassette.load(write(tmp_path, text)).interactions
    assert item.request.body == b'{"model": "m", "temperature": 1.0}'  # what pydantic-ai's own replay sends
    assert item.response.json() == {"type": "message", "text": "“quoted”"}


def test_old_httpx_layout_and_python_tags(tmp_path: Path) -> None:
    text = ("version: 1\ninteractions:\n- request:\n    method: !!python/unicode GET\n"
            "    uri: !!python/str http://127.0.0.1:9/\n    body: null\n"
            "    headers: {accept: !!python/tuple [a, b]}\n"
            "  response:\n    status_code: 201\n    headers: {}\n    content: done\n")
    [item] = cassette.load(write(tmp_path, text)).interactions
    assert (item.request.method, item.request.headers) == ("GET", {"accept": ["a", "b"]})
    assert (item.response.status, item.response.body) == (201, b"done")


def test_other_top_level_keys_are_kept(tmp_path: Path) -> None:
    text = one("    status: {code: 204, message: No Content}\n    headers: {}\n    body: {string: ''}\n")
    text += "metadata: {recorded_at: 2026-01-01}\n"
    loaded = cassette.load(write(tmp_path, text))
    assert list(loaded.extra) == ["metadata"]
    again = cassette.loads(cassette.dumps(loaded))
    assert again.extra == loaded.extra


def test_crlf_file(tmp_path: Path) -> None:
    text = one("    status: {code: 200, message: OK}\n    headers: {}\n    body: {string: hi}\n")
    [item] = cassette.load(write(tmp_path, text.replace("\n", "\r\n"))).interactions
    assert (item.response.body, item.line) == (b"hi", 3)


def test_every_recorded_file_loads() -> None:
    assert len(RECORDINGS) >= 7
    for path in RECORDINGS:
        loaded = cassette.load(path)
        assert loaded.interactions, path
        for item in loaded.interactions:
            assert item.line is not None and item.request.method == "POST"
            if item.response.is_stream:
                assert sse.serialize(item.response.events) == item.response.body
                assert item.response.events[-1].terminated
            else:
                assert isinstance(item.response.json(), dict)
            assert isinstance(item.request.json(), dict)


def test_recorded_line_numbers_point_at_interactions() -> None:
    path = RECORDED / "pydantic-ai__anthropic_web_search_tool.yaml"
    lines = path.read_text().splitlines()
    starts = [item.line for item in cassette.load(path).interactions]
    assert len(starts) == 2 and all(lines[n - 1].startswith("- request:") for n in starts if n)


def test_vcrpy_written_gzip_fixture_loads() -> None:
    """A cassette vcrpy 9 recorded from httpx against a loopback server (gzip, deflate, br, SSE, plain)."""
    loaded = cassette.load(DATA / "vcrpy_httpx_encodings.yaml")
    bodies = {item.request.uri.rsplit("/", 1)[-1]: item.response for item in loaded.interactions}
    assert set(bodies) == {"gzip", "deflate", "br", "stream", "plain"}
    for name in ("gzip", "deflate", "br"):
        assert bodies[name].json() == {"encoding": name, "text": "héllo " * 20}
    assert [e.json()["n"] for e in bodies["stream"].events if e.dispatched] == [0, 1, 2]
    assert bodies["plain"].body == b"plain text"
    raw = yaml.safe_load((DATA / "vcrpy_httpx_encodings.yaml").read_text())
    assert isinstance(raw["interactions"][0]["response"]["body"]["string"], bytes)  # the premise: !!binary


# ---------------------------------------------------------------- bodies, events, offsets


def test_stream_events_keep_their_bytes() -> None:
    response = stream_cassette().interactions[0].response
    events = response.events
    ping = STREAM.index(b": ping")
    assert [e.raw for e in events] == [STREAM[:ping], b": ping\n\n", STREAM[ping + 8 :]]
    assert [e.type for e in events if e.dispatched] == ["message_start", "message_stop"]
    assert response.json() is None and response.is_stream


def test_events_follow_a_new_body_and_cannot_be_corrupted() -> None:
    response = stream_cassette().interactions[0].response
    response.events.clear()
    assert len(response.events) == 3
    response.body = b"data: x\n\n"
    assert [e.data for e in response.events] == ["x"]
    response.headers = {"content-type": ["application/json"]}
    assert response.events == []


def test_json_accessors() -> None:
    assert Request("GET", "u").json() is None
    assert Request("POST", "u", body=b"not json").json() is None
    body = Response(200, body=b'{"a": [1]}')
    body.json()["a"].append(2)
    assert body.json() == {"a": [1]}
    assert cassette.header({"X-A": ["1", "2"], "x-b": []}, "x-a") == "1"
    assert cassette.header({"x-b": []}, "x-b") is None


def test_offsets_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    cassette.save(stream_cassette(), path)
    assert cassette.load(path).interactions[0].response.event_offsets_ms == [0.0, 12.5, 30.0]
    stored = yaml.safe_load(path.read_text())["interactions"][0]["replaykit"]
    assert stored == {"event_offsets_ms": [0.0, 12.5, 30.0]}


# ---------------------------------------------------------------- saving


def test_save_writes_vcrpy_yaml_with_metadata(tmp_path: Path) -> None:
    response = Response(200, "OK", {"content-encoding": ["gzip"], "content-length": ["10"]}, b"\xff\x00raw")
    request = Request("POST", "http://127.0.0.1:9/x", {"Content-Length": ["3"]}, b'{"a":1}')
    item = Interaction(request, response)
    path = tmp_path / "deep" / "out.yaml"
    cassette.save(Cassette([item], Meta(origin="recorded", recorded_with="test", extra={"note": "n"})), path)
    doc = yaml.safe_load(path.read_text())
    assert list(doc) == ["version", "replaykit", "interactions"]
    assert doc["replaykit"] == {"origin": "recorded", "recorded_with": "test",
                                "fingerprint": cassette.load(path).fingerprint(), "note": "n"}
    response = doc["interactions"][0]["response"]
    assert response["body"]["string"] == b"\xff\x00raw"  # not UTF-8: !!binary
    assert response["headers"] == {"content-length": ["5"]}  # decoded body: no encoding, true length
    assert doc["interactions"][0]["request"]["headers"] == {"content-length": ["7"]}
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_save_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path) -> None:
    path = write(tmp_path, "old")
    path.chmod(0o600)
    cassette.save(stream_cassette(), path)
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_failed_save_leaves_the_old_file_and_no_temp(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    path = write(tmp_path, "old contents")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(CassetteError, match=r"c\.yaml: cannot be written: Input/output error; check"):
        cassette.save(stream_cassette(), path)
    assert path.read_text() == "old contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_save_refuses_metadata_yaml_cannot_hold(tmp_path: Path) -> None:
    bad = stream_cassette()
    bad.meta.extra["when"] = object()
    with pytest.raises(CassetteError, match=r"cannot be written.*plain YAML types"):
        cassette.save(bad, tmp_path / "x.yaml")
    assert list(tmp_path.iterdir()) == []


def test_save_into_a_file_is_a_cassette_error(tmp_path: Path) -> None:
    blocker = write(tmp_path, "", "file")
    with pytest.raises(CassetteError, match="cannot be written"):
        cassette.save(stream_cassette(), blocker / "x.yaml")


# ---------------------------------------------------------------- fingerprint


def test_fingerprint_ignores_what_is_not_traffic() -> None:
    base = stream_cassette()
    before = base.fingerprint()
    item = base.interactions[0]
    item.response.reason, item.response.event_offsets_ms = "Fine", None
    item.request.body = b'{ "stream" : true }'
    item.request.headers["Content-Length"] = ["99"]
    base.meta = Meta(origin="recorded")
    assert base.fingerprint() == before


@pytest.mark.parametrize("change", [
    lambda i: setattr(i.request, "method", "GET"),
    lambda i: setattr(i.request, "uri", i.request.uri + "?x=1"),
    lambda i: i.request.headers.update({"x-a": ["1"]}),
    lambda i: setattr(i.request, "body", b'{"stream": false}'),
    lambda i: setattr(i.response, "status", 500),
    lambda i: i.response.headers.update({"retry-after": ["1"]}),
    lambda i: setattr(i.response, "body", i.response.body.replace(b"   \n", b"\n")),
])
def test_fingerprint_changes_with_the_traffic(change: Any) -> None:
    changed = stream_cassette()
    change(changed.interactions[0])
    assert changed.fingerprint() != stream_cassette().fingerprint()


def test_fingerprint_parts_are_framed() -> None:
    """Moving bytes between adjacent parts changes the fingerprint (each part is length-prefixed)."""
    a, b = stream_cassette(), stream_cassette()
    a.interactions[0].request.method, a.interactions[0].request.uri = "POST", "xy"
    b.interactions[0].request.method, b.interactions[0].request.uri = "POSTX", "y"
    assert a.fingerprint() != b.fingerprint()


def test_recorded_fingerprints_survive_save(tmp_path: Path) -> None:
    for path in RECORDINGS:
        loaded = cassette.load(path)
        cassette.save(loaded, tmp_path / path.name)
        again = cassette.load(tmp_path / path.name)
        assert again.fingerprint() == loaded.fingerprint() == again.meta.fingerprint
        assert [i.response.body for i in again.interactions] == [i.response.body for i in loaded.interactions]


texts = st.text(max_size=30)
names = st.text(st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters=":"), min_size=1,
                max_size=12)
headers = st.dictionaries(names, st.lists(texts, min_size=1, max_size=2), max_size=4)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8)
plain_bodies = (st.none() | st.binary(max_size=40) | texts.map(str.encode)
                | json_values.map(lambda v: json.dumps(v).encode()))


@st.composite
def responses(draw: st.DrawFn) -> Response:
    if draw(st.booleans()):
        events = draw(st.lists(st.builds(sse.encode, texts.map(lambda t: t.replace("\r", "")),
                                         st.none() | st.sampled_from(["delta", "ping"])), max_size=4))
        sized = st.lists(st.floats(0, 1e6), min_size=len(events), max_size=len(events))
        offsets = draw(st.none() | sized.map(sorted))
        return Response(200, "OK", {"content-type": ["text/event-stream"]}, sse.serialize(events), offsets)
    body = draw(plain_bodies) or b""
    return Response(draw(st.integers(100, 599)), draw(texts), draw(headers), body)


requests = st.builds(Request, st.sampled_from(["GET", "POST", "delete"]), texts, headers, plain_bodies)
interactions = st.builds(Interaction, requests, responses())
cassettes = st.builds(Cassette, st.lists(interactions, max_size=3),
                      st.builds(Meta, st.none() | st.sampled_from(cassette.ORIGINS), st.none() | texts))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cassettes)
@example(Cassette([Interaction(Request("POST", "u", {}, "\r\n\x85\u2028 \t".encode()),
                               Response(200, body=b"\xef\xbb\xbfx"))]))
@example(Cassette([Interaction(Request("POST", "u", {}, b'{"lone": "\\ud800"}'), Response(200))]))
@example(Cassette([Interaction(Request("GET", "", {}, None),  # LS escaped by PyYAML: rapidyaml folded the \n
                               Response(200, headers={"content-type": ["text/event-stream"]},
                                        body="data: \ndata: \u2028\u2028\n\n".encode()))]))
def test_load_save_load_keeps_fingerprint_and_bytes(original: Cassette) -> None:
    first = cassette.loads(cassette.dumps(original), cache=False)
    second = cassette.loads(cassette.dumps(first), cache=False)
    assert first.fingerprint() == second.fingerprint() == original.fingerprint() == second.meta.fingerprint
    for before, after in zip(original.interactions, second.interactions, strict=True):
        assert (after.request.method, after.request.uri) == (before.request.method, before.request.uri)
        assert after.request.body == before.request.body
        assert after.response.body == before.response.body
        assert after.response.status == before.response.status
        assert after.response.reason == before.response.reason
        assert after.response.event_offsets_ms == before.response.event_offsets_ms
    assert (second.meta.origin, second.meta.provider) == (original.meta.origin, original.meta.provider)


# ---------------------------------------------------------------- the cache


def test_repeated_loads_are_equal_copies(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    cassette.save(stream_cassette(), path)
    cassette.clear_cache()
    for _ in range(2):  # the parse that fills the cache, then a copy from it: neither may leak changes
        loaded = cassette.load(path)
        loaded.interactions[0].response.headers["content-type"].append("x")
        loaded.interactions[0].response.event_offsets_ms.append(99.0)  # type: ignore[union-attr]
        loaded.interactions[0].request.headers.clear()
        loaded.interactions.append(loaded.interactions[0])
        loaded.meta.extra["x"] = 1
    fresh = cassette.load(path)
    assert len(fresh.interactions) == 1 and fresh.meta.extra == {}
    assert fresh.interactions[0].response.headers["content-type"] == ["text/event-stream"]
    assert fresh.interactions[0].response.event_offsets_ms == [0.0, 12.5, 30.0]
    assert fresh.interactions[0].request.headers == {"content-type": ["application/json"]}
    assert fresh == cassette.load(path, cache=False)


def test_cache_evicts_the_least_recently_used() -> None:
    cache = read._Cache(max_entries=2, max_bytes=100)
    for key in (b"a", b"b", b"c"):
        cache.put(key, 10, Cassette(meta=Meta(provider=key.decode())))
    assert cache.get(b"a") is None and cache.get(b"b") is not None
    cache.put(b"d", 10, Cassette())  # "b" was used last: "c" goes
    assert [cache.get(key) is not None for key in (b"b", b"c", b"d")] == [True, False, True]
    cache.put(b"big", 95, Cassette())  # over the byte budget: older entries go first
    assert [cache.get(key) is not None for key in (b"b", b"d", b"big")] == [False, False, True]


@pytest.mark.parametrize("whole", [read.WHOLE, 0], ids=["read whole", "streamed"])
def test_a_changed_file_is_parsed_again_even_with_the_same_size_and_mtime(tmp_path: Path, whole: int,
                                                                          monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(read, "WHOLE", whole)
    text = one("    status: {code: 200, message: OK}\n    headers: {}\n    body: {string: aaaa}\n")
    path = write(tmp_path, text)
    stat = path.stat()
    assert cassette.load(path).interactions[0].response.body == b"aaaa"
    write(tmp_path, text.replace("aaaa", "bbbb"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert cassette.load(path).interactions[0].response.body == b"bbbb"


def test_cache_is_shared_by_content_and_can_be_cleared(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    text = one("    status: {code: 200, message: OK}\n    headers: {}\n    body: {string: hi}\n")
    a, b = write(tmp_path, text, "a.yaml"), write(tmp_path, text, "b.yaml")
    cassette.load(a)
    calls: list[str] = []
    real = read._parse
    def counting(source: Any, where: str, original: Any, key: Any = None) -> tuple[Cassette, bytes, int]:
        calls.append(where)
        return real(source, where, original, key)

    monkeypatch.setattr(read, "_parse", counting)
    assert cassette.load(b).path == b and calls == []
    cassette.load(b, cache=False)
    cassette.clear_cache()
    cassette.load(a)
    assert calls == [str(b), str(a)]


# ---------------------------------------------------------------- the fast YAML loader


yaml_docs = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6) | st.integers(), inner,
                                                                 max_size=4),
    max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(yaml_docs, st.sampled_from([None, False, True]))
def test_fast_loader_builds_what_safe_load_builds(value: Any, flow: bool | None) -> None:
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    assert _same(yaml.load(text, Loader=yamlio.Loader), yaml.safe_load(text))


TRICKY = """\
base: &base {a: 1, b: [x, y]}
merged: {<<: *base, c: 2}
alias: *base
octal: 012
hex: 0x1F
under: 1_000
sexa: 1:30
float_sexa: 1:30.5
floats: [1.5, -0.0, .inf, -.INF, .nan, 1e3, 6.8523015e+5, 1_0.5]
ints: [0, -7, +7, 0b101]
bools: [yes, No, on, OFF, true]
nulls: [~, null, ]
stamp: 2026-01-01 10:00:00
date: 2026-01-01
binary: !!binary aGk=
set: !!set {a, b}
omap: !!omap [{a: 1}, {b: 2}]
pairs: !!pairs [{a: 1}, {a: 2}]
quoted: ['1', "true", "null"]
literal: |
  line
folded: >
  a
  b
"""


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_fast_loader_on_every_yaml_feature() -> None:
    ours, theirs = yaml.load(TRICKY, Loader=yamlio.Loader), yaml.safe_load(TRICKY)
    assert _same(ours, theirs)
    assert ours["alias"] is ours["base"]
    recursive = yaml.load("a: &x [1, *x]", Loader=yamlio.Loader)
    assert recursive["a"][1] is recursive["a"]


def test_fast_loader_refuses_unhashable_keys() -> None:
    with pytest.raises(yaml.constructor.ConstructorError, match="unhashable key"):
        yaml.load("? [a]\n: 1\n", Loader=yamlio.Loader)


# ---------------------------------------------------------------- iter_paths


def test_iter_paths(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("sub/b.yml", "a.yaml", "notes.txt"):
        (tmp_path / name).write_text("")
    assert cassette.iter_paths([tmp_path, tmp_path / "notes.txt"]) == [
        tmp_path / "a.yaml", tmp_path / "sub" / "b.yml", tmp_path / "notes.txt"]


# ---------------------------------------------------------------- every bad input

OK_RESPONSE = "    status: {code: 200, message: OK}\n    headers: {}\n    body: {string: ok}\n"
BAD = [
    ("malformed", "version: 1\ninteractions:\n- request: {method: GET\n", 4, "invalid YAML", "fix the YAML"),
    ("tab", "version: 1\ninteractions: [\n\t- x: 1: 2\n", 3, "invalid YAML", "fix the YAML syntax"),
    ("control", "version: 1\ninteractions: []\nx: \"a\x07b\"\n", 3, "is not allowed in YAML", "!!binary"),
    ("object tag", "version: 1\ninteractions: !!python/object/apply:os.system [ls]\n", 2,
     "could not determine a constructor", "remove Python object tags"),
    ("empty", "", 1, "the file is empty", "record the cassette again"),
    ("list", "- 1\n- 2\n", 1, "must be a mapping, not list", "version: 1"),
    ("no version", "interactions: []\n", 1, "has no `version:`", "add `version: 1`"),
    ("version 2", "interactions: []\nversion: 2\n", 2, "unsupported cassette version 2", "version: 1"),
    ("version text", "version: '1'\ninteractions: []\n", 1, "unsupported cassette version '1'", "version: 1"),
    ("version bool", "version: true\ninteractions: []\n", 1, "unsupported cassette version True", "1"),
    ("no interactions", "version: 1\n", 1, "has no `interactions:`", "add `interactions: []`"),
    ("interactions map", "version: 1\ninteractions: {a: 1}\n", 2, "interactions must be a list, not dict",
     "version"),
    ("interaction scalar", "version: 1\ninteractions:\n- 7\n", 3,
     "interactions[0] must be a mapping, not int", "request:"),
    ("no response", "version: 1\ninteractions:\n- request: {method: GET, uri: u}\n", 3,
     "interactions[0] has no `response:`", "needs `request:` and `response:`"),
    ("no method", one(OK_RESPONSE, "    uri: u\n"), 4, "interactions[0].request has no `method:`",
     "`method:`"),
    ("no status", one("    headers: {}\n", "    method: GET\n    uri: u\n"), 7,
     "interactions[0].response has no `status:`", "status: {code: 200"),
    ("bad status", one("    status: {code: two}\n", "    method: GET\n    uri: u\n"), 7,
     "has no integer code", "status: {code: 200"),
    ("status bool", one("    status: {code: true}\n", "    method: GET\n    uri: u\n"), 7,
     "has no integer code (got True)", "status: {code: 200"),
    ("status digit", one("    status: {code: '²'}\n", "    method: GET\n    uri: u\n"), 7,
     "has no integer code (got '²')", "status: {code: 200"),
    ("bad br", one("    status: {code: 200}\n    headers: {content-encoding: [br]}\n"
                   "    body: {string: plain}\n", "    method: GET\n    uri: u\n"), 9,
     "response.body is not valid br data", "!!binary"),
    ("headers list", one(OK_RESPONSE, "    method: GET\n    uri: u\n    headers: [a]\n"), 6,
     "interactions[0].request.headers must be a mapping, not list", "name: [value"),
    ("header mapping", one(OK_RESPONSE, "    method: GET\n    uri: u\n    headers:\n      a: {b: c}\n"), 7,
     "request.headers.a must hold text values", "name: [value"),
    ("body number", one(OK_RESPONSE, "    method: GET\n    uri: u\n    body: 12\n"), 6,
     "request.body must be text or !!binary, not int", "!!binary"),
    ("bad gzip", one("    status: {code: 200}\n    headers: {content-encoding: [gzip]}\n"
                     "    body: {string: plain}\n", "    method: GET\n    uri: u\n"), 9,
     "response.body is not valid gzip data", "remove content-encoding"),
    ("unknown encoding", one("    status: {code: 200}\n    headers: {content-encoding: [zstd]}\n"
                             "    body: {string: x}\n", "    method: GET\n    uri: u\n"), 8,
     "unsupported content-encoding 'zstd'", "decode the body yourself"),
    ("bad origin", "version: 1\nreplaykit:\n  origin: guessed\ninteractions: []\n", 3,
     "replaykit.origin is 'guessed'", "origin: synthesized"),
    ("meta list", "version: 1\nreplaykit: [a]\ninteractions: []\n", 2, "replaykit must be a mapping",
     "origin"),
    ("meta number", "version: 1\nreplaykit: {provider: 7}\ninteractions: []\n", 2,
     "replaykit.provider must be text", "quote"),
    ("description list", "version: 1\nreplaykit:\n  description: [a]\ninteractions: []\n", 3,
     "replaykit.description must be text, not list", "quote"),
]


def offsets_case(offsets: str, line: int, message: str) -> tuple[str, str, int, str, str]:
    response = ("    status: {code: 200}\n    headers: {content-type: [text/event-stream]}\n"
                "    body: {string: \"data: a\\n\\ndata: b\\n\\n\"}\n")
    text = one(response, "    method: GET\n    uri: u\n") + f"  replaykit:\n    event_offsets_ms: {offsets}\n"
    return (f"offsets {offsets}", text, line, message, "one non-decreasing number")


BAD += [offsets_case("[1, 0]", 11, "must not decrease"),
        offsets_case("[1]", 11, "has 1 offsets for 2 events"),
        offsets_case("[1, x]", 11, "list of finite numbers >= 0"),
        offsets_case("[-1, 2]", 11, "list of finite numbers >= 0"),
        offsets_case("[.nan, 2]", 11, "list of finite numbers >= 0")]


@pytest.mark.parametrize(("name", "text", "line", "message", "fix"), BAD, ids=[case[0] for case in BAD])
def test_bad_input_names_file_line_and_fix(tmp_path: Path, name: str, text: str, line: int, message: str,
                                           fix: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CassetteError) as caught:
        cassette.load(path)
    error = str(caught.value)
    assert error.startswith(f"{path}:{line}: "), error
    assert message in error and fix in error.partition("; ")[2], error


def test_the_description_is_metadata_of_its_own() -> None:
    meta = "{origin: recorded, description: What it shows., x-note: n}"
    tape = cassette.loads(f"version: 1\nreplaykit: {meta}\ninteractions: []\n")
    assert tape.meta.description == "What it shows." and tape.meta.extra == {"x-note": "n"}
    saved = yaml.safe_load(cassette.dumps(tape))["replaykit"]
    assert list(saved) == ["origin", "fingerprint", "description", "x-note"]  # as the bundled files have it
    assert cassette.loads(cassette.dumps(tape)).meta.description == "What it shows."


def test_non_utf8_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, b"version: 1\ninteractions:\n- request: {method: GET, uri: \xff}\n")
    with pytest.raises(CassetteError, match=r"c\.yaml:3: not UTF-8 \(byte 0xff\); save the file as UTF-8"):
        cassette.load(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match=r"nope\.yaml: cannot read: No such file.*; check the path"):
        cassette.load(tmp_path / "nope.yaml")


def test_a_string_source_is_named(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match=r"^<string>:1: .*has no `version:`"):
        cassette.loads("interactions: []\n")


def test_errors_are_not_cached(tmp_path: Path) -> None:
    path = write(tmp_path, "version: 2\ninteractions: []\n")
    for _ in range(2):
        with pytest.raises(CassetteError, match="version 2"):
            cassette.load(path)
    write(tmp_path, "version: 1\ninteractions: []\n")
    assert cassette.load(path).interactions == []


def test_deep_nesting_loads_up_to_libyaml_limit_then_is_a_cassette_error() -> None:
    deep = "version: 1\ninteractions: []\nx: " + "[" * 990 + "]" * 990 + "\n"
    value, depth = yaml.load(deep, Loader=yamlio.Loader)["x"], 1  # deeper than the fast path recurses
    while value:
        [value], depth = value, depth + 1
    assert (value, depth) == ([], 990)
    with pytest.raises(CassetteError, match=r"^<string>:3: invalid YAML: .*nesting depth; fix the YAML"):
        cassette.loads(deep.replace("[" * 990, "[" * 5000).replace("]" * 990, "]" * 5000))


def test_flow_style_cassette_gets_lines_by_composing() -> None:
    text = ('{"version": 1, "interactions": [\n {"request": {"method": "GET", "uri": "u"},\n'
            '  "response": {"status": {"code": 200}, "body": {"string": "x"}}},\n'
            ' {"request": {"method": "GET", "uri": "v"}, "response": {"status": {"code": 201}}}]}\n')
    assert [item.line for item in cassette.loads(text).interactions] == [2, 4]


# ---------------------------------------------------------------- reading as the file is read


def big_stream_cassette(path: Path, body_bytes: int, items: int = 1) -> int:
    """Save a cassette of ``items`` SSE responses of about ``body_bytes`` each; return the body size."""
    event = sse.encode(json.dumps({"type": "content_block_delta", "text": "x" * 1000}), "content_block_delta")
    body = event.raw * (body_bytes // len(event.raw))
    response = Response(200, "OK", {"content-type": ["text/event-stream"]}, body)
    request = Request("POST", "http://127.0.0.1:9/v1/messages", {}, b"{}")
    cassette.save(Cassette([Interaction(request, response) for _ in range(items)]), path)
    return len(body)


def traced_peak(action: Any) -> int:
    """The most memory Python objects held at once while ``action()`` ran (libyaml's own is not seen)."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("items", "most"), [(1, 2.2), (8, 1.3)])
def test_loading_holds_no_copy_of_the_file(tmp_path: Path, items: int, most: float,
                                           monkeypatch: MonkeyPatch) -> None:
    # a file over read.WHOLE (here: any) is streamed when rapidyaml is not there. One body: its text (built
    # by libyaml) and its bytes, never the file's bytes and text as well; many bodies: each text is dropped
    # once its bytes exist
    monkeypatch.setattr(read, "WHOLE", 0)
    monkeypatch.setattr(read.fastyaml, "AVAILABLE", False)
    path = tmp_path / "big.yaml"
    body = big_stream_cassette(path, 2_000_000 // items, items)
    peak = traced_peak(lambda: cassette.load(path, cache=False))
    assert peak < most * body * items, f"peak {peak} for {items} bodies of {body} bytes"


@pytest.mark.parametrize("items", [1, 8])
def test_a_big_file_parsed_in_place_holds_its_bytes_or_its_text(tmp_path: Path, items: int,
                                                                 monkeypatch: MonkeyPatch) -> None:
    # a file over read.WHOLE parsed by rapidyaml: its bytes (parsed in place, no copy) next to the bodies'
    # text, then each text next to its bytes; never the bytes, the text and the bodies at once
    monkeypatch.setattr(read, "WHOLE", 0)
    path = tmp_path / "big.yaml"
    body = big_stream_cassette(path, 2_000_000 // items, items)
    real, parses = read._in_place, []

    def counted(held: Any) -> Any:
        parses.append(held)
        return real(held)

    monkeypatch.setattr(read, "_in_place", counted)
    peak = traced_peak(lambda: cassette.load(path, cache=False))
    assert parses and peak < 2.2 * body * items, f"peak {peak} for {items} bodies of {body} bytes"


def test_a_shared_interactions_list_is_left_whole(tmp_path: Path) -> None:
    text = one("    status: {code: 200, message: OK}\n    body: {string: hi}\n").replace(
        "interactions:\n", "interactions: &items\n") + "again: *items\n"
    loaded = cassette.load(write(tmp_path, text), cache=False)
    assert loaded.interactions[0].response.body == b"hi"
    assert loaded.extra["again"][0]["response"]["body"] == {"string": "hi"}


def test_a_file_changed_while_loading_is_cached_as_what_was_parsed(tmp_path: Path,
                                                                   monkeypatch: MonkeyPatch) -> None:
    # a streamed file loaded before is hashed first (the cache may hold it), then parsed as it is read (one
    # held whole for rapidyaml is read once, hashed and parsed from the same bytes)
    monkeypatch.setattr(read, "WHOLE", 0)
    monkeypatch.setattr(read.fastyaml, "AVAILABLE", False)
    old = one("    status: {code: 200, message: OK}\n    body: {string: aaaa}\n")
    path = write(tmp_path, old)
    assert cassette.load(path).interactions[0].response.body == b"aaaa"
    first = path.stat()
    real = hashlib.file_digest
    def digest_then_change(handle: Any, name: str) -> Any:
        hashed = real(handle, name)
        path.write_text(old.replace("aaaa", "bbbb"))  # in place: the open handle reads the new bytes
        return hashed

    read._CACHE.clear()  # the parse forgotten, the file still known as loaded before
    monkeypatch.setattr(hashlib, "file_digest", digest_then_change)
    assert cassette.load(path).interactions[0].response.body == b"bbbb"
    monkeypatch.setattr(hashlib, "file_digest", real)
    path.write_text(old)
    os.utime(path, ns=(first.st_atime_ns, first.st_mtime_ns))  # as first loaded: looked up by its hash
    assert cassette.load(path).interactions[0].response.body == b"aaaa"


def test_an_encoding_problem_is_named_before_a_yaml_one(tmp_path: Path) -> None:
    # the YAML error comes first in the file, the bad byte after the first pieces the loader reads
    path = write(tmp_path, b"version: 1\ninteractions: [\n- x\n" + b"# padding\n" * 10_000 + b"# caf\xe9\n")
    with pytest.raises(CassetteError, match=r"c\.yaml:10004: not UTF-8 \(byte 0xe9\)"):
        cassette.load(path)


def test_utf16_is_not_read(tmp_path: Path) -> None:
    path = write(tmp_path, "version: 1\ninteractions: []\n".encode("utf-16"))  # libyaml alone would read it
    with pytest.raises(CassetteError, match=r"c\.yaml:1: not UTF-8 \(byte 0x(ff|fe)\)"):
        cassette.load(path)


def test_a_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # nobody writes: a read would block forever
    refused = r"pipe\.yaml: not a regular file \(a FIFO, a device or a socket\)"
    with pytest.raises(CassetteError, match=refused):
        cassette.load(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        cassette.named_paths([fifo])


def test_a_pipe_put_in_a_files_place_after_the_check_is_refused_not_waited_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    monkeypatch.setattr(read, "_regular", lambda path: None)  # as if the check had seen a file there
    with pytest.raises(CassetteError, match=r"pipe\.yaml: not a regular file"):
        cassette.load(fifo)


ORACLE_TOP = re.compile(r"\n(?:- |-\r?\n|-$|[^\s#-])")


def lines_of_whole_text(text: str) -> list[int]:
    """The reference: interaction lines found by one scan of the whole text, as replaykit did before."""
    found, line, counted = [], 1, 0
    inside = text.startswith("interactions:")
    for match in ORACLE_TOP.finditer(text):
        start = match.start() + 1
        line, counted = line + text.count("\n", counted, start), start
        if text.startswith("-", start):
            if inside:
                found.append(line)
        else:
            inside = text.startswith("interactions:", start)
    return found


PIECES = ["\n", "- ", "-", " ", "\r", "\r\n", "interactions:", "interactions", "version: 1", "#", "a", "x: y",
          "---", "\t", "\xa0", "\u3000", "\u2028", "\x85", "\x1c", "\x0c", "é", "€", "😀"]
LINES = ["interactions:", "interactions: []", "version: 1", "- request:", "-", "- ", "-\r", "-x", "  body: x",
         "# note", "", "---", "x: y", "\xa0x", "\u3000", "\u2028", "\x85", "\x1cx", "\x0c", "\té", "😀: 1"]
texts = (st.lists(st.sampled_from(LINES), max_size=30).map("\n".join)
         | st.lists(st.sampled_from(PIECES), max_size=60).map("".join))


@settings(max_examples=200, deadline=None)
@given(texts, st.data())
@example("interactions:\n- a\n-\n- b\n-", None)  # None: one byte at a time
@example("interactions:\n- a\n-\n- b\n-\r\n- c\n# more than the lookahead\n", None)
@example("version: 1\ninteractions:\n- a\n\x1cx\n- b\n\xa0y\n- c\n\u3000\n- d\n\x85\n- e\n😀: 1\n- f", None)
def test_line_scan_does_not_depend_on_how_the_bytes_are_cut(text: str, data: st.DataObject | None) -> None:
    raw = text.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12))) if data else range(len(raw))
    scan = yamlio.Lines()
    for start, end in itertools.pairwise([0, *cuts, len(raw)]):
        scan.feed(raw[start:end])
    scan.feed(b"", final=True)
    assert scan.found == lines_of_whole_text(text)


def test_a_huge_integer_offset_is_a_clear_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    cassette.save(stream_cassette(), path)
    text = path.read_text().replace("    - 30\n", "    - " + "9" * 400 + "\n")
    with pytest.raises(CassetteError, match="must be a list of finite numbers >= 0"):
        cassette.loads(text, path)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"Retry-After": "2"}, "2"), ({"retry-after": ["3", "4"]}, "3"), ({"retry-after": []}, None),
     ({"retry-after": None}, None), ({}, None), (None, None)],
)
def test_header_reads_every_header_shape(headers: Any, expected: str | None) -> None:
    assert cassette.header(headers, "retry-after") == expected


def _canonical_reference(item: Interaction) -> list[bytes]:
    """The canonical parts as first written: each body parsed, then dumped whole."""
    def body(raw: bytes | None) -> bytes:
        parsed = cassette.body_json(raw)
        if parsed is None:
            return raw or b""
        return json.dumps(parsed, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass")

    req, resp = item.request, item.response
    return [req.method.upper().encode(), req.uri.encode(), model._canonical_headers(req.headers),
            body(req.body), str(resp.status).encode(), model._canonical_headers(resp.headers),
            body(resp.body)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda items: st.lists(items, max_size=4) | st.dictionaries(st.text(max_size=8), items, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_a_long_json_body_is_fingerprinted_a_piece_at_a_time_as_if_whole(doc: Any) -> None:
    raw = json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")
    item = Interaction(Request("POST", "https://a.example/v1", {}, raw), Response(200, "OK", {}, raw))
    with MonkeyPatch.context() as patch:
        patch.setattr(model, "_SLICE", 3)  # every string of more than 3 characters is written in slices
        pieces = list(cassette.canonical_parts(item))
        streamed = Cassette([item]).fingerprint()
    assert pieces == _canonical_reference(item)
    assert streamed == Cassette([item]).fingerprint()


def test_events_can_be_read_one_at_a_time(monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_SSE_PIECE", 5)  # blocks, lines and characters cut across reads
    for response in (item.response for item in stream_cassette().interactions):
        assert list(response.iter_events()) == response.events
    assert list(Response(200, "OK", {}, b"data: 1\n\n").iter_events()) == []


# ---------------------------------------------------------------- opening and reading a file


# its last byte is its body's last: no newline after it
SMALL = one("    status: {code: 200, message: OK}\n    headers: {}\n    body:\n      string: hi")


def test_a_file_removed_after_the_check_is_a_cassette_error(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(read, "_regular", lambda path: None)  # as if the check had seen a file there
    gone = tmp_path / "gone.yaml"
    with pytest.raises(CassetteError) as caught:
        cassette.load(gone)
    assert str(caught.value) == (f"{gone}: cannot read: No such file or directory; "
                                 "check the path and its permissions")


def test_a_platform_without_nonblocking_opens_still_reads(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    path = write(tmp_path, SMALL)
    monkeypatch.delattr(os, "O_NONBLOCK")  # e.g. Windows: the file is opened for reading, as it is
    assert cassette.load(path, cache=False).interactions[0].response.body == b"hi"


def test_a_directory_named_as_a_cassette_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(CassetteError) as caught:
        cassette.load(tmp_path)
    assert str(caught.value) == (f"{tmp_path}: not a regular file (a FIFO, a device or a socket); "
                                 "name a cassette file")


def test_a_file_up_to_whole_bytes_is_read_whole_and_its_last_byte_kept(tmp_path: Path,
                                                                       monkeypatch: MonkeyPatch) -> None:
    path = write(tmp_path, SMALL)
    handled: list[int] = []
    real = read._from_handle

    def counted(handle: Any, status: os.stat_result, *args: Any) -> Cassette:
        handled.append(status.st_size)
        return real(handle, status, *args)

    monkeypatch.setattr(read, "_from_handle", counted)
    size = path.stat().st_size
    monkeypatch.setattr(read, "WHOLE", size)
    assert cassette.load(path, cache=False).interactions[0].response.body == b"hi"  # `hi`: the file's end
    assert handled == []
    monkeypatch.setattr(read, "WHOLE", size - 1)
    assert cassette.load(path, cache=False).interactions[0].response.body == b"hi"
    assert handled == [size]


@pytest.mark.parametrize(("text", "more"),
                         [(one(OK_RESPONSE), "x-more: 1\n"), ("\n" + one(OK_RESPONSE), "\n")],
                         ids=["grew-a-line", "grew-a-byte"])
def test_a_small_file_that_grows_while_it_is_read_is_read_whole_from_its_start(
        tmp_path: Path, monkeypatch: MonkeyPatch, text: str, more: str) -> None:
    path = write(tmp_path, text)
    real = read._read

    def grow_then_read(fd: int, size: int) -> bytes:
        with path.open("a") as file:  # after fstat took the size
            file.write(more)
        monkeypatch.setattr(read, "_read", real)
        return real(fd, size)

    monkeypatch.setattr(read, "_read", grow_then_read)
    loaded = cassette.load(path, cache=False)
    assert loaded == cassette.load(path, cache=False)  # what the file holds now
    assert loaded.extra == ({"x-more": 1} if more.strip() else {})
    assert loaded.interactions[0].line == text.count("\n", 0, text.index("- request")) + 1


def test_read_gathers_short_reads_up_to_the_size_asked(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    path = write(tmp_path, b"0123456789" * 3)
    real = os.read
    fd = os.open(path, os.O_RDONLY)
    try:
        monkeypatch.setattr(os, "read", lambda fd, size: real(fd, min(size, 4)))  # a read may return less
        assert read._read(fd, 8) == b"01234567"
        assert read._read(fd, 5) == b"89012"  # the last byte asked for comes from a read of its own
        assert read._read(fd, 10) == b"3456789012"
        assert read._read(fd, 100) == b"3456789"
        assert read._read(fd, 100) == b""
    finally:
        monkeypatch.undo()
        os.close(fd)


def test_a_big_file_with_a_problem_names_the_file_and_line(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(read, "WHOLE", 0)
    path = write(tmp_path, "version: 1\ninteractions:\n- request: {method: GET}\n")
    with pytest.raises(CassetteError) as caught:
        cassette.load(path, cache=False)
    assert str(caught.value).startswith(f"{path}:3: interactions[0]"), str(caught.value)


def test_a_big_file_is_hashed_first_only_when_it_was_loaded_before(tmp_path: Path,
                                                                   monkeypatch: MonkeyPatch) -> None:
    # a file never loaded is hashed as it is parsed; one loaded before is hashed first, to look in the cache
    monkeypatch.setattr(read, "WHOLE", 0)
    monkeypatch.setattr(read, "_SEEN", read.OrderedDict())
    read._CACHE.clear()
    a = write(tmp_path, one(OK_RESPONSE), "a.yaml")
    b = write(tmp_path, one(OK_RESPONSE.replace("ok", "other")), "b.yaml")
    hashed: list[Any] = []
    parses: list[str] = []
    streams: list[Any] = []
    real_digest, real_parse, real_stream = hashlib.file_digest, read._parse, read._stream

    def digest(handle: Any, name: str) -> Any:
        hashed.append(handle.name)
        return real_digest(handle, name)

    def parse(source: Any, where: str, *args: Any) -> Any:
        parses.append(where)
        return real_parse(source, where, *args)

    def stream(handle: Any) -> Any:
        streams.append(handle)
        return real_stream(handle)

    monkeypatch.setattr(hashlib, "file_digest", digest)
    monkeypatch.setattr(read, "_parse", parse)
    monkeypatch.setattr(read, "_stream", stream)
    first = cassette.load(a)
    assert cassette.load(b).interactions[0].response.body == b"other"
    assert (hashed, parses) == ([], [str(a), str(b)])
    assert cassette.load(a) == first  # from the memory cache: hashed first, not parsed
    assert len(hashed) == 1 and parses == [str(a), str(b)]
    read._CACHE.clear()  # the parse forgotten, the file still known as loaded
    assert cassette.load(a) == first
    assert len(hashed) == 2 and parses == [str(a), str(b), str(a)] and streams == []  # read whole again


def test_the_big_files_remembered_are_the_latest_1024(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(read, "WHOLE", 0)
    monkeypatch.setattr(read, "_SEEN", read.OrderedDict(((0, 0, 0, n), None) for n in range(1024)))
    path = write(tmp_path, one(OK_RESPONSE))
    cassette.load(path, cache=False)
    assert len(read._SEEN) == 1024  # loaded without the cache: not remembered
    cassette.load(path)
    status = path.stat()
    assert len(read._SEEN) == 1024 and (0, 0, 0, 0) not in read._SEEN and (0, 0, 0, 1) in read._SEEN
    assert (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns) in read._SEEN


def test_a_big_file_that_grows_while_it_is_read_is_streamed_whole(tmp_path: Path,
                                                                  monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(read, "WHOLE", 0)
    path = write(tmp_path, one(OK_RESPONSE))
    real = read._from_handle

    def grow_then_read(handle: Any, status: os.stat_result, *args: Any) -> Cassette:
        with path.open("a") as file:  # after fstat took the size
            file.write("x-more: 1\n")
        return real(handle, status, *args)

    monkeypatch.setattr(read, "_from_handle", grow_then_read)
    assert cassette.load(path, cache=False).extra == {"x-more": 1}


@pytest.mark.parametrize("fast", [True, False], ids=["rapidyaml", "libyaml"])
def test_a_streamed_file_gets_its_lines_and_is_counted_at_its_size(tmp_path: Path, monkeypatch: MonkeyPatch,
                                                                   fast: bool) -> None:
    monkeypatch.setattr(read, "WHOLE", 0)
    monkeypatch.setattr(read.fastyaml, "AVAILABLE", fast)
    flow = ('{"version": 1, "interactions": [\n {"request": {"method": "GET", "uri": "u"},\n'
            '  "response": {"status": {"code": 200}, "body": {"string": "x"}}},\n'
            ' {"request": {"method": "GET", "uri": "v"}, "response": {"status": {"code": 201}}}]}\n')
    path = write(tmp_path, flow)
    size = path.stat().st_size
    assert [item.line for item in cassette.load(path, cache=False).interactions] == [2, 4]
    second = "- request: {method: GET, uri: v}\n  response: {status: {code: 201}}\n"
    block = write(tmp_path, one(OK_RESPONSE) + second, "block.yaml")
    assert [item.line for item in cassette.load(block, cache=False).interactions] == [3, 10]
    for budget, kept in ((size, True), (size - 1, False)):  # the memory cache holds up to its bytes
        monkeypatch.setattr(read, "_CACHE", read._Cache(max_bytes=budget))
        cassette.load(path)
        assert (read._CACHE.get(hashlib.sha256(path.read_bytes()).digest() + read.MAX_BODY.to_bytes(8, "big"))
                is not None) == kept


def test_an_alias_bomb_in_a_streamed_file_is_refused(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(read, "WHOLE", 0)
    laughs = ["x-anchors:", "  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    laughs += [f"  a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 10)]
    path = write(tmp_path, "version: 1\ninteractions: []\n" + "\n".join(laughs) + "\n")
    with pytest.raises(CassetteError, match=r"c\.yaml:\d+: "):
        cassette.load(path, cache=False)


def test_loads_names_its_path_and_caches_unless_told_not_to(monkeypatch: MonkeyPatch) -> None:
    text = one(OK_RESPONSE) + "x-unique: loads\n"
    parses: list[str] = []
    real = read._parse

    def parse(source: Any, where: str, *args: Any) -> Any:
        parses.append(where)
        return real(source, where, *args)

    monkeypatch.setattr(read, "_parse", parse)
    read._CACHE.clear()
    assert cassette.loads(text, "named.yaml").path == Path("named.yaml")
    assert cassette.loads(text).path is None
    assert cassette.loads(text, cache=False).path is None
    assert parses == ["named.yaml", "<string>"]
    with pytest.raises(CassetteError, match=r"^named\.yaml:1: "):
        cassette.loads("interactions: []\n", "named.yaml")


def test_the_memory_cache_holds_an_entry_of_exactly_its_budget() -> None:
    cache = read._Cache(max_entries=2, max_bytes=100)
    cache.put(b"a", 100, Cassette())
    assert cache.get(b"a") is not None
    cache.clear()
    cache.put(b"b", 100, Cassette())
    assert cache.get(b"b") is not None
    default = read._Cache()
    for index in range(65):
        default.put(bytes([index]), 1, Cassette())
    assert default.get(bytes([0])) is None and default.get(bytes([1])) is not None


def test_a_cached_load_is_a_deep_copy_with_the_extra_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "version: 1\nreplaykit: {origin: synthesized, x-note: {tags: [a]}}\n"
                 "interactions: []\nx-vendor: {tags: [b]}\n")
    read._CACHE.clear()
    for _ in range(2):  # the parse that fills the cache, then a copy from it
        loaded = cassette.load(path)
        assert loaded.extra == {"x-vendor": {"tags": ["b"]}}
        assert loaded.meta.extra == {"x-note": {"tags": ["a"]}}
        loaded.extra["x-vendor"]["tags"].append("changed")
        loaded.meta.extra["x-note"]["tags"].append("changed")
    assert cassette.load(path) == cassette.load(path, cache=False)


# ---------------------------------------------------------------- YAML that is not a cassette


def test_read_yaml_reads_a_document_the_cassettes_way() -> None:
    doc = cassette.read_yaml(b"a: [1, yes]\nb: {c: x}\n", "s.yaml")
    assert doc == {"a": [1, True], "b": {"c": "x"}}
    assert cassette.read_yaml("a: &x [1]\nb: *x\n", "s.yaml") == {"a": [1], "b": [1]}


def test_read_yaml_names_the_file_the_line_and_the_fix() -> None:
    laughs = ["x:", "  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    laughs += [f"  a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 10)]
    for data, message in [
        (b"a: [1\n", "s.yaml:2: invalid YAML: did not find expected ',' or ']'; fix the YAML syntax"),
        (b"a: 1\nb: \xff\n",
         "s.yaml:2: not UTF-8 (byte 0xff); save the file as UTF-8; binary bodies belong in !!binary"),
        ("a: !!python/object/apply:os.system [ls]\n",
         "s.yaml:1: invalid YAML: could not determine a constructor for the tag "
         "'tag:yaml.org,2002:python/object/apply:os.system'; replaykit loads YAML safely: "
         "remove Python object tags (`!!python/...`)"),
        ("\n".join(laughs) + "\n",
         "s.yaml:11: x.a9: its YAML aliases expand to 4,412,961,507 values from 12 written; write the values "
         "out instead of repeating aliases (an alias bomb?)"),
    ]:
        with pytest.raises(CassetteError) as caught:
            cassette.read_yaml(data, "s.yaml")
        assert str(caught.value) == message
    with pytest.raises(CassetteError) as caught:
        cassette.read_yaml("a: 1\nb: \"x\x07\"\n", "s.yaml")
    message = str(caught.value)
    assert message.startswith("s.yaml:2: invalid YAML: character ") and message.endswith(
        " is not allowed in YAML; store such bodies as !!binary"), message


def test_a_control_character_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(CassetteError) as caught:
        cassette.load(write(tmp_path, "version: 1\ninteractions: []\nx: \"a\x07b\"\n"))
    assert str(caught.value).endswith("is not allowed in YAML; store such bodies as !!binary")


def test_yaml_line_is_where_the_path_starts_or_leaves_the_document() -> None:
    text = "a:\n  b:\n  - x\n  - y\n"
    assert cassette.yaml_line(text, ["a", "b", 1]) == 4
    assert cassette.yaml_line(text, ["a", "zz", 3]) == 2  # the deepest value on the path: a's
    assert cassette.yaml_line(text, []) == 1
    assert cassette.yaml_line("a: [1\n", ["a"]) is None


def test_a_byte_that_is_not_utf8_is_placed_when_the_file_opens_with_a_blank_line(tmp_path: Path) -> None:
    path = write(tmp_path, b"\nversion: 1\ninteractions: []\nx: caf\xe9\n")
    with pytest.raises(CassetteError, match=r"c\.yaml:4: not UTF-8 \(byte 0xe9\)"):
        cassette.load(path)
