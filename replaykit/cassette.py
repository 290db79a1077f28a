"""Cassettes: vcrpy version-1 YAML, read in every layout users have, written atomically.

A cassette file is vcrpy's format plus a top-level ``replaykit:`` mapping (which vcrpy ignores)::

    version: 1
    replaykit: {origin: recorded|synthesized, provider: anthropic, recorded_with: ..., fingerprint: sha256:...}
    interactions:
    - request:  {method, uri, headers: {name: [values]}, body: str|null}
      response: {status: {code, message}, headers: {name: [values]}, body: {string: str}}
      replaykit: {event_offsets_ms: [...]}        # optional, per-event time offsets of an SSE body

Read as well: ``!!binary`` bodies, gzip / deflate / br bodies with ``content-encoding`` (decoded on load),
and pydantic-ai's ``parsed_body`` layout. Bodies are held decoded (``bytes``); JSON bodies are exposed
parsed (:meth:`Request.json`), SSE bodies as :mod:`replaykit.sse` events with their byte boundaries.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import brotli
import yaml

from replaykit import sse
from replaykit.errors import CassetteError, located

__all__ = [
    "Cassette",
    "Interaction",
    "Meta",
    "Origin",
    "Request",
    "Response",
    "dumps",
    "load",
    "loads",
    "save",
]

Origin = Literal["recorded", "synthesized"]
Headers = dict[str, list[str]]

try:  # the C loader is several times faster; fall back when libyaml is absent
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader
    _Dumper: type[yaml.SafeDumper] = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - depends on the build of PyYAML
    _Loader, _Dumper = yaml.SafeLoader, yaml.SafeDumper


def header(headers: Headers, name: str) -> str | None:
    """First value of header ``name`` (case-insensitive), or ``None``."""
    lowered = name.lower()
    for key, values in headers.items():
        if key.lower() == lowered and values:
            return values[0]
    return None


def _json_or_none(body: bytes | None) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


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
        """The body parsed as JSON, or ``None`` when it is empty or not JSON."""
        return _json_or_none(self.body)


@dataclass(slots=True)
class Response:
    """A recorded response; ``body`` is decoded (no content-encoding left)."""

    status: int
    reason: str = ""
    headers: Headers = field(default_factory=dict)
    body: bytes = b""
    event_offsets_ms: list[float] | None = None
    _events: list[list[sse.Event]] = field(default_factory=list, repr=False, compare=False)

    def header(self, name: str) -> str | None:
        """First value of a header, case-insensitive."""
        return header(self.headers, name)

    @property
    def is_stream(self) -> bool:
        """True when the body is ``text/event-stream``."""
        return (self.header("content-type") or "").startswith("text/event-stream")

    @property
    def events(self) -> list[sse.Event]:
        """The SSE blocks of a streaming body, with their original bytes (empty when not a stream)."""
        if not self._events:
            self._events.append(sse.parse(self.body) if self.is_stream else [])
        return self._events[0]

    def json(self) -> Any:
        """The body parsed as JSON, or ``None`` when it is a stream, empty or not JSON."""
        return None if self.is_stream else _json_or_none(self.body)


@dataclass(slots=True)
class Interaction:
    """One request and its response; ``line`` is where it starts in the file (1-based), if known."""

    request: Request
    response: Response
    line: int | None = None


@dataclass(slots=True)
class Meta:
    """replaykit's metadata, kept in the top-level ``replaykit:`` mapping."""

    origin: Origin | None = None
    provider: str | None = None
    recorded_with: str | None = None
    fingerprint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Cassette:
    """A loaded cassette."""

    interactions: list[Interaction] = field(default_factory=list)
    meta: Meta = field(default_factory=Meta)
    path: Path | None = None

    def fingerprint(self) -> str:
        """Canonical SHA-256 of the traffic (not the metadata): stable across load and save."""
        digest = hashlib.sha256()
        for item in self.interactions:
            digest.update(_canonical(item))
        return f"sha256:{digest.hexdigest()}"


