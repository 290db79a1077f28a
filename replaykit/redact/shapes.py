"""Key shapes: finding secrets in a text, whatever disguise they wear, and masking them.

:func:`find` reports every secret in a text as a :class:`Hit`:

* keys of a known shape (:data:`KINDS`): Anthropic ``sk-ant-…``, OpenAI ``sk-proj-…`` / ``sk-svcacct-…`` /
  ``sk-…``, Cloudflare ``cfut_…`` and named tokens, AWS ``AKIA…`` / ``ASIA…``, GitHub ``ghp_…`` /
  ``github_pat_…``, Google ``AIza…``, Slack ``xox?-…``, JWTs, bearer tokens, HTTP Basic credentials and PEM
  private key blocks. A key starts at a token boundary (never inside a base64 blob) and, where its shape is
  loose, must look random (letters and digits), so slugs and placeholders are not keys;
* a value labelled as a secret in prose, config text or a URL path (``api-key: …``,
  ``AWS_SECRET_ACCESS_KEY=…``, ``password is …``, ``/api_key/…``): shape-less keys (an Azure key, a
  Cloudflare token, an AWS secret key) are found by their label. Such a value has at least 16 characters,
  letters and digits;
* the same inside a URL-encoded text (``%22sk-ant-…%22``, ``api_key%3D…``) and inside a base64-encoded
  string whose bytes are text (a key base64-encoded in a field). Random bytes are never text, so the
  base64 blobs of real recordings (``encrypted_content``, ``signature``) are decoded and left alone.

A hit is never shown whole: :func:`excerpt` keeps at most its first 4 and last 2 characters and its length,
:func:`mask` replaces each secret of a text by its excerpt, and :func:`safe_message` makes any text safe to
print (secrets replaced, one line, bounded).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = [
    "ACCOUNT_PLACEHOLDER",
    "KINDS",
    "PLACEHOLDER",
    "SECRET_KINDS",
    "Hit",
    "Kind",
    "encoded_forms",
    "excerpt",
    "find",
    "is_placeholder",
    "kind_label",
    "looks_random",
    "mask",
    "safe_message",
]

PLACEHOLDER = "REDACTED"
ACCOUNT_PLACEHOLDER = "0123456789abcdef0123456789abcdef"
BASE64_MAX = 16 << 10  # a longer base64 string is a blob (an image, a file), not a key in disguise


@dataclass(frozen=True, slots=True)
class Kind:
    """A key shape: ``name``, a human ``label``, the ``pattern`` (group ``v``, when present, is the secret
    itself) and the ``check`` a match's secret must pass (that it looks random, that it decodes…)."""

    name: str
    label: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class Hit:
    """One secret found in a text: its ``kind`` name and the ``secret`` string as it stands in the text
    (or in its decoded form, when ``encoding`` is ``url`` or ``base64``: then ``found_in`` is the encoded
    string of the text that holds it); ``start`` is its offset in the text, when it stands there as written
    or base64-encoded."""

    kind: str
    secret: str
    encoding: str = ""
    found_in: str = ""
    start: int = -1


def looks_random(value: str) -> bool:
    """At least one upper-case letter, one lower-case letter and one digit: not a slug or a placeholder."""
    return any(map(str.isupper, value)) and any(map(str.islower, value)) and any(map(str.isdigit, value))


def _labelled_value(value: str) -> bool:
    """A value a label calls secret: 16 characters at least, letters and digits, not a placeholder."""
    letters, digits = any(map(str.isalpha, value)), any(map(str.isdigit, value))
    return letters and digits and PLACEHOLDER not in value.upper() and len(set(value)) > 4


def _basic(value: str) -> bool:
    """An HTTP Basic credential: base64 of ``user:password``."""
    text = _b64text(value)
    return text is not None and ":" in text


def _always(value: str) -> bool:
    return True


