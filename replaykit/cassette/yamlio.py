"""YAML at the node level: a fast safe loader (vcrpy's harmless Python tags accepted) and where each
interaction starts, found in the bytes as they are read."""


import re

import yaml

from replaykit.cassette.model import Where

BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


_STR, _MAP, _SEQ, _INT, _FLOAT, _NULL = (f"tag:yaml.org,2002:{name}"
                                         for name in ("str", "map", "seq", "int", "float", "null"))
_PLAIN_FLOAT = re.compile(r"-?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?")
_MERGING = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})


class Loader(BaseLoader):  # type: ignore[valid-type,misc]
    """The safe loader plus vcrpy's harmless Python tags (plain strings and tuples), built faster.

    PyYAML's constructor spends most of a cassette's load in generic per-node machinery. Plain strings,
    mappings and sequences (nearly every node of a cassette) are built here directly from libyaml's nodes;
    every other node (numbers, null, ``!!binary``, merge keys, ...) goes to PyYAML's own constructors, so
    the result is exactly ``yaml.safe_load``'s. Aliases share one object, as with PyYAML.
    """

    def __init__(self, stream: object) -> None:
        super().__init__(stream)
        self._resolved: dict[str, str] = {}
        self._built: dict[yaml.Node, object] = {}
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

    def get_single_data(self) -> object:
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

    def _build(self, node: yaml.Node) -> object:
        kind, tag = type(node), node.tag
        if kind is yaml.ScalarNode:
            return node.value if tag == _STR else self._scalar(node)
        if node in self._built:
            self.shared = True
            return self._built[node]
        if kind is yaml.MappingNode and tag == _MAP and not any(key.tag in _MERGING for key, _ in node.value):
            return self._mapping(node)
        if kind is yaml.SequenceNode and tag == _SEQ:
            items: list[object] = []
            self._built[node] = items
            items.extend([self._build(child) for child in node.value])
            return items
        self.shared = True  # PyYAML builds this one and keeps its own aliases
        return self.construct_object(node, deep=True)

    def _scalar(self, node: yaml.Node) -> object:
        """Decimal ints, plain floats and null directly (YAML 1.1 octal, ``_``, ``1:30`` go to PyYAML)."""
        tag, value = node.tag, node.value
        if tag == _INT and value.isascii() and value.isdigit() and (value == "0" or value[0] != "0"):
            return int(value)
        if tag == _FLOAT and _PLAIN_FLOAT.fullmatch(value):
            return float(value)
        if tag == _NULL:
            return None
        return self.construct_object(node, deep=True)

    def _mapping(self, node: yaml.Node) -> dict[object, object]:
        mapping: dict[object, object] = {}
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


Loader.add_constructor("tag:yaml.org,2002:python/str", BaseLoader.construct_yaml_str)
Loader.add_constructor("tag:yaml.org,2002:python/unicode", BaseLoader.construct_yaml_str)
Loader.add_constructor("tag:yaml.org,2002:python/tuple", BaseLoader.construct_yaml_seq)


# ---------------------------------------------------------------- reading: lines


class Lines:
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

    def feed(self, data: bytes | bytearray, final: bool = False) -> None:
        """Scan the next piece of the file; ``final`` for the last one (``data`` may then be empty)."""
        text: bytes | bytearray = self._rest + data if self._rest else data  # (a file held whole: no copy)
        if self._inside is None:
            if len(text) < len(self._KEY) and not final:
                self._rest = bytes(text)
                return
            self._inside = text.startswith(self._KEY)
        limit = len(text) if final else len(text) - self._AHEAD
        cut = max(self._scan(text, limit), len(text) if final else limit)
        if not final:  # the line the next piece starts on (after the last one: not needed)
            self._line += text.count(b"\n", 0, cut)
        self._rest = bytes(text[cut:])

    def _scan(self, text: bytes | bytearray, limit: int) -> int:
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

    def _decide(self, text: bytes | bytearray, start: int, line: int) -> None:
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


def _unicode_space(text: bytes | bytearray, at: int) -> bool:
    """Whether the UTF-8 character at ``at`` is non-ASCII whitespace to ``str.isspace`` (NBSP, U+3000...)."""
    return text[at] >= 0x80 and text[at : at + 4].decode("utf-8", "ignore")[:1].isspace()


def _node_lines(node: yaml.Node | None) -> list[int]:
    """Start lines (1-based) of the items of the document's ``interactions:`` sequence, if it has one."""
    found = node_at(node, ("interactions",))
    return [item.start_mark.line + 1 for item in found.value] if isinstance(found, yaml.SequenceNode) else []


def node_at(node: yaml.Node | None, at: Where) -> yaml.Node | None:
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
