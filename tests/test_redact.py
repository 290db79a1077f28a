"""Redaction and the secret scanner, on keys of every kind planted at run time (never written literally)."""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recordings import recorded

from replaykit import cassette as cassettes
from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.redact import (
    ACCOUNT_PLACEHOLDER,
    PLACEHOLDER,
    SECRET_HEADERS,
    SECRET_KINDS,
    Rules,
    SecretFinding,
    is_secret_field,
    is_secret_query,
    redact,
    safe_message,
    scan,
    scan_text,
    shapes,
)
from replaykit.resources import data_dir

_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"


def _random(rng: random.Random, size: int, alphabet: str = _ALNUM) -> str:
    """``size`` random characters that always mix upper case, lower case and digits."""
    body = [rng.choice(alphabet) for _ in range(size - 3)]
    mixed = [rng.choice(chars) for chars in (string.ascii_uppercase, string.ascii_lowercase, string.digits)]
    return "".join(body + mixed)


def planted(seed: int = 7) -> dict[str, list[str]]:
    """Realistic keys of every kind the scanner knows, assembled from fragments at run time."""
    rng = random.Random(seed)
    dash, under = "-", "_"
    pem_head = "-----BEGIN " + "RSA PRIVATE" + " KEY-----"
    pem_tail = "-----END " + "RSA PRIVATE" + " KEY-----"
    pem_body = "\n".join(_random(rng, 64, _ALNUM + "+/") for _ in range(3))
    return {
        "anthropic": ["sk" + dash + "ant" + dash + "api03" + dash + _random(rng, 93, _URLSAFE) + "AA"],
        "openai": ["sk" + dash + "proj" + dash + _random(rng, 156, _URLSAFE),
                   "sk" + dash + "svcacct" + dash + _random(rng, 74, _URLSAFE),
                   "sk" + dash + _random(rng, 48)],
        "cloudflare": ["cf" + kind + under + _random(rng, 40) + f"{rng.getrandbits(32):08x}"
                       for kind in ("ut", "at", "k")],
        "aws": ["AK" + "IA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))],
        "github": ["gh" + "p" + under + _random(rng, 36),
                   "github" + under + "pat" + under + _random(rng, 22) + under + _random(rng, 59)],
        "bearer": [_random(rng, 40, _URLSAFE + ".")],
        "pem": [f"{pem_head}\n{pem_body}\n{pem_tail}"],
        "google": ["AI" + "za" + _random(rng, 35, _URLSAFE)],
        "openrouter": ["sk" + dash + "or" + dash + "v1" + dash + "".join(rng.choice("0123456789abcdef")
                                                                  for _ in range(62)) + "a1"],
        "perplexity": ["pp" + "lx" + dash + _random(rng, 48)],
        "xai": ["x" + "ai" + dash + _random(rng, 80)],
        "slack": ["xo" + "xb-" + f"{rng.randrange(10**11, 10**12)}-" + _random(rng, 24)],
        "jwt": [".".join(base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=") for part in
                         ({"alg": "HS256", "typ": "JWT"},
                          {"sub": _random(rng, 12), "iat": rng.getrandbits(31)}, _random(rng, 32)))],
        "basic": [base64.b64encode(f"user{rng.randrange(100)}:{_random(rng, 14)}".encode()).decode()],
        "labelled": ["".join(rng.choice("0123456789abcdef") for _ in range(30)) + "a1"],  # an Azure key: hex
    }


_SCHEMES = {"bearer": "Bearer ", "basic": "Basic ", "labelled": "api-key: "}


def _in_text(kind: str, key: str) -> str:
    """How a key of ``kind`` appears in free text: a bearer token or a Basic credential with its scheme (as
    in a pasted header), a shape-less key after its label."""
    return _SCHEMES.get(kind, "") + key


def _every_key() -> list[tuple[str, str]]:
    return [(kind, key) for kind, keys in planted().items() for key in keys]


def _json_response(doc: object, headers: dict[str, list[str]] | None = None) -> Response:
    head = {"content-type": ["application/json"], **(headers or {})}
    return Response(200, "OK", head, json.dumps(doc).encode())


def _stream_response(body: str) -> Response:
    return Response(200, "OK", {"content-type": ["text/event-stream"]}, body.encode())


def _one(request: Request, response: Response | None = None) -> Cassette:
    item = Interaction(request, response or _json_response({"ok": True}), 3)
    return Cassette([item], Meta(provider="anthropic"))


def _dumped(cassette: Cassette) -> str:
    return cassettes.dumps(cassette)


# ---------------------------------------------------------------- what is a secret name


@pytest.mark.parametrize("name", [
    "api_key", "apiKey", "APIKey", "x-api-key", "OPENAI_API_KEY", "secret", "client_secret", "clientSecret",
    "password", "db_password", "token", "access_token", "accessToken", "refresh_token", "authorization",
    "private_key", "aws_secret_access_key", "credentials", "webhook_secret", "authorization_token",
])
def test_secret_field_names(name: str) -> None:
    assert is_secret_field(name)


@pytest.mark.parametrize("name", ["AWSSecretKey", "DBPassword", "GCPPrivateKey", "SSHPassphrase"])
def test_an_acronym_before_a_camel_case_word_is_split_off(name: str) -> None:
    """``AWSSecretKey`` is ``aws_secret_key``: the split before the last capital of an acronym counts."""
    assert is_secret_field(name)
    assert is_secret_query(name)


@pytest.mark.parametrize("name", [
    "input_tokens", "output_tokens", "max_tokens", "max_output_tokens", "cache_read_input_tokens",
    "cache_creation_input_tokens", "reasoning_tokens", "total_tokens", "budget_tokens", "cached_tokens",
    "encrypted_content", "encrypted_index", "signature", "prompt_cache_key", "token_count", "tokens",
    "idempotency_key", "key", "eos_token", "author", "next_page_token", "has_refresh_token_flag",
])
def test_not_secret_field_names(name: str) -> None:
    assert not is_secret_field(name)


@pytest.mark.parametrize(("name", "secret"), [
    ("key", True), ("api_key", True), ("apiKey", True), ("access_token", True), ("sig", True),
    ("X-Amz-Signature", True), ("X-Amz-Credential", True), ("api-version", False), ("limit", False),
    ("max_tokens", False), ("q", False),
])
def test_secret_query_names(name: str, secret: bool) -> None:
    assert is_secret_query(name) is secret


# ---------------------------------------------------------------- redact: headers, URIs, bodies


SPEC_HEADERS = ("authorization", "proxy-authorization", "x-api-key", "api-key", "openai-organization",
                "openai-project", "cf-aig-authorization", "cookie", "set-cookie")  # the issues' list


def test_the_default_header_list_is_the_specified_one() -> None:
    assert set(SECRET_HEADERS) == set(SPEC_HEADERS)


@pytest.mark.parametrize("header", SPEC_HEADERS)
def test_every_default_header_is_scrubbed_on_both_sides(header: str) -> None:
    key = planted()["anthropic"][0]
    shouted = "-".join(part.capitalize() for part in header.split("-"))
    request = Request("POST", "https://api.anthropic.com/v1/messages", {shouted: [key], "accept": ["*/*"]})
    response = _json_response({"ok": True}, {header: [key]})
    clean = redact(_one(request, response))
    assert clean.interactions[0].request.headers[shouted] == [PLACEHOLDER]
    assert clean.interactions[0].response.headers[header] == [PLACEHOLDER]
    assert clean.interactions[0].request.headers["accept"] == ["*/*"]
    assert key not in _dumped(clean)
    assert scan(clean) == []


@pytest.mark.parametrize(("header", "value"), [
    ("Proxy-Authorization", "Basic " + "dXNlcjpw" + "YXNzd29yZA=="), ("api-key", "0f" * 16),
    ("Authorization", "Basic " + "YWxhZGRpbjpvcGVuc2VzYW1l"), ("x-api-key", "a-key-of-no-known-shape")])
def test_a_credential_header_is_a_secret_whatever_its_shape(header: str, value: str) -> None:
    tape = _one(Request("POST", "https://example.openai.azure.com/openai/v1/responses", {header: [value]}))
    (finding,) = scan(tape)
    assert finding.field == f"request.headers.{header.lower()}" and finding.kind in ("basic", "labelled")
    assert value not in repr(finding)
    assert scan(redact(tape)) == [] and value not in _dumped(redact(tape))


def test_an_identifier_header_is_scrubbed_but_not_a_finding() -> None:
    headers = {"openai-organization": ["pydantic-28gund"], "cookie": ["__cf_bm=abc; _cfuvid=def"]}
    tape = _one(Request("POST", "https://api.openai.com/v1/responses", headers))
    assert scan(tape) == []
    assert redact(tape).interactions[0].request.headers == {name: [PLACEHOLDER] for name in headers}


def test_authorization_keeps_its_scheme() -> None:
    token = planted()["bearer"][0]
    request = Request("POST", "https://api.openai.com/v1/responses", {"Authorization": [f"Bearer {token}"]})
    clean = redact(_one(request))
    assert clean.interactions[0].request.headers["Authorization"] == [f"Bearer {PLACEHOLDER}"]


def test_redact_returns_a_new_cassette_and_leaves_the_original_alone() -> None:
    key = planted()["openai"][0]
    original = _one(Request("POST", "https://api.openai.com/v1/responses?api_key=" + key, {"api-key": [key]},
                            json.dumps({"api_key": key}).encode()))
    before = _dumped(original)
    clean = redact(original)
    assert clean is not original and clean.interactions[0] is not original.interactions[0]
    assert _dumped(original) == before
    assert key not in _dumped(clean)


def test_secret_query_parameters_are_scrubbed_and_the_rest_of_the_uri_kept_byte_for_byte() -> None:
    keys = planted()
    uri = ("https://example.openai.azure.com/openai/v1/responses?api-version=2025-04-01%20preview"
           f"&key={keys['openai'][2]}&X-Amz-Signature={keys['aws'][0]}&q=a+b"
           f"&access_token={keys['github'][0]}#frag")
    clean = redact(_one(Request("GET", uri)))
    assert clean.interactions[0].request.uri == (
        "https://example.openai.azure.com/openai/v1/responses?api-version=2025-04-01%20preview&key=REDACTED"
        "&X-Amz-Signature=REDACTED&q=a+b&access_token=REDACTED#frag")


def test_a_uri_without_secrets_is_untouched() -> None:
    uri = "https://api.anthropic.com/v1/messages?beta=true&limit=5&empty=&flag"
    assert redact(_one(Request("GET", uri))).interactions[0].request.uri == uri


def test_cloudflare_account_id_is_replaced_by_the_documented_placeholder() -> None:
    account = f"{random.Random(3).getrandbits(128):032x}"
    uri = f"https://api.cloudflare.com/client/v4/accounts/{account}/ai/websearch/?x=1"
    clean = redact(_one(Request("POST", uri, {}, b'{"query":"q","options":{"gateway":{"id":"g"}}}')))
    assert clean.interactions[0].request.uri == (
        f"https://api.cloudflare.com/client/v4/accounts/{ACCOUNT_PLACEHOLDER}/ai/websearch/?x=1")


def test_secret_named_json_fields_are_scrubbed_and_usage_and_blobs_kept() -> None:
    keys = planted()
    body = {"model": "m", "max_tokens": 1024,
            "metadata": {"apiKey": keys["anthropic"][0], "password": "hunter2"},
            "tools": [{"type": "mcp", "authorization": keys["github"][1], "headers": {"X-Api-Key": "abc"}}],
            "token": 17, "prompt_cache_key": "user-42", "user": "u"}
    reply = {"usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0},
             "content": [{"type": "thinking", "signature": "EqQBCkgIARABGAIiQL"},
                         {"type": "web_search_result", "encrypted_content": "EpQDCioIBRgCIiQ0"}],
             "client_secret": {"value": keys["openai"][0], "expires_at": 1}}
    request = Request("POST", "https://api.anthropic.com/v1/messages", {}, json.dumps(body).encode())
    clean = redact(_one(request, _json_response(reply)))
    sent, got = clean.interactions[0].request.json(), clean.interactions[0].response.json()
    assert sent["metadata"] == {"apiKey": PLACEHOLDER, "password": PLACEHOLDER}
    assert sent["tools"][0]["authorization"] == PLACEHOLDER
    assert sent["tools"][0]["headers"] == {"X-Api-Key": PLACEHOLDER}
    assert (sent["max_tokens"], sent["token"], sent["prompt_cache_key"]) == (1024, 17, "user-42")
    assert got["usage"] == reply["usage"] and got["content"] == reply["content"]
    assert got["client_secret"] == {"value": PLACEHOLDER, "expires_at": 1}


def test_a_secret_only_inside_a_list_is_scrubbed() -> None:
    key = planted()["openai"][0]
    body = json.dumps([{"role": "user"}, {"headers": {"api-key": key}}]).encode()
    clean = redact(_one(Request("POST", "https://x.test/", {}, body)))
    assert clean.interactions[0].request.json() == [{"role": "user"}, {"headers": {"api-key": PLACEHOLDER}}]


def test_a_key_in_a_binary_body_is_still_found() -> None:
    key = planted()["github"][0]
    body = b"\xff\xfe " + key.encode() + b" \x00"
    found = scan(_one(Request("POST", "https://x.test/", {}, body)))
    assert [(f.kind, f.field) for f in found] == [("github", "request.body")]


def test_a_body_without_secrets_keeps_its_exact_bytes() -> None:
    body = b'{ "model" : "m",\n  "max_tokens": 5 }'
    clean = redact(_one(Request("POST", "https://api.anthropic.com/v1/messages", {}, body)))
    assert clean.interactions[0].request.body == body


def test_only_the_sse_events_holding_a_secret_are_rebuilt() -> None:
    key = planted()["anthropic"][0]
    events = [
        'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":3}}}   \n\n',
        f'event: content_block_start\nid: 7\ndata: {{"type":"content_block_start","api_key":"{key}"}}\n\n',
        ": a comment\n\n",
        'event: message_stop\r\ndata: {"type":"message_stop"}\r\n\r\n',
    ]
    request = Request("POST", "https://api.anthropic.com/v1/messages")
    original = _one(request, _stream_response("".join(events)))
    clean = redact(original).interactions[0].response
    before = original.interactions[0].response.events
    assert [e.raw for e in clean.events] == [before[0].raw, clean.events[1].raw, before[2].raw, before[3].raw]
    rebuilt = clean.events[1]
    assert (rebuilt.event, rebuilt.id, rebuilt.terminated) == ("content_block_start", "7", True)
    assert rebuilt.json() == {"type": "content_block_start", "api_key": PLACEHOLDER}
    assert key.encode() not in clean.body


def test_an_unterminated_last_event_stays_unterminated() -> None:
    key = planted()["openai"][0]
    body = f'data: {{"type":"ping"}}\n\ndata: {{"token":"{key}"}}\n'
    clean = redact(_one(Request("POST", "https://api.openai.com/v1/responses"), _stream_response(body)))
    events = clean.interactions[0].response.events
    assert events[-1].terminated is False and events[-1].json() == {"token": PLACEHOLDER}


def test_a_stream_without_secrets_keeps_its_exact_bytes() -> None:
    body = "event: ping\rdata: {\"type\": \"ping\"}\r\r: ok\n\n"
    clean = redact(_one(Request("POST", "https://api.anthropic.com/v1/messages"), _stream_response(body)))
    assert clean.interactions[0].response.body == body.encode()


def test_metadata_and_other_top_level_keys_are_scrubbed_too() -> None:
    key = planted()["github"][0]
    original = _one(Request("GET", "https://api.github.com/"))
    original.meta.extra["recorder"] = {"github_token": key}
    original.extra["metadata"] = {"password": key}
    clean = redact(original)
    assert clean.meta.extra == {"recorder": {"github_token": PLACEHOLDER}}
    assert clean.extra == {"metadata": {"password": PLACEHOLDER}}
    assert original.extra == {"metadata": {"password": key}}


# ---------------------------------------------------------------- redact: user rules


def test_user_rules_add_headers_query_fields_patterns_and_substitutions() -> None:
    rules = Rules(headers=("X-Internal-Auth",), query=("session",), fields=("customerRef",),
                  field_pattern=r"^ssn$|_pin$",
                  substitutions=((r"user-\d+@example\.com", "user@example.invalid"),))
    body = {"customerRef": "c-123", "ssn": "123-45-6789", "card_pin": "0000",
            "note": "mail user-42@example.com"}
    headers = {"x-internal-auth": ["s3cr3t"], "From": ["user-9@example.com"]}
    request = Request("POST", "https://example.com/v1/x?session=abc&user=user-7@example.com", headers,
                      json.dumps(body).encode())
    clean = redact(_one(request, _stream_response("data: to user-1@example.com\n\n")), rules).interactions[0]
    assert clean.request.uri == "https://example.com/v1/x?session=REDACTED&user=user@example.invalid"
    assert clean.request.headers == {"x-internal-auth": ["REDACTED"], "From": ["user@example.invalid"]}
    assert clean.request.json() == {"customerRef": "REDACTED", "ssn": "REDACTED", "card_pin": "REDACTED",
                                    "note": "mail user@example.invalid"}
    assert clean.response.body == b"data: to user@example.invalid\n\n"


def test_user_rules_keep_the_defaults() -> None:
    key = planted()["anthropic"][0]
    dirty = _one(Request("POST", "https://x.test/", {"x-api-key": [key]}))
    clean = redact(dirty, Rules(headers=("x-other",)))
    assert clean.interactions[0].request.headers["x-api-key"] == [PLACEHOLDER]


# ---------------------------------------------------------------- scan: every kind, every place


@pytest.mark.parametrize(("kind", "key"), _every_key(), ids=lambda value: value[:12])
def test_scan_finds_every_kind_in_every_place_and_never_shows_it(kind: str, key: str) -> None:
    text = _in_text(kind, key)
    body = json.dumps({"messages": [{"content": f"use {text} now"}]}).encode()
    request = Request("POST", "https://api.example.com/v1/x?q=" + (key if kind != "pem" else "1"),
                      {"x-forwarded-note": [text]}, body)
    stream = "event: ping\ndata: {}\n\nevent: delta\ndata: " + json.dumps({"delta": {"text": text}}) + "\n\n"
    plain = Response(200, "OK", {}, f"plain {text}\n".encode())
    items = [Interaction(request, _stream_response(stream), 4),
             Interaction(Request("GET", "https://x.test/"), plain, 30)]
    found = scan(Cassette(items, path=Path("c.yaml")))
    places = {(f.interaction, f.field) for f in found if f.kind == kind}
    expected = {(0, "request.headers.x-forwarded-note"), (0, "request.body/messages/0/content"),
                (0, "response.body/events[1]/data/delta/text"), (1, "response.body")}
    if kind not in {"pem", "bearer", "basic", "labelled"}:  # a shape-less key needs its label, a URI has none
        expected.add((0, "request.uri"))
    assert places == expected
    assert {f.kind for f in found} == {kind}
    assert all(f.file == "c.yaml" for f in found)
    _assert_masked(found, key)


def _assert_masked(found: list[SecretFinding], key: str) -> None:
    for finding in found:
        head, _, tail = finding.excerpt.partition("…")
        assert key not in finding.excerpt
        assert tail.endswith(f" ({len(key)} chars)")
        assert len(head) <= 4 and key.startswith(head)
        assert len(tail) - len(f" ({len(key)} chars)") <= 2


def test_every_kind_is_covered_by_the_planted_keys() -> None:
    assert set(planted()) | {"cloudflare_account"} == set(SECRET_KINDS)


@pytest.mark.parametrize(("kind", "key"), _every_key(), ids=lambda value: value[:12])
def test_scan_text_finds_keys_where_the_model_does_not_look(kind: str, key: str) -> None:
    text = "version: 1\n# note: " + _in_text(kind, key) + "\ninteractions: []\n"
    found = scan_text(text, "f.yaml")
    assert [(f.kind, f.line, f.field) for f in found] == [(kind, 2, "line 2")]
    _assert_masked(found, key)


def test_a_bearer_token_is_flagged_from_twenty_characters() -> None:
    token = _random(random.Random(3), 20, _URLSAFE)
    (finding,) = scan_text(f"Authorization: Bearer {token}")
    assert (finding.kind, finding.excerpt) == ("bearer", f"{token[:4]}…{token[-2:]} (20 chars)")
    assert scan_text(f"Authorization: Bearer {token[:19]}") == []  # one short: not a token


def test_a_pem_excerpt_shows_no_more_than_four_and_two_characters() -> None:
    key = planted()["pem"][0]
    (finding,) = scan_text(key)
    assert (finding.kind, finding.excerpt) == ("pem", f"----…--- ({len(key)} chars)"[:4] + "…" + key[-2:]
                                               + f" ({len(key)} chars)")


def test_redacted_cassette_scans_clean_after_every_kind_is_planted_in_scrubbed_places() -> None:
    keys = planted()
    body = {"api_key": keys["anthropic"][0], "secret": keys["cloudflare"][0], "password": keys["openai"][1],
            "credentials": {"aws_secret_access_key": keys["aws"][0], "private_key": keys["pem"][0],
                            "github_token": keys["github"][0], "cloudflare_api_token": keys["cloudflare"][1]}}
    body |= {"note": f"{_in_text('basic', keys['basic'][0])} {keys['google'][0]} {keys['slack'][0]}",
             "jwt": keys["jwt"][0], "azure_api_key": keys["labelled"][0],
             "providers": f"{keys['openrouter'][0]} {keys['perplexity'][0]} {keys['xai'][0]}"}
    account = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    uri = f"https://api.cloudflare.com/client/v4/accounts/{account}/ai/websearch/?key=" + keys["openai"][2]
    headers = {"authorization": ["Bearer " + keys["bearer"][0]], "x-api-key": [keys["openai"][0]]}
    request = Request("POST", uri, headers, json.dumps(body).encode())
    dirty = _one(request)
    assert {f.kind for f in scan(dirty)} == set(SECRET_KINDS)
    assert scan(redact(dirty)) == []
    assert scan_text(_dumped(redact(dirty))) == []


@pytest.mark.parametrize("text", [
    "sk" + "-learn-is-a-machine-learning-library",           # a slug, not random
    "sk" + "-learn-compatible-Models-2024",                  # a slug with capitals and digits
    "sk" + "-Torch2-Lightning-Models-v2-Compatible",         # another: words between dashes
    "sk" + "-Abc123Def456-Ghi789Jkl012Mno345",               # random-looking runs cut by a dash
    "sk" + "-Ab3dEfGh1jKlMn0pQrStUv",                        # too short for a legacy key, no marker
    "sk" + "-proj",                                          # a prefix alone
    "Authorization: Bearer " + PLACEHOLDER,                  # the placeholder
    "Bearer <your-token-goes-here-please>",                  # documentation
    "gAAAAABo" + "x9Ksk-" + "proj-" + "Ab3dEfGh1jKlMn0pQrStUvWx",  # inside a base64url blob
    "Eq8BCkYIBRgCKkDghp" + "_" + "Ab3dEfGh1jKlMn0pQrStUvWxYz0123456789",  # inside another blob
    "ARN AK" + "IA" + "ABCDEFGH12345678XYZ",                 # too long for an access key id
    "the account " + ACCOUNT_PLACEHOLDER,
    "x" + "ai-grok-4-fast-reasoning-2025-09-01",              # a model name, not an xAI key
    "pp" + "lx-api-sonar-pro-search-results",                 # a slug after the prefix
    "sk" + "-or-v1-",                                         # a prefix alone
])
def test_near_misses_are_not_flagged(text: str) -> None:
    assert scan_text(text) == []


def _openai_shapes() -> dict[str, str]:
    """OpenAI keys as issued (assembled at run time): by prefix, holding the base64 of "OpenAI", legacy."""
    rng, marker = random.Random(11), "T3Blbk" + "FJ"

    def halves(size: int) -> str:
        return _random(rng, size, _URLSAFE) + marker + _random(rng, size, _URLSAFE)

    return {
        "project": "sk" + "-proj-" + halves(74),
        "service account": "sk" + "-svcacct-" + halves(58),
        "admin": "sk" + "-admin-" + halves(58),
        "admin, no marker": "sk" + "-admin-" + _random(rng, 120, _URLSAFE),
        "user": "sk" + "-None-" + _random(rng, 48, _URLSAFE),
        "named (2023)": "sk" + "-my-project-" + _random(rng, 20) + marker + _random(rng, 20),
        "legacy with marker": "sk" + "-" + _random(rng, 20) + marker + _random(rng, 20),
        "legacy": "sk" + "-" + _random(rng, 48),
        "legacy, shortest": "sk" + "-" + _random(rng, 32),
    }


@pytest.mark.parametrize("name", sorted(_openai_shapes()))
def test_every_openai_key_shape_is_found(name: str) -> None:
    key = _openai_shapes()[name]
    assert [(f.kind, f.excerpt) for f in scan_text(f"OPENAI={key}")] == [("openai", shapes.excerpt(key))]


@pytest.mark.parametrize("path", cassettes.iter_paths([data_dir("cassettes")]),
                         ids=lambda p: "/".join(p.parts[-3:]))
def test_no_false_positives_on_real_recordings_and_bundled_cassettes(path: Path) -> None:
    loaded = cassettes.load(path)
    assert scan(loaded) == []
    assert scan_text(path.read_text(encoding="utf-8")) == []


def test_redacting_a_real_recording_scrubs_its_headers_and_keeps_its_bodies() -> None:
    loaded = cassettes.load(recorded("pydantic-ai__openai_responses_web_search_tool.yaml"))
    clean = redact(loaded)
    for before, after in zip(loaded.interactions, clean.interactions, strict=True):
        assert before.request.json() == after.request.json()
        assert before.response.json() == after.response.json()
    first = clean.interactions[0].response.headers
    assert first["openai-organization"] == first["openai-project"] == [PLACEHOLDER]
    assert clean.interactions[1].request.headers["cookie"] == [PLACEHOLDER]


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(sorted(planted())), seed=st.integers(0, 10_000),
       before=st.text(alphabet=" \n\t:=,{}[]\"'", min_size=1, max_size=5),
       after=st.text(alphabet=" \n\t,;}])\"'", min_size=1, max_size=5))