_EDGE = r"(?<![A-Za-z0-9_-])"  # a key starts at a token boundary, never inside a base64(url) blob
_END = r"(?![A-Za-z0-9_-])"
_LABEL = (r"(?:[A-Za-z0-9]+[_-])*(?:api[_-]?key|secret(?:[_-]?(?:access[_-]?)?key)?|password|passwd"
          r"|passphrase|private[_-]?key|access[_-]?key|credentials?|authorization"
          r"|(?:access|auth|api|bearer|session|refresh|oauth)[_-]?token|token)")
_PEM_END = r"(?:(?:.|\n)*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----)?"


def _kind(name: str, label: str, pattern: str, check: Callable[[str], bool] = looks_random) -> Kind:
    return Kind(name, label, re.compile(pattern), check)


#: The key shapes replaykit knows, most specific first: the ONE list the scanner, the redactor and
#: :func:`safe_message` use. A later match overlapping an earlier one is the same secret.
KINDS: tuple[Kind, ...] = (
    _kind("anthropic", "Anthropic API key", rf"{_EDGE}sk-ant-[A-Za-z0-9_-]{{20,}}{_END}"),
    _kind("openai", "OpenAI API key", rf"{_EDGE}sk-(?!ant-)[A-Za-z0-9_-]{{20,}}{_END}"),
    _kind("cloudflare", "Cloudflare API token",
          rf"{_EDGE}cf(?:k|ut|at)_[A-Za-z0-9]{{40,64}}{_END}|(?i:c(?:f|loudflare)[_-]?api[_-]?(?:token|key))"
          r"[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9_-]{37,40})(?![A-Za-z0-9_-])"),
    _kind("aws", "AWS access key id", r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])", _always),
    _kind("github", "GitHub token",
          rf"{_EDGE}(?:gh[pousr]_[A-Za-z0-9]{{36,}}|github_pat_[A-Za-z0-9_]{{50,}}){_END}"),
    _kind("google", "Google API key", rf"{_EDGE}AIza[0-9A-Za-z_-]{{35}}{_END}", _always),
    _kind("slack", "Slack token", rf"{_EDGE}xox[abprs]-[0-9A-Za-z-]{{10,}}{_END}", _always),
    _kind("jwt", "JSON Web Token",
          rf"{_EDGE}eyJ[A-Za-z0-9_-]{{8,}}\.eyJ[A-Za-z0-9_-]{{8,}}\.[A-Za-z0-9_-]{{8,}}{_END}", _always),
    _kind("bearer", "bearer token", r"(?i:\bbearer)\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)(?![A-Za-z0-9._~+/=-])"),
    _kind("basic", "HTTP Basic credential",
          r"(?i:\bbasic)\s+(?P<v>[A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])", _basic),
    _kind("pem", "PEM private key", rf"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----{_PEM_END}", _always),
    _kind("labelled", "value labelled as a secret",
          rf"(?i:(?<![A-Za-z0-9]){_LABEL}(?![A-Za-z0-9]))[\"']?(?:\s*[:=]\s*|\s+is\s+|/)[\"']?"
          r"(?P<v>[A-Za-z0-9+/_.~-]{16,}={0,2})(?![A-Za-z0-9+/_.~=-])", _labelled_value),
)
#: Every kind a finding may have: the shapes, and ``cloudflare_account`` (the account id of a Cloudflare
#: URL path); ``labelled`` also names a value held under a secret name (header, field, query parameter).
SECRET_KINDS: tuple[str, ...] = (*(kind.name for kind in KINDS), "cloudflare_account")
_LABELS = {**{kind.name: kind.label for kind in KINDS}, "cloudflare_account": "Cloudflare account id"}


def kind_label(kind: str) -> str:
    """Human name of a finding kind (``anthropic`` → ``Anthropic API key``)."""
    return _LABELS.get(kind, kind)


# ---------------------------------------------------------------- finding


