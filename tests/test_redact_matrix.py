"""Every kind of key in every place a cassette can hold it: the scanner finds it and never shows it whole, the
redactor scrubs it; and random base64 blobs are never taken for keys.

A key leaks the way it would in real traffic: a key of a known shape anywhere, a shape-less one (an Azure key,
a Cloudflare token, an AWS secret key) under the name or label that says what it is. Keys are assembled at
run time from fragments: none is written whole in this file.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from replaykit import cassette as cassettes
from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.cli import EXIT_OK, main
from replaykit.redact import PLACEHOLDER, SecretFinding, redact, scan, scan_text
from replaykit.verify import verify_file

_ALNUM = string.ascii_letters + string.digits
_RNG = random.Random(20261202)


def _random(size: int, alphabet: str = _ALNUM) -> str:
    body = [_RNG.choice(alphabet) for _ in range(size - 3)]
    return "".join([*body, _RNG.choice(string.ascii_uppercase), _RNG.choice(string.ascii_lowercase),
                    _RNG.choice(string.digits)])


@dataclass(frozen=True)
class Key:
    """A planted key: ``secrets`` (what must never be shown or kept), its ``text`` form (how it reads in
    prose or a header: with its scheme or label), and the ``field`` a JSON body holds it under."""

    kind: str
    secrets: tuple[str, ...]
    text: str
    field: str = "value"


def _keys() -> list[Key]:
    dash, under = "-", "_"
    ant = "sk" + dash + "ant" + dash
    aws_id = "AK" + "IA" + "".join(_RNG.choice(string.ascii_uppercase + string.digits) for _ in range(16))
    aws_secret = _random(40, _ALNUM + "/+")
    azure = "".join(_RNG.choice("0123456789abcdef") for _ in range(31)) + "a"
    cloudflare = _random(40, _ALNUM + "_-")
    user_pass = "ops-" + "bot:" + _random(18)
    basic = base64.b64encode(user_pass.encode()).decode()
    pem = ("-----BEGIN " + "PRIVATE KEY-----" + _random(64, _ALNUM + "+/") + "-----END " + "PRIVATE KEY-----")
    jwt = ".".join(base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=") for part in (
        {"alg": "HS256"}, {"sub": _random(10), "iat": 1790000000}, _random(24)))
    shaped = {
        "anthropic": ant + "api03" + dash + _random(93, _ALNUM + "_-"),
        "anthropic_admin": ant + "admin01" + dash + _random(93, _ALNUM + "_-"),
        "openai_project": "sk" + dash + "proj" + dash + _random(120, _ALNUM + "_-"),
        "openai_service": "sk" + dash + "svcacct" + dash + _random(74, _ALNUM + "_-"),
        "openai_legacy": "sk" + dash + _random(48),
        "github": "gh" + "p" + under + _random(36),
        "google": "AI" + "za" + _random(35, _ALNUM + "_-"),
        "openrouter": "sk" + dash + "or" + dash + "v1" + dash + "".join(_RNG.choice("0123456789abcdef")
                                                                     for _ in range(62)) + "a1",
        "perplexity": "pp" + "lx" + dash + _random(48),
        "xai": "x" + "ai" + dash + _random(80),
        "slack": "xo" + "xp-" + "1234567890-" + _random(28),
        "jwt": jwt,
        "pem": pem,
    }
    keys = [Key(kind, (value,), value) for kind, value in shaped.items()]
    return [*keys,
            Key("azure", (azure,), f"api-key: {azure}", "api_key"),
            Key("cloudflare_token", (cloudflare,), f"CLOUDFLARE_API_TOKEN={cloudflare}",
                "cloudflare_api_token"),
            Key("aws", (aws_id, aws_secret), f"aws_access_key_id={aws_id} aws_secret_access_key={aws_secret}",
                "aws_secret_access_key"),
            Key("basic", (basic,), f"Basic {basic}", "authorization")]


KEYS = _keys()
URI = "https://api.example.com/v1/things"
Plant = Callable[[Key], tuple[Cassette, str]]  # a cassette holding the key, and where a finding must point


def _one(request: Request, response: Response | None = None) -> Cassette:
    ok = Response(200, "OK", {"content-type": ["application/json"]}, b'{"ok":true}')
    return Cassette([Interaction(request, response or ok, 3)], path=Path("leak.yaml"))


def _post(uri: str = URI, headers: dict[str, list[str]] | None = None, body: object = None) -> Request:
    raw = json.dumps(body).encode() if body is not None else None
    return Request("POST", uri, headers or {}, raw)


_AUTH_HEADERS = ("authorization", "x-api-key", "api-key", "proxy-authorization", "cookie")


def auth_header(key: Key) -> tuple[Cassette, str]:
    name = _AUTH_HEADERS[KEYS.index(key) % len(_AUTH_HEADERS)]
    value = f"session={key.text.replace(': ', '=')}" if name == "cookie" else key.text
    return _one(_post(headers={name: [value]})), f"request.headers.{name}"


def custom_header(key: Key) -> tuple[Cassette, str]:
    return _one(_post(headers={"x-forwarded-note": [key.text]})), "request.headers.x-forwarded-note"


def query(key: Key) -> tuple[Cassette, str]:
    parameter = "q" if key.field == "value" else key.field
    return _one(_post(f"{URI}?{parameter}={quote(key.secrets[-1], safe='')}&limit=5")), "request.uri"


def userinfo(key: Key) -> tuple[Cassette, str]:
    password = quote(key.secrets[-1], safe="")
    return _one(_post(f"https://deploy:{password}@api.example.com/v1/things")), "request.uri"


def path(key: Key) -> tuple[Cassette, str]:
    label = "" if key.field == "value" else f"{key.field}/"
    return _one(_post(f"https://api.example.com/v1/{label}{quote(key.secrets[-1], safe='')}/usage")), \
        "request.uri"


def request_field(key: Key) -> tuple[Cassette, str]:
    body = {"model": "m", key.field: key.text if key.kind in ("aws", "basic") else key.secrets[-1]}
    return _one(_post(body=body)), f"request.body/{key.field}"


def response_field(key: Key) -> tuple[Cassette, str]:
    doc = {"id": "r1", "config": {key.field: key.text if key.kind in ("aws", "basic") else key.secrets[-1]}}
    response = Response(200, "OK", {"content-type": ["application/json"]}, json.dumps(doc).encode())
    return _one(_post(body={"model": "m"}), response), f"response.body/config/{key.field}"


def free_text(key: Key) -> tuple[Cassette, str]:
    body = {"messages": [{"role": "user", "content": f"deploy with {key.text}, thanks"}]}
    return _one(_post(body=body)), "request.body/messages/0/content"


def sse_data(key: Key) -> tuple[Cassette, str]:
    events = "".join(f"event: delta\ndata: {json.dumps(data)}\n\n" for data in (
        {"type": "ping"}, {"type": "delta", "delta": {"text": f"your key: {key.text}"}}))
    response = Response(200, "OK", {"content-type": ["text/event-stream"]}, events.encode())
    return _one(_post(body={"stream": True}), response), "response.body/events[1]/data/delta/text"


def url_encoded(key: Key) -> tuple[Cassette, str]:
    form = "payload=" + quote(json.dumps({"note": key.text}), safe="")
    request = Request("POST", URI, {"content-type": ["application/x-www-form-urlencoded"]}, form.encode())
    return _one(request), "request.body"


def base64_field(key: Key) -> tuple[Cassette, str]:
    attachment = base64.b64encode(f"config\n{key.text}\n".encode()).decode()
    return _one(_post(body={"attachment": attachment})), "request.body/attachment"


PLACES: dict[str, Plant] = {place.__name__: place for place in (
    auth_header, custom_header, query, userinfo, path, request_field, response_field, free_text, sse_data,
    url_encoded, base64_field)}
MATRIX = [(key, place) for key in KEYS for place in PLACES]


def test_the_matrix_is_seventeen_kinds_by_eleven_places() -> None:
    assert (len(KEYS), len(PLACES), len(MATRIX)) == (17, 11, 187)


def _shown(found: list[SecretFinding], key: Key) -> list[str]:
    """Every finding that shows more of a secret than a masked excerpt (4 leading, 2 trailing characters)."""
    return [repr(f) for f in found for secret in key.secrets for cut in range(len(secret) - 5)
            if secret[cut:cut + 6] in repr(f)]


@pytest.mark.parametrize(("key", "place"), MATRIX, ids=[f"{k.kind}-{p}" for k, p in MATRIX])
def test_the_scanner_finds_every_kind_in_every_place_and_shows_an_excerpt_only(key: Key, place: str) -> None:
    tape, where = PLACES[place](key)
    found = scan(tape)
    assert any(f.field == where for f in found), (where, [(f.field, f.kind) for f in found])
    assert len(found) >= len(key.secrets) or place in ("query", "userinfo", "path")
    assert _shown(found, key) == []


@pytest.mark.parametrize(("key", "place"), MATRIX, ids=[f"{k.kind}-{p}" for k, p in MATRIX])
def test_the_redactor_scrubs_every_kind_in_every_place(key: Key, place: str) -> None:
    tape, _ = PLACES[place](key)
    clean = redact(tape)
    dumped = cassettes.dumps(clean)
    assert scan(clean) == []
    for secret in key.secrets:
        for form in (secret, quote(secret, safe=""), base64.b64encode(key.text.encode()).decode()[8:24]):
            assert form not in dumped
    if place == "base64_field":
        dumped = base64.b64decode(clean.interactions[0].request.json()["attachment"]).decode()
    assert PLACEHOLDER in dumped


@pytest.mark.parametrize("key", KEYS, ids=[key.kind for key in KEYS])
def test_verify_never_prints_a_key_whole(tmp_path: Path, key: Key) -> None:
    target = tmp_path / "leak.yaml"
    tapes = [PLACES[place](key)[0] for place in PLACES]
    target.write_text(cassettes.dumps(Cassette([t.interactions[0] for t in tapes])), encoding="utf-8")
    result = verify_file(target)
    text = "\n".join(map(str, result.findings)) + json.dumps(result.to_json())
    assert not result.ok
    shown = [secret for secret in key.secrets
             for cut in range(len(secret) - 5) if secret[cut:cut + 6] in text]
    assert shown == []


def test_the_redact_command_scrubs_the_whole_matrix_and_verify_then_passes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for key in KEYS:  # one file per kind, every place in it
        tapes = [PLACES[place](key)[0] for place in PLACES]
        cassettes.save(Cassette([t.interactions[0] for t in tapes], Meta(origin="synthesized")),
                       tmp_path / f"{key.kind}.yaml")
    assert main(["redact", "--in-place", str(tmp_path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.endswith(f"{len(KEYS)} cassettes, {len(KEYS)} changed, 0 failed\n")
    written = "".join(path.read_text() for path in tmp_path.glob("*.yaml"))
    for key in KEYS:
        for secret in key.secrets:
            assert all(secret[cut:cut + 6] not in out for cut in range(len(secret) - 5)), key.kind
            assert secret not in written and quote(secret, safe="") not in written
    assert main(["verify", str(tmp_path)]) == EXIT_OK, capsys.readouterr().out


# ---------------------------------------------------------------- no false positives


def _blob(rng: random.Random) -> str:
    raw = rng.randbytes(rng.randrange(12, 300))
    encoded = (base64.urlsafe_b64encode if rng.random() < 0.3 else base64.b64encode)(raw).decode()
    return encoded if rng.random() < 0.5 else encoded.rstrip("=")


def test_forty_thousand_random_base64_blobs_are_never_keys() -> None:
    rng = random.Random(40000)
    blobs = [_blob(rng) for _ in range(40_000)]
    body = {"items": [{"encrypted_content": blob, "signature": blob[::-1]} for blob in blobs]}
    tape = _one(_post(body={"model": "m"}), Response(200, "OK", {"content-type": ["application/json"]},
                                                      json.dumps(body).encode()))
    assert scan(tape) == []
    assert scan_text("\n".join(blobs)) == []
