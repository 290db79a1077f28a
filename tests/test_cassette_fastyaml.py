"""replaykit.cassette.fastyaml: rapidyaml gives exactly what ``yaml.safe_load`` (with vcrpy's harmless Python
tags: replaykit's own Loader) gives, or refuses the document and libyaml reads it, as before.

Compared on every bundled cassette, on a corpus of tricky YAML 1.1 scalars and layouts, on documents PyYAML's
dumper writes from random values (what vcrpy and replaykit write), and on bad and hostile YAML: libyaml's
error is never replaced by a rapidyaml value.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replaykit import cassette
from replaykit.cassette import fastyaml, read
from replaykit.cassette.yamlio import Loader
from replaykit.errors import CassetteError
from replaykit.resources import data_dir

BUNDLED = sorted(data_dir("cassettes").rglob("*.yaml"))


def _same(left: Any, right: Any) -> bool:
    """Equal values of the same types (a float's sign and NaN included), keys in the same order."""
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        return (math.isnan(left) and math.isnan(right)) or (left == right and str(left) == str(right))
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(_same, left, right))
    return bool(left == right)


def _compare(text: str | bytes) -> str:
    """"same" (rapidyaml's value is libyaml's), or "refused"; fails on a different value, or a value where
    libyaml raises."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        want: Any = yaml.load(data, Loader=Loader)
    except yaml.YAMLError as exc:
        want = exc
    try:
        got = fastyaml.load(bytearray(data))
    except fastyaml.Refused:
        return "refused"
    assert not isinstance(want, Exception), f"{data!r}: libyaml refuses it ({want}), rapidyaml gave {got!r}"
    assert _same(got, want), f"{data!r}: rapidyaml {got!r}, libyaml {want!r}"
    if b"!!python/" not in data:  # the tags vcrpy writes, which replaykit's Loader adds to safe_load's
        assert _same(got, yaml.safe_load(data)), f"{data!r}: rapidyaml {got!r}, yaml.safe_load differs"
    return "same"


def test_rapidyaml_is_what_replaykit_parses_with() -> None:
    assert fastyaml.AVAILABLE  # a dependency: without it every load would quietly take the slow path


@pytest.mark.parametrize("path", BUNDLED, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_bundled_cassette_parses_the_same_and_is_not_refused(path: Path) -> None:
    assert _compare(path.read_bytes()) == "same"
    assert cassette.load(path, cache=False) == _libyaml_load(path)


def _libyaml_load(path: Path) -> cassette.Cassette:
    real = fastyaml.screen

    def refuse(*_: Any) -> Any:
        raise fastyaml.Refused("libyaml only")

    fastyaml.screen = refuse
    try:
        return cassette.load(path, cache=False)
    finally:
        fastyaml.screen = real


# plain scalars YAML 1.1 types (PyYAML's resolver), and text that only looks like them
SCALARS = [
    "yes", "no", "on", "off", "y", "n", "Yes", "NO", "True", "false", "TRUE", "On", "OFF", "~", "null",
    "Null", "NULL", "", "0", "12", "-3", "+5", "0x1F", "017", "0o17", "1_000", "1:30", "0b101", "-0",
    "00", "09",
    "1.5", "-0.0", ".5", "1e5", "1.0e+5", "1.0E-5", ".inf", "-.Inf", "+.INF", ".NaN", ".nan", "1_000.5",
    "1:30.5", "0.", "1.2.3", "12:61", "190:20:30", "-1:30", "685.230_15e+03", "2001-12-14",
    "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "2001-12-14T21:59:43Z", "=", "<<",
    "'yes'", '"no"', "'0x1F'", "'it''s'", '"a\\"b"',
    '"\\x41\\u00e9\\U0001F600"',
    '"\\0\\a\\b\\t\\n\\v\\f\\r\\e\\ \\/\\N\\_\\L\\P"', "é", "日本語", "😀 emoji", "http://x:80/y", "a#b",
    "a #b", "'#'", "-x", "x-", "!!str 3", "!!int \"3\"", "!!float '1'", "!!bool yes", "!!binary aGVsbG8=",
    "!!python/str x", "!!python/unicode x", "!!python/tuple [1, 2]", "!!set {a}", "! x", "[a: 1]",
    "{a: 1, b: [x, y]}", "[1, [2, [3]]]", "{}", "[]", "[a, b,]", "{a, b}", "{a: }", "[,]", "'  lead  '",
    "a  b", "-", ":x", "x:", "@x", "`x", "%x", "&a x", "*a", "[x:]", "{a:}", "[a #b]", "{x: a #b}",
]
# layouts: block scalars, multi-line quoted and plain scalars, flow collections, keys, document markers
LAYOUTS = [
    "k: |\n  a\n  b\n", "k: |-\n  a\n  b\n\n", "k: |+\n  a\n  b\n\n", "k: >\n  a\n  b\n\n  c\n",
    "k: >-\n  a\n   b\n  c\n", "k: >+\n  a\n\n", "k: |2\n   a\n  b\n", "k: |\n\n  a\n", "k: |\n  a\n\n\n",
    "k: >\n  a\n\n   indented\n  b\n", "k: 'a\n  b\n\n  c\n  '\n", "k: 'a \n  b'\n", 'k: "a\\\n  b"\n',
    'k: "a\\\n  \\ b"\n', 'k: "a\n\n  b\n  "\n', 'k: "a\\\n\n  b"\n', 'k: "a\\\n \n  b"\n',
    "k: plain\n  folded\n\n  lines\n", "k: a # comment\n", "a: 1\na: 2\n", "1: int key\n'1': str key\n",
    "yes: b\n", "~: n\n", ": v\n", "? a\n: b\n", '"q k": v\n', "k: [a,\n  b]\n", "k: {a: 1,\n  b: 2}\n",
    "k:\n- a\n- - b\n  - c\n-\n- ''\n", "k: v\n...\n", "k: v\n---\nj: w\n", "--- \nk: v\n",
    "%YAML 1.1\n---\nk: v\n", "# c\n%YAML 1.1\nk: v\n", "k: v\n...\n%YAML 1.1\n", "<<: {a: 1}\n",
    "k: {<<: {a: 1}, b: 2}\n", "k: &a 1\nj: *a\n", "k: !!binary |\n  aGVs\n  bG8=\n", "k: !!binary 'no!'\n",
    "k: '''q'''\n", 'k: ""\n', "k: ''\n", "'': empty key\n", "k: x\n j: y\n", " k: v\n", "k: - x\n",
    "k: [? a : b]\n", "k: {x: a #b}\nj: 1\n", "k: {a: b} #c\n", "k:\tv\n", "k: v\r\nj: w\r\n", "k: \x85x\n",
    "k: x\u2028y\n", "k: '\u2029'\n", "\ufeffk: v\n", "k: v\x07\n", "k: v\x7f\n", 'k: "\\ud800"\n',
    'k: "\\x80"\n', "k: v\n  bad indent: x\n", "k: " + "[" * 80 + "]" * 80 + "\n",
    "k: " + "[" * 2000 + "]" * 2000 + "\n", "- a\nb: c\n", "k: [1, 2\n", "k: 'open\n", 'k: "bad \\q"\n',
    "x\n", "", "# only a comment\n", "k: \u00a0v\n", "k: \u3000v\n",
]


@pytest.mark.parametrize("scalar", SCALARS)
def test_a_tricky_scalar_parses_the_same_in_every_place(scalar: str) -> None:
    for text in (f"k: {scalar}\n", f"k:\n- {scalar}\n", f"k: [{scalar}]\n", f"k: {{x: {scalar}}}\n",
                 f"{scalar}: v\n", f"k:\n  {scalar}: v\n"):
        _compare(text)


@pytest.mark.parametrize("text", LAYOUTS)
def test_a_tricky_layout_parses_the_same_or_is_refused(text: str) -> None:
    _compare(text)


def test_a_pattern_registered_for_any_first_character_types_every_plain_scalar(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain scalars whose first character no pattern starts with are strings without the resolver, unless a
    pattern applies to any first character (PyYAML keeps those under None)."""
    resolvers = dict(yaml.resolver.Resolver.yaml_implicit_resolvers)
    resolvers[None] = [("tag:yaml.org,2002:null", re.compile("^zzz$"))]
    monkeypatch.setattr(yaml.resolver.Resolver, "yaml_implicit_resolvers", resolvers)
    text = "k: zzz\nj: [zzz, zz]\n"
    assert _compare(text) == "same"
    assert fastyaml.load(text.encode()) == {"k": None, "j": [None, "zz"]}


