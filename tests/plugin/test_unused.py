"""Interactions never served fail the test unless ``allow_unused=True``; the marker alone is enough."""

from __future__ import annotations

import pytest

INNER = '''
import pytest
from conftest import post, recorded_body

FOLLOW_UP = "anthropic/web_search_follow_up.yaml"


def first_turn(replaykit):
    status, _ = post(replaykit.base_url("anthropic") + "/v1/messages", recorded_body(replaykit.cassettes[0]))
    assert status == 200


@pytest.mark.replaykit(cassettes=[FOLLOW_UP])
def test_the_second_turn_is_never_asked_for(replaykit):
    first_turn(replaykit)


@pytest.mark.replaykit(cassettes=[FOLLOW_UP], allow_unused=True)
def test_allowed(replaykit):
    first_turn(replaykit)
    assert [(u["index"], u["route"]) for u in replaykit.unused()] == [(1, "anthropic.messages")]


@pytest.mark.replaykit(FOLLOW_UP)
def test_marker_without_the_fixture():
    pass
'''


def test_unused_interactions_fail_unless_allowed(rk: pytest.Pytester) -> None:
    rk.makepyfile(test_inner=INNER)
    result = rk.runpytest("-rA", "--tb=short")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.re_match_lines(
        [
            r"_+ test_the_second_turn_is_never_asked_for _+",
            r"replaykit: this test's provider traffic has problems",
            r"recorded interactions never served \(1\); fix: make the code send them, drop them from the "
            r"cassette, or mark the test @pytest.mark.replaykit\(allow_unused=True\)",
            r"  /.*/cassettes/anthropic/web_search_follow_up.yaml:interactions\[1\] "
            r"\(line \d+, route anthropic.messages\)",
            r"_+ test_marker_without_the_fixture _+",
            r"recorded interactions never served \(2\); .*",
            r"  .*web_search_follow_up.yaml:interactions\[0\] .*",
            r"  .*web_search_follow_up.yaml:interactions\[1\] .*",
        ]
    )
    result.stdout.re_match_lines([r"PASSED test_inner.py::test_allowed"])
