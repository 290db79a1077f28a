"""A cassette document parsed with rapidyaml (``ryml``): the same values as ``yaml.safe_load``, faster than
libyaml (about 3.5x a 5 MB cassette's first load), for the documents vcrpy and replaykit write.

It types rapidyaml's plain scalars with PyYAML's own YAML 1.1 resolver, so a value is exactly what
:class:`~replaykit.cassette.yamlio.Loader` gives, and raises :class:`Refused` on whatever it is not sure to
read the same way (aliases, most tags, odd characters, deep nesting...): the caller,
:mod:`replaykit.cassette.read`, then parses with libyaml, which gives the value or the error with its line.
Without rapidyaml every document is refused; the refusals are listed in docs/architecture/cassette.md.
"""

import atexit
import codecs
import os
import re
import tempfile
import threading
from collections.abc import Container, Iterator
from contextlib import contextmanager
from typing import Any

import yaml

from replaykit.jsondoc import JSON

try:
    import ryml  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - rapidyaml is a dependency; a platform without a wheel falls back
    ryml = None

AVAILABLE = ryml is not None
MAX_DEPTH = 64  # nesting the walk follows; deeper documents go to libyaml (its limit: 1000)

_STR, _BINARY = "tag:yaml.org,2002:str", "tag:yaml.org,2002:binary"
_TAGS = {b"!!str": _STR, b"!!python/str": _STR, b"!!python/unicode": _STR, b"!!binary": _BINARY}
_RESOLVER = yaml.resolver.Resolver()  # YAML 1.1 plain scalars, as yamlio.Loader resolves them
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
# the bytes one pass over the file keeps for a closer look: ASCII controls but LF, and the three bytes the
# constructs below need (every other printable ASCII byte, and the bytes of other UTF-8 characters, go)
_MARKS = b"\\#%"
_PLAIN_BYTES = bytes(sorted({0x0A, *range(0x20, 0x7F), *range(0x80, 0x100)} - set(_MARKS)))
# UTF-8 characters YAML forbids or reads as a line break in 1.1 only: C1 controls and NEL, LS, PS, BOM,
# U+FFFE/U+FFFF (surrogates are not UTF-8: the decoder refuses them)
_UNSAFE = re.compile(rb"\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]|\xef\xbb\xbf|\xef\xbf[\xbe\xbf]")
# an escaped line break before a blank line: PyYAML keeps the blank line as a newline, rapidyaml does not
_ESCAPED_BREAK = re.compile(rb"\\\n *\n")
# an escaped line or paragraph separator (PyYAML writes U+2028 and U+2029 so): rapidyaml folds a "\n" before
# two of them ("a\nb\L\L" read as "a b" and two LS)
_ESCAPED_SEPARATOR = re.compile(rb"\\[LP]")
_DIRECTIVE = re.compile(rb"\n%")
_ASCII = bytes(range(0x80))
# plain scalars libyaml refuses (reserved indicators) or reads differently in flow collections
_PLAIN_REFUSED = frozenset("@`%:?,[]{}#&*!|>'\"")
_PIECE = 1 << 20
_COMMENT = "a comment read into a plain scalar (inside a flow mapping)"


class Refused(Exception):
    """A document this parser is not sure to read as ``yaml.safe_load`` does: parse it with libyaml."""


def load(data: bytes | bytearray) -> Any:
    """The document in ``data`` (UTF-8 YAML), or :class:`Refused`: :func:`screen`, then :func:`parse`."""
    screen(data)
    return parse(data)


def parse(data: bytes | bytearray) -> Any:
    """The document in ``data`` (passed by :func:`screen` already), or :class:`Refused`. A ``bytearray`` is
    parsed in place (no copy; it holds no YAML afterwards), ``bytes`` from a copy."""
    if ryml is None:
        raise Refused("rapidyaml is not installed")
    # (before an in-place parse changes the bytes; a lone `#` is found about 40x faster than ` #`)
    comments = b"#" in data and b" #" in data
    with _quiet():
        try:
            tree = ryml.parse_in_place(data) if isinstance(data, bytearray) else ryml.parse_in_arena(data)
        except ryml.ExceptionBasic as exc:
            raise Refused("rapidyaml refuses it") from exc
    root = tree.root_id()
    kind = tree.type(root)
    if not kind & ryml.MAP or kind & (ryml.STREAM | ryml.DOC | _VALUE_REFUSED):
        raise Refused("not one mapping")
    try:
        return _Walk(tree, comments).mapping(root, kind, 0)
    except (UnicodeDecodeError, yaml.YAMLError, ValueError, TypeError) as exc:
        raise Refused(str(exc)) from exc