def test_scan_text_finds_any_key_between_separators(kind: str, seed: int, before: str, after: str) -> None:
    key = planted(seed)[kind][0]
    found = scan_text(f"x{before}{_in_text(kind, key)}{after}y")
    assert [f.kind for f in found] == [kind]
    assert key not in found[0].excerpt


# ---------------------------------------------------------------- safe messages


def test_masked_keys_and_bearer_tokens_are_masked_too() -> None:
    half_masked = "sk-" + "proj-" + "*" * 20 + "abcd"
    bearer = "Bearer " + "tok" + "e" * 30
    text = safe_message(f"Incorrect API key provided: {half_masked}; header {bearer}; api_key=" + "v" * 12)
    assert half_masked not in text and "tokeeee" not in text and "v" * 12 not in text


def test_messages_are_one_bounded_line() -> None:
    text = safe_message("line one\nline two " + "x" * 2000)
    assert "\n" not in text and len(text) <= 500


def _scanner_keys() -> list[tuple[str, str]]:
    """Every key shape the scanner knows, ASIA session keys and named Cloudflare tokens too."""
    keys = [(kind, _in_text(kind, key)) for kind, found in planted(11).items() for key in found]
    session = "AS" + "IA" + "Q" * 4 + "7" * 12
    named = "CLOUDFLARE_" + "API_TOKEN=" + "Ab3" * 13
    return [*keys, ("aws", session), ("cloudflare", named)]