def test_the_corpus_is_mostly_read_by_rapidyaml() -> None:
    # a comparison that refuses everything proves nothing: most of the corpus must be parsed by rapidyaml
    verdicts = [_compare(f"k: {scalar}\n") for scalar in SCALARS] + [_compare(text) for text in LAYOUTS]
    assert verdicts.count("same") > len(verdicts) / 2, verdicts.count("same")


@pytest.mark.parametrize("text", [
    'k: "a\\\n\n  b"\n',    # an escaped line break before a blank line: 'a\nb' to PyYAML, 'a b' to rapidyaml
    "k: {x: a #b}\n",       # unclosed: rapidyaml takes `#b}` for a comment and accepts it
    "k: [x:]\n",            # libyaml: "found unexpected ':'"; rapidyaml: [{x: null}]
    "k: @x\n",              # a reserved indicator: libyaml's error
    "# c\n%YAML 1.1\nk: v\n",
    "k: x\u2028y\n",         # a line break in YAML 1.1 only
    "k: v\r\n",
    "k: &a 1\nj: *a\n",     # aliases are libyaml's (and the alias-bomb check's)
    "k: " + "[" * 100 + "]" * 100 + "\n",
    "# recorded\nk: {x: a #b}\n",   # the file's first byte is a comment's `#`: the later ones are looked at
    " #c\nk: {x: a #b}\n",          # ... and so when it is the second byte
    "k: {x: a #b}\nj: 1 # c\n",      # not only the last `#` of the file
    "k: v # a\nj: {x: a #b}\nl: 1 # c\n",  # every `#`, not only the first and the last
    "{k: v #c}\n",                  # the `{` is the line's (and the file's) first byte
    "%YAML 1.1\nk: v\n",             # a directive on the first line (no `---`: libyaml's error)
    "k: {a: 1,\n  b: x #c\n  }\n",    # a comment on a later line of a flow mapping: 'x #c' to rapidyaml
    "k: {a: {b: 1},\n  c: x #c\n  }\n",
    "k: {? a #c\n : b}\n",           # ... after a key
    "k: {a: !!str b #c}\n",          # ... after a tagged scalar
    "!!set\na:\nb:\n",              # a tag on the top mapping: a set to libyaml
    "k: !!str [a]\n",               # a scalar's tag on a collection: libyaml's error
    "k: !!binary {a: 1}\n",
    b"k: v\n# caf\xe9\n",           # not UTF-8, in a comment rapidyaml skips
    b"k: v\n# caf\xc3",              # a character cut short by the end of the file, in a comment
    'k: "a\\nb\\L\\L"\n',         # escaped LS: 'a\nb' + two LS to PyYAML, 'a b' + two LS to rapidyaml
    'k: "a\\nb\\P\\P"\n',         # ... and PS
], ids=["escaped-break", "comment-in-flow", "flow-colon", "reserved", "directive", "ls", "crlf", "alias",
        "deep", "comment-first", "comment-second", "comment-not-last", "comment-between", "flow-first",
        "directive-first", "comment-later-line", "comment-after-nested", "comment-after-key",
        "comment-after-tag",
        "tagged-top", "str-on-seq", "binary-on-map", "latin1-comment", "cut-utf8-comment", "escaped-ls",
        "escaped-ps"])
