"""Fault kinds and their keys, from the fault definitions: in ``serve --help``, in a bad fault's message."""

from __future__ import annotations

import dataclasses

import pytest

from replaykit.cli import EXIT_USAGE, main
from replaykit.errors import UsageError
from replaykit.resources import data_dir
from replaykit.server import Fault
from replaykit.server.faults import KINDS

SELECTORS = {"kind", "route", "nth", "times"}


def _keys(kind: str) -> set[str]:
    """The keys a fault of ``kind`` accepts, found by trying each field of :class:`Fault` (no second list)."""
    return {field.name for field in dataclasses.fields(Fault)
            if field.name not in SELECTORS and _allowed(kind, field.name)}


def _allowed(kind: str, key: str) -> bool:
    try:
        Fault.from_dict(_minimal(kind) | {key: _value(key)})
    except UsageError as exc:
        return f"{key}= does not apply" not in str(exc)
    return True


def _minimal(kind: str) -> dict[str, object]:
    for extra in ({}, {"status": 500}, {"ms": 1}, {"after": 1}, {"event": 1}):
        try:
            Fault.from_dict({"kind": kind, **extra})
        except UsageError:
            continue
        return {"kind": kind, **extra}
    raise AssertionError(kind)


def _value(key: str) -> object:
    return {"as_failed": True, "should_retry": True, "message": "m", "error_type": "e", "code": "c",
            "status": 500}.get(key, 1)


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    return capsys.readouterr().out


def test_serve_help_lists_every_fault_kind_with_its_keys(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    listed = text.split("fault kinds", 1)[1]
    rows = {line.split()[0]: line.split(None, 1)[1] if len(line.split()) > 1 else ""
            for line in listed.splitlines()[1:] if line.startswith("  ")}
    assert list(rows) == list(KINDS)
    for kind in KINDS:
        shown = {key.strip(" *,") for key in rows[kind].replace("(none)", "").split()}
        assert shown == {key for key in _keys(kind)}, kind
    assert "status*" in rows["status"] and "ms*" in rows["delay_headers"] and "ms" in rows["stall"]
    assert "route=" in listed and "nth=" in listed and "times=" in listed


@pytest.mark.parametrize(("spec", "words"), [
    ("foo=1", "unknown key 'foo'"),
    ("kind=explode", "kind='explode' must be one of"),
    ("route=anthropic", "a fault needs a kind"),
])
def test_a_fault_without_a_known_kind_lists_every_kind_and_its_keys(spec: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        Fault.parse(spec)
    message = str(info.value)
    assert words in message
    for kind in KINDS:
        assert f"{kind} (" in message, kind
    assert "status (status*, retry_after, retry_after_ms, message, error_type, code, should_retry)" in message
    assert "stall (after*, ms)" in message and "drop_terminal ()" in message


@pytest.mark.parametrize(("spec", "words"), [
    ("kind=stall,after=1,colour=red", "unknown key 'colour'; a stall fault takes after*, ms"),
    ("kind=stall,after=1,status=500", "status= does not apply to a stall fault; it takes after*, ms; status= "
                                      "belongs to status"),
    ("kind=stall,after=1,message=x", "message= does not apply to a stall fault; it takes after*, ms; "
                                     "message= belongs to status, error_event"),
])
def test_a_key_a_kind_does_not_take_names_the_keys_it_takes(spec: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        Fault.parse(spec)
    assert words in str(info.value)
    assert "(and route, nth, times; * required)" in str(info.value)


def test_serve_prints_the_kinds_on_a_bad_fault(capsys: pytest.CaptureFixture[str]) -> None:
    cassette = str(data_dir("cassettes") / "anthropic/web_search.yaml")
    assert main(["serve", cassette, "--fault", "kind=stal"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kind='stal' must be one of" in err and "stall (after*, ms)" in err
