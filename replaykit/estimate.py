"""The replay-aware token estimator: counts exactly what :func:`replaykit.replay.project` sends.

:func:`estimate` splits every string of the projected body into content classes (text, structure, digits,
url, opaque, cjk), each counted at its rate of :data:`RATES` (``o200k_base``'s, measured by
``scripts/bench_estimate``); it anchors on the last assistant message with valid usage whose system and tools
are still in force (:func:`find_anchor`, :func:`usage_tokens`, ``systemHistory``), and ``exact=True`` counts
with tiktoken's ``o200k_base`` read offline. Called by the reference harness, repro and qualify; the rates'
derivation and the anchoring rules are in docs/architecture/modules.md.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, cast

from replaykit.errors import ReplaykitError, UsageError
from replaykit.replay import PROVIDERS, Api, Provider, ProviderModel, project

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "CJK",
    "IMAGE_CHARS",
    "OPAQUE_ALPHABET",
    "OPAQUE_MIN",
    "RATES",
    "STRUCTURE",
    "URL",
    "URL_TOKEN",
    "USAGE_FIELDS",
    "Anchor",
    "Breakdown",
    "Budget",
    "Chars",
    "Estimate",
    "ExactModeUnavailable",
    "body_chars",
    "budget",
    "estimate",
    "estimate_tokens",
    "find_anchor",
    "o200k_base",
    "o200k_tokens",
    "text_chars",
    "text_tokens",
    "to_target",
    "usage_tokens",
]


#: CJK characters: Han (with extensions and compatibility forms), kana, Hangul, CJK punctuation, full width.
CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3200-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003134f]"
)
#: An http(s) URL: the scheme, then the characters RFC 3986 allows (ASCII: a space, a quote or a CJK
#: character ends it).
URL = re.compile(r"https?://[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]+")
#: JSON punctuation, counted outside URLs.
STRUCTURE = '{}[]":,'
#: An opaque run (base64, an encrypted field, an id, a hash): at least :data:`OPAQUE_MIN` characters in a row
#: of :data:`OPAQUE_ALPHABET`, outside URLs, with a digit and a letter among them.
OPAQUE_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
OPAQUE_MIN = 12
#: Tokens per character of each content class (see the module docstring for the measurements); ``text`` is
#: everything else that is not CJK: prose and code.
RATES: Mapping[str, Fraction] = MappingProxyType({
    "text": Fraction(1, 4), "structure": Fraction(1, 3), "digits": Fraction(1, 2), "url": Fraction(1, 3),
    "opaque": Fraction(7, 10), "cjk": Fraction(3, 4),
})
#: Characters an image counts as (1,200 tokens, the figure pi's compaction uses).
IMAGE_CHARS = 4800
USAGE_FIELDS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
_IMAGE_TYPES = ("image", "input_image", "image_url")
_IMAGE_KEYS = ("inlineData",)  # a Gemini part holding an image (no type member)
#: The body keys of each counted part, per API: Anthropic ``system`` / ``messages``, OpenAI Responses
#: ``instructions`` / ``input``, Gemini ``systemInstruction`` / ``contents``; Chat Completions carries its
#: system prompt as ``system`` messages, counted as the system part (:func:`_parts`).
_PARTS = {"system": ("system", "instructions", "systemInstruction"), "tools": ("tools",),
          "messages": ("messages", "input", "contents")}
_SYSTEM_ROLES = ("system", "developer")
_DENOMINATOR = 60  # every rate is a whole number of sixtieths (a test checks it): sums stay integers
_SIXTIETHS = {name: int(rate * _DENOMINATOR) for name, rate in RATES.items()}
# The classes are found in the UTF-8 bytes (every class but CJK is ASCII): URLs are blanked, then one
# translation marks opaque-alphabet bytes "a" and JSON punctuation "s"; a literal prefix of OPAQUE_MIN "a"s
# lets the regex engine skip ahead instead of trying a character class at every byte.
_URL_BYTES = re.compile(URL.pattern.encode())
_MASK = bytes(ord("a") if chr(byte) in OPAQUE_ALPHABET else ord("s") if chr(byte) in STRUCTURE else ord(" ")
              for byte in range(256))
_RUN_START = b"a" * OPAQUE_MIN
_RUN = re.compile(_RUN_START + b"a*")
_DIGIT, _LETTER = re.compile(b"[0-9]"), re.compile(b"[A-Za-z]")
_LOWER, _UPPER = re.compile(b"[a-z]"), re.compile(b"[A-Z]")
#: An opaque token inside a URL (counted as opaque, not URL): OPAQUE_MIN or more base64url characters.
URL_TOKEN = re.compile(f"[A-Za-z0-9_=+-]{{{OPAQUE_MIN},}}")
_URL_TOKEN = re.compile(URL_TOKEN.pattern.encode())
_NOT_DIGITS = bytes(byte for byte in range(256) if not ord("0") <= byte <= ord("9"))
_SPACED_CJK = re.compile(f" (?={CJK.pattern})")  # o200k_base joins a space to the word it starts (Korean)


@dataclass(frozen=True, slots=True)
class Chars:
    """Characters of projected text by content class: ``cjk`` and ``other`` (every other character but a
    space before a CJK one, which the tokenizer joins to it); of ``other``, ``structure`` are JSON
    punctuation, ``url`` in URLs and ``opaque`` in opaque runs, the rest is plain ``text``."""

    other: int = 0
    cjk: int = 0
    structure: int = 0
    digits: int = 0
    url: int = 0
    opaque: int = 0

    def __add__(self, more: Chars) -> Chars:
        return Chars(self.other + more.other, self.cjk + more.cjk, self.structure + more.structure,
                     self.digits + more.digits, self.url + more.url, self.opaque + more.opaque)

    @property
    def text(self) -> int:
        """The plain text characters: ``other`` less structure, digits, URLs and opaque runs."""
        return self.other - self.structure - self.digits - self.url - self.opaque

    def classes(self) -> dict[str, int]:
        """The characters of each class of :data:`RATES`."""
        return {"text": self.text, "structure": self.structure, "digits": self.digits, "url": self.url,
                "opaque": self.opaque, "cjk": self.cjk}

    @property
    def tokens(self) -> int:
        """Every class at its :data:`RATES`, summed, rounded up."""
        weighted = sum(_SIXTIETHS[name] * count for name, count in self.classes().items())
        return -(-weighted // _DENOMINATOR)


@dataclass(frozen=True, slots=True)
class Anchor:
    """The assistant message whose usage covers the prefix: its ``index`` and the ``tokens`` it covers."""

    index: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Where the tokens come from; ``anchor + system + tools + messages == Estimate.tokens``."""

    anchor: int
    system: int
    tools: int
    messages: int


