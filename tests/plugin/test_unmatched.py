"""A request no recorded interaction matches fails the test, with the near misses and their body diffs."""

from __future__ import annotations

import pytest

INNER = '''
import anthropic
import pytest
from conftest import recorded_body

SEARCH = "anthropic/web_search.yaml"


@pytest.mark.replaykit(cassettes=[SEARCH], strict=True)
def test_strict_refuses_another_body(replaykit, client):
    body = {**recorded_body(replaykit.cassettes[0]), "model": "claude-other"}
    with pytest.raises(anthropic.NotFoundError, match="no recorded interaction"):
        client.messages.create(**body)


@pytest.mark.replaykit(cassettes=[SEARCH])
def test_one_request_too_many(replaykit, client):
    body = recorded_body(replaykit.cassettes[0])
    client.messages.create(**body)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(**{**body, "max_tokens": 7})


@pytest.mark.replaykit(cassettes=[SEARCH])
def test_a_failing_test_gets_the_report_as_a_section(replaykit, client):
    client.messages.create(**recorded_body(replaykit.cassettes[0]))
    client.messages.create(**recorded_body(replaykit.cassettes[0]))
'''


def test_unmatched_requests_fail_with_near_misses(rk: pytest.Pytester) -> None:
    rk.makepyfile(test_inner=INNER)
    result = rk.runpytest("--tb=short")
    result.assert_outcomes(failed=3)
    result.stdout.re_match_lines(
        [
            r"_+ test_strict_refuses_another_body _+",
            r"replaykit: this test's provider traffic has problems",
            r"requests no recorded interaction matched \(1\); fix: record the missing interaction.*",
            r"  request 1: POST /v1/messages got 404: none of the 1 interactions on route anthropic.messages "
            r"passes the matchers \(stream, body\)",
            r"    near miss /.*/cassettes/anthropic/web_search.yaml:interactions\[0\] "
            r"\(line 14, refused by: body\)",
            r'      /model: sent "claude-other", recorded "claude-sonnet-4-6"',
            r"recorded interactions never served \(1\); fix: .*allow_unused=True\)",
            r"  /.*/anthropic/web_search.yaml:interactions\[0\] \(line 14, route anthropic.messages\)",
            r"_+ test_one_request_too_many _+",
            r"  request 2: POST /v1/messages got 404: all 1 interactions recorded on route "
            r"anthropic.messages were already served",
            r"    near miss .*web_search.yaml:interactions\[0\] \(line 14, refused by: already served\)",
            r"      /max_tokens: sent 7, recorded 4096",
            r"_+ test_a_failing_test_gets_the_report_as_a_section _+",
            r".*anthropic.NotFoundError: (Error code: )?404 .*",  # anthropic >= 2.17 drops "Error code:"
            r"-+ Captured replaykit call -+",
            r"replaykit: this test's provider traffic has problems",
            r"  request 2: POST /v1/messages got 404: all 1 interactions .* already served",
        ]
    )
    result.stdout.no_re_match_line(r".*pytest_plugin.py.*")  # the report comes without a plugin traceback
