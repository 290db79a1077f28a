"""From a parsed YAML document to the model: every layout users have, checked shape by shape (a problem
at a path inside the document, given its line later), bodies decoded within bounds (gzip / deflate / br
decompression bombs, alias bombs)."""


import copy
import itertools
import json
import math
import zlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, NoReturn

import brotli  # type: ignore[import-untyped]

from replaykit import sse
from replaykit.cassette.model import ORIGINS, Cassette, Headers, Interaction, Meta, Request, Response, Where
from replaykit.jsondoc import JSON

# ---------------------------------------------------------------- reading: shapes


class Invalid(Exception):
    """A shape problem at a path inside the document; turned into a CassetteError with a line."""

    def __init__(self, at: Where, message: str, fix: str) -> None:
        super().__init__(message)
        self.at, self.message, self.fix = at, message, fix


def dotted(at: Where) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in at).lstrip(".")


def _need(mapping: JSON, key: str, at: Where, fix: str) -> object:
    if key not in mapping:
        raise Invalid(at, f"{dotted(at)} has no `{key}:`", fix)
    return mapping[key]


def _mapping(value: object, at: Where, fix: str) -> JSON:
    if not isinstance(value, dict):
        raise Invalid(at, f"{dotted(at)} must be a mapping, not {_kind(value)}", fix)
    return value


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _text_or_bytes(value: object, at: Where) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise Invalid(at, f"{dotted(at)} must be text or !!binary, not {_kind(value)}",
                   "quote the body as a string, or store raw bytes as !!binary")


def _headers(raw: object, at: Where) -> Headers:
    if raw is None:
        return {}
    out: Headers = {}
    for name, values in _mapping(raw, at, _HEADERS_FIX).items():
        listed = values if isinstance(values, list | tuple) else [values]
        # a new list of text (a header is read for each load: text, nearly always, is taken as it is)
        out[str(name)] = [value if type(value) is str else _header_text(value, (*at, str(name)))
                          for value in listed]
    return out


_HEADERS_FIX = "write headers as `name: [value, ...]`"


def _header_text(value: object, at: Where) -> str:
    if isinstance(value, dict | list | tuple) or value is None:
        raise Invalid(at, f"{dotted(at)} must hold text values", _HEADERS_FIX)
    return str(value)


def _replayed_json(parsed: object) -> bytes:
    """pydantic-ai's ``parsed_body`` as the bytes its serializer replays (``json.dumps`` defaults)."""
    return json.dumps(parsed).encode("utf-8")


def _request(raw: JSON, at: Where) -> Request:
    fix = "a request needs `method:` and `uri:`"
    method, uri = _need(raw, "method", at, fix), _need(raw, "uri", at, fix)
    if "parsed_body" in raw:
        body: bytes | None = _replayed_json(raw["parsed_body"])
    else:
        body = _text_or_bytes(raw.get("body"), (*at, "body"))
    return Request(str(method), str(uri), _headers(raw.get("headers"), (*at, "headers")), body)


def _status(raw: JSON, at: Where) -> tuple[int, str]:
    fix = "write `status: {code: 200, message: OK}`"
    status = raw["status_code"] if "status_code" in raw else _need(raw, "status", at, fix)
    code, reason = (status.get("code"), status.get("message")) if isinstance(status, dict) else (status, "")
    if not isinstance(code, int | str) or not (str(code).isascii() and str(code).isdigit()):  # not True
        raise Invalid((*at, "status"), f"{dotted(at)}.status has no integer code (got {code!r})", fix)
    return int(code), "" if reason is None else str(reason)


def _raw_response_body(raw: JSON, at: Where) -> bytes | None:
    if "content" in raw and "body" not in raw:  # vcrpy's pre-4 httpx layout
        return _text_or_bytes(raw["content"], (*at, "content"))
    body = raw.get("body")
    if isinstance(body, dict):
        return _text_or_bytes(body.get("string"), (*at, "body", "string"))
    return _text_or_bytes(body, (*at, "body"))


def _response(raw: JSON, at: Where) -> Response:
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
BODY_LIMIT: ContextVar[int] = ContextVar("replaykit_max_body", default=MAX_BODY)


def _decoded(body: bytes, encoding: str, at: Where) -> bytes:
    names = [name.strip().lower() for name in encoding.split(",") if name.strip()]
    for name in reversed(names):  # the last coding applied is undone first
        codec = _CODECS.get(name)
        if codec is None:
            raise Invalid((*at, "headers"), f"{dotted(at)}: unsupported content-encoding {name!r}",
                           "decode the body yourself and remove the content-encoding header")
        body = _decode(codec, name, body, at)
    return body


def _measure(pieces: Iterator[bytes], limit: int) -> None:
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > limit:
            raise _TooLarge


def _decode(codec: Callable[[bytes], Iterator[bytes]], name: str, body: bytes, at: Where) -> bytes:
    """``body`` decoded; measured first, a piece at a time, so a bomb is refused without being held."""
    limit = BODY_LIMIT.get()
    try:
        _measure(codec(body), limit)
        return b"".join(codec(body))
    except _TooLarge:
        message = f"{dotted(at)}.body decodes ({name}) to more than {limit} bytes (a decompression bomb?)"
        fix = "raise the limit (--max-body, load(max_body=...)) if the body is real"
        raise Invalid((*at, "body"), message, fix) from None
    except (OSError, EOFError, zlib.error, brotli.error) as exc:
        message = f"{dotted(at)}.body is not valid {name} data ({exc})"
        fix = "store the encoded bytes as !!binary, or remove content-encoding for a plain body"
        raise Invalid((*at, "body"), message, fix) from exc


