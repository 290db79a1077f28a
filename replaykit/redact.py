"""Scrub secrets from cassettes, and find the ones left behind.

:func:`redact` returns a new cassette with, by default:

* the values of the headers in :data:`SECRET_HEADERS` (request and response) replaced by ``REDACTED``
  (``Authorization: Bearer REDACTED`` keeps its scheme);
* secret-looking query parameters (``?key=``, ``api_key``, ``access_token``, ``sig``, ``X-Amz-Signature``…)
  replaced by ``REDACTED``, every other byte of the URI untouched;
* the Cloudflare account id in ``/client/v4/accounts/{id}/`` replaced by :data:`ACCOUNT_PLACEHOLDER`
  (``0123456789abcdef0123456789abcdef``: the shape of a real id, obviously not one);
* string values of secret-named JSON fields (``api_key``, ``apiKey``, ``client_secret``, ``password``,
  ``access_token``, ``token``…; and ``client_secret.value``) in request and response bodies, including the
  JSON ``data`` of each SSE event, replaced by ``REDACTED``. Usage counters (``input_tokens``,
  ``max_tokens``…), ``encrypted_content``, ``signature`` and ``prompt_cache_key`` are not secrets: kept.

:class:`Rules` adds user rules on top. Bodies are rewritten only where something changed: an SSE event is
rebuilt with :func:`replaykit.sse.encode` only when its data held a secret; the other events keep their bytes.

:func:`scan` and :func:`scan_text` find keys by shape (Anthropic, OpenAI, Cloudflare, AWS, GitHub, bearer
tokens, PEM private keys) and report them with a masked excerpt such as ``sk-ant-a…(108 chars)``: a finding
never holds the whole secret. Keys must look random (upper- and lower-case letters and digits), so slugs and
placeholders are not flagged; matches must start at a token boundary, so the base64 blobs of real recordings
(``encrypted_content``, ``encrypted_index``, ``signature``) are not flagged either.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import chain
from typing import Any
from urllib.parse import unquote_plus

from replaykit import sse
from replaykit.cassette import Cassette, Headers, Interaction, Request, Response
from replaykit.pointer import json_pointer

__all__ = [
    "ACCOUNT_PLACEHOLDER",
    "CREDENTIAL_HEADERS",
    "PLACEHOLDER",
    "SECRET_HEADERS",
    "SECRET_KINDS",
    "SECRET_PATTERNS",
    "Rules",
    "SecretFinding",
    "is_secret_field",
    "is_secret_query",
    "kind_label",
    "redact",
    "redact_header",
    "safe_message",
    "scan",
    "scan_text",
]

PLACEHOLDER = "REDACTED"
ACCOUNT_PLACEHOLDER = "0123456789abcdef0123456789abcdef"
#: Headers that carry a credential: their value is a secret whatever its shape (an Azure key, a Basic
#: credential), so :func:`scan` reports one that :func:`redact` would still change.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key",
                                "cf-aig-authorization"})
#: Headers scrubbed by :func:`redact` and in the fake provider's journal: the credentials, and what ties
#: traffic to an account or a session (organization, project, cookies; found by :func:`scan` only when a key
#: of a known shape sits in them).
SECRET_HEADERS = CREDENTIAL_HEADERS | {"openai-organization", "openai-project", "cookie", "set-cookie"}

_TOKEN_OWNERS = "access|refresh|id|auth|authorization|api|bearer|session|security|oauth|tunnel|github|hf|bot"
_SECRET_FIELD = re.compile(
    r"^(?:[a-z0-9]+_)*(?:api_?key|secret|secret_key|secret_value|password|passwd|passphrase|private_key|access_key"
    rf"|credentials?|authorization|(?:{_TOKEN_OWNERS})_token)$|^token$"
)
_SECRET_QUERY = re.compile(
    r"^(?:key|sig|signature|auth|code_verifier|x_amz_(?:signature|credential|security_token)"
    r"|x_goog_(?:signature|credential))$"
)
_ACCOUNT = re.compile(r"(/client/v4/accounts/)([^/?#]+)")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _normal_name(name: str) -> str:
    """``apiKey`` / ``X-Api-Key`` / ``API_KEY`` → ``api_key`` / ``x_api_key`` / ``api_key``."""
    return _CAMEL.sub("_", name).replace("-", "_").replace(".", "_").lower()


def is_secret_field(name: str) -> bool:
    """True when a JSON field of this name holds a secret by default (``apiKey`` yes, ``max_tokens`` no)."""
    return bool(_SECRET_FIELD.match(_normal_name(name)))


def is_secret_query(name: str) -> bool:
    """True when a query parameter of this name holds a secret by default (``key``, ``api_key``, ``sig``…)."""
    normal = _normal_name(name)
    return bool(_SECRET_QUERY.match(normal) or _SECRET_FIELD.match(normal))


# ---------------------------------------------------------------- key shapes

_EDGE = r"(?<![A-Za-z0-9_-])"  # a key starts at a token boundary, never inside a base64(url) blob
_END = r"(?![A-Za-z0-9_-])"
_CF_PREFIXED = rf"{_EDGE}cf(?:k|ut|at)_[A-Za-z0-9]{{40,64}}{_END}"
_CF_NAMED = (r"(?i:c(?:f|loudflare)[_-]?api[_-]?(?:token|key))"  # CLOUDFLARE_API_TOKEN=… (unprefixed tokens)
             r"[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9_-]{37,40})")
_PEM_END = r"(?:(?:.|\n)*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----)?"

# The key shapes replaykit knows, by kind, most specific first: the ONE list both the secret scanner
# (scan, scan_text) and safe_message use. A named group ``v`` is the secret
# itself, ``label`` the part of it that is safe to show.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic", re.compile(rf"{_EDGE}sk-ant-[A-Za-z0-9_-]{{20,}}{_END}")),
    ("openai", re.compile(rf"{_EDGE}sk-(?!ant-)[A-Za-z0-9_-]{{20,}}{_END}")),
    ("cloudflare", re.compile(rf"{_CF_PREFIXED}|{_CF_NAMED}{_END}")),
    ("aws", re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")),
    ("github", re.compile(rf"{_EDGE}(?:gh[pousr]_[A-Za-z0-9]{{36,}}|github_pat_[A-Za-z0-9_]{{50,}}){_END}")),
    ("bearer", re.compile(r"(?i:\bbearer)\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)(?![A-Za-z0-9._~+/=-])")),
    ("pem", re.compile(rf"(?P<label>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----){_PEM_END}")),
)

_MASK = "[REDACTED]"
_SECRETS = re.compile(
    r"\bsk-[A-Za-z0-9_*\-]{6,}"                      # sk-ant-…, sk-… and sk-proj-…, even half-masked
    r"|\bAKIA[0-9A-Z]{12,}"                           # AWS access key ids
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_\w{20,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
    r"|(?i:\bbearer)\s+[A-Za-z0-9._~+/=\-]{8,}"
    r"|(?i:\b(?:x-)?api[-_]?key|\btoken|\bsecret|\bpassword)(?:\"?\s*[=:]\s*\"?)[^\s\"',;}]+"
)
_MAX_MESSAGE = 500


def safe_message(text: str) -> str:
    """``text`` with key-shaped substrings masked, on one line, at most 500 characters."""
    masked = text
    for _, pattern in SECRET_PATTERNS:  # every key the scanner knows, then looser shapes (half-masked keys)
        masked = pattern.sub(_MASK, masked)
    masked = _SECRETS.sub(_MASK, masked)
    flat = " ".join(masked.split())
    return flat if len(flat) <= _MAX_MESSAGE else flat[: _MAX_MESSAGE - 1] + "…"


# ---------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class Rules:
    """User rules, applied on top of the defaults.

    ``headers``, ``query`` and ``fields`` are extra names (case-insensitive); ``field_pattern`` is a regex
    searched in JSON field names (case-insensitive); ``substitutions`` are ``(regex, replacement)`` pairs
    applied to the URI, every header value and the text of every body, before the field rules.
    """

    headers: tuple[str, ...] = ()
    query: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    field_pattern: str | None = None
    substitutions: tuple[tuple[str, str], ...] = ()
    placeholder: str = PLACEHOLDER

    def secret_header(self, name: str) -> bool:
        """True when header ``name`` is scrubbed."""
        lowered = name.lower()
        return lowered in SECRET_HEADERS or lowered in {h.lower() for h in self.headers}

    def secret_query(self, name: str) -> bool:
        """True when query parameter ``name`` is scrubbed."""
        return is_secret_query(name) or name.lower() in {q.lower() for q in self.query}

    def secret_field(self, name: str) -> bool:
        """True when the string value of JSON field ``name`` is scrubbed."""
        if is_secret_field(name) or name.lower() in {f.lower() for f in self.fields}:
            return True
        return bool(self.field_pattern and re.search(self.field_pattern, name, re.IGNORECASE))

    def substitute(self, text: str) -> str:
        """``text`` with every user substitution applied."""
        for pattern, replacement in self.substitutions:
            text = re.sub(pattern, replacement, text)
        return text


_DEFAULT_RULES = Rules()


# ---------------------------------------------------------------- redact


def redact(cassette: Cassette, rules: Rules | None = None) -> Cassette:
    """A new cassette with secrets scrubbed (see the module docstring); ``cassette`` is not changed.

    Secret-named fields in the cassette's other top-level keys and ``replaykit:`` metadata are scrubbed too.
    """
    active = rules or Rules()
    items = [_interaction(item, active) for item in cassette.interactions]
    meta_extra, extra = copy.deepcopy(cassette.meta.extra), copy.deepcopy(cassette.extra)
    _scrub(meta_extra, active)
    _scrub(extra, active)
    meta = replace(cassette.meta, fingerprint=None, extra=meta_extra)
    return replace(cassette, interactions=items, meta=meta, extra=extra)


def _interaction(item: Interaction, rules: Rules) -> Interaction:
    req, resp = item.request, item.response
    request = Request(req.method, _uri(req.uri, rules), _headers(req.headers, rules), _body(req.body, rules))
    body = _stream_body(resp, rules) if resp.is_stream else _body(resp.body, rules)
    response = Response(status=resp.status, reason=resp.reason, headers=_headers(resp.headers, rules),
                        body=body or b"", event_offsets_ms=copy.copy(resp.event_offsets_ms))
    return Interaction(request, response, item.line)


def _headers(headers: Headers, rules: Rules) -> Headers:
    return {name: [redact_header(name, value, rules) for value in values] for name, values in headers.items()}


def redact_header(name: str, value: str, rules: Rules | None = None) -> str:
    """The value header ``name`` may be stored with: a secret header's (:data:`SECRET_HEADERS`, or a user
    rule) replaced by the placeholder, ``Authorization: Bearer REDACTED`` keeping its scheme; any other value
    with the user's substitutions applied."""
    active = rules or _DEFAULT_RULES
    if not active.secret_header(name):
        return active.substitute(value)
    scheme, sep, rest = value.partition(" ")
    if sep and rest and name.lower().endswith("authorization") and scheme.isalpha():
        return f"{scheme} {active.placeholder}"
    return active.placeholder


