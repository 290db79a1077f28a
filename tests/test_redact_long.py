"""The scanner on long texts: searched only where a key may sit, a chunk at a time, it finds exactly what a
search of the whole text by every pattern finds (the reference below, the scanner as first written). Texts
are cut small here so that every chunk, region and piece boundary is crossed; keys are assembled at run time.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import string
from collections.abc import Iterator
from urllib.parse import quote, unquote, unquote_plus

import pytest

from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.redact import cassette_walk as walk
from replaykit.redact import redact, scan, scan_text, shapes
from replaykit.redact.shapes import KINDS, Hit, find, might_hold_key, might_hold_key_in_json

_ALNUM = string.ascii_letters + string.digits
_BASE64 = shapes._BASE64


def _reference_b64text(value: str) -> str | None:
    if len(value) > shapes.BASE64_MAX:
        return None
    padded = value + "=" * (-len(value) % 4)
    try:
        text = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return text if all(char.isprintable() or char in "\r\n\t" for char in text) else None


def _reference_shapes(text: str) -> Iterator[Hit]:
    taken: list[tuple[int, int]] = []
    for kind in KINDS:
        for match in kind.pattern.finditer(text):
            secret = (match.group("v") if "v" in kind.pattern.groupindex else None) or match.group(0)
            if not any(start < match.end() and match.start() < end for start, end in taken) \
                    and kind.check(secret):
                taken.append(match.span())
                yield Hit(kind.name, secret, start=match.start())


def _reference(text: str) -> list[Hit]:
    """find() as first written: every pattern over the whole text, then its URL- and base64-decoded forms."""
    hits = list(_reference_shapes(text))
    decoded: list[Hit] = []
    if "%" in text:
        plain = unquote_plus(text) if "+" in text else unquote(text)
        if plain != text:
            decoded += [Hit(hit.kind, hit.secret, "url", hit.secret) for hit in _reference_shapes(plain)]
    for match in _BASE64.finditer(text):
        inner = _reference_b64text(match.group(0))
        decoded += [Hit(hit.kind, hit.secret, "base64", match.group(0), match.start())
                    for hit in _reference_shapes(inner or "")]
    seen = {hit.secret for hit in hits}
    for hit in decoded:
        if hit.secret not in seen:
            seen.add(hit.secret)
            hits.append(hit)
    return hits


def _random(rng: random.Random, size: int, alphabet: str = _ALNUM) -> str:
    body = [rng.choice(alphabet) for _ in range(size - 3)]
    return "".join([*body, rng.choice(string.ascii_uppercase), rng.choice(string.ascii_lowercase),
                    rng.choice(string.digits)])


def _fragments(rng: random.Random) -> list[str]:
    """Keys of every shape, labels, separators, escapes, folding letters, cuts and blobs, to be strung."""
    dash, under, begin = "-", "_", "-----BEGIN "
    key, token, word = "api" + under + "key", "tok" + "en", "pass" + "word"
    keys = [
        "sk" + dash + "ant" + dash + _random(rng, 30, _ALNUM + "_-"), "sk" + dash + _random(rng, 25),
        "cf" + "ut" + under + _random(rng, 42),
        "cloudflare" + under + "api" + under + token + ": " + _random(rng, 40),
        "AK" + "IA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16)),
        "gh" + "p" + under + _random(rng, 36), "AI" + "za" + _random(rng, 35),
        "xo" + "xb" + dash + _random(rng, 12), ".".join("ey" + "J" + _random(rng, 10) for _ in range(3)),
        "Bearer " + _random(rng, 24),
        "Basic " + base64.b64encode(b"user:" + rng.randbytes(6).hex().encode()).decode(),
        begin + "PRIVATE KEY-----" + _random(rng, 40) + "-----END PRIVATE KEY-----",
        begin + "RSA PRIVATE KEY-----",
        key + "=" + _random(rng, 20), "my_" + key + " is " + _random(rng, 20),
        word + ": '" + _random(rng, 18) + "'",
        token + "/" + _random(rng, 20), "secret" + under + "access" + under + "key = " + _random(rng, 30),
        "access" + token + "=" + _random(rng, 24),
    ]
    encoded = [
        base64.b64encode((key + "=" + _random(rng, 20)).encode()).decode(),
        base64.b64encode(("a long text naming the " + word + ": " + _random(rng, 24)).encode()).decode(),
        base64.b64encode(rng.randbytes(60)).decode(), base64.urlsafe_b64encode(rng.randbytes(40)).decode(),
        quote("sk" + dash + "ant" + dash + _random(rng, 30)),
        quote('"' + word + '": "' + _random(rng, 20) + '"'),
        "%2D%2D%2D%2D%2DBEGIN PRIVATE KEY%2D%2D%2D%2D%2D", "%E2%82", "%AC", "%41", "%", "+",
    ]
    folding = ["\u017fecret: " + _random(rng, 20), "to\u212aen=" + _random(rng, 20),
               "ap\u0131" + under + "key=" + _random(rng, 20), "bas\u0131c " + _random(rng, 10), "\u0130"]
    plain = ["\u00a0", "\u2028", "\x1c", ",", "{", "}", "(", ")", ";", "?", "\u00e9", "\u2014", "\U0001f600",
             " ",
             "\n", "\t", '"', "'", ":", "=", "/", "-", "_", ".", " is ", _random(rng, 15), _random(rng, 24),
             "x" * 20, "content_block_delta", "the key point is simple", "tokens", "passes", "basic", "KEY"]
    return keys + encoded + folding + plain


def _text(rng: random.Random) -> str:
    fragments = _fragments(rng)
    return "".join(rng.choice(fragments) for _ in range(rng.randrange(1, 60)))


@pytest.fixture(params=[1 << 20, 64, 23], ids=["chunk-1MiB", "chunk-64", "chunk-23"])
def small_chunks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Chunks (and short texts) cut small, the scanner's memories emptied before and after."""
    monkeypatch.setattr(shapes, "_CHUNK", request.param)
    monkeypatch.setattr(shapes, "_SHORT", min(request.param, 256))
    shapes._find_short.cache_clear()
    shapes._short_needles.cache_clear()
    yield
    shapes._find_short.cache_clear()
    shapes._short_needles.cache_clear()


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("seed", range(4))
def test_find_finds_what_a_search_of_the_whole_text_finds(seed: int) -> None:
    rng = random.Random(seed)
    texts = [_text(rng) for _ in range(500)]
    assert [find(text) for text in texts] == [_reference(text) for text in texts]


