"""Reading a cassette file: a small one read whole and hashed once, a big one read whole and parsed in place
by rapidyaml (or, when it refuses, parsed by libyaml as it is read); parsed cassettes cached by the SHA-256
of their bytes, in memory and (small ones) on disk (:mod:`replaykit.cassette.parsed`); a problem explained
with its line, by libyaml."""


import codecs
import copy
import hashlib
import io
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from replaykit.cassette import fastyaml, parsed
from replaykit.cassette.build import BODY_LIMIT, MAX_BODY, Invalid, build_cassette, check_expansion
from replaykit.cassette.model import Cassette, Interaction, Request, Response, Where
from replaykit.cassette.yamlio import BaseLoader, Lines, Loader, node_at
from replaykit.errors import CassetteError, located

# ---------------------------------------------------------------- reading: from a file, as it is read


WHOLE = 8 << 20  # a file up to this size is hashed once, parsed from memory, kept on disk parsed


class _Reader:
    """A binary file as the YAML loader reads it, checked as UTF-8, hashed and scanned for lines on the way.

    Nothing is kept but the scan's few undecided bytes: the loader never holds the file's text.
    """

    def __init__(self, handle: io.BufferedIOBase) -> None:
        self._handle, self._ended = handle, False
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._hash = hashlib.sha256()
        self.lines, self.size = Lines(), 0

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


def _load_doc(source: object) -> tuple[object, list[int], bool]:
    """The YAML document (a safe load), its interactions' node lines, and whether anything is shared."""
    loader = Loader(source)
    try:
        return loader.get_single_data(), loader.item_lines, loader.shared
    finally:
        loader.dispose()


def _stream(handle: io.BufferedIOBase) -> tuple[Cassette, bytes, int]:
    """The cassette parsed as ``handle`` is read, the SHA-256 and size of its bytes; raises _PROBLEMS."""
    reader = _Reader(handle)
    doc, composed, shared = _load_doc(reader)
    key = reader.digest()
    return build_cassette(doc, lambda count: reader.lines.lines(count, composed), shared), key, reader.size


def _whole(data: bytes, key: bytes | None) -> Cassette:
    """The cassette in ``data`` (from the disk cache when ``key`` is kept there; a parse is kept there);
    raises _PROBLEMS."""
    kept = _from_disk(key)
    if kept is not None:
        return kept
    scan = Lines()
    scan.feed(data, final=True)
    doc, composed, shared, fast = _document(data, scan)
    return _built(doc, lambda count: scan.lines(count, composed), key, len(data), shared, fast)


def _from_disk(key: bytes | None) -> Cassette | None:
    """The cassette whose document the disk cache keeps under ``key``, or None (none kept, or it fails a
    check, e.g. a body over a lower max_body: then explained from the file itself)."""
    kept = parsed.get(key) if key else None
    if kept is None:
        return None
    try:
        return build_cassette(kept[0], lambda count: [*kept[1], *[None] * count][:count], False)
    except Invalid:
        return None


def _built(doc: object, lines_of: Callable[[int], list[int | None]], key: bytes | None, size: int,
           shared: bool,
           fast: bool) -> Cassette:
    """The cassette in a document parsed from ``size`` bytes; the document is handed to the disk cache under
    ``key`` when it can be kept. One from rapidyaml (``fast``) is kept as it is and made JSON when written;
    one from libyaml (maybe too deep to copy) is made JSON now, before build empties it."""
    keep = bool(key) and not shared and size <= parsed.MAX_DOCUMENT and parsed.folder() is not None
    form = parsed.stored_form(doc) if keep and not fast else None
    lines: list[int | None] = []

    def starts(count: int) -> list[int | None]:
        lines[:] = lines_of(count)
        return lines

    cassette = build_cassette(doc, starts, shared, keep=keep and fast)
    if keep and key:
        parsed.put(key, (lambda: parsed.stored_form(doc)) if fast else (lambda: form), lines, size)
    return cassette