def _uri(uri: str, rules: Rules) -> str:
    uri = _ACCOUNT.sub(lambda m: m.group(1) + ACCOUNT_PLACEHOLDER, rules.substitute(uri))
    base, sep, query = uri.partition("?")
    if not sep:
        return uri
    query, hash_sep, fragment = query.partition("#")
    parts = [_query_part(part, rules) for part in query.split("&")]
    return f"{base}?{'&'.join(parts)}{hash_sep}{fragment}"


def _query_part(part: str, rules: Rules) -> str:
    name, sep, value = part.partition("=")
    if sep and value and rules.secret_query(unquote_plus(name)):
        return f"{name}={rules.placeholder}"
    return part


def _body(body: bytes | None, rules: Rules) -> bytes | None:
    if not body:
        return body
    text = _utf8(body)
    if text is None:
        return body
    changed = rules.substitute(text)
    doc = _loads(changed)
    if doc is None or not _scrub(doc, rules):
        return body if changed == text else changed.encode("utf-8")
    return _dumps(doc, changed).encode("utf-8")


def _stream_body(resp: Response, rules: Rules) -> bytes:
    text = _utf8(resp.body)
    if text is None:
        return resp.body
    changed = rules.substitute(text)
    events = sse.parse(changed.encode("utf-8")) if changed != text else resp.events
    return sse.serialize(_event(event, rules) for event in events)