def test_what_rapidyaml_reads_apart_is_refused(text: str | bytes) -> None:
    assert _compare(text) == "refused"


@pytest.mark.parametrize("text", [
    "k: !!str 3\nj: !!python/unicode x\nl: !!python/str y\nb: !!binary aGVsbG8=\n",
    "k: [!!str 1, !!binary aGVsbG8=]\n",
    "k: !!str\nj: !!binary\n",                 # tagged, with no text: '' and b''
    "k:\nj: 1\n'': 2\n",                        # a block mapping's value left out: null
    "k: [[a, 1], [b, [c]]]\nj:\n- - d\n  - e\n- {x: [1]}\n",  # sequences in sequences, a mapping in one
    "k: {a: 1}\nj: 2 # a comment after a flow mapping closed on an earlier line\n",
    "a: 1\nk: {a: 1}\nj: 2 # c\n",
    "k: v # a {comment} with braces\nj: {a: 1}\n",
    "k: !!str 'a #b'\nj: [!!str \"c #d\", 'e #f']\n",  # ` #` quoted: text, not a comment
    "k:\n- a\n-\n- ''\n",                     # an item left out: null
], ids=["tags", "tags-in-flow", "empty-tags", "nulls", "nested", "comment-later", "comment-later-2",
        "brace-in-comment", "quoted-hash", "empty-item"])