@pytest.mark.parametrize(("kind", "key"), _scanner_keys())
def test_every_key_kind_the_scanner_knows_is_masked(kind: str, key: str) -> None:
    assert [f.kind for f in scan_text(f"failed: {key} !")] == [kind]  # the scanner knows this key
    text = safe_message(f"failed: {key} !")
    body = key.split()[-1].partition("=")[2] or key.split()[-1]
    assert body[-12:] not in text and body[:12] not in text.replace("[REDACTED]", "")


# ---------------------------------------------------------------- the shapes' edges (each kills a mutant)


def _kinds(text: str) -> list[tuple[str, str]]:
    return [(hit.kind, hit.encoding) for hit in shapes.find(text)]


@pytest.mark.parametrize(("value", "random_"), [
    ("Ab3", True), ("ab3", False), ("AB3", False), ("Abc", False), ("", False)])
def test_looks_random_needs_upper_lower_and_digit(value: str, random_: bool) -> None:
    assert shapes.looks_random(value) is random_


@pytest.mark.parametrize(("value", "secret"), [
    ("ab12ab12ab12ab12", False),  # 4 distinct characters: a pattern, not a key
    ("ab12ab12ab12ab1c", True),   # 5
    ("abcdefghijklmnop", False),  # no digit
    ("1234567890123456", False),  # no letter
    ("xxREDACTEDxx1234", False),  # a placeholder
    ("xxredactedxx1234", False),  # in any case
])
def test_a_labelled_value_must_look_like_a_key(value: str, secret: bool) -> None:
    assert (_kinds(f"password: {value}") == [("labelled", "")]) is secret