def _event(event: sse.Event, rules: Rules) -> sse.Event:
    doc = _loads(event.data) if event.data is not None else None
    if doc is None or not _scrub(doc, rules):
        return event
    data = _dumps(doc, event.data or "")
    rebuilt = sse.encode(data, event=event.event, comments=event.comments, id=event.id, retry=event.retry)
    return rebuilt if event.terminated else sse.parse(rebuilt.raw[:-1])[0]


def _scrub(doc: Any, rules: Rules) -> bool:
    """Replace, in place, the string values of secret-named fields; True when anything changed."""
    if isinstance(doc, dict):
        return _scrub_mapping(doc, rules)
    if isinstance(doc, list):
        changed = [_scrub(value, rules) for value in doc]  # every item, no short cut
        return any(changed)
    return False


def _scrub_mapping(doc: dict[str, Any], rules: Rules) -> bool:
    """A secret-named object holding its secret in ``value`` (OpenAI's ``client_secret: {value, expires_at}``)
    has that ``value`` replaced; its other members are walked like any others."""
    changed = False
    for key, value in doc.items():
        secret = rules.secret_field(key)
        if secret and isinstance(value, dict) and _hides(value.get("value"), rules):
            value["value"], changed = rules.placeholder, True
        if secret and _hides(value, rules):
            doc[key], changed = rules.placeholder, True
        else:
            changed = _scrub(value, rules) or changed
    return changed


