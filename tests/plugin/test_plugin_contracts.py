"""Contract violations fail the test (pointer and message), except those a cassette lists as deliberate."""

from __future__ import annotations

import pytest

from replaykit.resources import data_dir

INNER = '''
from urllib.parse import urlsplit

import pytest
from conftest import post, recorded_body

from replaykit import cassette

SEARCH = "anthropic/web_search.yaml"
MISSING_FIELDS = "cloudflare/search_missing_fields.yaml"


def replay_first(replaykit, path):
    """Send the first recorded request of ``path`` as recorded; return the status served."""
    uri = cassette.load(path).interactions[0].request.uri
    return post(replaykit.url + urlsplit(uri).path, recorded_body(path))[0]


@pytest.mark.replaykit(cassettes=[SEARCH])
def test_an_invalid_request(replaykit):
    status, body = post(replaykit.base_url("anthropic") + "/v1/messages", {
        **recorded_body(replaykit.cassettes[0]), "max_tokens": "lots"})
    print("served", status, body["error"]["message"] if status >= 400 else "")


@pytest.mark.replaykit(cassettes=["cloudflare/error_400_validation.yaml"])
def test_a_listed_request_violation_is_allowed(replaykit):
    assert replay_first(replaykit, replaykit.cassettes[0]) == 400


@pytest.mark.replaykit(cassettes=[MISSING_FIELDS])
def test_a_listed_response_violation_is_allowed(replaykit):
    assert replay_first(replaykit, replaykit.cassettes[0]) == 200


@pytest.mark.replaykit(cassettes=["unlisted.yaml"])
def test_an_unlisted_response_violation(replaykit):
    assert replay_first(replaykit, replaykit.cassettes[0]) == 200
'''
LISTED = "  x-expected-violations:\n  - response /items/1/url\n  - response /items/2/title\n"


@pytest.fixture
def inner(rk: pytest.Pytester) -> pytest.Pytester:
    """The inner tests, and next to them ``cassettes/unlisted.yaml``, whose violations are not listed."""
    text = (data_dir("cassettes") / "cloudflare/search_missing_fields.yaml").read_text(encoding="utf-8")
    assert LISTED in text
    rk.mkdir("cassettes")
    (rk.path / "cassettes" / "unlisted.yaml").write_text(text.replace(LISTED, ""), encoding="utf-8")
    rk.makepyfile(test_inner=INNER)
    return rk


def test_violations_fail_the_test(inner: pytest.Pytester) -> None:
    result = inner.runpytest("-rA", "--tb=short")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.re_match_lines(
        [
            r"_+ test_an_invalid_request _+",
            r"contract violations \(1\); fix: fix the request \(a response: the cassette\); "
            r"list a deliberate violation under the cassette's replaykit: x-expected-violations",
            r"  request 1: POST /v1/messages: request /max_tokens: expected 'integer', got string 'lots'",
            r"-+ Captured stdout call -+",
            r"served 200 ",
            r"_+ test_an_unlisted_response_violation _+",
            r"contract violations \(2\); .*",
            r"  request 1: POST /client/v4/accounts/\w+/ai/websearch/: response /items/1/url: .*required.* "
            r"\(recorded in cassettes/unlisted.yaml:interactions\[0\]\)",
            r"  request 1: .*: response /items/2/title: .*required.*",
        ]
    )
    result.stdout.re_match_lines(
        [r"PASSED test_inner.py::test_a_listed_request_violation_is_allowed",
         r"PASSED test_inner.py::test_a_listed_response_violation_is_allowed"]
    )


def test_enforced_contracts_answer_400(inner: pytest.Pytester) -> None:
    result = inner.runpytest("--replaykit-enforce-contracts", "-k", "invalid_request", "--tb=short")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [r"  request 1: POST /v1/messages: request /max_tokens: expected 'integer', got string 'lots'",
         r"served 400 /max_tokens: expected 'integer', got string 'lots'"]
    )