def _canonical_body(body: bytes | None) -> bytes:
    parsed = _json_or_none(body)
    if parsed is not None:
        return json.dumps(parsed, sort_keys=True, separators=(",", ":")).encode()
    return body or b""


def _canonical_headers(headers: Headers) -> list[tuple[str, list[str]]]:
    skip = {"content-length", "content-encoding", "transfer-encoding"}
    return sorted((k.lower(), v) for k, v in headers.items() if k.lower() not in skip)


def _canonical(item: Interaction) -> bytes:
    req, resp = item.request, item.response
    head = [req.method.upper(), req.uri, _canonical_headers(req.headers), resp.status,
            _canonical_headers(resp.headers)]
    parts = [json.dumps(head, sort_keys=True).encode(), _canonical_body(req.body), _canonical_body(resp.body)]
    return b"\0".join(hashlib.sha256(part).digest() for part in parts)


# ---------------------------------------------------------------- loading


def _decode(body: bytes, encoding: str | None) -> bytes:
    codecs = {"gzip": gzip.decompress, "x-gzip": gzip.decompress, "br": brotli.decompress,
              "deflate": _inflate, "identity": lambda b: b}
    for name in reversed([part.strip().lower() for part in (encoding or "").split(",") if part.strip()]):
        if name not in codecs:
            raise ValueError(f"unknown content-encoding {name!r}")
        body = codecs[name](body)
    return body


def _inflate(body: bytes) -> bytes:
    try:
        return zlib.decompress(body)
    except zlib.error:
        return zlib.decompress(body, -zlib.MAX_WBITS)


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"a body must be text or !!binary, not {type(value).__name__}")


