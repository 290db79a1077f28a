"""Cassettes: vcrpy version-1 YAML, read in every layout users have, written atomically.

A cassette file is vcrpy's format plus a top-level ``replaykit:`` mapping (which vcrpy ignores)::

    version: 1
    replaykit: {origin: recorded|synthesized, provider: anthropic, recorded_with: ..., fingerprint: sha256:…,
                description: what it shows, in a sentence or two}
    interactions:
    - request:  {method, uri, headers: {name: [values]}, body: str|null}
      response: {status: {code, message}, headers: {name: [values]}, body: {string: str}}
      replaykit: {event_offsets_ms: [...]}        # optional: when each SSE event was sent, in ms

Read as well: ``!!binary`` bodies, gzip / deflate / br bodies with ``content-encoding`` (decoded on load),
pydantic-ai's ``parsed_body`` layout (serialised back to JSON the way its own replay does), vcrpy's
pre-4 httpx layout (``status_code`` / ``content``), vcrpy's harmless ``!!python/str|unicode|tuple`` tags
and any other top-level key (kept in :attr:`Cassette.extra`, written back). Loading is safe (no Python
objects) and uses libyaml's C loader when PyYAML has it.

Bodies are held decoded (``bytes``); JSON bodies are exposed parsed (:meth:`Request.json`,
:meth:`Response.json`), SSE bodies as :mod:`replaykit.sse` events with their byte boundaries
(:attr:`Response.events`, or one at a time: :meth:`Response.iter_events`). :meth:`Cassette.fingerprint` is a
SHA-256 of the traffic in a canonical form (see :func:`canonical_parts`) that is the same before and after a
save; a long JSON body's canonical form is hashed a piece at a time. :func:`save` writes atomically.

:func:`load` keeps parsed cassettes in a cache keyed by the SHA-256 of the file's bytes, so a changed
file is always parsed again; every call returns a fresh copy that the caller may change freely.

Memory: :func:`load` reads the file twice in small pieces, once to hash it (the cache key) and once as
libyaml parses it (checked as UTF-8, hashed again and scanned for interaction lines on the way); it never
holds the file's bytes or text whole, and each body's text is dropped once its bytes are made. Loading a
cassette with one 100 MB body peaks at about 2.5x the file's size: libyaml's buffer for that body (grown
by doubling) next to the body's text, then that text next to its bytes (``scripts/bench_cassette --big``).
A problem is explained by parsing the file again in memory, the way that names its line.
"""

from __future__ import annotations

import codecs
import copy
import hashlib
import io
import itertools
import json
import math
import os
import re
import stat
import tempfile
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

import brotli  # type: ignore[import-untyped]
import yaml

from replaykit import jsondoc, sse
from replaykit.errors import CassetteError, UsageError, located

__all__ = [
    "MAX_BODY",
    "MAX_EXPANSION",
    "ORIGINS",
    "Cassette",
    "Headers",
    "Interaction",
    "Meta",
    "Origin",
    "Request",
    "Response",
    "body_json",
    "canonical_parts",
    "clear_cache",
    "dumps",
    "header",
    "iter_paths",
    "load",
    "loads",
    "named_paths",
    "read_yaml",
    "save",
    "stale_temporaries",
    "write_atomic",
    "yaml_line",
]

Origin = Literal["recorded", "synthesized"]
ORIGINS: tuple[Origin, ...] = ("recorded", "synthesized")
Headers = dict[str, list[str]]
_Path = tuple[str | int, ...]

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


_STR, _MAP, _SEQ, _INT, _FLOAT, _NULL = (f"tag:yaml.org,2002:{name}"
                                         for name in ("str", "map", "seq", "int", "float", "null"))
