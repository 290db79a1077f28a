"""Contract violations fail the test (pointer and message), except those a cassette lists as deliberate."""

from __future__ import annotations

from typing import Any

import pytest

from replaykit import contracts
from replaykit.resources import data_dir
from replaykit.server.journal import Entry
from replaykit.traffic import format_report

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


# ---------------------------------------------------------------- the report honours the listed keys


def _served(*rows: dict[str, Any]) -> Entry:
    return Entry(1, "t", "anthropic", "messages", "POST", "/v1/messages", {}, {}, {}, verdict="served",
                 matched={"cassette": "c.yaml", "index": 2}, response_violations=list(rows))


ROWS: list[dict[str, Any]] = [
    {"pointer": "/usage", "keyword": "required", "message": "'usage' is required", "event": 3},
    {"pointer": "", "keyword": "type", "message": "expected object", "event": None},
]
EVENT, ROOT = "response events[3] /usage", "response /: expected object"


@pytest.mark.parametrize(("listed", "left"), [
    (set(), [EVENT, ROOT]),
    ({"response /usage"}, [ROOT]),  # <part> <pointer>: in any interaction or event
    ({"interactions[2]:events[3] response /usage"}, [ROOT]),
    ({"interactions[2] response /"}, [EVENT]),  # the root pointer is "/"
    ({"interactions[2] response /usage"}, [EVENT, ROOT]),  # an event's violation is named with its event
    ({"interactions[1]:events[3] response /usage", "request /usage"}, [EVENT, ROOT]),
    ({"response /", "interactions[2]:events[3] response /usage"}, []),
])
def test_the_report_leaves_out_what_the_cassette_lists(listed: set[str], left: list[str]) -> None:
    report = format_report([_served(*ROWS)], [], [], expected=lambda label: frozenset(listed))
    assert [line for line in (EVENT, ROOT) if line in report] == left
    for row, line in zip(ROWS, (EVENT, ROOT), strict=True):  # replaykit verify accepts the same entries
        violation = contracts.Violation(row["pointer"], row["keyword"], row["message"], row["event"],
                                        "response")
        assert (line in left) == (not contracts.expected_keys(2, violation) & listed)