def screen(data: bytes | bytearray) -> None:
    """Refuse (:class:`Refused`) bytes libyaml might read differently (see the module's docstring)."""
    kept = data.translate(None, _PLAIN_BYTES)  # one pass; what it keeps is short, as a rule
    if kept.translate(None, _MARKS):
        raise Refused("a control character, a tab or a carriage return")
    # each construct is looked for only when a byte it needs is there
    if b"\\" in kept and _ESCAPED_BREAK.search(data):
        raise Refused("an escaped line break before a blank line")
    if b"\\" in kept and _ESCAPED_SEPARATOR.search(data):
        raise Refused("an escaped line or paragraph separator")
    if b"%" in kept and (data.startswith(b"%") or _DIRECTIVE.search(data)):
        raise Refused("a directive")
    if not data.isascii():
        decoder = codecs.getincrementaldecoder("utf-8")()
        with memoryview(data) as view:  # released at once: the caller may free ``data``
            try:  # a piece at a time: never the text of a big file whole
                for at in range(0, len(view), _PIECE):
                    with view[at : at + _PIECE] as piece:
                        decoder.decode(piece)
                decoder.decode(b"", True)
            except UnicodeDecodeError:
                raise Refused("not UTF-8") from None
        # the non-ASCII bytes alone are still whole UTF-8 characters, in order: a short search
        if _UNSAFE.search(data.translate(None, _ASCII)):
            raise Refused("a character YAML 1.1 reads apart")


class _Walk:
    """rapidyaml's tree to Python values, each plain scalar typed once per document.

    The loops are written out (a cassette has hundreds of nodes, each read through rapidyaml's wrappers): a
    node that is neither a collection nor tagged is read in place. Each wrapper is called with the SWIG object
    behind the tree (its ``this``), not the tree: the bindings take that as it is, where the tree is looked
    into on every call (a call then costs about 5x as much). In a document that holds `` #`` (``comments``)
    every plain scalar is read by :func:`_typed`, which refuses one holding it.
    """

    def __init__(self, tree: object, comments: bool) -> None:
        self.handle = getattr(tree, "this", tree)
        self.plain: JSON = {}
        self.special = _Every() if comments else _special()

    def mapping(self, node: int, kind: int, depth: int) -> dict[object, object]:
        if depth > MAX_DEPTH:
            raise Refused("nested too deeply")
        out: dict[object, object] = {}
        # in a flow mapping, `{a:}` is an error to libyaml and `{a: }` is not: neither is worth telling apart
        refused = _KEY_REFUSED | (ryml.VALNIL if kind & _FLOW else 0)
        kind_of, key_of, val_of, next_of, tree = _TYPE, _KEY, _VAL, _NEXT, self.handle
        plain, special = self.plain, self.special
        child, none = _FIRST(tree, node), ryml.NONE
        while child != none:
            kind = kind_of(tree, child)
            if kind & refused:
                raise Refused("a key that is not a plain or quoted scalar, or no value in a flow mapping")
            text = key_of(tree, child)
            key = "" if text is None else str(text, "utf-8")
            if not kind & _KEY_QUOTED and key[:1] in special:
                key = plain[key] if key in plain else self.typed(key)
                if key is None:  # `: v` is an error to libyaml, `~: v` is not: not worth telling apart
                    raise Refused("a null key")
            if kind & _NOT_SCALAR:
                out[key] = self.value(child, kind, depth)
            else:
                text = val_of(tree, child)
                value = "" if text is None else str(text, "utf-8")
                string = kind & _VALUE_QUOTED or value[:1] not in special
                out[key] = value if string else plain[value] if value in plain else self.typed(value)
            child = next_of(tree, child)
        return out

    def sequence(self, node: int, depth: int) -> list[object]:
        """A sequence's items (vcrpy's ``!!python/tuple`` is refused: a tag on a collection)."""
        if depth > MAX_DEPTH:
            raise Refused("nested too deeply")
        out: list[object] = []
        kind_of, val_of, next_of, tree = _TYPE, _VAL, _NEXT, self.handle
        plain, special = self.plain, self.special
        child, none = _FIRST(tree, node), ryml.NONE
        while child != none:
            kind = kind_of(tree, child)
            if kind & _NOT_SCALAR:
                out.append(self.value(child, kind, depth))
            else:
                text = val_of(tree, child)
                value = "" if text is None else str(text, "utf-8")
                string = kind & _VALUE_QUOTED or value[:1] not in special
                out.append(value if string else plain[value] if value in plain else self.typed(value))
            child = next_of(tree, child)
        return out

    def value(self, node: int, kind: int, depth: int) -> object:
        """A collection, or a tagged scalar (an anchor or an alias: refused)."""
        if kind & _VALUE_REFUSED:
            if kind & _VALUE_REFUSED != ryml.VALTAG or kind & (ryml.MAP | ryml.SEQ):
                raise Refused("an anchor, an alias or a tag on a collection")
            return self.tagged(node, kind)
        if kind & ryml.MAP:
            return self.mapping(node, kind, depth + 1)
        return self.sequence(node, depth + 1)

    def typed(self, text: str) -> Any:
        """A plain scalar typed as YAML 1.1 types it (:func:`_typed`), remembered for this document."""
        value = self.plain[text] = _typed(text)
        return value

    def tagged(self, node: int, kind: int) -> object:
        tag = _TAGS.get(bytes(_VAL_TAG(self.handle, node)))
        if tag is None:
            raise Refused("a tag")
        text = _VAL(self.handle, node)
        value = "" if text is None else str(text, "utf-8")
        if " #" in value and not kind & _VALUE_QUOTED:
            raise Refused(_COMMENT)
        return value if tag == _STR else _CONSTRUCTOR.construct_yaml_binary(yaml.ScalarNode(tag, value))