def _document(data: bytes, scan: Lines) -> tuple[object, list[int], bool, bool]:
    """:func:`_load_doc` of ``data``, and whether rapidyaml parsed it (:mod:`~replaykit.cassette.fastyaml`:
    the same values, faster). What it refuses, or a layout whose interactions the line ``scan`` did not
    find, goes to libyaml."""
    try:
        doc = fastyaml.load(data)
    except fastyaml.Refused:
        pass
    else:
        if _lines_found(doc, scan):
            return doc, [], False, True
    if not data.isascii():
        data.decode("utf-8")  # Python's check, stricter than libyaml's (UnicodeDecodeError: explained)
    return (*_load_doc(data if BaseLoader is not yaml.SafeLoader else data.decode("utf-8")), False)


def _lines_found(doc: Any, scan: Lines) -> bool:
    """Whether the line scan found one line per interaction (else libyaml's nodes tell them)."""
    items = doc.get("interactions")
    return not isinstance(items, list) or len(items) == len(scan.found)


def _in_place(held: "_Held") -> tuple[Cassette, bytes, int]:
    """The cassette in a big file read whole (:func:`_from_file`): from the disk cache, or parsed in place by
    rapidyaml. The file's bytes are freed before the document is read from disk or the bodies are made.
    Raises fastyaml.Refused (the file is then streamed) or _PROBLEMS."""
    data = held.read()
    size, scan, cassette = len(data), Lines(), None
    try:
        fastyaml.screen(data)  # meanwhile, the bytes are hashed
        key = held.key()
        if key and parsed.has(key):  # its document is read instead: the file's bytes go first
            data.clear()
            cassette = _from_disk(key)
            if cassette is None:  # unreadable, or over a lower max_body: read the file again, keep it anew
                parsed.forget(key)
                raise fastyaml.Refused("the kept document does not do: the file is read again")
        else:
            scan.feed(data, final=True)
            doc = fastyaml.parse(data)  # changes the bytes: hashed before
            if not _lines_found(doc, scan):
                raise fastyaml.Refused("interactions not found by the line scan")
    finally:
        held.key()
        data.clear()  # before the bodies' bytes are made, next to their text
    if cassette is None:
        cassette = _built(doc, lambda count: scan.lines(count, []), key, size, False, True)
    return cassette, key, size


class _Held:
    """A big file to read whole for rapidyaml, and to stream if it refuses. Its SHA-256 (for the caches) is
    taken in a thread beside the checks before the parse (hashlib lets go of the GIL)."""

    def __init__(self, handle: io.BufferedReader, size: int, hashed: bool) -> None:
        self.handle, self._hashed = handle, hashed
        self._size = size
        self._sha = hashlib.sha256()
        self._hashing: threading.Thread | None = None

    def read(self) -> bytearray:
        """The file's bytes, in one buffer (its SHA-256 begun); Refused when the file grew meanwhile."""
        data = bytearray(self._size)
        if self.handle.readinto(data) != self._size or self.handle.read(1):
            data.clear()  # freed before the file is streamed
            raise fastyaml.Refused("the file grew meanwhile")
        if self._hashed:
            self._hashing = threading.Thread(target=self._sha.update, args=(data,), daemon=True)
            self._hashing.start()
        return data

    def key(self) -> bytes:
        """The SHA-256 of the bytes read (b"" when they are not hashed), once it is taken."""
        if self._hashing is None:
            return b""
        self._hashing.join()
        return self._sha.digest()


# ---------------------------------------------------------------- reading: explaining a problem

_PROBLEMS = (yaml.YAMLError, RecursionError, UnicodeDecodeError, Invalid)