_PLAIN_FLOAT = re.compile(r"-?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?")
_MERGING = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """The safe loader plus vcrpy's harmless Python tags (plain strings and tuples), built faster.

    PyYAML's constructor spends most of a cassette's load in generic per-node machinery. Plain strings,
    mappings and sequences (nearly every node of a cassette) are built here directly from libyaml's nodes;
    every other node (numbers, null, ``!!binary``, merge keys, ...) goes to PyYAML's own constructors, so
    the result is exactly ``yaml.safe_load``'s. Aliases share one object, as with PyYAML.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._resolved: dict[str, str] = {}
        self._built: dict[yaml.Node, Any] = {}
        self.item_lines: list[int] = []  # where each node of `interactions:` starts (1-based)
        self.shared = False  # a list or mapping may appear twice in the document (an alias)

    def resolve(self, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
        """PyYAML's tag resolution, remembered per plain value (a cassette repeats its keys many times)."""
        if kind is not yaml.ScalarNode or self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]
        if not implicit[0]:
            return _STR  # quoted, literal or folded: always a string
        tag = self._resolved.get(value)
        if tag is None:
            tag = self._resolved[value] = super().resolve(kind, value, implicit)
        return tag

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        self.item_lines = _node_lines(node)
        try:
            return None if node is None else self._build(node)
        except RecursionError:  # very deep nesting: PyYAML's own constructor is not recursive
            self._built.clear()
            self.shared = True
            return self.construct_document(node)
        finally:
            self._built.clear()
            self._resolved.clear()
            self.constructed_objects.clear()
            self.recursive_objects.clear()

    def _build(self, node: yaml.Node) -> Any:
        kind, tag = type(node), node.tag
        if kind is yaml.ScalarNode:
            return node.value if tag == _STR else self._scalar(node)
        if node in self._built:
            self.shared = True
            return self._built[node]
        if kind is yaml.MappingNode and tag == _MAP and not any(key.tag in _MERGING for key, _ in node.value):
            return self._mapping(node)
        if kind is yaml.SequenceNode and tag == _SEQ:
            items: list[Any] = []
            self._built[node] = items
            items.extend([self._build(child) for child in node.value])
            return items
        self.shared = True  # PyYAML builds this one and keeps its own aliases
        return self.construct_object(node, deep=True)

    def _scalar(self, node: yaml.Node) -> Any:
        """Decimal ints, plain floats and null directly (YAML 1.1 octal, ``_``, ``1:30`` go to PyYAML)."""
        tag, value = node.tag, node.value
        if tag == _INT and value.isascii() and value.isdigit() and (value == "0" or value[0] != "0"):
            return int(value)
        if tag == _FLOAT and _PLAIN_FLOAT.fullmatch(value):
            return float(value)
        if tag == _NULL:
            return None
        return self.construct_object(node, deep=True)

    def _mapping(self, node: yaml.Node) -> dict[Any, Any]:
        mapping: dict[Any, Any] = {}
        self._built[node] = mapping
        for key_node, value_node in node.value:
            key = self._build(key_node)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                        "found unhashable key", key_node.start_mark) from None
            mapping[key] = self._build(value_node)
        return mapping


_Loader.add_constructor("tag:yaml.org,2002:python/str", _BaseLoader.construct_yaml_str)
_Loader.add_constructor("tag:yaml.org,2002:python/unicode", _BaseLoader.construct_yaml_str)
_Loader.add_constructor("tag:yaml.org,2002:python/tuple", _BaseLoader.construct_yaml_seq)


def header(headers: Any, name: str) -> str | None:
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
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Cassette:
    """A loaded cassette; ``extra`` holds top-level keys other than ours (e.g. vcrpy's ``metadata``)."""

    interactions: list[Interaction] = field(default_factory=list)
    meta: Meta = field(default_factory=Meta)
    path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

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


def _canonical_json(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class _CanonicalPieces:
    """The canonical JSON of a parsed body holding long strings, encoded a piece at a time on each pass."""

    def __init__(self, doc: Any, long: set[int]) -> None:
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


def _long_strings(doc: Any, found: set[int]) -> set[int]:
    """The ids of the strings in ``doc`` longer than a slice, and of the arrays and objects that hold one."""
    children = doc.values() if isinstance(doc, dict) else doc if isinstance(doc, list) else ()
    for child in children:
        _long_strings(child, found)
    if (isinstance(doc, str) and len(doc) > _SLICE) or any(id(child) in found for child in children):
        found.add(id(doc))
    return found


# ---------------------------------------------------------------- reading: shapes


class _Invalid(Exception):
    """A shape problem at a path inside the document; turned into a CassetteError with a line."""

    def __init__(self, at: _Path, message: str, fix: str) -> None:
        super().__init__(message)
        self.at, self.message, self.fix = at, message, fix


def _dotted(at: _Path) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in at).lstrip(".")


def _need(mapping: dict[str, Any], key: str, at: _Path, fix: str) -> Any:
    if key not in mapping:
        raise _Invalid(at, f"{_dotted(at)} has no `{key}:`", fix)
    return mapping[key]


