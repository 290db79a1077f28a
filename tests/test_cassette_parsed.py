"""replaykit.cassette.parsed: parsed cassettes kept on disk as JSON, keyed by the SHA-256 of the bytes."""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pytest import MonkeyPatch

from replaykit import cassette
from replaykit.cassette import parsed, read
from replaykit.errors import CassetteError

BINARY = base64.b64encode(gzip.compress(b'{"ok": true}')).decode()
TEXT = f"""version: 1
replaykit: {{origin: synthesized, provider: anthropic, note: 3.5, list: [1, null, true]}}
interactions:
- request:
    method: POST
    uri: http://127.0.0.1:9/v1/messages
    headers: {{content-type: [application/json]}}
    body: '{{"model": "m"}}'
  response:
    status: {{code: 200, message: OK}}
    headers: {{content-type: [application/json], content-encoding: [gzip]}}
    body: {{string: !!binary {BINARY}}}
-
  request: {{method: GET, uri: "http://127.0.0.1:9/v1/models"}}
  response: {{status: {{code: 200, message: OK}}, body: {{string: "caf\\u00e9 \\u2028 x"}}}}
"""


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: MonkeyPatch) -> Path:
    """A fresh folder for parsed cassettes, and an empty memory cache."""
    folder = tmp_path / "parsed"
    monkeypatch.setenv(parsed.ENV, str(folder))
    cassette.clear_cache()
    return folder


def _no_yaml(monkeypatch: MonkeyPatch) -> None:
    def refuse(*_: Any) -> Any:
        raise AssertionError("parsed as YAML")

    monkeypatch.setattr(read, "_load_doc", refuse)
    monkeypatch.setattr(read.fastyaml, "parse", refuse)