def _shapes(text: str) -> Iterator[Hit]:
    """Keys of every kind in ``text`` as written; a match overlapping an earlier one is skipped."""
    taken: list[tuple[int, int]] = []
    for kind in KINDS:
        for match in kind.pattern.finditer(text):
            named = match.group("v") if "v" in kind.pattern.groupindex else None
            secret = named or match.group(0)
            overlaps = any(start < match.end() and match.start() < end for start, end in taken)
            if not overlaps and kind.check(secret):
                taken.append(match.span())
                yield Hit(kind.name, secret, start=match.start())


_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/=_-])")


def _b64text(value: str) -> str | None:
    """``value`` decoded as (standard or URL-safe) base64 when its bytes are printable UTF-8 text."""
    if len(value) > BASE64_MAX:
        return None
    padded = value + "=" * (-len(value) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return text if all(char.isprintable() or char in "\r\n\t" for char in text) else None


def _decoded(text: str) -> Iterator[Hit]:
    """Keys inside the URL-decoded form of ``text`` and inside its base64 strings that decode to text."""
    if "%" in text or "+" in text:
        plain = unquote_plus(text) if "+" in text and "%" in text else unquote(text)
        if plain != text:
            yield from (Hit(hit.kind, hit.secret, "url", hit.secret) for hit in _shapes(plain))
    for match in _BASE64.finditer(text):
        decoded = _b64text(match.group(0))
        if decoded:
            yield from (Hit(hit.kind, hit.secret, "base64", match.group(0), match.start())
                        for hit in _shapes(decoded))


def is_placeholder(value: str) -> bool:
    """True for a value already scrubbed: the placeholder, alone or after a scheme (``Bearer REDACTED``)."""
    scheme, _, rest = value.rpartition(" ")
    return value == PLACEHOLDER or (rest == PLACEHOLDER and scheme.isalpha())


def find(text: str) -> list[Hit]:
    """Every secret in ``text``: as written, URL-encoded, or base64-encoded (see the module docstring)."""
    hits = list(_shapes(text))
    seen = {hit.secret for hit in hits}
    for hit in _decoded(text):
        if hit.secret not in seen:
            seen.add(hit.secret)
            hits.append(hit)
    return hits


def encoded_forms(secret: str) -> list[str]:
    """The spellings of ``secret`` a text may hold: as it is, and percent-encoded (longest first)."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret)}
    return sorted(forms, key=len, reverse=True)


# ---------------------------------------------------------------- showing


def excerpt(secret: str) -> str:
    """A masked excerpt: at most its first 4 and last 2 characters, and its length."""
    shown = f"{secret[:4]}…{secret[-2:]}" if len(secret) >= 12 else "…"
    return f"{shown} ({len(secret)} chars)"


def mask(text: str, replacement: str | None = None) -> str:
    """``text`` with every secret :func:`find` sees replaced by its :func:`excerpt` (or ``replacement``)."""
    for hit in find(text):
        for form in encoded_forms(hit.secret) if hit.encoding != "base64" else [hit.found_in]:
            text = text.replace(form, excerpt(hit.secret) if replacement is None else replacement)
    return text


_LOOSE = re.compile(  # half-masked or short key shapes, for messages only: better masked twice than shown
    r"\bsk-[A-Za-z0-9_*\-]{6,}|\bAKIA[0-9A-Z]{12,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_\w{20,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
    r"|(?i:\bbearer)\s+[A-Za-z0-9._~+/=\-]{8,}"
    r"|(?i:\b(?:x-)?api[-_]?key|\btoken|\bsecret|\bpassword)(?:\"?\s*[=:]\s*\"?)[^\s\"',;}]+"
)
_MAX_MESSAGE = 500
_REDACTED = "[REDACTED]"


def safe_message(text: str) -> str:
    """``text`` safe to print: every secret replaced by ``[REDACTED]`` (what :func:`mask` finds, then looser
    shapes such as half-masked keys), on one line, at most 500 characters."""
    flat = " ".join(_LOOSE.sub(_REDACTED, mask(text, _REDACTED)).split())
    return flat if len(flat) <= _MAX_MESSAGE else flat[: _MAX_MESSAGE - 1] + "…"
