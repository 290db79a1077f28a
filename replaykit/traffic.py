"""The report on one test's provider traffic: what the pytest plugin fails a test with.

:func:`format_report` lists unmatched requests (near misses, body diffs), interactions never served, contract
violations (expected ones excepted), connections the network guard refused and a failed recording; no
problems, an empty string. :func:`differences` lists requests served although their body differs from the
recording, values masked and cut: the plugin's terminal summary. Cheap to import, as the plugin must be;
the details are in docs/architecture/modules.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from replaykit.jsondoc import JSON

if TYPE_CHECKING:
    from replaykit.server import Entry

__all__ = ["NETWORK_HINT", "RECORD_HINT", "differences", "format_report"]

NETWORK_HINT = (
    "point the client at replaykit.base_url(...) or replaykit.env(), or allow the network with "
    "--replaykit-allow-network (ini replaykit_allow_network = true, env REPLAYKIT_ALLOW_NETWORK=1)"
)
RECORD_HINT = (
    "--replaykit-record-mode=once (env REPLAYKIT_RECORD_MODE=once; from the provider's real API unless "
    "--replaykit-upstream PROVIDER=URL names another)"
)
UPSTREAM_HINT = (
    "give each provider's API as --replaykit-upstream PROVIDER=URL (ini replaykit_upstream, env "
    "REPLAYKIT_UPSTREAM) and its key; a cassette is never written past a key that survived redaction"
)
WIDTH = 40  # characters of each value a difference shows, as brief() shows it


def format_report(
    journal: list[Entry],
    unused: list[JSON],
    refused: list[str],
    display: Callable[[str], str] = str,
    expected: Callable[[str], frozenset[str]] = lambda label: frozenset(),
    recording: list[str] | None = None,
) -> str:
    """The report of one test's traffic: unmatched requests, unused interactions, violations, refusals, and
    why its recording failed (``recording``: the lines that say so)."""
    sections = [
        _section("requests no recorded interaction matched", _unmatched(journal, display),
                 "record the missing interaction, or fix the request (the near misses show the closest)"),
        _section("recorded interactions never served", [[_unused_line(u, display)] for u in unused],
                 "make the code send them, drop them from the cassette, or mark the test "
                 "@pytest.mark.replaykit(allow_unused=True)"),
        _section("contract violations", _violations(journal, display, expected),
                 "fix the request (a response: the cassette); list a deliberate violation under the "
                 "cassette's replaykit: x-expected-violations"),
        _section("network connections refused", [[line] for line in refused], NETWORK_HINT),
        _section("the recording failed", [[line] for line in recording or []], UPSTREAM_HINT),
    ]
    found = [text for text in sections if text]
    return "\n".join(["replaykit: this test's provider traffic has problems", *found]) if found else ""


def _section(title: str, items: list[list[str]], fix: str) -> str:
    """A titled, counted list; each item is a first line and the lines explaining it."""
    if not items:
        return ""
    lines = [f"  {line}" for item in items for line in item]
    return "\n".join([f"{title} ({len(items)}); fix: {fix}", *lines])


def _request(entry: Entry) -> str:
    return f"request {entry.seq}: {entry.method} {entry.path}"


def _unmatched(journal: list[Entry], display: Callable[[str], str]) -> list[list[str]]:
    return [_unmatched_item(entry, display) for entry in journal if entry.verdict == "unmatched"]


def _unmatched_item(entry: Entry, display: Callable[[str], str]) -> list[str]:
    lines = [f"{_request(entry)} got {entry.status or 404}: {entry.error}"]
    for miss in entry.near_misses:
        refused = ", ".join(miss["failed"]) or "nothing"
        place = f"{display(miss['cassette'])}:interactions[{miss['index']}]"
        lines.append(f"  near miss {place} (line {miss['line']}, refused by: {refused})")
        lines.extend(f"    {_change(change)}" for change in miss["diff"])
    return lines


def _change(change: JSON, width: int | None = None) -> str:
    from replaykit.server.diff import change_text  # the server is running when a request was served

    return change_text(change, width)


def differences(journal: list[Entry], display: Callable[[str], str] = str) -> list[list[str]]:
    """Each request served although its body differs from the recording: ``request N: METHOD /path served
    <cassette>:interactions[i]``, then one line per difference (values masked, cut to :data:`WIDTH`)."""
    return [[f"{_request(entry)} served {display(entry.matched['cassette'])}:interactions"
             f"[{entry.matched['index']}]", *(f"  {_change(change, WIDTH)}" for change in entry.diff)]
            for entry in journal if entry.verdict == "served" and entry.diff and entry.matched]


def _unused_line(row: JSON, display: Callable[[str], str]) -> str:
    where = f"{display(row['cassette'])}:interactions[{row['index']}]"
    return f"{where} (line {row['line']}, route {row['route']})"


def _violations(
    journal: list[Entry], display: Callable[[str], str], expected: Callable[[str], frozenset[str]]
) -> list[list[str]]:
    items: list[list[str]] = []
    for entry in journal:
        rows = [("request", row) for row in entry.request_violations]
        if entry.verdict == "served" and not any(f.get("applied") for f in entry.faults):
            rows += [("response", row) for row in entry.response_violations]
        matched = entry.matched or {}
        listed = expected(matched["cassette"]) if rows and matched else frozenset()
        source = f"{display(matched['cassette'])}:interactions[{matched['index']}]" if matched else ""
        items += [[f"{_request(entry)}: {_violation(part, row)}"
                   + (f" (recorded in {source})" if part == "response" else "")]
                  for part, row in rows if not (listed and _names(part, row, matched["index"]) & listed)]
    return items


def _names(part: str, row: JSON, index: int) -> set[str]:
    """The ways an ``x-expected-violations`` entry may name this journal violation row."""
    from replaykit.contracts import Violation, expected_keys  # jsonschema is imported only on a violation

    violation = Violation(str(row.get("pointer") or ""), str(row.get("keyword") or ""),
                          str(row.get("message") or ""), event=row.get("event"), part=part)
    return expected_keys(index, violation)


def _violation(part: str, row: JSON) -> str:
    event = f" events[{row['event']}]" if row.get("event") is not None else ""
    return f"{part}{event} {row.get('pointer') or '/'}: {row.get('message')}"