def _mapping(value: Any, at: _Path, fix: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(at, f"{_dotted(at)} must be a mapping, not {_kind(value)}", fix)
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _text_or_bytes(value: Any, at: _Path) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise _Invalid(at, f"{_dotted(at)} must be text or !!binary, not {_kind(value)}",
                   "quote the body as a string, or store raw bytes as !!binary")


def _headers(raw: Any, at: _Path) -> Headers:
    if raw is None:
        return {}
    fix = "write headers as `name: [value, ...]`"
    out: Headers = {}
    for name, values in _mapping(raw, at, fix).items():
        listed = list(values) if isinstance(values, list | tuple) else [values]
        if any(isinstance(value, dict | list | tuple) or value is None for value in listed):
            raise _Invalid((*at, str(name)), f"{_dotted((*at, str(name)))} must hold text values", fix)
        out[str(name)] = [str(value) for value in listed]
    return out


def _replayed_json(parsed: Any) -> bytes:
    """pydantic-ai's ``parsed_body`` as the bytes its serializer replays (``json.dumps`` defaults)."""
    return json.dumps(parsed).encode("utf-8")


def _request(raw: dict[str, Any], at: _Path) -> Request:
    fix = "a request needs `method:` and `uri:`"
    method, uri = _need(raw, "method", at, fix), _need(raw, "uri", at, fix)
    if "parsed_body" in raw:
        body: bytes | None = _replayed_json(raw["parsed_body"])
    else:
        body = _text_or_bytes(raw.get("body"), (*at, "body"))
    return Request(str(method), str(uri), _headers(raw.get("headers"), (*at, "headers")), body)


def _status(raw: dict[str, Any], at: _Path) -> tuple[int, str]:
    fix = "write `status: {code: 200, message: OK}`"
    status = raw["status_code"] if "status_code" in raw else _need(raw, "status", at, fix)
    code, reason = (status.get("code"), status.get("message")) if isinstance(status, dict) else (status, "")
    if not isinstance(code, int | str) or not (str(code).isascii() and str(code).isdigit()):  # not True
        raise _Invalid((*at, "status"), f"{_dotted(at)}.status has no integer code (got {code!r})", fix)
    return int(code), "" if reason is None else str(reason)


def _raw_response_body(raw: dict[str, Any], at: _Path) -> bytes | None:
    if "content" in raw and "body" not in raw:  # vcrpy's pre-4 httpx layout
        return _text_or_bytes(raw["content"], (*at, "content"))
    body = raw.get("body")
    if isinstance(body, dict):
        return _text_or_bytes(body.get("string"), (*at, "body", "string"))
    return _text_or_bytes(body, (*at, "body"))


def _response(raw: dict[str, Any], at: _Path) -> Response:
    code, reason = _status(raw, at)
    headers = _headers(raw.get("headers"), (*at, "headers"))
    if "parsed_body" in raw:
        return Response(code, reason, headers, _replayed_json(raw["parsed_body"]))
    body = _raw_response_body(raw, at) or b""
    encoding = ", ".join(value for name, values in headers.items() if name.lower() == "content-encoding"
                         for value in values)
    return Response(code, reason, headers, _decoded(body, encoding, at))


class _TooLarge(Exception):
    """A body decodes to more than the limit (a decompression bomb, or a body too large to hold)."""


_PIECE = 1 << 20  # bytes of decoded output produced at a time


def _gunzip(body: bytes) -> Iterator[bytes]:
    """Every gzip member of ``body`` decoded, a piece at a time (trailing zero padding ignored)."""
    while body and body.strip(b"\x00"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        yield from _inflated(inflater, body)
        if not inflater.eof:
            raise zlib.error("the gzip data ends before its member does")
        body = inflater.unused_data


def _inflated(inflater: Any, body: bytes) -> Iterator[bytes]:
    piece = inflater.decompress(body, _PIECE)
    while piece:
        yield piece
        piece = inflater.decompress(inflater.unconsumed_tail, _PIECE)


def _inflate(body: bytes) -> Iterator[bytes]:
    """``deflate`` as servers send it: zlib-wrapped, or (a common mistake) raw deflate."""
    try:
        zlib.decompressobj().decompress(body[:_PIECE], 1)  # the header tells which
    except zlib.error:
        yield from _inflated(zlib.decompressobj(-zlib.MAX_WBITS), body)
        return
    yield from _inflated(zlib.decompressobj(), body)


def _unbrotli(body: bytes) -> Iterator[bytes]:
    decoder = brotli.Decompressor()
    piece = decoder.process(body, output_buffer_limit=_PIECE)
    while piece:
        yield piece
        if decoder.is_finished() or decoder.can_accept_more_data():
            break
        piece = decoder.process(b"", output_buffer_limit=_PIECE)
    if not decoder.is_finished():
        raise brotli.error("the brotli data ends early")


_CODECS: dict[str, Callable[[bytes], Iterator[bytes]]] = {
    "gzip": _gunzip,
    "x-gzip": _gunzip,
    "br": _unbrotli,
    "deflate": _inflate,
    "identity": lambda body: iter((body,)),
}
MAX_BODY = 256 << 20  # bytes a body may decode to, by default (``load(max_body=...)``, ``--max-body``)
_MAX_BODY: ContextVar[int] = ContextVar("replaykit_max_body", default=MAX_BODY)


def _decoded(body: bytes, encoding: str, at: _Path) -> bytes:
    names = [name.strip().lower() for name in encoding.split(",") if name.strip()]
    for name in reversed(names):  # the last coding applied is undone first
        codec = _CODECS.get(name)
        if codec is None:
            raise _Invalid((*at, "headers"), f"{_dotted(at)}: unsupported content-encoding {name!r}",
                           "decode the body yourself and remove the content-encoding header")
        body = _decode(codec, name, body, at)
    return body


def _measure(pieces: Iterator[bytes], limit: int) -> None:
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > limit:
            raise _TooLarge


def _decode(codec: Callable[[bytes], Iterator[bytes]], name: str, body: bytes, at: _Path) -> bytes:
    """``body`` decoded; measured first, a piece at a time, so a bomb is refused without being held."""
    limit = _MAX_BODY.get()
    try:
        _measure(codec(body), limit)
        return b"".join(codec(body))
    except _TooLarge:
        message = f"{_dotted(at)}.body decodes ({name}) to more than {limit} bytes (a decompression bomb?)"
        fix = "raise the limit (--max-body, load(max_body=...)) if the body is real"
        raise _Invalid((*at, "body"), message, fix) from None
    except (OSError, EOFError, zlib.error, brotli.error) as exc:
        message = f"{_dotted(at)}.body is not valid {name} data ({exc})"
        fix = "store the encoded bytes as !!binary, or remove content-encoding for a plain body"
        raise _Invalid((*at, "body"), message, fix) from exc


def _offsets(raw: Any, response: Response, at: _Path) -> list[float] | None:
    if raw is None:
        return None
    fix = "write one non-decreasing number of milliseconds per SSE event, or remove event_offsets_ms"
    if not isinstance(raw, list | tuple) or not all(_is_offset(value) for value in raw):
        raise _Invalid(at, f"{_dotted(at)} must be a list of finite numbers >= 0", fix)
    offsets = [float(value) for value in raw]
    if any(later < earlier for earlier, later in itertools.pairwise(offsets)):
        raise _Invalid(at, f"{_dotted(at)} must not decrease", fix)
    if len(offsets) != (count := sse.count(response.body) if response.is_stream else 0):
        raise _Invalid(at, f"{_dotted(at)} has {len(offsets)} offsets for {count} events", fix)
    return offsets


def _is_offset(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an integer too large for a float (milliseconds are floats)
        return False


def _interaction(raw: Any, index: int, line: int | None) -> Interaction:
    at: _Path = ("interactions", index)
    item = _mapping(raw, at, "each interaction is a mapping with `request:` and `response:`")
    request = _request(_part(item, "request", at), (*at, "request"))
    response = _response(_part(item, "response", at), (*at, "response"))
    fix = "write `replaykit: {event_offsets_ms: [...]}`"
    ours = _mapping(item.get("replaykit") or {}, (*at, "replaykit"), fix)
    offsets_at = (*at, "replaykit", "event_offsets_ms")
    response.event_offsets_ms = _offsets(ours.get("event_offsets_ms"), response, offsets_at)
    return Interaction(request, response, line)


def _part(item: dict[str, Any], key: str, at: _Path) -> dict[str, Any]:
    fix = "each interaction needs `request:` and `response:` mappings"
    return _mapping(_need(item, key, at, fix), (*at, key), fix)


def _meta(raw: Any) -> Meta:
    at: _Path = ("replaykit",)
    ours = dict(_mapping(raw if raw is not None else {}, at, "write `replaykit: {origin: recorded}`"))
    origin = ours.pop("origin", None)
    if origin is not None and origin not in ORIGINS:
        fix = "write `origin: recorded` or `origin: synthesized`"
        raise _Invalid((*at, "origin"), f"replaykit.origin is {origin!r}", fix)
    keys = ("provider", "recorded_with", "fingerprint", "description")
    texts = [ours.pop(key, None) for key in keys]
    for key, value in zip(keys, texts, strict=True):
        if value is not None and not isinstance(value, str):
            raise _Invalid((*at, key), f"replaykit.{key} must be text, not {_kind(value)}", "quote the value")
    return Meta(origin, texts[0], texts[1], texts[2], texts[3], ours)


def _cassette(doc: Any, lines: Callable[[int], list[int | None]], shared: bool) -> Cassette:
    """The cassette in a loaded document.

    In a document where nothing is ``shared`` (no YAML alias), the interactions list is emptied as each one
    is converted, so each text body can be freed as soon as its bytes exist. A shared one is first checked
    for what its aliases expand to (:func:`_check_expansion`).
    """
    fix = "a vcrpy cassette is a mapping with `version: 1` and `interactions:`"
    if shared:
        _check_expansion(doc)
    top = _mapping(doc, (), fix) if doc is not None else _empty()
    version = _need(top, "version", (), "add `version: 1`")
    if version != 1 or isinstance(version, bool):
        message = f"unsupported cassette version {version!r}"
        raise _Invalid(("version",), message, "replaykit reads vcrpy version 1 cassettes: `version: 1`")
    raw_items = _need(top, "interactions", (), "add `interactions: []`")
    if not isinstance(raw_items, list):
        raise _Invalid(("interactions",), f"interactions must be a list, not {_kind(raw_items)}", fix)
    starts = lines(len(raw_items))
    items = []
    for index, raw in enumerate(raw_items):
        items.append(_interaction(raw, index, starts[index]))
        if not shared:
            raw_items[index] = None
    extra = {str(k): v for k, v in top.items() if k not in {"version", "interactions", "replaykit"}}
    return Cassette(items, _meta(top.get("replaykit")), None, extra)


MAX_EXPANSION = 1_000_000  # nodes YAML aliases may expand to (and then 10x the nodes written), at most


def _check_expansion(doc: Any) -> None:
    """Refuse a document whose aliases expand past :data:`MAX_EXPANSION` nodes (a "billion laughs" bomb:
    a few hundred bytes that expand to billions of values), or that refers to itself."""
    sizes = _expansion(doc)
    written, expanded = len(sizes), sizes.get(id(doc), 1)
    if expanded > max(MAX_EXPANSION, 10 * written):
        at = _bomb_at(doc, sizes)
        message = f"{_dotted(at) or 'the document'}: its YAML aliases expand to {expanded:,} values from " \
                  f"{written:,} written"
        raise _Invalid(at, message, "write the values out instead of repeating aliases (an alias bomb?)")


def _bomb_at(doc: Any, sizes: dict[int, int]) -> _Path:
    """Where the expansion happens: down from the top, into the child that holds most of it, until no child
    holds half (the list or mapping whose aliases multiply)."""
    at: list[str | int] = []
    node = doc
    while isinstance(node, dict | list):
        keyed = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        key, child = max(keyed, key=lambda item: sizes.get(id(item[1]), 1), default=(None, None))
        if key is None or 2 * sizes.get(id(child), 1) < sizes[id(node)]:
            break
        at.append(key)
        node = child
    return tuple(at)


def _expansion(doc: Any) -> dict[int, int]:
    """The size of each container of ``doc`` (by ``id``) once every alias is expanded, counted without
    expanding (each shared container is counted once); a container that contains itself is refused."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, done = stack.pop()
        children = list(node.values()) if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None or (id(node) in sizes and not done):
            continue
        if done:
            open_.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes.get(id(child), 1) for child in children)
            continue
        if id(node) in open_:
            raise _Invalid((), "a YAML alias refers to the mapping or list it is in", "remove the alias")
        open_.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if isinstance(child, dict | list))
    return sizes


def _empty() -> NoReturn:
    fix = "record the cassette again, or write `version: 1` and `interactions: []`"
    raise _Invalid((), "the file is empty", fix)


# ---------------------------------------------------------------- reading: lines


class _Lines:
    """Where the interactions of a block-style cassette start, found in its bytes piece by piece.

    A line at column 0 that starts with ``-`` while inside ``interactions:`` starts an interaction; any
    other line at column 0 (not blank, not a comment) starts another top-level key. A line is decided
    once the bytes just after its newline are known, so up to ``_AHEAD`` bytes wait for the next piece;
    the lines found do not depend on how the bytes are cut into pieces.
    """

    _TOP = re.compile(rb"\n(?:- |-\r?\n|-$|[^\s#\-\x1c-\x1f])")  # \x1c-\x1f: whitespace to str.isspace
    _AHEAD = 16  # the bytes a decision reads past a newline: "interactions:" or one UTF-8 character
    _KEY = b"interactions:"

    def __init__(self) -> None:
        self.found: list[int] = []
        self._rest = b""  # undecided bytes, the first of them on line ``_line``
        self._line = 1
        self._inside: bool | None = None  # unknown until the first bytes are

    def feed(self, data: bytes, final: bool = False) -> None:
        """Scan the next piece of the file; ``final`` for the last one (``data`` may then be empty)."""
        text = self._rest + data
        if self._inside is None:
            if len(text) < len(self._KEY) and not final:
                self._rest = text
                return
            self._inside = text.startswith(self._KEY)
        limit = len(text) if final else len(text) - self._AHEAD
        cut = max(self._scan(text, limit), len(text) if final else limit)
        self._line += text.count(b"\n", 0, cut)
        self._rest = text[cut:]

    def _scan(self, text: bytes, limit: int) -> int:
        """Decide the lines whose newline is before ``limit``; return where the scan may resume."""
        resume, line, counted = 0, self._line, 0
        for match in self._TOP.finditer(text):
            if match.start() >= limit:
                break
            start = match.start() + 1
            line, counted = line + text.count(b"\n", counted, start), start
            self._decide(text, start, line)
            resume = match.end()
        return resume

    def _decide(self, text: bytes, start: int, line: int) -> None:
        if text.startswith(b"-", start):
            if self._inside:
                self.found.append(line)
        elif not _unicode_space(text, start):  # where a scan of the text as str finds no line
            self._inside = text.startswith(self._KEY, start)

    def lines(self, count: int, composed: list[int]) -> list[int | None]:
        """The lines found when there is one per interaction, else the nodes' ``composed`` lines."""
        if len(self.found) == count:
            return list(self.found)
        return [*composed, *[None] * count][:count]


def _unicode_space(text: bytes, at: int) -> bool:
    """Whether the UTF-8 character at ``at`` is non-ASCII whitespace to ``str.isspace`` (NBSP, U+3000...)."""
    return text[at] >= 0x80 and text[at : at + 4].decode("utf-8", "ignore")[:1].isspace()


def _node_lines(node: yaml.Node | None) -> list[int]:
    """Start lines (1-based) of the items of the document's ``interactions:`` sequence, if it has one."""
    found = _node_at(node, ("interactions",))
    return [item.start_mark.line + 1 for item in found.value] if isinstance(found, yaml.SequenceNode) else []


def _node_at(node: yaml.Node | None, at: _Path) -> yaml.Node | None:
    """The deepest node of ``node`` along ``at`` (stops where the path leaves the document)."""
    for part in at:
        child = _child(node, part)
        if child is None:
            return node
        node = child
    return node


def _child(node: yaml.Node | None, part: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        return next((value for key, value in node.value if key.value == part), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        return node.value[part]  # type: ignore[no-any-return]
    return None


# ---------------------------------------------------------------- reading: from a file, as it is read


class _Reader:
    """A binary file as the YAML loader reads it, checked as UTF-8, hashed and scanned for lines on the way.

    Nothing is kept but the scan's few undecided bytes: the loader never holds the file's text.
    """

    def __init__(self, handle: io.BufferedIOBase) -> None:
        self._handle, self._ended = handle, False
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._hash = hashlib.sha256()
        self.lines, self.size = _Lines(), 0

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes, ``b""`` at the end; UnicodeDecodeError when they are not UTF-8."""
        data = self._handle.read(size)
        if not self._ended:
            self._ended = not data
            self._utf8.decode(data, self._ended)
            self._hash.update(data)
            self.size += len(data)
            self.lines.feed(data, self._ended)
        return data

    def digest(self) -> bytes:
        """The SHA-256 of the whole file (what the loader left unread is read first)."""
        while not self._ended:
            self.read(1 << 16)
        return self._hash.digest()


def _load_doc(source: Any) -> tuple[Any, list[int], bool]:
    """The YAML document (a safe load), its interactions' node lines, and whether anything is shared."""
    loader = _Loader(source)
    try:
        return loader.get_single_data(), loader.item_lines, loader.shared
    finally:
        loader.dispose()


def _stream(handle: io.BufferedIOBase) -> tuple[Cassette, bytes, int]:
    """The cassette parsed as ``handle`` is read, the SHA-256 and size of its bytes; raises _PROBLEMS."""
    reader = _Reader(handle)
    doc, composed, shared = _load_doc(reader)
    key = reader.digest()
    return _cassette(doc, lambda count: reader.lines.lines(count, composed), shared), key, reader.size


# ---------------------------------------------------------------- reading: explaining a problem

_PROBLEMS = (yaml.YAMLError, RecursionError, UnicodeDecodeError, _Invalid)


def _line_at(text: str, at: _Path) -> int | None:
    try:
        node = _node_at(yaml.compose(text, Loader=_Loader), at)
    except yaml.YAMLError:  # pragma: no cover - the text was parsed once already
        return None
    return node.start_mark.line + 1 if node is not None else 1


def _decode_text(data: bytes | str, where: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CassetteError(located(where, line, f"not UTF-8 (byte 0x{data[exc.start]:02x})",
                                    "save the file as UTF-8; binary bodies belong in !!binary")) from exc


def _yaml_error(exc: yaml.YAMLError, source: bytes | str, where: str) -> CassetteError:
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.reader.ReaderError):  # the position counts what the loader was given
        before = source[: exc.position]
        line: int | None = (before.count(b"\n") if isinstance(before, bytes) else before.count("\n")) + 1
        problem, fix = f"character {exc.character!r} is not allowed in YAML", "store such bodies as !!binary"
    else:
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        fix = "fix the YAML syntax"
        if isinstance(exc, yaml.constructor.ConstructorError):
            fix = "replaykit loads YAML safely: remove Python object tags (`!!python/...`)"
    return CassetteError(located(where, line, f"invalid YAML: {problem}", fix))


def _explain(data: bytes | str, where: str) -> Cassette:
    """Parse ``data`` held in memory: a problem is a CassetteError naming the line at fault and the fix.

    The same parse as :func:`_stream`, in the order that puts an encoding problem first; used once the
    streamed parse has failed, to say why (it returns a cassette only if the file changed in between).
    """
    text = _decode_text(data, where)
    # libyaml reads UTF-8 bytes directly (faster than from str); the pure-Python reader wants text
    source = data if isinstance(data, bytes) and _BaseLoader is not yaml.SafeLoader else text
    try:
        doc, composed, shared = _load_doc(source)  # a safe loader: no Python objects
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, where) from exc
    except RecursionError as exc:  # pragma: no cover - libyaml stops at depth 1000 first
        raise CassetteError(located(where, None, "nested too deeply", "flatten the document")) from exc
    scan = _Lines()
    scan.feed(_utf8(data), final=True)
    try:
        return _cassette(doc, lambda count: scan.lines(count, composed), shared)
    except _Invalid as exc:
        raise CassetteError(located(where, _line_at(text, exc.at), exc.message, exc.fix)) from None


def read_yaml(data: bytes | str, where: str) -> Any:
    """A YAML document that is not a cassette (a scenario) read the cassette's way: UTF-8 checked, loaded
    safely (no Python tags), an alias bomb refused; a problem is a CassetteError naming ``where``, the line
    at fault and the fix."""
    text = _decode_text(data, where)
    source = data if isinstance(data, bytes) and _BaseLoader is not yaml.SafeLoader else text
    try:
        doc, _, shared = _load_doc(source)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, where) from exc
    except RecursionError as exc:  # pragma: no cover - libyaml stops at depth 1000 first
        raise CassetteError(located(where, None, "nested too deeply", "flatten the document")) from exc
    if shared:
        try:
            _check_expansion(doc)
        except _Invalid as exc:
            raise CassetteError(located(where, _line_at(text, exc.at), exc.message, exc.fix)) from None
    return doc


def yaml_line(text: str, parts: Iterable[str | int]) -> int | None:
    """The line (1-based) where the value at ``parts`` starts in the YAML ``text`` (where the path leaves the
    document: the deepest value on it), or None when ``text`` is not YAML."""
    return _line_at(text, tuple(parts))


def _utf8(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def _parse(handle: io.BufferedIOBase, where: str,
           original: Callable[[], bytes | str]) -> tuple[Cassette, bytes, int]:
    """Parse as the file is read; on a problem, :func:`_explain` the ``original`` bytes (read again)."""
    try:
        return _stream(handle)
    except _PROBLEMS:
        pass
    data = original()
    raw = _utf8(data)
    return _explain(data, where), hashlib.sha256(raw).digest(), len(raw)


# ---------------------------------------------------------------- reading: the cache


class _Cache:
    """Parsed cassettes keyed by the SHA-256 of their bytes (never stale); hands out copies."""

    def __init__(self, max_entries: int = 64, max_bytes: int = 256 << 20) -> None:
        self._entries: OrderedDict[bytes, tuple[int, Cassette]] = OrderedDict()
        self._lock = threading.Lock()
        self._max_entries, self._max_bytes, self._bytes = max_entries, max_bytes, 0

    def get(self, key: bytes) -> Cassette | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        return _copy(entry[1])

    def put(self, key: bytes, size: int, cassette: Cassette) -> None:
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (size, _copy(cassette))
                self._bytes += size
            while self._entries and (len(self._entries) > self._max_entries or self._bytes > self._max_bytes):
                self._bytes -= self._entries.popitem(last=False)[1][0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


_CACHE = _Cache()


def clear_cache() -> None:
    """Forget every parsed cassette (they are re-parsed on the next load)."""
    _CACHE.clear()


def _copy(cassette: Cassette) -> Cassette:
    """A copy sharing only immutable parts (bytes, strings, events)."""
    items = [Interaction(_copy_request(item.request), _copy_response(item.response), item.line)
             for item in cassette.interactions]
    meta = copy.copy(cassette.meta)
    meta.extra = copy.deepcopy(meta.extra)
    return Cassette(items, meta, cassette.path, copy.deepcopy(cassette.extra))


def _copy_request(req: Request) -> Request:
    return Request(req.method, req.uri, {k: list(v) for k, v in req.headers.items()}, req.body)


def _copy_response(resp: Response) -> Response:
    offsets = None if resp.event_offsets_ms is None else list(resp.event_offsets_ms)
    headers = {k: list(v) for k, v in resp.headers.items()}
    return Response(resp.status, resp.reason, headers, resp.body, offsets, list(resp._events))


def _cached(handle: io.BufferedIOBase, where: str, original: Callable[[], bytes | str],
            key: bytes | None, max_body: int) -> Cassette:
    """A copy from the cache when ``key`` (the SHA-256 of the bytes) is there, else parsed from ``handle``
    with bodies decoded to at most ``max_body`` bytes.

    A parse is kept under the hash of the bytes it read (not ``key``: the file may have changed since), and
    the limit it was made under.
    """
    limit = max_body.to_bytes(8, "big")
    cassette = _CACHE.get(key + limit) if key is not None else None
    if cassette is None:
        token = _MAX_BODY.set(max_body)
        try:
            cassette, digest, size = _parse(handle, where, original)
        finally:
            _MAX_BODY.reset(token)
        if key is not None:
            _CACHE.put(digest + limit, size, cassette)
    return cassette


def loads(data: bytes | str, path: str | os.PathLike[str] | None = None, *, cache: bool = True,
          max_body: int = MAX_BODY) -> Cassette:
    """Parse cassette text; errors name ``path`` and the line at fault. ``cache=False`` always parses;
    an encoded body that decodes to more than ``max_body`` bytes is an error (a decompression bomb)."""
    where = str(path) if path is not None else "<string>"
    raw = _utf8(data)
    key = hashlib.sha256(raw).digest() if cache else None
    cassette = _cached(io.BytesIO(raw), where, lambda: data, key, max_body)
    cassette.path = Path(path) if path is not None else None
    return cassette


def load(path: str | os.PathLike[str], *, cache: bool = True, max_body: int = MAX_BODY) -> Cassette:
    """Load a cassette file (see :func:`loads`), parsed as it is read: the text is never held whole.

    Only a regular file is read: a FIFO or a device named as a cassette is an error, never a wait.
    """
    _regular(path)
    try:
        with open(path, "rb") as handle:
            key = hashlib.file_digest(handle, "sha256").digest() if cache else None
            handle.seek(0)
            cassette = _cached(handle, str(path), lambda: _read_again(handle), key, max_body)
    except OSError as exc:
        raise CassetteError(located(path, None, f"cannot read: {exc.strerror or exc}",
                                    "check the path and its permissions")) from exc
    cassette.path = Path(path)
    return cassette


def _regular(path: str | os.PathLike[str]) -> None:
    """Refuse what is not a regular file (a FIFO would block the read forever), without opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise CassetteError(located(path, None, f"cannot read: {exc.strerror or exc}",
                                    "check the path and its permissions")) from exc
    if not stat.S_ISREG(mode):
        raise CassetteError(located(path, None, "not a regular file (a FIFO, a device or a socket)",
                                    "name a cassette file"))


def _read_again(handle: io.BufferedIOBase) -> bytes:
    handle.seek(0)
    return handle.read()


# ---------------------------------------------------------------- saving


def _body_out(body: bytes | None) -> str | bytes | None:
    if body is None:
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body  # dumped as !!binary


def _headers_out(headers: Headers, body: bytes | None) -> Headers:
    out = {k: list(v) for k, v in headers.items() if k.lower() not in {"content-encoding", "content-length"}}
    if body is not None and any(k.lower() == "content-length" for k in headers):
        out["content-length"] = [str(len(body))]
    return out


def _meta_out(cassette: Cassette) -> dict[str, Any]:
    meta = cassette.meta
    known = (("origin", meta.origin), ("provider", meta.provider), ("recorded_with", meta.recorded_with))
    out: dict[str, Any] = {key: value for key, value in known if value is not None}
    out["fingerprint"] = cassette.fingerprint()
    if meta.description is not None:
        out["description"] = meta.description
    out.update({k: v for k, v in meta.extra.items() if k not in out})
    return out


def _item_out(item: Interaction) -> dict[str, Any]:
    req, resp = item.request, item.response
    out: dict[str, Any] = {
        "request": {"method": req.method, "uri": req.uri, "headers": _headers_out(req.headers, req.body),
                    "body": _body_out(req.body)},
        "response": {"status": {"code": resp.status, "message": resp.reason},
                     "headers": _headers_out(resp.headers, resp.body),
                     "body": {"string": _body_out(resp.body)}},
    }
    if resp.event_offsets_ms is not None:
        out["replaykit"] = {"event_offsets_ms": list(resp.event_offsets_ms)}
    return out


def dumps(cassette: Cassette) -> str:
    """The cassette as vcrpy-compatible YAML text (bodies decoded, fingerprint refreshed)."""
    doc: dict[str, Any] = {"version": 1, "replaykit": _meta_out(cassette)}
    doc.update({k: v for k, v in cassette.extra.items() if k not in {"version", "replaykit", "interactions"}})
    doc["interactions"] = [_item_out(item) for item in cassette.interactions]
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)


def save(cassette: Cassette, path: str | os.PathLike[str]) -> None:
    """Write atomically: a temporary file in the same folder, fsync, then rename over ``path``.

    On any failure the old file (if any) is untouched and no temporary file is left behind.
    """
    target = Path(path)
    try:
        text = dumps(cassette).encode("utf-8")
    except yaml.YAMLError as exc:
        fix = "keep metadata to plain YAML types: text, numbers, lists and mappings"
        raise CassetteError(located(target, None, f"cannot be written: {exc}", fix)) from exc
    try:
        write_atomic(target, text)
    except OSError as exc:
        raise CassetteError(located(target, None, f"cannot be written: {exc.strerror or exc}",
                                    "check that the folder is writable")) from exc


def write_atomic(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` whole or not at all: a temporary file beside it, synced, renamed over it
    (an existing file keeps its mode; a new one gets 0644). Missing folders are created."""
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def named_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The cassette files named on a command line (files, or folders of ``*.yaml`` / ``*.yml``); a path that
    does not exist, a folder with no cassettes, something not a regular file (a FIFO would block a read
    forever) or no path at all is a :class:`~replaykit.errors.UsageError`."""
    found: list[Path] = []
    for entry in map(Path, paths):
        if not entry.exists():
            raise UsageError(located(entry, None, "no such file or directory",
                                     "name a cassette file or a folder of cassettes"))
        if not entry.is_dir() and not entry.is_file():
            raise UsageError(located(entry, None, "not a regular file (a FIFO, a device or a socket)",
                                     "name a cassette file or a folder of cassettes"))
        files = iter_paths([entry])
        if not files:
            raise UsageError(located(entry, None, "no cassettes (*.yaml, *.yml) in this directory",
                                     "point at a folder that holds cassettes"))
        found += files
    if not found:
        raise UsageError("no paths given; name cassette files or folders")
    return found


def stale_temporaries(target: Path) -> list[Path]:
    """The temporary files :func:`write_atomic` left beside ``target`` when killed mid-write
    (``.<name>.<8 random characters>.tmp``, as ``tempfile.mkstemp`` names them)."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}\.tmp")
    folder = target.parent if target.parent.is_dir() else None
    return [] if folder is None else sorted(p for p in folder.iterdir() if pattern.fullmatch(p.name))


def iter_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Cassette files named by ``paths`` (files as given; folders searched for ``*.yaml`` / ``*.yml``)."""
    found: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            found.extend(sorted(p for p in entry.rglob("*") if p.suffix in {".yaml", ".yml"} and p.is_file()))
        else:
            found.append(entry)
    return found