@dataclass(frozen=True, slots=True)
class Estimate:
    """An estimate of the input tokens of the request ``project`` builds."""

    tokens: int
    anchor: Anchor | None
    breakdown: Breakdown


@dataclass(frozen=True, slots=True)
class Budget:
    """Whether to compact before the next request, and how many output tokens still fit."""

    estimate: Estimate
    compact: bool
    output_allowance: int


class ExactModeUnavailable(ReplaykitError):
    """Exact counting was asked for, but the ``o200k_base`` ranks cannot be loaded offline."""


# ---------------------------------------------------------------- counting text


def text_chars(text: str) -> Chars:
    """The characters of ``text`` by content class."""
    if not text:
        return Chars()
    raw = text.encode()
    digits = _digits(raw)
    blanked, url = _blank_urls(raw) if b"://" in raw else (raw, 0)
    url -= digits - _digits(blanked) if url else 0  # a URL's digits count as digits
    in_url, in_url_digits = _url_tokens(raw) if url else (0, 0)
    mask = blanked.translate(_MASK)
    opaque, hidden = _opaque(blanked, mask)
    cjk = 0 if text.isascii() else len(CJK.findall(text))
    joined = len(_SPACED_CJK.findall(text)) if cjk else 0
    return Chars(len(text) - cjk - joined, cjk, mask.count(b"s"), digits - hidden - in_url_digits,
                 url - (in_url - in_url_digits), opaque + in_url)


def _digits(raw: bytes) -> int:
    return len(raw.translate(None, _NOT_DIGITS))