def test_what_rapidyaml_reads_is_not_refused(text: str) -> None:
    assert _compare(text) == "same"


def _nested(kinds: str) -> str:
    """``k:`` holding collections nested ``len(kinds)`` deep, outermost first (``s`` a sequence, ``m`` a
    mapping)."""
    opens = "".join("[" if kind == "s" else "{a: " for kind in kinds)
    return f"k: {opens}x{''.join(']' if kind == 's' else '}' for kind in reversed(kinds))}\n"


@pytest.mark.parametrize("pattern", ["s", "m", "sm", "ms"])
def test_nesting_is_read_to_max_depth_and_refused_past_it(pattern: str) -> None:
    # every way down (a mapping's sequence, a sequence's items, a mapping's mapping) counts one level
    kinds = pattern * fastyaml.MAX_DEPTH
    assert _compare(_nested(kinds[: fastyaml.MAX_DEPTH])) == "same"
    assert _compare(_nested(kinds[: fastyaml.MAX_DEPTH] + kinds[0])) == "refused"


def test_a_plain_scalar_no_pattern_starts_with_is_a_string_without_the_resolver(
        monkeypatch: pytest.MonkeyPatch) -> None:
    typed: list[str] = []
    real = fastyaml._typed

    def counted(text: str) -> Any:
        typed.append(text)
        return real(text)

    monkeypatch.setattr(fastyaml, "_typed", counted)
    doc = fastyaml.load(b"k: hello\nj: [world, yes, 12]\nhi: {who: ~}\n")
    assert doc == {"k": "hello", "j": ["world", True, 12], "hi": {"who": None}}
    assert typed == ["yes", "12", "~"]


def test_the_walk_calls_rapidyaml_with_the_swig_object_behind_the_tree(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the bindings take the SWIG object as it is; a tree would be looked up again on every call (6x the cost)
    handles: list[Any] = []
    real = fastyaml._TYPE

    def recorded(handle: Any, node: int) -> Any:
        handles.append(handle)
        return real(handle, node)

    monkeypatch.setattr(fastyaml, "_TYPE", recorded)
    assert fastyaml.load(b"k: [a]\nj: {b: 1}\n") == {"k": ["a"], "j": {"b": 1}}
    assert handles and not any(isinstance(handle, fastyaml.ryml.Tree) for handle in handles)


def test_a_bytearray_is_parsed_in_place_with_no_copy() -> None:
    # rapidyaml unescapes in the buffer itself (a big file's bytes are parsed where they were read)
    data = bytearray(b"k: 'it''s'\nj: \"a\\tb\"\n")
    assert fastyaml.parse(data) == {"k": "it's", "j": "a\tb"}
    assert data != b"k: 'it''s'\nj: \"a\\tb\"\n"


@pytest.mark.parametrize("data", [b"\xe9k: v\n", b"k: caf\xe9\n", b"k: v\n# caf\xc3"],
                         ids=["first-byte", "inside", "cut-short"])
def test_screen_refuses_bytes_that_are_not_utf8(data: bytes) -> None:
    with pytest.raises(fastyaml.Refused):
        fastyaml.screen(data)


_SCALAR_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.binary(max_size=24),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40),
    st.text(alphabet=st.sampled_from(list("ab :#-'\"\\\n yeson0.{}[],!&*|>@`%?é\u2028\t")), max_size=30),
)
_KEYS = st.text(max_size=8) | st.integers()
_VALUES = st.recursive(_SCALAR_VALUES, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=16)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=st.dictionaries(st.text(max_size=8), _VALUES, min_size=1, max_size=4),
       flow=st.sampled_from([None, False, True]), unicode=st.booleans(), width=st.sampled_from([20, 80, 120]),
       style=st.sampled_from([None, '"', "'", "|", ">"]))