@pytest.mark.usefixtures("small_chunks")
def test_a_text_that_might_hold_no_key_holds_none_nor_does_any_part_of_it() -> None:
    rng = random.Random(7)
    quiet = [text for text in (_text(rng) for _ in range(3000)) if not might_hold_key(text)]
    assert quiet
    parts = [part for text in quiet for cut in range(len(text)) for part in (text[:cut], text[cut:])]
    assert [part for part in parts if _reference(part)] == []


def _event(rng: random.Random) -> str:
    fragments = _fragments(rng)
    names = ["type", "text", "api.key", "apiKey", "password", "client_secret", "note", "encrypted_content"]
    data = {rng.choice(names): rng.choice(fragments) for _ in range(rng.randrange(1, 5))}
    data["blob"] = base64.b64encode(rng.randbytes(rng.randrange(10, 120))).decode()
    text = json.dumps(data, ensure_ascii=rng.random() < 0.2)
    if rng.random() < 0.2:  # escapes that spell a needle, or join base64 strings
        text = text.replace("pass", "p\\u0061ss").replace("k" + "-", "\\u006b-").replace("/", "\\/")
    return text


def _stream(rng: random.Random, count: int) -> Cassette:
    events = b"".join(f"event: delta\ndata: {_event(rng)}\n\n".encode() for _ in range(count))
    response = Response(200, "OK", {"content-type": ["text/event-stream"]}, events)
    request = Request("POST", "https://api.example.com/v1/stream", {}, None)
    return Cassette([Interaction(request, response, 3)], Meta(origin="synthesized"))


def test_quiet_events_are_skipped_without_changing_a_finding_or_a_byte(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    tapes = [_stream(rng, 40) for _ in range(10)]
    fast = [(scan(tape), redact(tape).interactions[0].response.body) for tape in tapes]
    monkeypatch.setattr(walk, "_quiet", lambda data: False)
    assert fast == [(scan(tape), redact(tape).interactions[0].response.body) for tape in tapes]


def test_a_json_text_that_might_hold_no_key_in_a_string_holds_none() -> None:
    rng = random.Random(13)
    quiet = [text for text in (_event(rng) for _ in range(3000)) if not might_hold_key_in_json(text)]
    assert quiet
    strings = [value for text in quiet for item in json.loads(text).items() for value in item]
    assert [value for value in strings if _reference(value)] == []


def test_a_long_body_and_its_raw_text_are_scanned_like_short_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(17)
    text = " ".join(_text(rng) for _ in range(200))
    body = json.dumps({"text": text, "blobs": [_text(rng) for _ in range(20)]}).encode()
    headers = {"content-type": ["application/json"]}
    request = Request("POST", "https://api.example.com/v1/messages", headers, body)
    tape = Cassette([Interaction(request, Response(200, "OK", {}, b"{}"), 3)])
    short = (scan(tape), scan_text(text))
    monkeypatch.setattr(shapes, "_CHUNK", 97)
    shapes._find_short.cache_clear()
    assert (scan(tape), scan_text(text)) == short
