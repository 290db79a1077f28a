"""JSON pointers: built with their tokens escaped, resolved back to the value."""

from __future__ import annotations

from replaykit.pointer import json_pointer, resolve


def test_json_pointer_escapes_each_token() -> None:
    assert json_pointer(["messages", 0, "a/b", "m~n"]) == "/messages/0/a~1b/m~0n"
    assert json_pointer([]) == ""


def test_resolve_follows_escaped_tokens_and_answers_none_where_nothing_is() -> None:
    doc = {"messages": [{"a/b": {"m~n": 7}}], "x": None}
    assert resolve(doc, json_pointer(["messages", 0, "a/b", "m~n"])) == 7
    assert resolve(doc, "") == doc
    assert resolve(doc, "/messages/3") is None and resolve(doc, "/messages/x") is None
    assert resolve(doc, "/x/y") is None and resolve([1, 2], "/1") == 2
