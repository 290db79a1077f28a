"""The cassette model: requests, responses (SSE bodies as events), interactions, metadata; the one
header lookup and the one body parser."""


import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from replaykit import jsondoc, sse
from replaykit.jsondoc import JSON

Origin = Literal["recorded", "synthesized"]
ORIGINS: tuple[Origin, ...] = ("recorded", "synthesized")
Headers = dict[str, list[str]]
Where = tuple[str | int, ...]  # a place inside a cassette document: keys and indices

def header(headers: object, name: str) -> str | None:
    """First value of header ``name`` (case-insensitive), or ``None``: the one header lookup, for a
    cassette's ``{name: [values]}``, a plain ``{name: value}`` dict, or httpx / aiohttp headers."""
    lowered = name.lower()
    for key, value in headers.items() if hasattr(headers, "items") else ():
        if str(key).lower() == lowered:
            first = (value[0] if value else None) if isinstance(value, list) else value
            return str(first) if first is not None else None
    return None


def body_json(body: bytes | None) -> Any:
    """``body`` parsed as JSON, or ``None`` when it is empty, not JSON, or nested deeper than
    :data:`replaykit.jsondoc.MAX_DEPTH`."""
    if not body:
        return None
    try:
        return jsondoc.loads(body)
    except ValueError:
        return None


# ---------------------------------------------------------------- the model

_SSE_PIECE = 1 << 16  # bytes of a stream parsed at a time by Response.iter_events


@dataclass(slots=True)
class Request:
    """A recorded request; ``body`` is the exact bytes sent (``None`` when there was none)."""

    method: str
    uri: str
    headers: Headers = field(default_factory=dict)
    body: bytes | None = None

    def header(self, name: str) -> str | None:
        """First value of a header, case-insensitive."""
        return header(self.headers, name)

    def json(self) -> Any:
        """The body parsed as JSON (a fresh object each call), or ``None`` when it is empty or not JSON."""
        return body_json(self.body)


@dataclass(slots=True)
class Response:
    """A recorded response; ``body`` is decoded (no content-encoding left).

    ``event_offsets_ms``, when known, holds one offset per SSE event: milliseconds from the start of the
    response to the moment that event was sent (non-decreasing).
    """

    status: int
    reason: str = ""
    headers: Headers = field(default_factory=dict)
    body: bytes = b""
    event_offsets_ms: list[float] | None = None
    _events: list[tuple[bytes, list[sse.Event]]] = field(default_factory=list, repr=False, compare=False)

    def header(self, name: str) -> str | None:
        """First value of a header, case-insensitive."""
        return header(self.headers, name)

    @property
    def is_stream(self) -> bool:
        """True when the body is ``text/event-stream``."""
        return (self.header("content-type") or "").lower().startswith("text/event-stream")

    @property
    def events(self) -> list[sse.Event]:
        """The SSE blocks of a streaming body, with their original bytes (empty when not a stream).

        Parsed once per body (a new ``body`` is parsed again); the list is a copy, the events immutable.
        """
        if not self.is_stream:
            return []
        if not self._events or self._events[0][0] is not self.body:
            self._events[:] = [(self.body, sse.parse(self.body))]
        return list(self._events[0][1])

    def iter_events(self) -> Iterator[sse.Event]:
        """The events of :attr:`events` one at a time, parsed as the body is read and none kept: for a long
        stream, whose events :attr:`events` would hold all at once."""
        if not self.is_stream:
            return iter(())
        if self._events and self._events[0][0] is self.body:
            return iter(self._events[0][1])
        body = self.body
        return sse.iter_events(body[at : at + _SSE_PIECE] for at in range(0, len(body), _SSE_PIECE))

    def json(self) -> Any:
        """The body parsed as JSON (a fresh object each call), or ``None`` for a stream, empty or not JSON."""
        return None if self.is_stream else body_json(self.body)


@dataclass(slots=True)
class Interaction:
    """One request and its response; ``line`` is where it starts in the file (1-based), if known."""

    request: Request
    response: Response
    line: int | None = None


@dataclass(slots=True)
class Meta:
    """replaykit's metadata, kept in the top-level ``replaykit:`` mapping (``extra``: its other keys).

    ``description`` says what the cassette shows, in a sentence or two: what ``replaykit cassettes`` lists and
    ``replaykit show`` prints (the bundled cassettes' index, ``cassettes/README.md``, is made of the same
    text by ``scripts/synthesize_cassettes``).
    """

    origin: Origin | None = None
    provider: str | None = None
    recorded_with: str | None = None
    fingerprint: str | None = None
    description: str | None = None
    extra: JSON = field(default_factory=dict)