def _hides(value: Any, rules: Rules) -> bool:
    """True for a string that may hold a secret (not empty, not already the placeholder)."""
    return isinstance(value, str) and value not in ("", rules.placeholder)


def _utf8(body: bytes) -> str | None:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _loads(text: str) -> Any:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict | list) else None


def _dumps(doc: Any, original: str) -> str:
    spaced = '": ' in original
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(doc, ensure_ascii=False, separators=separators)


# ---------------------------------------------------------------- scan


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A key found by shape. ``excerpt`` masks all but a few leading characters; never the whole secret.

    ``interaction`` is the index in the cassette (``None`` for a raw-text finding); ``field`` where it sits:
    ``request.headers.x-api-key``, ``request.uri``, ``response.body/events[3]/data/delta/text``, ``line 12``;
    ``line`` the 1-based line in the file (for an interaction: where it starts) when known.
    """

    file: str
    interaction: int | None
    field: str
    kind: str
    excerpt: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class _Kind:
    name: str
    pattern: re.Pattern[str]
    random: bool = True


_LABELS = {"anthropic": "Anthropic API key", "openai": "OpenAI API key", "cloudflare": "Cloudflare API token",
           "aws": "AWS access key id", "github": "GitHub token", "bearer": "bearer token",
           "pem": "PEM private key", "header": "value of a credential header"}
_FIXED = {"aws", "pem"}  # shapes that are not random text: no mixed-case check
_KINDS: tuple[_Kind, ...] = tuple(_Kind(name, pattern, name not in _FIXED)
                                  for name, pattern in SECRET_PATTERNS)
SECRET_KINDS: tuple[str, ...] = tuple(kind.name for kind in _KINDS)


def _looks_random(value: str) -> bool:
    """At least one upper-case letter, one lower-case letter and one digit: not a slug or a placeholder."""
    return any(map(str.isupper, value)) and any(map(str.islower, value)) and any(map(str.isdigit, value))


def _excerpt(secret: str, label: str | None) -> str:
    if label:
        return f"{label}…({len(secret)} chars)"
    shown = max(4, min(8, len(secret) // 5))
    return f"{secret[:shown]}…({len(secret)} chars)"


def _secret(match: re.Match[str]) -> tuple[str, str | None]:
    """The secret a match holds, and the part of it that is safe to show (a PEM label), if any."""
    groups = match.groupdict()
    return groups.get("v") or match.group(0), groups.get("label")


def _matches(text: str) -> Iterator[tuple[_Kind, str, int]]:
    """``(kind, masked excerpt, offset)`` for every key in ``text``; the secret itself never leaves here.

    Kinds are tried most specific first; a later match overlapping an earlier one (the ``sk-…`` key after
    ``Bearer``) is the same secret and is not reported twice.
    """
    taken: list[tuple[int, int]] = []
    for kind in _KINDS:
        for match in kind.pattern.finditer(text):
            secret, shown = _secret(match)
            overlaps = any(start < match.end() and match.start() < end for start, end in taken)
            if overlaps or (kind.random and not _looks_random(secret)):
                continue
            taken.append(match.span())
            yield kind, _excerpt(secret, shown), match.start()


def scan_text(text: str, file: str = "") -> list[SecretFinding]:
    """Keys anywhere in raw text (a whole cassette file): each reported with its line, masked."""
    found: list[SecretFinding] = []
    for kind, excerpt, offset in _matches(text):
        line = text.count("\n", 0, offset) + 1
        found.append(SecretFinding(file, None, f"line {line}", kind.name, excerpt, line))
    return sorted(found, key=lambda f: (f.line or 0, f.kind))


def scan(cassette: Cassette) -> list[SecretFinding]:
    """Keys in every URI, header and body (JSON strings, SSE event data) of ``cassette``, and in its other
    top-level keys and metadata (``interaction`` is ``None`` there), each masked. A value in a credential
    header (:data:`CREDENTIAL_HEADERS`) that :func:`redact` would change is a finding whatever its shape
    (kind ``header``)."""
    file = str(cassette.path) if cassette.path is not None else ""
    found: list[SecretFinding] = []
    for index, line, place, text in _cassette_places(cassette):
        keys = [SecretFinding(file, index, place, kind.name, excerpt, line)
                for kind, excerpt, _ in _matches(text)]
        if not keys and _unredacted_header(place, text):
            keys = [SecretFinding(file, index, place, "header", _excerpt(text, None), line)]
        found += keys
    return found


def _unredacted_header(place: str, value: str) -> bool:
    """True for the value of a credential header (place ``request.headers.<name>``) not yet redacted."""
    side, sep, name = place.partition(".headers.")
    credential = sep and side in ("request", "response") and name in CREDENTIAL_HEADERS
    return bool(credential) and redact_header(name, value) != value


def _cassette_places(cassette: Cassette) -> Iterator[tuple[int | None, int | None, str, str]]:
    """``(interaction index, line, field, text)`` for every string of the cassette."""
    for index, item in enumerate(cassette.interactions):
        for place, text in _places(item):
            yield index, item.line, place, text
    walked: set[int] = set()  # shared by both walks: an alias may point from one into the other
    for place, text in chain(_strings(cassette.meta.extra, "/replaykit", walked),
                             _strings(cassette.extra, "", walked)):
        yield None, None, place, text


def _places(item: Interaction) -> Iterator[tuple[str, str]]:
    req, resp = item.request, item.response
    yield "request.uri", req.uri
    yield from _header_places("request", req.headers)
    yield from _body_places("request.body", _text(req.body))
    yield from _header_places("response", resp.headers)
    if resp.is_stream:
        for number, event in enumerate(resp.events):
            yield from _body_places(f"response.body/events[{number}]/data", event.data)
    else:
        yield from _body_places("response.body", _text(resp.body))


def _header_places(side: str, headers: Headers) -> Iterator[tuple[str, str]]:
    for name, values in headers.items():
        for value in values:
            yield f"{side}.headers.{name.lower()}", value


def _text(body: bytes | None) -> str | None:
    return body.decode("utf-8", errors="replace") if body else None  # a binary body is still searched


def _body_places(place: str, text: str | None) -> Iterator[tuple[str, str]]:
    if not text:
        return
    doc = _loads(text)
    if doc is None:
        yield place, text
        return
    yield from _strings(doc, place)


def _strings(doc: Any, place: str, seen: set[int] | None = None) -> Iterator[tuple[str, str]]:
    """Every string (keys included) of a JSON document, with its JSON pointer appended to ``place``.

    A container met again (a YAML alias shares one object between places) is walked only the first time,
    so a nest of aliases (a "billion laughs" file) costs its size, not its expansion.
    """
    walked = set() if seen is None else seen
    if isinstance(doc, str):
        yield place, doc
    elif isinstance(doc, (dict, list)) and id(doc) not in walked:
        walked.add(id(doc))
        items = doc.items() if isinstance(doc, dict) else enumerate(doc)
        for key, value in items:
            if isinstance(doc, dict):
                yield place + json_pointer([key]), str(key)
            yield from _strings(value, place + json_pointer([key]), walked)


def kind_label(kind: str) -> str:
    """Human name of a finding kind (``anthropic`` → ``Anthropic API key``)."""
    return _LABELS.get(kind, kind)