def test_a_cassette_read_once_loads_from_disk_as_it_parsed(kept: Path, tmp_path: Path,
                                                           monkeypatch: MonkeyPatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(TEXT, encoding="utf-8")
    first = cassette.load(path)
    assert not kept.exists()  # written later: a first load pays no write
    cassette.clear_cache()
    assert len(list(kept.glob("*.json"))) == 1
    _no_yaml(monkeypatch)
    again = cassette.load(path)
    monkeypatch.undo()
    assert again == first == cassette.load(path, cache=False)
    assert again.interactions[0].response.body == b'{"ok": true}'
    assert [item.line for item in again.interactions] == [4, 13]
    assert again.meta.extra == {"note": 3.5, "list": [1, None, True]}


def test_a_new_process_loads_from_disk(kept: Path, tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(TEXT, encoding="utf-8")
    writer = "import sys; from replaykit import cassette; cassette.load(sys.argv[1])"
    subprocess.run([sys.executable, "-c", writer, str(path)], env={**os.environ, parsed.ENV: str(kept)},
                   check=True)
    assert len(list(kept.glob("*.json"))) == 1  # written as that process exited
    script = ("import sys; from replaykit.cassette import read\n"
              "read._load_doc = read.fastyaml.parse = None  # any YAML parse fails\n"
              "print(len(read.load(sys.argv[1]).interactions))")
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                          env={**os.environ, parsed.ENV: str(kept)}, check=True)
    assert done.stdout.strip() == "2"


@pytest.mark.parametrize("text", [
    "version: 1\ninteractions: &i []\nagain: *i\n",                     # an alias
    "version: 1\ninteractions: []\nwhen: 2025-01-01 10:00:00\n",        # a timestamp
    "version: 1\ninteractions: []\n3: three\n",                         # a key that is not text
    "version: 1\ninteractions: []\nx: .nan\n",                           # not a finite number
], ids=["alias", "timestamp", "integer key", "nan"])
def test_a_document_json_would_change_is_never_kept(kept: Path, tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    loaded = cassette.load(path)
    parsed.flush()
    assert not kept.exists() or not list(kept.glob("*.json"))
    assert loaded == cassette.load(path, cache=False)


def test_a_broken_cassette_is_never_kept(kept: Path, tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("version: 1\ninteractions:\n- request: {method: GET}\n", encoding="utf-8")
    with pytest.raises(CassetteError, match=r"c\.yaml:3: .*uri"):
        cassette.load(path)
    parsed.flush()
    assert not kept.exists() or not list(kept.glob("*.json"))


def _kept_once(kept: Path, tmp_path: Path) -> tuple[Path, cassette.Cassette, Path]:
    """A cassette file of TEXT, its first load, and the one file that load kept."""
    path = tmp_path / "c.yaml"
    path.write_text(TEXT, encoding="utf-8")
    first = cassette.load(path)
    parsed.flush()
    (stored,) = kept.glob("*.json")
    return path, first, stored


def test_a_foreign_or_damaged_file_is_a_miss(kept: Path, tmp_path: Path) -> None:
    path, first, stored = _kept_once(kept, tmp_path)
    for damaged in (b"", b"{}", b'{"format": 1, "lines": [1]}\n[["x"]]\n{}', b"\xff\n\n",
                    stored.read_bytes()[:-10], b'{"format": 2, "lines": []}\n[]\n{}'):
        stored.write_bytes(damaged)
        cassette.clear_cache()
        assert cassette.load(path) == first


def test_the_body_limit_holds_for_a_kept_document(kept: Path, tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(TEXT, encoding="utf-8")
    cassette.load(path)
    cassette.clear_cache()
    with pytest.raises(CassetteError, match=r"c\.yaml:12: .*decodes \(gzip\) to more than 4 bytes"):
        cassette.load(path, max_body=4)


def test_the_folder_keeps_the_newest_entries(kept: Path, tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(parsed, "MAX_ENTRIES", 2)
    for index in range(4):
        path = tmp_path / f"c{index}.yaml"
        path.write_text(TEXT + f"n: {index}\n", encoding="utf-8")
        cassette.load(path)
        parsed.flush()
    assert len(list(kept.glob("*.json"))) == 2


def test_where_parsed_cassettes_are_kept(monkeypatch: MonkeyPatch, tmp_path: Path) -> None:
    for off in ("off", "", " "):
        monkeypatch.setenv(parsed.ENV, off)
        assert parsed.folder() is None
    monkeypatch.setenv(parsed.ENV, str(tmp_path))
    assert parsed.folder() == tmp_path
    monkeypatch.delenv(parsed.ENV)
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    assert parsed.folder() is None  # outside a virtual environment: nowhere of ours
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    assert parsed.folder() == tmp_path / "venv" / "replaykit-cache" / "cassettes"


def test_a_document_too_deep_to_walk_is_loaded_and_not_kept(kept: Path, tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("version: 1\ninteractions: []\ndeep: " + "[" * 400 + "]" * 400 + "\n", encoding="utf-8")
    assert parsed.stored_form(cassette.load(path, cache=False).extra) is None
    assert cassette.load(path).interactions == []
    parsed.flush()
    assert not kept.exists() or not list(kept.glob("*.json"))


def test_a_change_to_a_loaded_cassette_is_not_kept(kept: Path, tmp_path: Path,
                                                   monkeypatch: MonkeyPatch) -> None:
    # the document is made JSON when it is written, after the load returned: the cassette must not share it
    path = tmp_path / "c.yaml"
    path.write_text(TEXT + "x-vendor: {tags: [a]}\n", encoding="utf-8")
    first = cassette.load(path)
    first.meta.extra["list"].append("changed")
    first.extra["x-vendor"]["tags"].append("changed")
    cassette.clear_cache()  # written now
    _no_yaml(monkeypatch)
    again = cassette.load(path)
    assert again.meta.extra == {"note": 3.5, "list": [1, None, True]}
    assert again.extra == {"x-vendor": {"tags": ["a"]}}


def test_a_big_cassette_is_kept_its_long_body_as_it_is(kept: Path, tmp_path: Path,
                                                       monkeypatch: MonkeyPatch) -> None:
    # a file over read.WHOLE is read whole and parsed in place: it is kept on disk too, a long string as
    # its UTF-8 after the JSON (no JSON escapes to decode when it is read back)
    monkeypatch.setattr(read, "WHOLE", 0)
    body = "event: delta\ndata: {\"text\": \"caf\u00e9 \\\\n\"}\n\n" * 4000
    assert len(body) > parsed.LONG
    path = tmp_path / "big.yaml"
    cassette.save(cassette.Cassette([cassette.Interaction(
        cassette.Request("POST", "http://127.0.0.1:9/v1/messages", {}, b"{}"),
        cassette.Response(200, "OK", {"content-type": ["text/event-stream"]}, body.encode()))]), path)
    first = cassette.load(path)
    cassette.clear_cache()
    (stored,) = kept.glob("*.json")
    assert body.encode() in stored.read_bytes()
    with monkeypatch.context() as patched:
        _no_yaml(patched)
        again = cassette.load(path)
    assert again == first and again.interactions[0].response.body == body.encode()
    assert again.interactions[0].line == first.interactions[0].line == 5
    stored.write_bytes(stored.read_bytes()[:-1])  # the long string cut short: a miss, the file read again
    cassette.clear_cache()
    assert cassette.load(path) == first
    cassette.clear_cache()
    assert cassette.load(path) == first  # parsed again, and kept anew
    cassette.clear_cache()
    with monkeypatch.context() as patched:
        _no_yaml(patched)
        assert cassette.load(path) == first


def test_a_big_cassette_is_kept_under_the_hash_of_its_bytes(kept: Path, tmp_path: Path,
                                                            monkeypatch: MonkeyPatch) -> None:
    # hashed in a thread beside the checks, before rapidyaml parses the bytes in place (and changes them)
    monkeypatch.setattr(read, "WHOLE", 0)
    path = tmp_path / "big.yaml"
    for body in (b"first body", b"second body"):
        cassette.save(cassette.Cassette([cassette.Interaction(
            cassette.Request("GET", "http://127.0.0.1:9/v1/models"),
            cassette.Response(200, "OK", {"content-type": ["text/plain"]}, body))]), path)
        assert cassette.load(path).interactions[0].response.body == body
        cassette.clear_cache()
        assert (kept / f"{hashlib.sha256(path.read_bytes()).hexdigest()}.json").is_file()


def test_with_the_folder_off_nothing_is_kept_or_looked_up(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setenv(parsed.ENV, "off")
    key = hashlib.sha256(b"x").digest()
    assert parsed.has(key) is False and parsed.get(key) is None
    parsed.forget(key)  # nothing to drop: no error
    monkeypatch.setattr(read, "WHOLE", 0)  # a big file asks whether its document is kept
    path = tmp_path / "c.yaml"
    path.write_text(TEXT, encoding="utf-8")
    assert cassette.load(path) == cassette.loads(TEXT, path, cache=False)


def test_forgetting_what_is_not_kept_is_no_error(kept: Path) -> None:
    kept.mkdir()
    parsed.forget(hashlib.sha256(b"never kept").digest())
    assert list(kept.iterdir()) == []


def test_a_long_string_is_kept_once_after_the_json(kept: Path, tmp_path: Path) -> None:
    body = ("line \"quoted\" \\ é\n" * 400)[: parsed.LONG + 1]
    path = tmp_path / "c.yaml"
    cassette.save(cassette.Cassette([cassette.Interaction(
        cassette.Request("GET", "http://127.0.0.1:9/v1/models"),
        cassette.Response(200, "OK", {"content-type": ["text/plain"]}, body.encode()))]), path)
    first = cassette.load(path)
    cassette.clear_cache()
    (stored,) = kept.glob("*.json")
    data = stored.read_bytes()
    assert data.endswith(body.encode()) and len(data) < len(body.encode()) + 1000  # not in the JSON as well
    assert cassette.load(path) == first


def test_waiting_documents_are_written_once_they_come_from_flush_bytes(kept: Path,
                                                                       monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(parsed, "FLUSH_BYTES", 100)
    parsed.flush()
    keys = [hashlib.sha256(bytes([index])).digest() for index in range(3)]
    form = parsed.stored_form({"version": 1, "interactions": []})
    for key, size in zip(keys, (60, 40), strict=False):  # documents from 100 bytes: they wait
        parsed.put(key, lambda: form, [], size)
    assert not kept.exists()
    parsed.put(keys[2], lambda: form, [], 1)  # from 101 bytes: the ones before are written, this one waits
    written = sorted(path.name for path in kept.glob("*.json"))
    assert written == sorted(f"{key.hex()}.json" for key in keys[:2])
    parsed.flush()
    assert len(list(kept.glob("*.json"))) == 3


def test_kept_lines_that_are_not_integers_are_a_miss(kept: Path, tmp_path: Path) -> None:
    path, first, stored = _kept_once(kept, tmp_path)
    stored.write_bytes(stored.read_bytes().replace(b'"lines": [4, 13]', b'"lines": ["4", 13]', 1))
    cassette.clear_cache()
    assert [item.line for item in cassette.load(path).interactions] == [4, 13] == [
        item.line for item in first.interactions]


def test_the_folder_keeps_the_newest_entries_within_max_bytes(kept: Path, tmp_path: Path,
                                                              monkeypatch: MonkeyPatch) -> None:
    names = []
    for index in range(3):
        path = tmp_path / f"c{index}.yaml"
        path.write_text(TEXT + f"n: {index}\n", encoding="utf-8")
        cassette.load(path)
        parsed.flush()
        names.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}.json")
        os.utime(kept / names[-1], ns=(index * 10**9, index * 10**9))  # the order they were kept in
    sizes = [(kept / name).stat().st_size for name in names]
    monkeypatch.setattr(parsed, "MAX_BYTES", sizes[1] + sizes[2])  # exactly the two newest
    parsed._prune(kept)
    assert sorted(path.name for path in kept.glob("*.json")) == sorted(names[1:])
    monkeypatch.setattr(parsed, "MAX_BYTES", sizes[2])
    monkeypatch.setattr(parsed, "MAX_ENTRIES", 1)
    parsed._prune(kept)
    assert [path.name for path in kept.glob("*.json")] == names[2:]


def test_a_document_from_more_than_max_document_bytes_is_not_kept(kept: Path, tmp_path: Path,
                                                                  monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(read, "WHOLE", 0)  # a big file: read whole, parsed in place by rapidyaml
    path = tmp_path / "c.yaml"
    path.write_text(TEXT, encoding="utf-8")
    size = path.stat().st_size
    monkeypatch.setattr(parsed, "MAX_DOCUMENT", size - 1)
    cassette.load(path)
    cassette.clear_cache()
    assert not kept.exists() or not list(kept.glob("*.json"))
    monkeypatch.setattr(parsed, "MAX_DOCUMENT", size)
    cassette.load(path)
    cassette.clear_cache()
    assert len(list(kept.glob("*.json"))) == 1


def test_a_big_file_loaded_without_the_cache_is_not_kept(kept: Path, tmp_path: Path,
                                                         monkeypatch: MonkeyPatch) -> None:
    monkeypatch.setattr(read, "WHOLE", 0)
    path = tmp_path / "c.yaml"
    path.write_text(TEXT, encoding="utf-8")
    cassette.load(path, cache=False)
    parsed.flush()
    assert not kept.exists() or not list(kept.glob("*.json"))


def test_a_document_libyaml_parsed_is_kept_whole(kept: Path, tmp_path: Path,
                                                  monkeypatch: MonkeyPatch) -> None:
    # a CRLF file is refused by rapidyaml: libyaml's document is made JSON before the build empties it
    path = tmp_path / "c.yaml"
    path.write_bytes(TEXT.replace("\n", "\r\n").encode())
    first = cassette.load(path)
    cassette.clear_cache()
    assert len(list(kept.glob("*.json"))) == 1
    _no_yaml(monkeypatch)
    again = cassette.load(path)
    assert again == first and again.interactions[0].response.body == b'{"ok": true}'


def test_kept_bytes_that_are_not_base64_are_a_miss(kept: Path, tmp_path: Path) -> None:
    # a damaged file is a miss, never other bytes: base64 with a character out of its alphabet is refused
    path = tmp_path / "c.yaml"
    path.write_text("version: 1\ninteractions:\n- request: {method: GET, uri: 'http://127.0.0.1:9/'}\n"
                    "  response: {status: {code: 200}, body: {string: !!binary aGVsbG8gd29ybGQh}}\n")
    assert cassette.load(path).interactions[0].response.body == b"hello world!"
    parsed.flush()
    (stored,) = kept.glob("*.json")
    stored.write_bytes(stored.read_bytes().replace(b"aGVsbG8gd29ybGQh", b"!!!!bG8gd29ybGQh", 1))
    cassette.clear_cache()
    assert cassette.load(path).interactions[0].response.body == b"hello world!"