def _offsets(raw: object, response: Response, at: Where) -> list[float] | None:
    if raw is None:
        return None
    fix = "write one non-decreasing number of milliseconds per SSE event, or remove event_offsets_ms"
    if not isinstance(raw, list | tuple) or not all(_is_offset(value) for value in raw):
        raise Invalid(at, f"{dotted(at)} must be a list of finite numbers >= 0", fix)
    offsets = [float(value) for value in raw]
    if any(later < earlier for earlier, later in itertools.pairwise(offsets)):
        raise Invalid(at, f"{dotted(at)} must not decrease", fix)
    if len(offsets) != (count := sse.count(response.body) if response.is_stream else 0):
        raise Invalid(at, f"{dotted(at)} has {len(offsets)} offsets for {count} events", fix)
    return offsets


def _is_offset(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an integer too large for a float (milliseconds are floats)
        return False


def _interaction(raw: object, index: int, line: int | None) -> Interaction:
    at: Where = ("interactions", index)
    item = _mapping(raw, at, "each interaction is a mapping with `request:` and `response:`")
    request = _request(_part(item, "request", at), (*at, "request"))
    response = _response(_part(item, "response", at), (*at, "response"))
    fix = "write `replaykit: {event_offsets_ms: [...]}`"
    ours = _mapping(item.get("replaykit") or {}, (*at, "replaykit"), fix)
    offsets_at = (*at, "replaykit", "event_offsets_ms")
    response.event_offsets_ms = _offsets(ours.get("event_offsets_ms"), response, offsets_at)
    return Interaction(request, response, line)


def _part(item: JSON, key: str, at: Where) -> JSON:
    fix = "each interaction needs `request:` and `response:` mappings"
    return _mapping(_need(item, key, at, fix), (*at, key), fix)


def _meta(raw: object) -> Meta:
    at: Where = ("replaykit",)
    ours = dict(_mapping(raw if raw is not None else {}, at, "write `replaykit: {origin: recorded}`"))
    origin = ours.pop("origin", None)
    if origin is not None and origin not in ORIGINS:
        fix = "write `origin: recorded` or `origin: synthesized`"
        raise Invalid((*at, "origin"), f"replaykit.origin is {origin!r}", fix)
    keys = ("provider", "recorded_with", "fingerprint", "description")
    texts = [ours.pop(key, None) for key in keys]
    for key, value in zip(keys, texts, strict=True):
        if value is not None and not isinstance(value, str):
            raise Invalid((*at, key), f"replaykit.{key} must be text, not {_kind(value)}", "quote the value")
    return Meta(origin, texts[0], texts[1], texts[2], texts[3], ours)


def build_cassette(doc: object, lines: Callable[[int], list[int | None]], shared: bool,
                   keep: bool = False) -> Cassette:
    """The cassette in a loaded document.

    In a document where nothing is ``shared`` (no YAML alias), the interactions list is emptied as each one
    is converted, so each text body can be freed as soon as its bytes exist. A document to ``keep`` is left
    as it is and the cassette shares nothing that can change with it (its extra keys are copied: keep only
    a document shallow enough to copy). A shared one is first checked for what its aliases expand to
    (:func:`check_expansion`).
    """
    fix = "a vcrpy cassette is a mapping with `version: 1` and `interactions:`"
    if shared:
        check_expansion(doc)
    top = _mapping(doc, (), fix) if doc is not None else _empty()
    version = _need(top, "version", (), "add `version: 1`")
    if version != 1 or isinstance(version, bool):
        message = f"unsupported cassette version {version!r}"
        raise Invalid(("version",), message, "replaykit reads vcrpy version 1 cassettes: `version: 1`")
    raw_items = _need(top, "interactions", (), "add `interactions: []`")
    if not isinstance(raw_items, list):
        raise Invalid(("interactions",), f"interactions must be a list, not {_kind(raw_items)}", fix)
    starts = lines(len(raw_items))
    items = []
    for index, raw in enumerate(raw_items):
        items.append(_interaction(raw, index, starts[index]))
        if not shared and not keep:
            raw_items[index] = None
    extra = {str(k): v for k, v in top.items() if k not in {"version", "interactions", "replaykit"}}
    meta = _meta(top.get("replaykit"))
    if keep:
        extra, meta.extra = copy.deepcopy(extra), copy.deepcopy(meta.extra)
    return Cassette(items, meta, None, extra)


MAX_EXPANSION = 1_000_000  # nodes YAML aliases may expand to (and then 10x the nodes written), at most


def check_expansion(doc: object) -> None:
    """Refuse a document whose aliases expand past :data:`MAX_EXPANSION` nodes (a "billion laughs" bomb:
    a few hundred bytes that expand to billions of values), or that refers to itself."""
    sizes = _expansion(doc)
    written, expanded = len(sizes), sizes.get(id(doc), 1)
    if expanded > max(MAX_EXPANSION, 10 * written):
        at = _bomb_at(doc, sizes)
        message = f"{dotted(at) or 'the document'}: its YAML aliases expand to {expanded:,} values from " \
                  f"{written:,} written"
        raise Invalid(at, message, "write the values out instead of repeating aliases (an alias bomb?)")


def _bomb_at(doc: object, sizes: dict[int, int]) -> Where:
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


def _expansion(doc: object) -> dict[int, int]:
    """The size of each container of ``doc`` (by ``id``) once every alias is expanded, counted without
    expanding (each shared container is counted once); a container that contains itself is refused."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[object, bool]] = [(doc, False)]
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
            raise Invalid((), "a YAML alias refers to the mapping or list it is in", "remove the alias")
        open_.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if isinstance(child, dict | list))
    return sizes


def _empty() -> NoReturn:
    fix = "record the cassette again, or write `version: 1` and `interactions: []`"
    raise Invalid((), "the file is empty", fix)