@dataclass(slots=True)
class Cassette:
    """A loaded cassette; ``extra`` holds top-level keys other than ours (e.g. vcrpy's ``metadata``)."""

    interactions: list[Interaction] = field(default_factory=list)
    meta: Meta = field(default_factory=Meta)
    path: Path | None = None
    extra: JSON = field(default_factory=dict)

    def fingerprint(self) -> str:
        """Canonical SHA-256 of the traffic (not the metadata): the same before and after a save."""
        digest = hashlib.sha256()
        for item in self.interactions:
            for pieces in _canonical(item):
                digest.update(sum(map(len, pieces)).to_bytes(8, "big"))
                for piece in pieces:
                    digest.update(piece)
        return f"sha256:{digest.hexdigest()}"


# ---------------------------------------------------------------- the canonical form

_NOT_TRAFFIC = frozenset({"content-length", "content-encoding", "transfer-encoding"})
_SLICE = 1 << 20  # characters of a long JSON string encoded at a time


def canonical_parts(item: Interaction) -> Iterator[bytes]:
    """The canonical form of an interaction, as the byte strings the fingerprint hashes.

    In order: request method (upper case), URI, request headers, request body, response status, response
    headers, response body. Headers: the JSON list of ``[name, values]`` pairs with lower-cased names,
    sorted, without content-length, content-encoding and transfer-encoding (a save decodes bodies and
    rewrites the length). Bodies: a JSON body as sorted-key compact JSON (re-serialising it does not change
    the fingerprint), any other body as its bytes, no body as empty. The reason phrase, time offsets and
    metadata are not traffic. :meth:`Cassette.fingerprint` hashes every part, each preceded by its length
    as 8 big-endian bytes, so no two different sequences of parts hash alike.
    """
    return (b"".join(pieces) for pieces in _canonical(item))


def _canonical(item: Interaction) -> Iterator[Iterable[bytes]]:
    """The parts of :func:`canonical_parts`, each as pieces that can be gone through twice (to measure,
    then to hash): a long JSON body's canonical form is made again each time, never held whole."""
    req, resp = item.request, item.response
    yield (req.method.upper().encode(),)
    yield (req.uri.encode(),)
    yield (_canonical_headers(req.headers),)
    yield _canonical_body(req.body)
    yield (str(resp.status).encode(),)
    yield (_canonical_headers(resp.headers),)
    yield _canonical_body(resp.body)


def _canonical_headers(headers: Headers) -> bytes:
    lowered = ((name.lower(), values) for name, values in headers.items())
    pairs = sorted((name, values) for name, values in lowered if name not in _NOT_TRAFFIC)
    return json.dumps(pairs, ensure_ascii=False, separators=(",", ":")).encode()


def _canonical_body(body: bytes | None) -> Iterable[bytes]:
    parsed = body_json(body)
    if parsed is None:
        return (body or b"",)
    long = _long_strings(parsed, set()) if len(body or b"") > _SLICE else set()
    if not long:
        return (_canonical_json(parsed).encode("utf-8", "surrogatepass"),)  # JSON may escape a lone surrogate
    return _CanonicalPieces(parsed, long)


def _canonical_json(doc: object) -> str:
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class _CanonicalPieces:
    """The canonical JSON of a parsed body holding long strings, encoded a piece at a time on each pass."""

    def __init__(self, doc: object, long: set[int]) -> None:
        self.doc, self.long = doc, long

    def __iter__(self) -> Iterator[bytes]:
        return (text.encode("utf-8", "surrogatepass") for text in self._pieces(self.doc))

    def _pieces(self, doc: Any) -> Iterator[str]:
        """:func:`_canonical_json` of ``doc``, what holds a long string written a piece at a time."""
        if id(doc) not in self.long:
            yield _canonical_json(doc)
        elif isinstance(doc, str):
            yield '"'
            for at in range(0, len(doc), _SLICE):
                yield _canonical_json(doc[at : at + _SLICE])[1:-1]
            yield '"'
        elif isinstance(doc, dict):
            for index, (key, value) in enumerate(sorted(doc.items())):
                yield ("{" if index == 0 else ",") + _canonical_json(key) + ":"
                yield from self._pieces(value)
            yield "}"
        else:
            for index, value in enumerate(doc):
                yield "[" if index == 0 else ","
                yield from self._pieces(value)
            yield "]"


def _long_strings(doc: object, found: set[int]) -> set[int]:
    """The ids of the strings in ``doc`` longer than a slice, and of the arrays and objects that hold one."""
    children = doc.values() if isinstance(doc, dict) else doc if isinstance(doc, list) else ()
    for child in children:
        _long_strings(child, found)
    if (isinstance(doc, str) and len(doc) > _SLICE) or any(id(child) in found for child in children):
        found.add(id(doc))
    return found
