"""jsondoc.loads parses like json.loads: a long body's long strings, decoded apart and a piece at a time, come
out the same, and so does every error (sizes are cut small here so that every piece boundary is crossed)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from replaykit import jsondoc

_ALPHABET = ["a", "b", "g", " ", "\\", '"', "/", "\n", "\u00e9", "\u2014", "\U0001f600", "\ud800", "\udc00",
             "u", "x", "0", "\t", "\x01"]


def _string(rng: random.Random) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 40)))


def _document(rng: random.Random, depth: int = 0) -> Any:
    draw = rng.random()
    if depth > 3 or draw < 0.4:
        return rng.choice([_string(rng), _string(rng), 1, 2.5, None, True])
    if draw < 0.7:
        return [_document(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {_string(rng): _document(rng, depth + 1) for _ in range(rng.randrange(0, 4))}


def _body(rng: random.Random) -> bytes:
    text = json.dumps(_document(rng), ensure_ascii=rng.random() < 0.3)
    raw = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.1:  # a byte that breaks it: an escape, a quote, bad UTF-8, a NUL
        at = rng.randrange(len(raw) + 1)
        raw = raw[:at] + rng.choice([b"\\", b'"', b"\xff", b"\xc3", b"\x00", b"\\u12", b"e"]) + raw[at:]
    return raw


def _outcome(parse: Any, raw: bytes) -> tuple[str, Any]:
    try:
        return "parsed", repr(parse(raw))
    except (ValueError, RecursionError):
        return "refused", None


@pytest.mark.parametrize("seed", range(3))
def test_a_long_body_parses_as_json_loads_parses_it(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsondoc, "_LEAN", 0)  # every body is long
    monkeypatch.setattr(jsondoc, "_PIECE", 7)  # and its strings of more than 7 bytes are cut out
    rng = random.Random(seed)
    bodies = [_body(rng) for _ in range(3000)]
    assert [_outcome(jsondoc.loads, raw) for raw in bodies] == [_outcome(json.loads, raw) for raw in bodies]


@pytest.mark.parametrize("text", [b"event: message_start\ndata: {}\n\n", b"data: {}", "id: 1", b"e\x00v\x00"])
def test_a_text_that_starts_with_a_letter_no_json_starts_with_is_refused(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        jsondoc.loads(text)


@pytest.mark.parametrize("text", [b"true", b"false", b"null", b"NaN", b"Infinity", "-Infinity"])
def test_the_letters_json_starts_with_still_parse(text: str | bytes) -> None:
    assert repr(jsondoc.loads(text)) == repr(json.loads(text))