class _Every:
    def __contains__(self, item: object) -> bool:
        return True


def _special() -> Container[str]:
    """The first characters of the plain scalars :func:`_typed` reads: those it refuses, and those the
    resolver has patterns for (it picks them by the first character, ``''`` for an empty scalar, ``None``
    for patterns that apply to any: then every one). Any other plain scalar is a string."""
    resolvers = _RESOLVER.yaml_implicit_resolvers
    return _Every() if None in resolvers else _PLAIN_REFUSED.union(resolvers)


def _typed(text: str) -> object:
    """A plain scalar as PyYAML's resolver and safe constructors type it (a merge key ``<<`` and ``=`` have
    no safe constructor, and one holding `` #`` is a comment rapidyaml read into it: refused)."""
    if text[:1] in _PLAIN_REFUSED:
        raise Refused(f"a plain scalar starting with {text[:1]!r}")
    if " #" in text:
        raise Refused(_COMMENT)
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if tag == _STR:
        return text
    build = _CONSTRUCTOR.yaml_constructors.get(tag)
    if build is None:  # e.g. `=` (tag:yaml.org,2002:value): libyaml's error
        raise Refused(f"no constructor for {tag}")
    return build(_CONSTRUCTOR, yaml.ScalarNode(tag, text))


if ryml is not None:
    _KEY_REFUSED = ryml.KEYANCH | ryml.KEYREF | ryml.KEYTAG
    _VALUE_REFUSED = ryml.VALANCH | ryml.VALREF | ryml.VALTAG
    _FLOW = ryml.FLOW_SL | ryml.FLOW_ML
    _NOT_SCALAR = ryml.MAP | ryml.SEQ | _VALUE_REFUSED  # (a tag is read by _Walk.value too)
    _KEY_QUOTED, _VALUE_QUOTED = ryml.KEYQUO, ryml.VALQUO  # quoted, literal or folded: text as it is
    _TYPE, _KEY, _VAL = ryml.Tree.type, ryml.Tree.key, ryml.Tree.val
    _FIRST, _NEXT, _VAL_TAG = ryml.Tree.first_child, ryml.Tree.next_sibling, ryml.Tree.val_tag
else:  # pragma: no cover
    _KEY_REFUSED = _VALUE_REFUSED = _FLOW = _NOT_SCALAR = _KEY_QUOTED = _VALUE_QUOTED = 0
    _TYPE = _KEY = _VAL = _FIRST = _NEXT = _VAL_TAG = None


_QUIET = threading.Lock()
_CAUGHT: list[Any] = []  # the file that stands in for stderr while rapidyaml parses (made once, kept open)


@contextmanager
def _quiet() -> Iterator[None]:
    """Catch what is written to file descriptor 2 meanwhile: rapidyaml prints each error it raises there.

    What other threads write meanwhile is written out afterwards; only rapidyaml's own report of an error
    (its ``line=... ERROR: ...`` line and the ``(detected here)`` line after it) is dropped. Without a
    descriptor 2 (closed) or a temporary file, nothing is caught.
    """
    with _QUIET:
        try:
            if not _CAUGHT:
                _CAUGHT.append(tempfile.TemporaryFile())  # noqa: SIM115 - open for the process's life
                atexit.register(_CAUGHT[0].close)
            caught, saved = _CAUGHT[0].fileno(), os.dup(2)
        except OSError:
            yield
            return
        os.dup2(caught, 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            _release(caught, failed)


_REPORT = re.compile(rb"line=\d+ col=\d+ \(\d+B\): ERROR: [^\n]*\n(?:[^\n]*\(detected here\)\n)?")


def _release(caught: int, failed: bool) -> None:
    size = os.lseek(caught, 0, os.SEEK_END)
    if not size:
        return
    os.lseek(caught, 0, os.SEEK_SET)
    written = os.read(caught, size)
    os.ftruncate(caught, 0)
    os.lseek(caught, 0, os.SEEK_SET)
    if failed:
        written = _REPORT.sub(b"", written, count=1)
    if written:
        os.write(2, written)
