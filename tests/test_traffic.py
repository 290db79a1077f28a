"""The report on a test's provider traffic, as a unit; the plugin's tests in ``tests/plugin/`` use it."""

from __future__ import annotations

import pytest

from replaykit.cassette import Cassette, Meta
from replaykit.contracts import EXPECTED_VIOLATIONS, expected_violations
from replaykit.server import Entry
from replaykit.traffic import NETWORK_HINT, UPSTREAM_HINT, WIDTH, differences, format_report


def test_no_problems_no_report() -> None:
    assert format_report([], [], []) == ""


def test_a_refused_connection_is_reported_with_the_fix() -> None:
    report = format_report([], [], ["api.anthropic.com:443"])
    assert report.splitlines() == [
        "replaykit: this test's provider traffic has problems",
        f"network connections refused (1); fix: {NETWORK_HINT}",
        "  api.anthropic.com:443",
    ]


def test_a_failed_recording_is_reported_with_the_fix() -> None:
    report = format_report([], [], [], recording=["the upstream could not be reached 1 time"])
    assert report.splitlines()[1:] == [f"the recording failed (1); fix: {UPSTREAM_HINT}",
                                       "  the upstream could not be reached 1 time"]


def _entry(seq: int, verdict: str, diff: list[dict[str, object]]) -> Entry:
    matched = {"cassette": "/root/c.yaml", "index": 2}
    return Entry(seq, "t", "anthropic", "anthropic.messages", "POST", "/v1/messages", {}, {}, verdict=verdict,
                 matched=matched if verdict == "served" else None, diff=diff)


def test_differences_list_each_request_served_with_a_diff_and_cut_its_values() -> None:
    long = "x" * 100
    changes = [{"pointer": "/model", "change": "changed", "received": "a", "recorded": "b"},
               {"pointer": "/system", "change": "added", "received": long}]
    journal = [_entry(1, "served", changes), _entry(2, "served", []), _entry(3, "unmatched", changes)]
    assert differences(journal, lambda label: label.removeprefix("/root/")) == [[
        "request 1: POST /v1/messages served c.yaml:interactions[2]",
        '  /model: sent "a", recorded "b"',
        f'  /system: only in the request sent: "{long[:WIDTH - 2]}…',
    ]]


@pytest.mark.parametrize(
    ("extra", "listed"),
    [({EXPECTED_VIOLATIONS: ["0:request /model", 1]}, {"0:request /model", "1"}),
     ({EXPECTED_VIOLATIONS: "0:request /model"}, set()), ({}, set())],
)
def test_expected_violations_are_the_listed_names(extra: dict[str, object], listed: set[str]) -> None:
    assert expected_violations(Cassette(meta=Meta(extra=extra))) == listed
    assert expected_violations(None) == frozenset()