def test_keys_side_by_side_are_two_keys() -> None:
    first, second = "AKIA" + "A" * 15 + "1", "AIza" + "b" * 34 + "9"
    hits = shapes.find(f"{first}={second}")
    assert [(hit.kind, hit.secret, hit.start) for hit in hits] == [
        ("aws", first, 0), ("google", second, len(first) + 1)]


def test_a_form_encoded_labelled_secret_is_found() -> None:
    value = "Zq7" * 5 + "x9"
    assert _kinds(f"note=client_secret+%3D+{value}") == [("labelled", "url")]
    assert _kinds(f"note=client_secret%3D{value}+more") == [("labelled", "url")]


@pytest.mark.parametrize("trim", [0, 1, 2])
def test_base64_of_a_key_is_found_padded_or_not_standard_or_url_safe(trim: int) -> None:
    key = "sk" + "-ant-api03-" + "Zq7_" * 6 + "w~?" * trim  # "~?" makes "+" / "/" (or "-" / "_")
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        blob = encode(f"key {key}".encode()).decode().rstrip("=")
        assert ("anthropic", "base64") in _kinds(f"attachment {blob}"), (blob, trim)


def test_base64_that_decodes_to_binary_or_is_a_large_blob_is_not_searched() -> None:
    key = "sk" + "-ant-api03-" + "Zq7_" * 6
    assert _kinds(base64.b64encode(b"\x00\x01 " + key.encode()).decode()) == []
    big = base64.b64encode(f"{key} ".encode() + b"x" * (shapes.BASE64_MAX // 4 * 3 - len(key) - 1)).decode()
    assert len(big) == shapes.BASE64_MAX and _kinds(big) == [("anthropic", "base64")]
    assert _kinds(base64.b64encode(f"{key} ".encode() + b"x" * (len(big) // 4 * 3)).decode()) == []


def test_an_excerpt_shows_ends_only_from_twelve_characters() -> None:
    assert (shapes.excerpt("abcdefghijk"), shapes.excerpt("abcdefghijkl")) == (
        "… (11 chars)", "abcd…kl (12 chars)")


def test_a_glimpse_quotes_a_value_whole_only_below_twelve_characters() -> None:
    assert (shapes.glimpse("abcdefghijk"), shapes.glimpse("abcdefghijkl")) == (
        "'abcdefghijk'", "'abcd…kl' (12 chars)")


def test_every_kind_has_its_label() -> None:
    assert shapes.kind_label("anthropic") == "Anthropic API key"
    assert shapes.kind_label("cloudflare_account") == "Cloudflare account id"
    assert shapes.kind_label("new_kind") == "new_kind"


def test_a_google_key_in_the_query_and_in_x_goog_api_key_comes_out_of_a_gemini_recording() -> None:
    key = planted()["google"][0]
    uri = ("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent"
           f"?alt=sse&key={key}")
    chunk = f'data: {{"candidates": [{{"content": {{"parts": [{{"text": "your key {key}"}}]}}}}]}}\r\n\r\n'
    headers = {"x-goog-api-key": [key], "x-goog-api-client": ["google-genai-sdk"]}
    recording = _one(Request("POST", uri, headers, b'{"contents": [{"parts": [{"text": "hi"}]}]}'),
                     Response(200, "OK", {"content-type": ["text/event-stream"]}, chunk.encode()))
    assert {finding.kind for finding in scan(recording)} == {"google"}
    clean = redact(recording)
    assert key not in _dumped(clean) and scan(clean) == []
    request = clean.interactions[0].request
    assert request.uri.endswith("?alt=sse&key=REDACTED")
    assert request.headers["x-goog-api-key"] == ["REDACTED"]
    assert request.headers["x-goog-api-client"] == ["google-genai-sdk"]