def _headers(raw: Any) -> Headers:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TypeError("headers must be a mapping of name to a list of values")
    return {str(k): [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in raw.items()}


def _parsed_or(raw: dict[str, Any], body: Any) -> bytes | None:
    if "parsed_body" in raw:
        return json.dumps(raw["parsed_body"], ensure_ascii=False).encode("utf-8")
    return _as_bytes(body)


def _request(raw: dict[str, Any]) -> Request:
    headers = _headers(raw.get("headers"))
    body = _parsed_or(raw, raw.get("body"))
    return Request(str(raw["method"]), str(raw["uri"]), headers, body)


def _response(raw: dict[str, Any], extra: dict[str, Any]) -> Response:
    headers = _headers(raw.get("headers"))
    body_field = raw.get("body")
    inner = body_field.get("string") if isinstance(body_field, dict) else body_field
    body = _parsed_or(raw, inner) or b""
    if "parsed_body" not in raw:
        body = _decode(body, header(headers, "content-encoding"))
    status = raw["status"]
    code, reason = (status["code"], status.get("message", "")) if isinstance(status, dict) else (status, "")
    offsets = extra.get("event_offsets_ms")
    return Response(int(code), str(reason or ""), headers, body, offsets)


def _meta(raw: Any) -> Meta:
    if raw is None:
        return Meta()
    if not isinstance(raw, dict):
        raise TypeError("the replaykit: entry must be a mapping")
    known = {"origin", "provider", "recorded_with", "fingerprint"}
    extra = {k: v for k, v in raw.items() if k not in known}
    return Meta(raw.get("origin"), raw.get("provider"), raw.get("recorded_with"), raw.get("fingerprint"), extra)


def _interaction_lines(text: str) -> list[int]:
    lines: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("- request:") or line.startswith("-   request:"):
            lines.append(number)
    return lines


def loads(data: bytes | str, path: str | os.PathLike[str] | None = None) -> Cassette:
    """Parse cassette text; errors name ``path`` and the line or interaction at fault."""
    where = str(path) if path is not None else "<string>"
    text = _text(data, where)
    try:
        doc = yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        place = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise CassetteError(located(where, place, f"invalid YAML: {problem}", "fix the YAML syntax")) from exc
    return _from_doc(doc, text, where, path)


def _text(data: bytes | str, where: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CassetteError(located(where, line, f"not UTF-8 (byte 0x{data[exc.start]:02x})",
                                    "save the file as UTF-8; binary bodies belong in !!binary")) from exc


def _from_doc(doc: Any, text: str, where: str, path: str | os.PathLike[str] | None) -> Cassette:
    if not isinstance(doc, dict):
        raise CassetteError(located(where, 1, "not a cassette: the top level must be a mapping",
                                    "a vcrpy cassette has `version: 1` and `interactions:`"))
    if doc.get("version") != 1:
        raise CassetteError(located(where, _line_of(text, "version:"),
                                    f"unsupported cassette version {doc.get('version')!r}",
                                    "replaykit reads vcrpy version 1 cassettes"))
    raw_items = doc.get("interactions")
    if not isinstance(raw_items, list):
        raise CassetteError(located(where, None, "missing `interactions:` list", "add `interactions: []`"))
    lines = _interaction_lines(text)
    items = [_interaction(raw, index, lines, where) for index, raw in enumerate(raw_items)]
    try:
        meta = _meta(doc.get("replaykit"))
    except TypeError as exc:
        raise CassetteError(located(where, _line_of(text, "replaykit:"), str(exc))) from exc
    return Cassette(items, meta, Path(path) if path is not None else None)


def _line_of(text: str, prefix: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(prefix):
            return number
    return None


def _interaction(raw: Any, index: int, lines: list[int], where: str) -> Interaction:
    line = lines[index] if index < len(lines) else None
    place = f"{line}" if line else f"interactions[{index}]"
    try:
        if not isinstance(raw, dict):
            raise TypeError("an interaction must be a mapping with request: and response:")
        extra = raw.get("replaykit") or {}
        return Interaction(_request(raw["request"]), _response(raw["response"], extra), line)
    except KeyError as exc:
        msg = f"interaction {index} is missing key {exc.args[0]!r}"
        raise CassetteError(located(where, place, msg, "each interaction needs request: and response:")) from exc
    except (TypeError, ValueError, OSError, zlib.error, brotli.error) as exc:
        raise CassetteError(located(where, place, f"interaction {index}: {exc}")) from exc


def load(path: str | os.PathLike[str]) -> Cassette:
    """Load a cassette file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CassetteError(located(path, None, f"cannot read: {exc.strerror}")) from exc
    return loads(data, path)


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


def _doc(cassette: Cassette) -> dict[str, Any]:
    meta: dict[str, Any] = {k: v for k, v in (
        ("origin", cassette.meta.origin), ("provider", cassette.meta.provider),
        ("recorded_with", cassette.meta.recorded_with), ("fingerprint", cassette.fingerprint()),
    ) if v is not None}
    meta.update(cassette.meta.extra)
    return {"version": 1, "replaykit": meta, "interactions": [_item_out(i) for i in cassette.interactions]}


def _item_out(item: Interaction) -> dict[str, Any]:
    req, resp = item.request, item.response
    out: dict[str, Any] = {
        "request": {"method": req.method, "uri": req.uri, "headers": _headers_out(req.headers, req.body),
                    "body": _body_out(req.body)},
        "response": {"status": {"code": resp.status, "message": resp.reason},
                     "headers": _headers_out(resp.headers, resp.body), "body": {"string": _body_out(resp.body)}},
    }
    if resp.event_offsets_ms is not None:
        out["replaykit"] = {"event_offsets_ms": list(resp.event_offsets_ms)}
    return out


def dumps(cassette: Cassette) -> str:
    """The cassette as vcrpy-compatible YAML text (bodies decoded, fingerprint refreshed)."""
    return yaml.dump(_doc(cassette), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)


def save(cassette: Cassette, path: str | os.PathLike[str]) -> None:
    """Write atomically: a temporary file in the same directory, fsync, then rename over ``path``."""
    target = Path(path)
    text = dumps(cassette).encode("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def iter_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Cassette files named by ``paths`` (files as given; folders searched for ``*.yaml`` / ``*.yml``)."""
    found: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            found.extend(sorted(p for p in entry.rglob("*") if p.suffix in {".yaml", ".yml"} and p.is_file()))
        else:
            found.append(entry)
    return found
