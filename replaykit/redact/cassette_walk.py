"""One walk over a cassette, two uses: :func:`redact` scrubs every secret, :func:`scan` reports each one.

The walk visits every place a secret can sit (the URI, headers, request and response bodies, each SSE
event's JSON ``data``, the ``replaykit:`` metadata and other top-level keys) and knows what it is called
there; it finds keys with :mod:`replaykit.redact.shapes`. JSON is walked to
:data:`replaykit.jsondoc.MAX_DEPTH` levels, deeper as text; bodies are rewritten only where something
changed. Called by :mod:`replaykit.redact`; the places are listed in docs/architecture/redact.md.
"""

from __future__ import annotations

import base64
import codecs
import copy
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote_plus

from replaykit import jsondoc, sse
from replaykit.cassette import Cassette, Headers, Interaction, Request, Response
from replaykit.jsondoc import JSON
from replaykit.pointer import json_pointer
from replaykit.redact.names import DEFAULT_RULES, NAME_NEEDLES, Rules, is_secret_field
from replaykit.redact.shapes import (
    ACCOUNT_PLACEHOLDER,
    KINDS,
    Hit,
    encoded_forms,
    excerpt,
    find,
    is_placeholder,
    might_hold_key_in_json,
)

__all__ = ["SecretFinding", "redact", "redact_document", "redact_header", "scan", "scan_text"]
_ACCOUNT = re.compile(r"(/client/v4/accounts/)([^/?#]+)")
_ACCOUNT_ID = re.compile(r"[0-9a-fA-F]{32}")
_COLON = re.compile(r"[ \t\n\r]*:")  # after a JSON string: it is a key
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@:]*):([^/?#@]*)@")


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A key found. ``excerpt`` masks all but a few characters (:func:`~replaykit.redact.shapes.excerpt`).

    ``interaction`` is the index in the cassette (``None`` for a raw-text finding or the metadata); ``field``
    where it sits: ``request.headers.x-api-key``, ``request.uri``,
    ``response.body/events[3]/data/delta/text``,
    ``line 12``; ``line`` the 1-based line in the file (for an interaction: where it starts) when known.
    """

    file: str
    interaction: int | None
    field: str
    kind: str
    excerpt: str
    line: int | None = None


class _TooDeep(Exception):
    """Metadata nested deeper than :data:`replaykit.jsondoc.MAX_DEPTH` (bodies never are: see _loads)."""


@dataclass(slots=True)
class _Walk:
    """The state of one walk: the rules, where it is, and what it found."""

    rules: Rules
    file: str = ""
    interaction: int | None = None
    line: int | None = None
    found: list[SecretFinding] = field(default_factory=list)
    # id: (container, walked): aliases once
    memo: dict[int, tuple[object, object]] = field(default_factory=dict)

    @property
    def plain(self) -> bool:
        """True when only the default secret names apply and no substitution does (see :func:`_quiet`)."""
        rules = self.rules
        return not (rules.substitutions or rules.fields or rules.field_pattern)

    def report(self, place: str, hit: Hit) -> None:
        self.found.append(SecretFinding(self.file, self.interaction, place, hit.kind, excerpt(hit.secret),
                                        self.line))

    # ------------------------------------------------------------ text

    def text(self, place: str, text: str, secret: bool = False) -> str:
        """``text`` scrubbed, each secret in it reported; ``secret``: the whole value is one (its name says
        so)."""
        hits = find(text)
        whole = secret and bool(text) and not is_placeholder(text) and text != self.rules.placeholder
        if whole and not hits:
            hits = [Hit("labelled", text)]
        for hit in hits:
            self.report(place, hit)
        return self.rules.placeholder if whole else _scrubbed(text, hits, self.rules.placeholder)

    # ------------------------------------------------------------ URIs and headers

    def uri(self, uri: str) -> str:
        uri = self.account(self.rules.substitute(uri))
        uri = _USERINFO.sub(lambda m: f"{m[1]}{m[2]}:{self.text('request.uri', m[3], secret=True)}@", uri)
        base, sep, rest = uri.partition("?")
        query, hash_sep, fragment = rest.partition("#")
        base = self.path(base)
        parts = [self.query_part(part) for part in query.split("&")] if sep else []
        tail = self.text("request.uri", f"{hash_sep}{fragment}") if hash_sep else ""
        return f"{base}{sep}{'&'.join(parts)}{tail}"

    def account(self, uri: str) -> str:
        def swap(match: re.Match[str]) -> str:
            if _ACCOUNT_ID.fullmatch(match[2]) and match[2] != ACCOUNT_PLACEHOLDER:
                self.report("request.uri", Hit("cloudflare_account", match[2]))
            return match[1] + ACCOUNT_PLACEHOLDER

        return _ACCOUNT.sub(swap, uri)

    def path(self, base: str) -> str:
        segments = base.split("/")
        out = [self.text("request.uri", segment, secret=index > 0 and is_secret_field(segments[index - 1]))
               for index, segment in enumerate(segments)]
        return "/".join(out)

    def query_part(self, part: str) -> str:
        name, sep, value = part.partition("=")
        secret = bool(sep and value) and self.rules.secret_query(unquote_plus(name))
        if not sep:
            return self.text("request.uri", part)
        return f"{name}{sep}{self.text('request.uri', value, secret)}"

    def headers(self, side: str, headers: Headers) -> Headers:
        return {name: [self.header(f"{side}.headers.{name.lower()}", name, value) for value in values]
                for name, values in headers.items()}

    def header(self, place: str, name: str, value: str) -> str:
        if self.rules.credential_header(name):
            kept = redact_header(name, value, self.rules)
            self.text(place, value, secret=kept != value)  # reported; the header keeps its scheme
            return kept
        if self.rules.secret_header(name):
            self.text(place, value)  # an identifier: reported only when a key sits in it
            return redact_header(name, value, self.rules)
        return self.text(place, self.rules.substitute(value))

    # ------------------------------------------------------------ bodies

    def body(self, place: str, body: bytes | None) -> bytes | None:
        """``body`` scrubbed, each secret in it reported. A JSON body in plain UTF-8 is parsed from its bytes,
        the same document as from its text, which is then made only to rewrite it (a long body's never is)."""
        doc = None if not body or self.rules.substitutions or not _plain_utf8(body) else _loads(body)
        if body is None or doc is None:
            return self.text_body(place, body)
        self.memo.clear()  # a parsed body shares no container: nothing to remember beyond it
        walked = self.json(place, doc, 0)  # never too deep: jsondoc refuses such a document
        return body if walked == doc else _dumps(walked, body.decode("utf-8")).encode("utf-8")

    def text_body(self, place: str, body: bytes | None) -> bytes | None:
        text = _utf8(body) if body else None
        if text is None:
            if body:
                self.text(place, body.decode("utf-8", "replace"))  # a binary body is still searched
            return body
        changed = self.rules.substitute(text)
        doc = _loads(changed)
        self.memo.clear()  # a parsed body shares no container: nothing to remember beyond it
        if doc is None:
            scrubbed = self.text(place, changed)
            return body if scrubbed == text else scrubbed.encode("utf-8")
        try:
            walked = self.json(place, doc, 0)
        except _TooDeep:
            scrubbed = self.text(place, changed)
            return body if scrubbed == text else scrubbed.encode("utf-8")
        return body if walked == doc and changed == text else _dumps(walked, changed).encode("utf-8")

    def json(self, place: str, doc: object, depth: int, secret: bool = False) -> Any:
        """``doc`` scrubbed (a new object where something changed); ``secret``: held under a secret name."""
        if depth > jsondoc.MAX_DEPTH:
            raise _TooDeep(place)
        if isinstance(doc, str):
            return self.text(place, doc, secret)
        if not isinstance(doc, (dict, list)):
            return doc
        seen = self.memo.get(id(doc))
        if seen is None or seen[0] is not doc:  # a YAML alias shares a container: walked (and reported) once
            seen = self.memo[id(doc)] = (doc, self.container(place, doc, depth, secret))
        return seen[1]

    def container(self, place: str, doc: JSON | list[object], depth: int, secret: bool) -> object:
        if isinstance(doc, list):
            return [self.json(f"{place}/{index}", item, depth + 1, secret) for index, item in enumerate(doc)]
        return self.mapping(place, doc, depth)

    def mapping(self, place: str, doc: JSON, depth: int, holder: bool = False) -> JSON:
        """``holder``: ``doc`` is held under a secret name (``client_secret: {value, expires_at}``): its
        ``value`` is the secret."""
        out: JSON = {}
        for key, value in doc.items():
            at = place + json_pointer([key])
            named = self.rules.secret_field(key) or (holder and key == "value")
            if named and isinstance(value, dict):
                out[self.text(at, key)] = self.mapping(at, value, depth + 1, holder=True)
            else:
                out[self.text(at, key)] = self.json(at, value, depth + 1, named)
        return out

    def stream(self, place: str, response: Response) -> bytes:
        """The stream scrubbed, its events read one at a time; the same bytes when none held a secret."""
        if self.rules.substitutions or not _is_utf8(response.body):
            return self.text_stream(place, response)
        changed: dict[int, sse.Event] = {}
        for index, event in enumerate(response.iter_events()):
            scrubbed = self.event(f"{place}/events[{index}]/data", event)
            if scrubbed is not event:
                changed[index] = scrubbed
        if not changed:
            return response.body
        return sse.serialize(changed.get(index, event) for index, event in enumerate(response.iter_events()))

    def text_stream(self, place: str, response: Response) -> bytes:
        text = _utf8(response.body)
        if text is None:
            return self.body(place, response.body) or b""
        changed = self.rules.substitute(text)
        events = sse.parse(changed.encode("utf-8")) if changed != text else response.events
        return sse.serialize(self.event(f"{place}/events[{n}]/data", event) for n, event in enumerate(events))

    def event(self, place: str, event: sse.Event) -> sse.Event:
        if event.data is None or (self.plain and _quiet(event.data)):
            return event
        data = self.body(place, event.data.encode("utf-8"))
        if data is None or data.decode("utf-8") == event.data:
            return event
        rebuilt = sse.encode(data.decode("utf-8"), event=event.event, comments=event.comments, id=event.id,
                             retry=event.retry)
        return rebuilt if event.terminated else sse.parse(rebuilt.raw[:-1])[0]

    # ------------------------------------------------------------ the cassette

    def visit(self, index: int, item: Interaction) -> Interaction:
        self.interaction, self.line = index, item.line
        req, resp = item.request, item.response
        request = Request(req.method, self.uri(req.uri), self.headers("request", req.headers),
                          self.body("request.body", req.body))
        headers = self.headers("response", resp.headers)
        body = self.stream("response.body", resp) if resp.is_stream else self.body("response.body", resp.body)
        response = Response(status=resp.status, reason=resp.reason, headers=headers, body=body or b"",
                            event_offsets_ms=copy.copy(resp.event_offsets_ms))
        return Interaction(request, response, item.line)

    def metadata(self, place: str, doc: JSON) -> JSON:
        self.interaction, self.line = None, None
        try:
            walked: JSON = self.json(place, doc, 0)
        except _TooDeep:
            return copy.deepcopy(doc)
        return walked


def _scrubbed(text: str, hits: list[Hit], placeholder: str) -> str:
    """``text`` with every hit replaced by ``placeholder`` (a base64 string holding some is re-encoded)."""
    encoded: dict[str, list[str]] = {}
    for hit in hits:
        if hit.encoding == "base64":
            encoded.setdefault(hit.found_in, []).append(hit.secret)
            continue
        for form in encoded_forms(hit.secret):
            text = text.replace(form, placeholder)
    for blob, secrets in encoded.items():
        text = text.replace(blob, _reencoded(blob, secrets, placeholder))
    return text


def _reencoded(encoded: str, secrets: list[str], placeholder: str) -> str:
    urlsafe = "-" in encoded or "_" in encoded
    decode = base64.urlsafe_b64decode if urlsafe else base64.b64decode
    plain = decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
    for secret in secrets:
        plain = plain.replace(secret, placeholder)
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    out = encode(plain.encode("utf-8")).decode("ascii")
    return out if len(encoded) % 4 == 0 else out.rstrip("=")  # unpadded stays unpadded


def _plain_utf8(body: bytes) -> bool:
    """Whether ``body`` parses as JSON the same from its bytes as from its text: UTF-8 without a BOM and
    without the byte that starts an encoded surrogate (which its text, strictly decoded, cannot hold)."""
    return json.detect_encoding(body) == "utf-8" and b"\xed" not in body


def _is_utf8(body: bytes) -> bool:
    """Whether ``body`` is UTF-8, decoded a MiB at a time (a long body's text is never made whole)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for at in range(0, len(body), 1 << 20):
            decoder.decode(body[at : at + (1 << 20)])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _quiet(data: str) -> bool:
    """Whether walking the JSON (or text) ``data`` can find nothing: no string of it holds a key
    (:func:`~replaykit.redact.shapes.might_hold_key_in_json`) and no key of it is a secret name."""
    return not might_hold_key_in_json(data) and not _may_name_secret(data)


# The needles of secret names that hold no needle of a key's shape (which :func:`_quiet` has looked for)
_NAME_ONLY = tuple(name.encode() for name in NAME_NEEDLES
                   if not any(needle in name for kind in KINDS for needle in kind.needles))


def _may_name_secret(data: str) -> bool:
    """Whether an object key of the JSON ``data`` that holds no needle of a key's shape may be a secret name:
    a needle of one in a string that a colon follows (with a backslash in ``data``, anywhere: a string's end
    is then harder to tell)."""
    lowered = data.encode("latin-1", "replace").lower()  # a character a byte: offsets are the text's
    for needle in _NAME_ONLY:
        at = lowered.find(needle)
        while at >= 0:
            end = data.find('"', at)
            if "\\" in data or (end >= 0 and _COLON.match(data, end + 1)):
                return True
            at = lowered.find(needle, at + 1)
    return False


def _utf8(body: bytes | None) -> str | None:
    try:
        return body.decode("utf-8") if body is not None else None
    except UnicodeDecodeError:
        return None


def _loads(text: str | bytes) -> object:
    try:
        doc = jsondoc.loads(text)
    except ValueError:  # not JSON, or too deep to walk: searched as text
        return None
    return doc if isinstance(doc, dict | list) else None


def _dumps(doc: object, original: str) -> str:
    separators = (", ", ": ") if '": ' in original else (",", ":")
    return json.dumps(doc, ensure_ascii=False, separators=separators)


# ---------------------------------------------------------------- the two uses


def _walk(cassette: Cassette, rules: Rules) -> tuple[Cassette, list[SecretFinding]]:
    walk = _Walk(rules, str(cassette.path) if cassette.path is not None else "")
    items = [walk.visit(index, item) for index, item in enumerate(cassette.interactions)]
    meta_extra, extra = walk.metadata("/replaykit", cassette.meta.extra), walk.metadata("", cassette.extra)
    meta = replace(cassette.meta, fingerprint=None, extra=meta_extra)
    return replace(cassette, interactions=items, meta=meta, extra=extra), walk.found


def redact(cassette: Cassette, rules: Rules | None = None) -> Cassette:
    """A new cassette with every secret scrubbed (see the module docstring); ``cassette`` is not changed.

    The traffic changes, so the cassette's fingerprint is recomputed when it is saved: a redacted cassette's
    fingerprint is that of its redacted traffic.
    """
    return _walk(cassette, rules or DEFAULT_RULES)[0]


def scan(cassette: Cassette, rules: Rules | None = None) -> list[SecretFinding]:
    """Every secret :func:`redact` would scrub in ``cassette`` (identifying headers aside: those are reported
    only when a key sits in them), each masked; the metadata's findings have ``interaction`` None."""
    return _walk(cassette, rules or DEFAULT_RULES)[1]


def redact_document(doc: object, file: str = "", rules: Rules | None = None) -> tuple[Any,
                    list[SecretFinding]]:
    """A parsed JSON document (a reported transcript, a request body) scrubbed by the same walk as a
    cassette's JSON bodies, and each secret found, masked; a finding's ``field`` is its JSON pointer.
    ``doc`` is not changed. Raises ``ValueError`` on a document nested deeper than
    :data:`replaykit.jsondoc.MAX_DEPTH` (parse it with :func:`replaykit.jsondoc.loads`, which refuses one)."""
    walk = _Walk(rules or DEFAULT_RULES, file)
    try:
        scrubbed = walk.json("", doc, 0)
    except _TooDeep as exc:
        raise ValueError(f"{file}: JSON nested deeper than {jsondoc.MAX_DEPTH} levels") from exc
    return scrubbed, walk.found


def scan_text(text: str, file: str = "") -> list[SecretFinding]:
    """Keys anywhere in raw text (a whole cassette file): each reported with its line, masked."""
    found: list[SecretFinding] = []
    for hit in find(text):
        offset = hit.start if hit.start >= 0 else min(
            (at for form in encoded_forms(hit.secret) if (at := text.find(form)) >= 0), default=0)
        line = text.count("\n", 0, offset) + 1
        found.append(SecretFinding(file, None, f"line {line}", hit.kind, excerpt(hit.secret), line))
    return sorted(found, key=lambda f: (f.line or 0, f.kind))


def redact_header(name: str, value: str, rules: Rules | None = None) -> str:
    """The value header ``name`` may be stored with: a secret header's (:data:`SECRET_HEADERS`, a
    credential-named one, or a user rule's) replaced by the placeholder, ``Authorization: Bearer REDACTED``
    keeping its scheme; any other value with the user's substitutions applied."""
    active = rules or DEFAULT_RULES
    if not active.secret_header(name):
        return active.substitute(value)
    scheme, sep, rest = value.partition(" ")
    if sep and rest and name.lower().endswith("authorization") and scheme.isalpha():
        return f"{scheme} {active.placeholder}"
    return active.placeholder