def _line_at(text: str, at: Where) -> int | None:
    try:
        node = node_at(yaml.compose(text, Loader=Loader), at)
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

    libyaml's parse (as :func:`_stream`'s), in the order that puts an encoding problem first; used once the
    first parse (rapidyaml's or libyaml's) has failed, to say why, so every message is libyaml's, with its
    line (it returns a cassette only if the file changed in between, or rapidyaml refused what libyaml
    reads).
    """
    text = _decode_text(data, where)
    # libyaml reads UTF-8 bytes directly (faster than from str); the pure-Python reader wants text
    source = data if isinstance(data, bytes) and BaseLoader is not yaml.SafeLoader else text
    try:
        doc, composed, shared = _load_doc(source)  # a safe loader: no Python objects
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, where) from exc
    except RecursionError as exc:  # pragma: no cover - libyaml stops at depth 1000 first
        raise CassetteError(located(where, None, "nested too deeply", "flatten the document")) from exc
    scan = Lines()
    scan.feed(_utf8(data), final=True)
    try:
        return build_cassette(doc, lambda count: scan.lines(count, composed), shared)
    except Invalid as exc:
        raise CassetteError(located(where, _line_at(text, exc.at), exc.message, exc.fix)) from None


def _utf8(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def _parse(source: "io.BufferedIOBase | bytes | _Held", where: str, original: Callable[[], bytes | str],
           key: bytes | None = None) -> tuple[Cassette, bytes, int]:
    """Parse bytes held whole (``key``: their SHA-256, for the disk cache), a big file read whole or as the
    file is read; on a problem, :func:`_explain` the ``original`` bytes (read again). Returns the SHA-256
    and size parsed."""
    try:
        if isinstance(source, bytes):
            return _whole(source, key), key or b"", len(source)
        if isinstance(source, _Held):
            try:
                return _in_place(source)
            except fastyaml.Refused:  # (the bytes read are freed already)
                source.handle.seek(0)
                source = source.handle
        return _stream(source)
    except _PROBLEMS:
        pass
    data = original()
    raw = _utf8(data)
    return _explain(data, where), key or hashlib.sha256(raw).digest(), len(raw)


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
        if size > self._max_bytes:
            return  # it would be dropped at once: not worth a copy
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
    """Forget every parsed cassette held in memory (they are read again on the next load, from the
    parsed documents kept on disk when there are some: :mod:`replaykit.cassette.parsed`)."""
    _CACHE.clear()
    _SEEN.clear()
    parsed.flush()  # what a new process would find


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


def _cached(source: "io.BufferedIOBase | bytes | _Held", where: str, original: Callable[[], bytes | str],
            key: bytes | None, max_body: int, keep: bool) -> Cassette:
    """A copy from the cache when ``key`` (the SHA-256 of the bytes) is there, else parsed from ``source``
    with bodies decoded to at most ``max_body`` bytes (and, with ``keep``, cached).

    A parse is kept under the hash of the bytes it read (a streamed file may have changed since ``key``
    was taken), and the limit it was made under.
    """
    limit = max_body.to_bytes(8, "big")
    cassette = _CACHE.get(key + limit) if key is not None else None
    if cassette is None:
        token = BODY_LIMIT.set(max_body)
        try:
            whole_key = key if isinstance(source, bytes) else None
            cassette, digest, size = _parse(source, where, original, whole_key)
        finally:
            BODY_LIMIT.reset(token)
        if keep:
            _CACHE.put(digest + limit, size, cassette)
    return cassette


def loads(data: bytes | str, path: str | os.PathLike[str] | None = None, *, cache: bool = True,
          max_body: int = MAX_BODY) -> Cassette:
    """Parse cassette text; errors name ``path`` and the line at fault. ``cache=False`` always parses;
    an encoded body that decodes to more than ``max_body`` bytes is an error (a decompression bomb)."""
    where = str(path) if path is not None else "<string>"
    raw = _utf8(data)
    key = hashlib.sha256(raw).digest() if cache else None
    cassette = _cached(raw, where, lambda: data, key, max_body, cache)
    cassette.path = Path(path) if path is not None else None
    return cassette


_SEEN: OrderedDict[tuple[int, ...], None] = OrderedDict()  # big files loaded: device, inode, size, mtime


def load(path: str | os.PathLike[str], *, cache: bool = True, max_body: int = MAX_BODY) -> Cassette:
    """Load a cassette file (see :func:`loads`).

    A file up to :data:`WHOLE` bytes is read whole and hashed once. A bigger one is read whole and parsed in
    place by rapidyaml, hashed beside the checks before that parse (or, what rapidyaml refuses, parsed by
    libyaml as it is read again, never held whole, and hashed on the way); it is hashed first, as it
    streams, only when a file with the same device, inode, size and mtime was loaded before (then the
    memory cache may hold it: the hash, not the metadata, decides). Only a regular file is read: a FIFO or
    a device named as a cassette is an error, never a wait.
    """
    _regular(path)
    try:
        # without blocking: a FIFO put in its place since that check is no wait either (fstat refuses it)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            cassette = _from_file(fd, str(path), cache, max_body)
        finally:
            os.close(fd)
    except OSError as exc:
        raise CassetteError(located(path, None, f"cannot read: {exc.strerror or exc}",
                                    "check the path and its permissions")) from exc
    cassette.path = Path(path)
    return cassette


def _from_file(fd: int, where: str, cache: bool, max_body: int) -> Cassette:
    """The cassette in an open file: read whole up to :data:`WHOLE` bytes (with no file object: most of a
    small file's load is its reading), else parsed in place or streamed (:func:`load`)."""
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        raise _not_regular(where)
    if status.st_size <= WHOLE:
        data = _read(fd, status.st_size + 1)  # not WHOLE + 1: a read allocates what it is asked for
        if len(data) <= status.st_size:  # (a file that grew meanwhile is streamed)
            key = hashlib.sha256(data).digest() if cache else None
            return _cached(data, where, lambda: data, key, max_body, cache)
        os.lseek(fd, 0, os.SEEK_SET)
    with open(fd, "rb", closefd=False) as handle:
        return _from_handle(handle, status, where, cache, max_body)


def _read(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes of ``fd``, fewer only at its end."""
    pieces = []
    while size > 0:
        piece = os.read(fd, size)
        if not piece:
            break
        pieces.append(piece)
        size -= len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _from_handle(handle: io.BufferedReader, status: os.stat_result, where: str, cache: bool,
                 max_body: int) -> Cassette:
    """A file over :data:`WHOLE` bytes: parsed in place or streamed (:func:`load`)."""
    seen = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
    key = None
    if cache and seen in _SEEN:  # then the cache may hold it: hashed first, to look
        key = hashlib.file_digest(handle, "sha256").digest()
        handle.seek(0)
    source = _Held(handle, status.st_size, cache) if fastyaml.AVAILABLE else handle
    cassette = _cached(source, where, lambda: _read_again(handle), key, max_body, cache)
    if cache:
        _SEEN[seen] = None
        while len(_SEEN) > 1024:
            _SEEN.popitem(last=False)
    return cassette


def _regular(path: str | os.PathLike[str]) -> None:
    """Refuse what is not a regular file (a FIFO would block the read forever), without opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise CassetteError(located(path, None, f"cannot read: {exc.strerror or exc}",
                                    "check the path and its permissions")) from exc
    if not stat.S_ISREG(mode):
        raise _not_regular(path)


def _not_regular(path: str | os.PathLike[str]) -> CassetteError:
    return CassetteError(located(path, None, "not a regular file (a FIFO, a device or a socket)",
                                 "name a cassette file"))


def _read_again(handle: io.BufferedIOBase) -> bytes:
    handle.seek(0)
    return handle.read()


def read_yaml(data: bytes | str, where: str) -> Any:
    """A YAML document that is not a cassette (a scenario) read the cassette's way: UTF-8 checked, loaded
    safely (no Python tags), an alias bomb refused; a problem is a CassetteError naming ``where``, the line
    at fault and the fix."""
    text = _decode_text(data, where)
    source = data if isinstance(data, bytes) and BaseLoader is not yaml.SafeLoader else text
    try:
        doc, _, shared = _load_doc(source)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, where) from exc
    except RecursionError as exc:  # pragma: no cover - libyaml stops at depth 1000 first
        raise CassetteError(located(where, None, "nested too deeply", "flatten the document")) from exc
    if shared:
        try:
            check_expansion(doc)
        except Invalid as exc:
            raise CassetteError(located(where, _line_at(text, exc.at), exc.message, exc.fix)) from None
    return doc


def yaml_line(text: str, parts: Iterable[str | int]) -> int | None:
    """The line (1-based) where the value at ``parts`` starts in the YAML ``text`` (where the path leaves the
    document: the deepest value on it), or None when ``text`` is not YAML."""
    return _line_at(text, tuple(parts))