def _blank_urls(raw: bytes) -> tuple[bytes, int]:
    """``raw`` with every URL replaced by as many spaces, and the number of bytes blanked."""
    blanked = 0

    def spaces(match: re.Match[bytes]) -> bytes:
        nonlocal blanked
        blanked += match.end() - match.start()
        return b" " * (match.end() - match.start())

    return _URL_BYTES.sub(spaces, raw), blanked


def _url_tokens(raw: bytes) -> tuple[int, int]:
    """The bytes of opaque tokens inside the URLs of ``raw`` (a redirect or signed URL's key: a run of
    :data:`URL_TOKEN` with a digit, a lower and an upper case letter, which no word or slug has), and the
    digits among them."""
    runs = b"".join(token.group() for found in _URL_BYTES.finditer(raw)
                    for token in _URL_TOKEN.finditer(found.group()) if _mixed(token.group()))
    return len(runs), _digits(runs)


def _mixed(run: bytes) -> bool:
    return bool(_DIGIT.search(run) and _LOWER.search(run) and _UPPER.search(run))


def _opaque(raw: bytes, mask: bytes) -> tuple[int, int]:
    """The bytes of ``raw`` in opaque runs (long runs of the alphabet, ``mask``, with a digit and a letter),
    and the digits among them."""
    if _RUN_START not in mask:  # a search for the bytes alone is cheaper than starting the regex engine
        return 0, 0
    digit, letter = _DIGIT.search, _LETTER.search
    runs = b"".join(run for match in _RUN.finditer(mask)
                    if digit(run := raw[match.start():match.end()]) and letter(run))
    return len(runs), _digits(runs)


def text_tokens(text: str) -> int:
    """The heuristic on one string: each content class at its rate, rounded up."""
    return text_chars(text).tokens


def _collect(value: object, texts: list[str]) -> int:
    """Gather the counted strings under ``value`` into ``texts``; return the number of images under it."""
    if isinstance(value, str):
        texts.append(value)
        return 0
    if isinstance(value, dict):
        if value.get("type") in _IMAGE_TYPES or any(key in value for key in _IMAGE_KEYS):
            return 1
        value = value.values()
    elif not isinstance(value, list):
        return 0
    images = 0
    for item in value:
        images += _collect(item, texts)
    return images


def _strings(values: Iterable[object]) -> tuple[list[str], int]:
    """The counted strings under ``values`` and the number of images among them."""
    texts: list[str] = []
    images = sum(_collect(value, texts) for value in values)
    return texts, images


def _chars(values: Iterable[object]) -> Chars:
    texts, images = _strings(values)
    chars = text_chars("\n".join(texts))  # a line break ends any URL or opaque run: classes stay per string
    return replace(chars, other=chars.other - max(len(texts) - 1, 0) + images * IMAGE_CHARS)


def body_chars(body: Mapping[str, object]) -> dict[str, Chars]:
    """The counted characters of a projected body, per part: ``system``, ``tools`` and ``messages``."""
    return {part: _chars(values) for part, values in _parts(body).items()}


def _parts(body: Mapping[str, object]) -> dict[str, list[object]]:
    """The counted values of each part of ``body``; a Chat Completions ``system`` message is the system."""
    parts = {part: [body.get(key) for key in keys] for part, keys in _PARTS.items()}
    messages = body.get("messages")
    if isinstance(messages, list) and any(_system_message(message) for message in messages):
        parts["system"].append([message for message in messages if _system_message(message)])
        parts["messages"] = [[message for message in messages if not _system_message(message)]]
    return parts


def _system_message(message: object) -> bool:
    return isinstance(message, dict) and message.get("role") in _SYSTEM_ROLES


# ---------------------------------------------------------------- usage anchoring


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float (10**400): not a usable count
        return None
    return number if math.isfinite(number) and number >= 0 else None