def test_what_pyyaml_writes_parses_the_same(doc: dict[str, Any], flow: bool | None, unicode: bool,
                                             width: int, style: str | None) -> None:
    # PyYAML's dumper is what vcrpy and replaykit write cassettes with
    text = yaml.dump(doc, Dumper=yaml.CSafeDumper, default_flow_style=flow, allow_unicode=unicode,
                     width=width, default_style=style)
    _compare(text)


_FLOW_VALUES = ["a", "b c", "1", "yes", "x#y", "'q #r'", '"d #e"', "{x: y}", "[1, 2]"]


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.sampled_from(_FLOW_VALUES), min_size=1, max_size=4),
       comments=st.lists(st.sampled_from(["", " #c", " #c}", "#c"]), min_size=4, max_size=4),
       end=st.sampled_from(["\n  }", "}", " }"]))
def test_a_comment_anywhere_in_a_flow_mapping_parses_the_same_or_is_refused(
        values: list[str], comments: list[str], end: str) -> None:
    # a comment can end a line of a flow mapping written on several lines: rapidyaml reads it into the scalar
    items = [f"k{index}: {value}{comments[index]}" for index, value in enumerate(values)]
    _compare("m: {" + ",\n  ".join(items) + end + "\nn: 1\n")


def _bombs() -> dict[str, str]:
    laughs = ["x-anchors:", "  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    laughs += [f"  a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 10)]
    return {
        "billion laughs": "version: 1\ninteractions: []\n" + "\n".join(laughs) + "\n",
        "self alias": "version: 1\ninteractions: []\nx-loop: &loop [1, *loop]\n",
        "deep flow": "version: 1\ninteractions: []\nx: " + "[" * 50_000 + "]" * 50_000 + "\n",
        "deep block": "version: 1\ninteractions: []\nx:\n" + "".join(" " * n + "-\n" for n in range(1, 3000)),
        "python object": "version: 1\ninteractions: []\nx: !!python/object/apply:os.system ['true']\n",
        "merge": "version: 1\ninteractions: []\nb: &b {k: 1}\nx: {<<: *b}\n",
    }


@pytest.mark.parametrize("name", sorted(_bombs()))
def test_a_hostile_document_is_refused_by_rapidyaml(name: str) -> None:
    with pytest.raises(fastyaml.Refused):
        fastyaml.load(bytearray(_bombs()[name].encode()))


