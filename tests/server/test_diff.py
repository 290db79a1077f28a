"""The structural JSON diff behind strict matching and near misses."""

from __future__ import annotations

import pytest

from replaykit.server.diff import MAX_VALUE_CHARS, brief, change_text, compile_patterns, diff


def test_equal_documents_have_no_diff() -> None:
    doc = {"a": [1, {"b": None}], "c": "x"}
    assert diff(doc, {"a": [1, {"b": None}], "c": "x"}) == []


def test_changed_added_removed_with_pointers() -> None:
    got = diff({"a": 1, "list": [1, 2, 3], "new": True}, {"a": 2, "list": [1, 5], "old": "x"})
    assert got == [
        {"pointer": "/a", "change": "changed", "received": 1, "recorded": 2},
        {"pointer": "/list/1", "change": "changed", "received": 2, "recorded": 5},
        {"pointer": "/list/2", "change": "added", "received": 3},
        {"pointer": "/new", "change": "added", "received": True},
        {"pointer": "/old", "change": "removed", "recorded": "x"},
    ]


def test_numbers_compare_by_value_but_booleans_are_not_numbers() -> None:
    assert diff({"t": 1.0}, {"t": 1}) == []
    assert diff({"t": True}, {"t": 1}) == [
        {"pointer": "/t", "change": "changed", "received": True, "recorded": 1}
    ]
    assert diff([0], [False]) != []


def test_type_changes_are_changes() -> None:
    assert diff({"c": "text"}, {"c": [{"type": "text"}]})[0]["pointer"] == "/c"
    assert diff({"c": {}}, {"c": []})[0]["change"] == "changed"


def test_pointer_tokens_are_escaped() -> None:
    assert diff({"a/b": {"~": 1}}, {"a/b": {"~": 2}})[0]["pointer"] == "/a~1b/~0"


def test_ignored_pointers_and_wildcards() -> None:
    ignore = compile_patterns(["/metadata/user_id", "/messages/*/cache_control", "/a~1b"])
    received = {"metadata": {"user_id": "1"}, "messages": [{"cache_control": 1}, {}], "a/b": 1}
    recorded = {"metadata": {"user_id": "2"}, "messages": [{}, {"cache_control": 2}], "a/b": 2}
    assert diff(received, recorded, ignore) == []
    assert diff({"messages": [{"x": 1}]}, {"messages": [{"x": 2}]}, ignore) != []


def test_bad_volatile_pointer() -> None:
    with pytest.raises(ValueError, match="must be a JSON pointer"):
        compile_patterns(["metadata"])


def test_limit_and_long_values() -> None:
    assert len(diff(list(range(100)), list(range(1, 101)), limit=7)) == 7
    long = diff({"x": "y" * 1000}, {"x": ""})[0]["received"]
    assert isinstance(long, str) and long.endswith("…(1002 chars)") and len(long) < MAX_VALUE_CHARS + 20


KEY = "sk" + "-ant-api03-" + "Zq7" * 31 + "AA"  # assembled: never written whole


def test_a_key_in_a_value_is_masked_and_a_value_holding_one_becomes_its_masked_json() -> None:
    assert diff({"model": KEY}, {"model": "claude"})[0]["received"] == "sk-a…AA (108 chars)"
    added = diff({"metadata": {"user_id": KEY}, "n": {"ok": 1}}, {})
    assert [d["received"] for d in added] == ['{"user_id": "sk-a…AA (108 chars)"}', {"ok": 1}]


def test_a_value_is_cut_by_its_json_length_counted_in_characters() -> None:
    exact = "x" * (MAX_VALUE_CHARS - 2)  # with its quotes: exactly the limit
    wide = "é" * (MAX_VALUE_CHARS - 2)  # as many characters; ASCII-escaped it would be 6 times longer
    assert [d["received"] for d in diff({"a": exact, "b": wide}, {})] == [exact, wide]
    assert diff({"a": exact + "x"}, {})[0]["received"].endswith(f"…({MAX_VALUE_CHARS + 1} chars)")


def test_a_volatile_pointer_unescapes_tilde_and_slash() -> None:
    assert compile_patterns(["/a~0b/c~1d"]) == (("a~b", "c/d"),)


def test_a_change_in_words() -> None:
    changes = diff({"a": 1, "new": "x" * 100, "c": [1]}, {"a": 2, "c": [1, 2]})
    assert [change_text(c) for c in changes] == [
        "/a: sent 1, recorded 2", f'/new: only in the request sent: "{"x" * 100}"',
        "/c/1: only in the recording: 2"]
    assert change_text(changes[1], width=10) == '/new: only in the request sent: "xxxxxxxx…'
    assert change_text({"pointer": "", "change": "changed", "received": "a", "recorded": "b"}) == (
        '/: sent "a", recorded "b"')


def test_brief_is_one_bounded_line() -> None:
    changes = diff({f"k{i}": "v" * 500 for i in range(9)}, {})
    line = brief(changes, limit=2, width=20)
    assert line.count("only in the request sent") == 2 and line.endswith("; and 7 more")
    assert len(line) < 150 and "\n" not in line
    assert brief([]) == ""