def usage_tokens(message: Mapping[str, object]) -> int | None:
    """The tokens an assistant message's usage covers, or None when it cannot anchor an estimate.

    Valid: an assistant message, stopReason not ``error`` / ``aborted``, a finite timestamp, all five usage
    fields finite and non-negative, and ``totalTokens`` (or, when it is 0, the sum of the other four) > 0.
    """
    if message.get("role") != "assistant" or message.get("stopReason") in ("error", "aborted"):
        return None
    usage = message.get("usage")
    if _number(message.get("timestamp")) is None or not isinstance(usage, dict):
        return None
    counts = [_number(usage.get(field)) for field in USAGE_FIELDS]
    if any(count is None for count in counts):
        return None
    *parts, total = (count or 0.0 for count in counts)
    covered = total or sum(parts)
    return math.ceil(covered) if covered > 0 else None


def _config(transcript: Mapping[str, object], timestamp: float) -> tuple[object, object] | None:
    history = transcript.get("systemHistory")
    if not isinstance(history, list):
        return _current(transcript)
    earlier = [entry for entry in history if isinstance(entry, dict)
               and _number(entry.get("timestamp")) is not None and entry["timestamp"] <= timestamp]
    return _current(earlier[-1]) if earlier else None


def _current(holder: Mapping[str, object]) -> tuple[object, object]:
    return holder.get("system") or None, holder.get("tools") or []


def find_anchor(transcript: Mapping[str, object]) -> Anchor | None:
    """The anchor of ``transcript``: the last assistant message with valid usage and unchanged system."""
    messages = transcript.get("messages")
    if not isinstance(messages, list):
        return None
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        tokens = usage_tokens(message) if isinstance(message, dict) else None
        if tokens is not None:
            unchanged = _config(transcript, message["timestamp"]) == _current(transcript)
            return Anchor(index, tokens) if unchanged else None
    return None


# ---------------------------------------------------------------- the estimate


def to_target(target: ProviderModel | Mapping[str, object]) -> ProviderModel:
    """A :class:`~replaykit.replay.ProviderModel` from itself or from ``{"provider", "api", "model"}``."""
    if isinstance(target, ProviderModel):
        return target
    if not isinstance(target, Mapping):
        raise UsageError(f"target={target!r} must be a ProviderModel or a {{provider, api, model}} object")
    provider = target.get("provider")
    api = target.get("api") or PROVIDERS.get(str(provider), "")
    return ProviderModel(cast(Provider, provider), cast(Api, api), cast(str, target.get("model")))


def estimate(transcript: Mapping[str, object], target: ProviderModel | Mapping[str, object], *,
             exact: bool = False) -> Estimate:
    """Estimate the input tokens of ``project(transcript, target)``, anchored on valid usage.

    ``exact=True`` counts with tiktoken's ``o200k_base`` instead of the heuristic (OpenAI and Azure only:
    Responses and Chat Completions).
    Raises :class:`~replaykit.errors.LocalRequestError` (phase ``validation``) when ``project`` does on what
    is counted: the whole transcript, or with an anchor the messages after it.
    """
    goal = to_target(target)
    count = _exact_counter(goal) if exact else _heuristic
    anchor = find_anchor(transcript) if isinstance(transcript, dict) else None
    if anchor is None:
        parts = count(project(transcript, goal, share=True))  # the body is only read: raw blocks shared
        return _estimate(None, parts["system"], parts["tools"], parts["messages"])
    later = count(project(transcript, goal, share=True, since=anchor.index + 1))["messages"]
    return _estimate(anchor, 0, 0, later)


def _estimate(anchor: Anchor | None, system: int, tools: int, messages: int) -> Estimate:
    used = anchor.tokens if anchor else 0
    return Estimate(used + system + tools + messages, anchor, Breakdown(used, system, tools, messages))


def _heuristic(body: Mapping[str, object]) -> dict[str, int]:
    return {part: chars.tokens for part, chars in body_chars(body).items()}


def estimate_tokens(transcript: Mapping[str, object], target: ProviderModel | Mapping[str, object]) -> int:
    """The reference estimator callable of the property suite: ``estimate(transcript, target).tokens``."""
    return estimate(transcript, target).tokens


