"""Assertions for tests of a harness: what reached the fake provider, and the provenance of an outcome.

:func:`assert_no_provider_request`, :func:`assert_requests`, :func:`assert_retries` and
:func:`assert_provenance` read a journal (a :class:`replaykit.server.FakeProvider`'s ``Journal``, or the JSON
list of ``GET /__replaykit/journal``) and a target outcome; a route is named as the journal names it
(``anthropic.messages``...) or by its provider. A failure raises ``AssertionError`` listing what the journal
holds, one request a line. Used in users' tests; examples are in docs/architecture/modules.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from replaykit.jsondoc import JSON
from replaykit.provenance import ErrorInfo, classify

__all__ = [
    "assert_no_provider_request",
    "assert_provenance",
    "assert_requests",
    "assert_retries",
    "describe_journal",
    "journal_entries",
    "outcome_fields",
]


def journal_entries(journal: object) -> list[JSON]:
    """The journal's entries as JSON objects, in arrival order."""
    method = getattr(journal, "entries", None)
    entries = method() if callable(method) else journal
    if not isinstance(entries, Iterable) or isinstance(entries, str | bytes | Mapping):
        raise TypeError(f"not a journal: {type(journal).__name__} (expected a Journal or a list of entries)")
    return [_entry_json(entry) for entry in entries]


def _entry_json(entry: object) -> JSON:
    to_json = getattr(entry, "to_json", None)
    if callable(to_json):
        data = to_json()
        return dict(data) if isinstance(data, Mapping) else {}
    if isinstance(entry, Mapping):
        return dict(entry)
    raise TypeError(f"not a journal entry: {type(entry).__name__}")


def _fault(fault: object) -> str:
    if not isinstance(fault, Mapping):
        return str(fault)
    kind = str(fault.get("kind", "?"))
    return f"{kind}={fault['status']}" if fault.get("status") is not None else kind


def _line(entry: Mapping[str, Any]) -> str:
    faults = ", ".join(_fault(fault) for fault in entry.get("faults") or [])
    text = f"#{entry.get('seq', '?')} {entry.get('method', '?')} {entry.get('path', '?')}"
    text += f" -> {entry.get('status') or '-'} [{entry.get('route', '?')}]"
    outcome = entry.get("outcome")
    text += f" {outcome}" if outcome not in (None, "complete") else ""
    return text + (f" faults: {faults}" if faults else "")


def _describe(entries: list[JSON]) -> str:
    return "\n".join(f"  {_line(entry)}" for entry in entries) if entries else "  (no requests)"


def describe_journal(journal: object) -> str:
    """One line per request the fake provider received (``(no requests)`` when empty)."""
    return _describe(journal_entries(journal))


def _count(entries: list[JSON], route: str | None) -> int:
    """How many ``entries`` are on ``route`` (named by route or by provider; None: all of them)."""
    return sum(1 for entry in entries
               if route is None or entry.get("route") == route or entry.get("provider") == route)


def assert_requests(journal: object, expected: int, route: str | None = None) -> None:
    """Exactly ``expected`` requests reached the fake provider (on ``route``, when given)."""
    entries = journal_entries(journal)
    found = _count(entries, route)
    if found != expected:
        where = f" on {route}" if route else ""
        raise AssertionError(f"expected {expected} provider request(s){where}, the journal holds "
                             f"{found}:\n{_describe(entries)}")


def assert_no_provider_request(journal: object) -> None:
    """Nothing reached the fake provider: the failure was local and terminal."""
    entries = journal_entries(journal)
    if entries:
        raise AssertionError(f"expected no provider request, the journal holds {len(entries)}:\n"
                             f"{_describe(entries)}")


def assert_retries(journal: object, route: str, retries: int) -> None:
    """``route`` was tried once and then retried exactly ``retries`` times (``retries + 1`` requests)."""
    if retries < 0:
        raise ValueError(f"retries={retries!r} must not be negative")
    entries = journal_entries(journal)
    count = _count(entries, route)
    if count != retries + 1:
        told = f"{count - 1} retries" if count else "no request at all"
        raise AssertionError(f"expected exactly {retries} retries on {route} ({retries + 1} requests), "
                             f"found {told}:\n{_describe(entries)}")


def outcome_fields(outcome: object) -> JSON:
    """The error fields of an outcome JSON, an :class:`ErrorInfo` or an exception, plus ``outcome``.

    ``outcome`` is the outcome's own ``status`` (``ok`` / ``error`` / ``aborted``), named as scenario
    expectations name it; ``status`` is the error's HTTP status.
    """
    if isinstance(outcome, BaseException):
        outcome = classify(outcome)
    if isinstance(outcome, ErrorInfo):
        return {**outcome.to_json(), "outcome": outcome.outcome}
    if not isinstance(outcome, Mapping):
        raise TypeError(f"not an outcome: {type(outcome).__name__}")
    error = outcome.get("error")
    return {**(dict(error) if isinstance(error, Mapping) else {}), "outcome": outcome.get("status")}


def assert_provenance(outcome: object, expected: Mapping[str, object] | None = None, /,
                      **fields: object) -> None:
    """The outcome and its error fields are what was expected (``code``, ``phase``, ``provenance``…).

    ``expected`` (or keyword arguments) names only the fields to check, as :func:`outcome_fields` names
    them, e.g. ``assert_provenance(outcome, outcome="aborted", provenance="cancelled")``.
    """
    wanted = {**(expected or {}), **fields}
    if not wanted:
        raise ValueError("assert_provenance needs at least one expected field")
    actual = outcome_fields(outcome)
    wrong = {key: value for key, value in wanted.items() if actual.get(key) != value}
    if wrong:
        lines = [f"  {key}: expected {value!r}, got {actual.get(key)!r}" for key, value in wrong.items()]
        raise AssertionError("the outcome's provenance is not what was expected:\n" + "\n".join(lines)
                             + f"\n  outcome: {actual!r}")