def test_a_bad_cassette_gets_libyamls_message_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\ninteractions:\n- request: {method: GET, uri: 'http://x'\n  response: {}\n")
    with pytest.raises(CassetteError) as caught:
        cassette.load(path, cache=False)
    message = str(caught.value)
    assert message.startswith(f"{path}:4: invalid YAML: ") and "fix the YAML syntax" in message


def test_a_cassette_opening_with_a_comment_gets_libyamls_error_for_a_comment_in_flow(tmp_path: Path) -> None:
    # rapidyaml reads `{a: b #c}` (unclosed) as {a: "b #c"}: a file whose first byte is a comment's `#` must
    # be looked at too, not loaded with that value
    path = tmp_path / "c.yaml"
    path.write_text("# recorded\nversion: 1\ninteractions: []\nx: {a: b #c}\n")
    with pytest.raises(CassetteError, match=r"c\.yaml:5: invalid YAML: did not find expected ',' or '}'"):
        cassette.load(path, cache=False)


def test_a_comment_on_a_later_line_of_a_flow_mapping_ends_the_plain_scalar(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("version: 1\ninteractions: []\nx: {a: 1,\n  b: kept #a comment\n  }\n")
    assert cassette.load(path, cache=False).extra == {"x": {"a": 1, "b": "kept"}}


def test_rapidyamls_own_report_of_an_error_is_not_printed(tmp_path: Path) -> None:
    # rapidyaml prints each error it raises on file descriptor 2; replaykit's error (with the line) is the one
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\ninteractions: [1, 2\n")
    script = ("import sys\nfrom replaykit.cassette import fastyaml\nfrom replaykit.cli import main\n"
              "assert fastyaml.AVAILABLE\nsys.exit(main(['verify', sys.argv[1]]))")
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "ERROR" not in done.stderr and "detected here" not in done.stderr, done.stderr
    assert f"{path}:" in done.stdout + done.stderr


def test_what_other_threads_write_to_stderr_meanwhile_is_kept(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(fastyaml.ryml.ExceptionBasic), fastyaml._quiet():
        os.write(2, b"a line from elsewhere\n")
        fastyaml.ryml.parse_in_arena(b"k: [1, 2\n")  # rapidyaml prints its report, then raises
    with pytest.raises(fastyaml.Refused):
        fastyaml.load(bytearray(b"k: [1, 2\n"))
    err = capfd.readouterr().err
    assert err == "a line from elsewhere\n"


def test_nothing_is_printed_after_a_parse_rapidyaml_refused(capfd: pytest.CaptureFixture[str]) -> None:
    # what was caught is emptied each time: none of rapidyaml's report is left for the next parse to write
    with pytest.raises(fastyaml.Refused):
        fastyaml.load(bytearray(b"k: [1, 2\n"))
    assert fastyaml.load(bytearray(b"k: 1\n")) == {"k": 1}
    assert capfd.readouterr().err == ""


def test_only_rapidyamls_own_report_is_dropped(capfd: pytest.CaptureFixture[str]) -> None:
    # another thread's line shaped like rapidyaml's report, written after it, is kept
    elsewhere = b"line=9 col=9 (9B): ERROR: a line from elsewhere\n"
    with pytest.raises(fastyaml.ryml.ExceptionBasic), fastyaml._quiet():
        try:
            fastyaml.ryml.parse_in_arena(b"k: [1, 2\n")
        finally:
            os.write(2, elsewhere)
    assert capfd.readouterr().err == elsewhere.decode()


def test_a_big_file_rapidyaml_refuses_is_streamed_by_libyaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setattr(read, "WHOLE", 0)
    path = tmp_path / "big.yaml"
    path.write_text("version: 1\nshared: &s {content-type: [text/plain]}\ninteractions:\n- request: "
                    "{method: GET, uri: 'http://x'}\n  response: {status: {code: 200, message: OK}, "
                    "headers: *s, body: {string: hi}}\n")
    loaded = cassette.load(path, cache=False)  # the alias: refused by rapidyaml, after its bytes were read
    assert loaded.interactions[0].response.headers == {"content-type": ["text/plain"]}
    assert loaded.interactions[0].line == 4


def test_a_process_without_stderr_still_parses() -> None:
    script = ("import os\nos.close(2)\nfrom replaykit.cassette import fastyaml\n"
              "print(fastyaml.load(bytearray(b'a: 1\\n')))\n"
              "try:\n    fastyaml.load(bytearray(b'a: [1\\n'))\n"
              "except fastyaml.Refused:\n    print('refused')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.split() == ["{'a':", "1}", "refused"]