def budget(transcript: Mapping[str, object], target: ProviderModel | Mapping[str, object],
           context_window: int, reserve: int) -> Budget:
    """Compact when the estimate exceeds ``context_window - reserve``; allow what is left for output."""
    _check_window(context_window, reserve)
    found = estimate(transcript, target)
    allowance = max(context_window - found.tokens, 0)
    return Budget(found, found.tokens > context_window - reserve, allowance)


def _check_window(context_window: int, reserve: int) -> None:
    for name, value in (("context_window", context_window), ("reserve", reserve)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{name}={value!r} must be an integer number of tokens")
    if context_window < 1:
        raise UsageError(f"context_window={context_window!r} must be positive")
    if not 0 <= reserve < context_window:
        raise UsageError(f"reserve={reserve!r} must be at least 0 and below context_window={context_window}")


# ---------------------------------------------------------------- exact mode (tiktoken o200k_base)

_O200K_FILE = "o200k_base.tiktoken"
_LOAD_LOCK = threading.Lock()


def _exact_counter(target: ProviderModel) -> Callable[[Mapping[str, object]], dict[str, int]]:
    if target.api not in ("openai-responses", "openai-chat"):
        raise UsageError(f"exact counting uses OpenAI's o200k_base; {target.provider} has no public "
                         "tokenizer: use the heuristic (exact=False)")
    encoding = o200k_base()

    def count(body: Mapping[str, object]) -> dict[str, int]:
        return {part: _exact(encoding, values) for part, values in _parts(body).items()}

    return count


def o200k_tokens(body: Mapping[str, object]) -> int:
    """``o200k_base`` over the counted strings of a projected ``body`` (each string on its own, an image
    as ``IMAGE_CHARS / 4``): exact for OpenAI, a stated proxy for Anthropic (whose tokenizer is not
    public). Raises :class:`ExactModeUnavailable`."""
    encoding = o200k_base()
    return sum(_exact(encoding, values) for values in _parts(body).values())


def _exact(encoding: tiktoken.Encoding, values: list[object]) -> int:
    texts, images = _strings(values)
    counted = sum(len(encoding.encode_ordinary(text)) for text in texts)
    return counted + images * (IMAGE_CHARS // 4)


@cache
def o200k_base() -> tiktoken.Encoding:
    """tiktoken's ``o200k_base``, built offline from the ranks shipped in the ``bpe-openai`` package.

    tiktoken's own constructor supplies the pattern and special tokens; only its download is replaced by
    the bundled file, which must match the SHA-256 tiktoken declares. Raises :class:`ExactModeUnavailable`.
    """
    try:
        import tiktoken
        from tiktoken_ext import openai_public  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ExactModeUnavailable("exact counting needs tiktoken: pip install 'tiktoken>=0.7' "
                                   "'bpe-openai>=0.1.4'") from exc

    original = openai_public.load_tiktoken_bpe

    def load(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if not blobpath.endswith("/" + _O200K_FILE):
            return cast(dict[bytes, int], original(blobpath, expected_hash))
        return _bundled_ranks(expected_hash)

    with _LOAD_LOCK:
        openai_public.load_tiktoken_bpe = load
        try:
            return tiktoken.Encoding(**openai_public.o200k_base())
        finally:
            openai_public.load_tiktoken_bpe = original


def _bundled_ranks(expected_hash: str | None) -> dict[bytes, int]:
    path = _bundled_path()
    data = gzip.decompress(path.read_bytes())
    if expected_hash and hashlib.sha256(data).hexdigest() != expected_hash:
        raise ExactModeUnavailable(f"{path}: the o200k_base ranks do not match tiktoken's SHA-256 "
                                   f"{expected_hash}; reinstall bpe-openai")
    ranks = (line.split() for line in data.splitlines() if line)
    return {base64.b64decode(token): int(rank) for token, rank in ranks}


def _bundled_path() -> Path:
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or spec.origin is None:
        raise ExactModeUnavailable("exact counting needs the o200k_base ranks, which replaykit reads offline "
                                   "from the bpe-openai package: pip install 'bpe-openai>=0.1.4'")
    path = Path(spec.origin).parent / "data" / (_O200K_FILE + ".gz")
    if not path.is_file():
        raise ExactModeUnavailable(f"{path}: missing from the installed bpe-openai; reinstall it")
    return path
