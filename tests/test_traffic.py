"""The report on a test's provider traffic, as a unit; the plugin's tests in ``tests/plugin/`` use it."""

from __future__ import annotations

import pytest

from replaykit.cassette import Cassette, Meta
from replaykit.contracts import EXPECTED_VIOLATIONS, expected_violations
from replaykit.traffic import NETWORK_HINT, format_report


def test_no_problems_no_report() -> None:
    assert format_report([], [], []) == ""


def test_a_refused_connection_is_reported_with_the_fix() -> None:
    report = format_report([], [], ["api.anthropic.com:443"])
    assert report.splitlines() == [
        "replaykit: this test's provider traffic has problems",
        f"network connections refused (1); fix: {NETWORK_HINT}",
        "  api.anthropic.com:443",
    ]


@pytest.mark.parametrize(
    ("extra", "listed"),
    [({EXPECTED_VIOLATIONS: ["0:request /model", 1]}, {"0:request /model", "1"}),
     ({EXPECTED_VIOLATIONS: "0:request /model"}, set()), ({}, set())],
)
def test_expected_violations_are_the_listed_names(extra: dict[str, object], listed: set[str]) -> None:
    assert expected_violations(Cassette(meta=Meta(extra=extra))) == listed
    assert expected_violations(None) == frozenset()
