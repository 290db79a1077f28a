"""Writing a cassette: the vcrpy YAML it is read from, written atomically (a temporary file, then a
rename: never a half-written file)."""


import os
import re
import tempfile
from pathlib import Path

import yaml

from replaykit.cassette.model import Cassette, Headers, Interaction
from replaykit.cassette.yamlio import Dumper
from replaykit.errors import CassetteError, located
from replaykit.jsondoc import JSON

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


def _meta_out(cassette: Cassette) -> JSON:
    meta = cassette.meta
    known = (("origin", meta.origin), ("provider", meta.provider), ("recorded_with", meta.recorded_with))
    out: JSON = {key: value for key, value in known if value is not None}
    out["fingerprint"] = cassette.fingerprint()
    if meta.description is not None:
        out["description"] = meta.description
    out.update({k: v for k, v in meta.extra.items() if k not in out})
    return out


def _item_out(item: Interaction) -> JSON:
    req, resp = item.request, item.response
    out: JSON = {
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
    doc: JSON = {"version": 1, "replaykit": _meta_out(cassette)}
    doc.update({k: v for k, v in cassette.extra.items() if k not in {"version", "replaykit", "interactions"}})
    doc["interactions"] = [_item_out(item) for item in cassette.interactions]
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120)


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


def write_atomic(target: Path, data: bytes | list[bytes], *, durable: bool = True) -> None:
    """Write ``data`` (or its pieces, one after the other) to ``target`` whole or not at all: a temporary
    file beside it, synced, renamed over it (an existing file keeps its mode; a new one gets 0644). Missing
    folders are created. ``durable=False`` skips the sync, for a file whose loss in a crash costs nothing
    (a cache entry)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.writelines([data] if isinstance(data, bytes) else data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def stale_temporaries(target: Path) -> list[Path]:
    """The temporary files :func:`write_atomic` left beside ``target`` when killed mid-write
    (``.<name>.<8 random characters>.tmp``, as ``tempfile.mkstemp`` names them)."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}\.tmp")
    folder = target.parent if target.parent.is_dir() else None
    return [] if folder is None else sorted(p for p in folder.iterdir() if pattern.fullmatch(p.name))
