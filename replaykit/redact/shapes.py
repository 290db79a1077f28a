"""Key shapes: finding secrets in a text, whatever disguise they wear, and masking them.

:func:`find` reports every secret in a text as a :class:`Hit`: keys of a known shape (:data:`KINDS`), values
labelled as secrets, and both inside URL-encoded or base64-encoded text. A hit is never shown whole:
:func:`excerpt`, :func:`mask`, :func:`safe_message` and :func:`glimpse` show at most a short masked excerpt.
Used by the cassette walk of :mod:`replaykit.redact` and by every message that quotes a received value;
the shapes are listed in docs/architecture/redact.md.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import codecs
import functools
import itertools
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
    "glimpse",
    "is_placeholder",
    "kind_label",
    "looks_random",
    "mask",
    "might_hold_key",
    "might_hold_key_in_json",
    "safe_message",
]

PLACEHOLDER = "REDACTED"
ACCOUNT_PLACEHOLDER = "0123456789abcdef0123456789abcdef"
BASE64_MAX = 16 << 10  # a longer base64 string is a blob (an image, a file), not a key in disguise


@dataclass(frozen=True, slots=True)
class Kind:
    """A key shape: ``name``, a human ``label``, the ``pattern`` (group ``v``, when present, is the secret
    itself), the ``check`` a match's secret must pass (that it looks random, that it decodes…) and its
    ``needles``: lower-case strings one of which every match holds, case aside (a stretch of text without
    them is not searched). A ``spanning`` match may hold any character (a PEM block): it is searched for in
    the whole text, every other shape only where a key may sit (see :func:`find`)."""

    name: str
    label: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool]
    needles: tuple[str, ...] = ()
    spanning: bool = False


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


def _hex_or_random(value: str) -> bool:
    """A key whose body may be lower-case hex (OpenRouter's, Perplexity's older ones): letters and digits,
    many distinct ones; a slug of words fails (its dashes are outside the body the pattern takes)."""
    body = value.rpartition("-")[2]
    return any(map(str.isalpha, body)) and any(map(str.isdigit, body)) and len(set(body)) > 8


def _always(value: str) -> bool:
    return True


_EDGE = r"(?<![A-Za-z0-9_-])"  # a key starts at a token boundary, never inside a base64(url) blob
_END = r"(?![A-Za-z0-9_-])"
_LABEL = (r"(?:[A-Za-z0-9]+[_-])*(?:api[_-]?key|secret(?:[_-]?(?:access[_-]?)?key)?|password|passwd"
          r"|passphrase|private[_-]?key|access[_-]?key|credentials?|authorization"
          r"|(?:access|auth|api|bearer|session|refresh|oauth)[_-]?token|token)")
# OpenAI keys: project, service account, admin and user keys (sk-proj-…, 156 URL-safe characters after the
# prefix today), any key holding the base64 of "OpenAI" (T3BlbkFJ, as every key issued holds), legacy keys
# (sk- and 48 letters and digits). A slug of words and dashes (sk-learn-compatible-Models-2024) is none.
_OPENAI = (r"(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}"
           r"|(?=[A-Za-z0-9_-]{40})[A-Za-z0-9_-]*T3BlbkFJ[A-Za-z0-9_-]*"
           r"|[A-Za-z0-9]{32,}")
_PEM_END = r"(?:(?:.|\n)*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----)?"


def _kind(name: str, label: str, needles: str, pattern: str, check: Callable[[str], bool] = looks_random,
          spanning: bool = False) -> Kind:
    return Kind(name, label, re.compile(pattern), check, tuple(needles.split()), spanning)


#: The key shapes replaykit knows, most specific first: the ONE list the scanner, the redactor and
#: :func:`safe_message` use. A later match overlapping an earlier one is the same secret.
KINDS: tuple[Kind, ...] = (
    _kind("anthropic", "Anthropic API key", "sk-", rf"{_EDGE}sk-ant-[A-Za-z0-9_-]{{20,}}{_END}"),
    # OpenAI-compatible providers' keys: OpenRouter sk-or-v1- and 64 hex digits, Perplexity pplx- and 48
    # letters and digits (hex in older keys), xAI xai- and 80 letters and digits.
    _kind("openrouter", "OpenRouter API key", "sk-or-", rf"{_EDGE}sk-or-(?:v\d+-)?[A-Za-z0-9]{{32,}}{_END}",
          _hex_or_random),
    _kind("openai", "OpenAI API key", "sk-", rf"{_EDGE}sk-(?:{_OPENAI}){_END}"),
    _kind("perplexity", "Perplexity API key", "pplx-", rf"{_EDGE}pplx-[A-Za-z0-9]{{40,}}{_END}",
          _hex_or_random),
    _kind("xai", "xAI API key", "xai-", rf"{_EDGE}xai-[A-Za-z0-9]{{60,}}{_END}"),
    _kind("cloudflare", "Cloudflare API token",
          "cfk_ cfut_ cfat_ token apikey api_key api-key",
          rf"{_EDGE}cf(?:k|ut|at)_[A-Za-z0-9]{{40,64}}{_END}|(?i:c(?:f|loudflare)[_-]?api[_-]?(?:token|key))"
          r"[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9_-]{37,40})(?![A-Za-z0-9_-])"),
    _kind("aws", "AWS access key id", "akia asia",
          r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])", _always),
    _kind("github", "GitHub token", "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_",
          rf"{_EDGE}(?:gh[pousr]_[A-Za-z0-9]{{36,}}|github_pat_[A-Za-z0-9_]{{50,}}){_END}"),
    _kind("google", "Google API key", "aiza", rf"{_EDGE}AIza[0-9A-Za-z_-]{{35}}{_END}", _always),
    _kind("slack", "Slack token", "xoxa- xoxb- xoxp- xoxr- xoxs-",
          rf"{_EDGE}xox[abprs]-[0-9A-Za-z-]{{10,}}{_END}", _always),
    _kind("jwt", "JSON Web Token", ".eyj",
          rf"{_EDGE}eyJ[A-Za-z0-9_-]{{8,}}\.eyJ[A-Za-z0-9_-]{{8,}}\.[A-Za-z0-9_-]{{8,}}{_END}", _always),
    _kind("bearer", "bearer token", "bearer",
          r"(?i:\bbearer)\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)(?![A-Za-z0-9._~+/=-])"),
    _kind("basic", "HTTP Basic credential", "basic",
          r"(?i:\bbasic)\s+(?P<v>[A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])", _basic),
    _kind("pem", "PEM private key", "-----begin",
          rf"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----{_PEM_END}", _always, spanning=True),
    _kind("labelled", "value labelled as a secret",
          "secret pass credential authorization token apikey api_key api-key privatekey private_key "
          "private-key accesskey access_key access-key",
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


# Finding keys in a long text (a 100 MB body) without running every pattern over all of it. A match of any
# shape but a spanning one (PEM) holds only key characters ([A-Za-z0-9+/_.~=-]), whitespace, quotes, ":" and
# letters (İ ı ſ K too: they match i, s and k when case is ignored), so it never crosses a cut: an ASCII
# character none of these ("," "{" "(" "%" ...). A stretch between two cuts holds a key only if it holds 15
# key characters in a row (every shape but basic does), the word basic or a folding letter: it is a region,
# searched only for the shapes whose needles it holds (each match of a shape holds one of them). The
# patterns are run over the whole text (pos, endpos), and a cut satisfies every lookaround at a region's
# edge: the matches are exactly those of a search of the whole text. The text is looked at a chunk at a
# time, as Latin-1 bytes (bytes.translate and bytes.find are fast); short texts are remembered, since a
# recording repeats them.

_SHORTEST = 12  # no key, nor any encoding of one, is shorter ("basic", a space and 6 characters)
_CHUNK = 1 << 20  # characters of a long text looked at a time
_OVERLAP = 32  # characters a chunk is looked at beyond its end: more than any run or needle sought
_RUN = 15  # key characters in a row that every shape but basic and PEM holds (a Slack token's shortest)
_BASE64_RUN = 24  # the shortest base64 string decoded
# ASCII characters no key holds: "%" too, unless decoding escapes; not "?", which stands in a chunk's bytes
# for a character beyond Latin-1
_CUTS = "\\x00-\\x08\\x0e-\\x1b!#$&()*,;<>@[\\\\\\]^`{|}\\x7f"
_FOLDING = re.compile("[\u0130\u0131\u017f\u212a]")


def _table(chars: str) -> bytes:
    """A ``bytes.translate`` table mapping ``chars`` to ``a`` and every other byte to a space."""
    return bytes(0x61 if chr(byte) in chars else 0x20 for byte in range(256))


def _cuts(escape: bool) -> tuple[re.Pattern[str], bytes]:
    """A cut (``escape``: "%" is not one), and a table marking cuts with a space in a text's Latin-1 bytes
    (:func:`_latin1`: "?" stands there for a character beyond Latin-1, so it is no cut)."""
    cuts = re.compile(f"[{_CUTS}{'' if escape else '%'}]")
    return cuts, _table("".join(char for char in map(chr, range(256)) if not cuts.match(char)))


_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_KEY_RUNS, _BASE64_RUNS = _table(_ALNUM + "+/_.~=-"), _table(_ALNUM + "+/_-")
_KEY_CUTS, _ESCAPE_CUTS = _cuts(escape=False), _cuts(escape=True)
_NEEDLES = sorted({needle.encode() for kind in KINDS for needle in kind.needles})
# Few texts hold "-", "_" or ".": a needle holding one is looked for where it is, by the mark and the byte
# before it in the needle (none at its start): {mark: {byte before: [(needle, where the mark is in it)]}}.
_MARKED: dict[bytes, dict[bytes, list[tuple[bytes, int]]]] = {}
for _needle in _NEEDLES:
    for _mark in sorted({bytes([char]) for char in _needle} & {b"-", b"_", b"."}):
        _at = _needle.index(_mark)
        _MARKED.setdefault(_mark, {}).setdefault(_needle[_at - 1 : _at], []).append((_needle, _at))
_PLAIN = [needle for needle in _NEEDLES if not any(mark in needle for mark in _MARKED)]
_ANY_NEEDLE = re.compile(b"|".join(map(re.escape, _NEEDLES)))
_SHORT = 256  # characters of a piece searched for all the needles at once (a longer one: for each)
_ORDER = {kind.name: index for index, kind in enumerate(KINDS)}
Seeds = Callable[[int, str, bytes, bool], list[int]]
Region = tuple[int, int]


def _offsets(data: bytes, needle: bytes, resume: bytes = b"") -> Iterator[tuple[int, int]]:
    """Where ``needle`` is in the chunk ``data`` (its overlap with the next chunk aside), as (start, end);
    with ``resume``, once per run, which ends where ``resume`` is next (or, unseen, after the chunk)."""
    at, limit = data.find(needle), min(len(data), _CHUNK)
    while 0 <= at < limit:
        end = data.find(resume, at) if resume else at + len(needle)
        yield at, end if end >= 0 else len(data) + 1
        at = data.find(needle, end) if end >= 0 else -1


def _starts(data: bytes, needle: bytes) -> Iterator[int]:
    """Where ``needle`` starts in ``data``, every time (overlap included)."""
    at = data.find(needle)
    while at >= 0:
        yield at
        at = data.find(needle, at + 1)


def _latin1(piece: str) -> tuple[bytes, bool]:
    """``piece`` as bytes, one per character (beyond Latin-1: "?"), and whether it had such characters."""
    try:
        return piece.encode("latin-1"), False
    except UnicodeEncodeError:
        return piece.encode("latin-1", "replace"), True


def _pieces(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, str, bytes, bool]]:
    """``text[start:end]`` a chunk at a time, each seen a little beyond its end: (offset, chunk, its Latin-1
    bytes, whether it had characters beyond Latin-1)."""
    stop = len(text) if end is None else end
    for at in range(start, stop, _CHUNK):
        piece = text[at : min(stop, at + _CHUNK + _OVERLAP)]
        yield (at, piece, *_latin1(piece))


def _needles(text: str, start: int = 0, end: int | None = None) -> frozenset[str] | None:
    """The needles ``text[start:end]`` holds, case aside (None when a folding letter could make any)."""
    stop = len(text) if end is None else end
    if stop - start <= _SHORT:
        return _short_needles(text[start:stop])
    found: set[str] = set()
    for _, piece, _, _ in _pieces(text, start, stop):
        held = _piece_needles(piece)
        if held is None:
            return None
        found |= held
    return frozenset(found)


@functools.lru_cache(maxsize=4096)
def _short_needles(piece: str) -> frozenset[str] | None:
    """:func:`_piece_needles` of a short piece, remembered: a recording repeats its short strings."""
    return _piece_needles(piece)


def _piece_needles(piece: str) -> frozenset[str] | None:
    """The needles of a piece of text."""
    raw, wide = _latin1(piece)
    if wide and _FOLDING.search(piece):
        return None
    lowered = raw.lower()
    if len(lowered) <= _SHORT and not _ANY_NEEDLE.search(lowered):
        return frozenset()  # one search tells a short piece holds none
    found = {needle for needle in _PLAIN if needle in lowered}
    for mark, by_before in _MARKED.items():
        for at in _starts(lowered, mark):
            for needle, index in (*by_before.get(lowered[at - 1 : at], ()), *by_before.get(b"", ())):
                if at >= index and lowered.startswith(needle, at - index):
                    found.add(needle)
    return frozenset(needle.decode() for needle in found)


def _regions(text: str, seeds: Seeds, cuts: tuple[re.Pattern[str], bytes]) -> list[Region]:
    """The stretches between two cuts that hold a seed, in order; ``seeds(offset, chunk, its bytes, wide)``
    finds the seeds of a chunk (see :func:`_pieces`)."""
    regions: list[Region] = []
    end, last_cut = 0, -1
    for at, piece, raw, wide in _pieces(text):
        marks = raw.translate(cuts[1])
        for seed in sorted(seeds(at, piece, raw, wide)):
            if at + seed < end:
                continue  # in the last region
            before, after = marks.rfind(b" ", 0, seed), marks.find(b" ", seed)
            further = cuts[0].search(text, at + len(piece)) if after < 0 else None
            start = (at + before if before >= 0 else last_cut) + 1
            end = last_cut = at + after if after >= 0 else further.start() if further else len(text)
            regions.append((start, end))
        last = marks.rfind(b" ", 0, _CHUNK)
        last_cut = max(last_cut, at + last) if last >= 0 else last_cut
    return regions


class _Survey:
    """One look at a text: its regions, and for each shape those that hold one of its needles; where the
    regions holding a needle start."""

    def __init__(self, text: str) -> None:
        self.regions = _regions(text, _key_seeds, _KEY_CUTS)
        self.shapes: dict[str, list[Region]] = {kind.name: [] for kind in KINDS}
        self.needy: list[int] = []
        for start, end in self.regions:
            held = _needles(text, start, end)
            if held == frozenset():
                continue
            self.needy.append(start)
            for kind in KINDS:
                if held is None or not held.isdisjoint(kind.needles):
                    self.shapes[kind.name].append((start, end))


def _key_seeds(at: int, piece: str, raw: bytes, wide: bool) -> list[int]:
    """Where a key may sit in a chunk: 15 key characters in a row, the word basic, a folding letter."""
    runs = [start for start, _ in _offsets(raw.translate(_KEY_RUNS), b"a" * _RUN, b" ")]
    basic = [start for start, _ in _offsets(raw.lower(), b"basic")]
    return runs + basic + ([match.start() for match in _FOLDING.finditer(piece, 0, _CHUNK)] if wide else [])


def _shapes(text: str, survey: _Survey | None = None) -> Iterator[Hit]:
    """Keys of every kind in ``text`` as written; a match overlapping an earlier one is skipped."""
    survey = survey or _Survey(text)
    taken: list[Region] = []
    for kind in KINDS:
        regions = [(0, len(text))] if kind.spanning else survey.shapes[kind.name]
        for match in (match for start, end in regions for match in kind.pattern.finditer(text, start, end)):
            named = match.group("v") if "v" in kind.pattern.groupindex else None
            secret = named or match.group(0)
            overlaps = any(start < match.end() and match.start() < end for start, end in taken)
            if not overlaps and kind.check(secret):
                taken.append(match.span())
                yield Hit(kind.name, secret, start=match.start())


_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/=_-])")


def _b64text(value: str) -> str | None:
    """``value`` decoded as (standard or URL-safe) base64 when its bytes are printable UTF-8 text."""
    if len(value) > BASE64_MAX or not _text_start(value[:64]):
        return None
    padded = value + "=" * (-len(value) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return text if all(char.isprintable() or char in "\r\n\t" for char in text) else None


def _text_start(start: str) -> bool:
    """Whether the first 64 characters of a base64 string (48 bytes) may start printable UTF-8 text: random
    bytes, nearly always not, and the rest of the string is then never decoded."""
    if len(start) < 64:
        return True
    try:
        raw = base64.b64decode(start.replace("-", "+").replace("_", "/"))
        text = codecs.utf_8_decode(raw, "strict", False)[0]
    except (binascii.Error, UnicodeDecodeError):
        return False
    return all(char.isprintable() or char in "\r\n\t" for char in text)


def _url_hits(text: str, survey: _Survey) -> list[Hit]:
    """Keys in the URL-decoded form of ``text``. A long text is decoded a region at a time: the stretches
    between two cuts ("%" aside: no escape holds a cut) that hold a "%", or a "+" (decoded as a space when
    the text has both) and a needle; the others decode to themselves, or to nothing a shape matches. A PEM
    block may span regions: then the text is decoded whole."""
    if "%" not in text:
        return []
    plus = "+" in text
    decode = unquote_plus if plus else unquote
    whole = len(text) <= _CHUNK

    def escapes(at: int, piece: str, raw: bytes, wide: bool) -> list[int]:
        found = [start for start, _ in _offsets(raw, b"%")]
        if plus:  # a "+" matters only where a needle is: seed the regions holding one
            needy = survey.needy
            found += [start - at for start in needy[bisect.bisect_left(needy, at) :] if start < at + _CHUNK]
        return found

    spans = [] if whole else _regions(text, escapes, _ESCAPE_CUTS)
    pieces = [text] if whole else [text[start:end] for start, end in spans
                                   if text.find("%", start, end) >= 0 or text.find("+", start, end) >= 0]
    plains = [plain for piece in pieces if (plain := decode(piece)) != piece]
    if not whole and any("-----BEGIN" in each for each in (text, *plains)):
        plains = [plain for plain in (decode(text),) if plain != text]
    hits = sorted((hit for plain in plains for hit in _shapes(plain)), key=lambda hit: _ORDER[hit.kind])
    return [Hit(hit.kind, hit.secret, "url", hit.secret) for hit in hits]


def _base64_strings(text: str) -> Iterator[re.Match[str]]:
    """The base64 strings of ``text`` (the matches of _BASE64: each starts a run of 24 base64 characters,
    found a chunk at a time)."""
    for at, _, raw, _ in _pieces(text):
        for start, _ in _offsets(raw.translate(_BASE64_RUNS), b"a" * _BASE64_RUN, b" "):
            match = _BASE64.match(text, at + start)
            if match:
                yield match


def _base64_hits(text: str) -> Iterator[Hit]:
    """Keys inside the base64 strings of ``text`` that decode to text."""
    for match in _base64_strings(text):
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
    if len(text) < _SHORTEST:
        return []
    return list(_find_short(text)) if len(text) <= _SHORT else _find(text)


@functools.lru_cache(maxsize=4096)
def _find_short(text: str) -> tuple[Hit, ...]:
    """:func:`find` of a short text, remembered: a recording repeats its keys and short values."""
    return tuple(_find(text))


def _find(text: str) -> list[Hit]:
    if not might_hold_key(text):
        return []
    survey = _Survey(text)
    hits = list(_shapes(text, survey))
    seen = {hit.secret for hit in hits}
    for hit in itertools.chain(_url_hits(text, survey), _base64_hits(text)):
        if hit.secret not in seen:
            seen.add(hit.secret)
            hits.append(hit)
    return hits


def might_hold_key(text: str) -> bool:
    """False only when no part of ``text`` holds a key :func:`find` would report (no shape's needle, no
    escape, no base64 string): a quick test of many short texts."""
    runs = any(b"a" * _BASE64_RUN in raw.translate(_BASE64_RUNS) for _, _, raw, _ in _pieces(text))
    return runs or _holds_needle(text)


def might_hold_key_in_json(text: str) -> bool:
    """False only when no string of the JSON ``text`` holds a key :func:`find` would report: as
    :func:`might_hold_key` (an escape ``\\u`` may spell anything), but a base64 string that decodes to no text
    is allowed (an opaque blob) when ``text`` has no backslash: each string's base64 strings are then the
    text's own."""
    if "\\u" in text or _holds_needle(text):
        return True
    strings = list(_base64_strings(text))
    return bool(strings) if "\\" in text else any(_b64text(match.group(0)) for match in strings)


def _holds_needle(text: str) -> bool:
    """True when ``text`` holds a shape's needle, a folding letter or a "%": what a key needs, as written or
    URL-encoded."""
    return "%" in text or _needles(text) != frozenset()


def encoded_forms(secret: str) -> list[str]:
    """The spellings of ``secret`` a text may hold: as it is, and percent-encoded (longest first)."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret)}
    return sorted(forms, key=len, reverse=True)


# ---------------------------------------------------------------- showing


def excerpt(secret: str) -> str:
    """A masked excerpt: at most its first 4 and last 2 characters, and its length."""
    shown = f"{secret[:4]}…{secret[-2:]}" if len(secret) >= 12 else "…"
    return f"{shown} ({len(secret)} chars)"


def glimpse(value: str) -> str:
    """``value`` quoted for a message, key or not: whole when shorter than any key (12 characters), else
    only its :func:`excerpt`: ``'f317…9b' (32 chars)``."""
    if len(value) < _SHORTEST:
        return repr(value)
    shown, _, size = excerpt(value).partition(" ")
    return f"{shown!r} {size}"


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
