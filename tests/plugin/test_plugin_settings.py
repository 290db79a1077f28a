"""The marker takes the fake provider's settings: match_on, volatile, strict, repeat, timing,
enforce_contracts, profile; a test with other settings than the session server's gets a server with them."""

from __future__ import annotations

import pytest

INNER = '''
import pytest
from conftest import post, recorded_body

from replaykit.server import Timing

SEARCH = "anthropic/web_search.yaml"
PORTS = {}


def url(replaykit):
    return replaykit.base_url("anthropic") + "/v1/messages"


@pytest.mark.replaykit(SEARCH, match_on=["body"], allow_unused=True)
def test_match_on_body_refuses_another_body(replaykit):
    assert post(url(replaykit), {**recorded_body(replaykit.cassettes[0]), "max_tokens": 7})[0] == 404
    assert "passes the matchers (stream, body)" in replaykit.journal[0].error
    PORTS["match_on"] = replaykit.url
    replaykit.server.reset()  # the report of the refused request is not this test's point


@pytest.mark.replaykit(SEARCH, match_on="body", allow_unused=True)
def test_match_on_as_on_the_command_line_shares_that_server(replaykit):
    assert replaykit.url == PORTS["match_on"]
    assert post(url(replaykit), {**recorded_body(replaykit.cassettes[0]), "max_tokens": 7})[0] == 404
    replaykit.server.reset()  # the report of the refused request is not this test's point


@pytest.mark.replaykit(SEARCH, strict=True, volatile=["/max_tokens"])
def test_volatile_fields_are_ignored_by_strict(replaykit):
    assert post(url(replaykit), {**recorded_body(replaykit.cassettes[0]), "max_tokens": 7})[0] == 200


@pytest.mark.replaykit(SEARCH, repeat=True)
def test_repeat_serves_again(replaykit):
    body = recorded_body(replaykit.cassettes[0])
    assert [post(url(replaykit), body)[0] for _ in range(3)] == [200, 200, 200]


@pytest.mark.replaykit(SEARCH, enforce_contracts=True, allow_unused=True)
def test_enforce_contracts_answers_400(replaykit):
    status, body = post(url(replaykit), {**recorded_body(replaykit.cassettes[0]), "max_tokens": "64"})
    assert status == 400 and body["type"] == "error"
    replaykit.server.reset()


@pytest.mark.replaykit(timing="fixed:5", profile="openai-compatible")
def test_timing_and_profile(replaykit):
    settings = replaykit.server.settings
    assert (settings.timing, settings.profile.name) == (Timing("fixed", 5.0), "openai-compatible")


def test_no_settings_the_session_server(replaykit, replaykit_server):
    assert replaykit.server is replaykit_server and replaykit.url not in PORTS.values()
'''

BAD = '''
import pytest


@pytest.mark.replaykit(match_on=[1])
def test_not_a_matcher(replaykit):
    pass


@pytest.mark.replaykit(match_on="colour")
def test_unknown_matcher(replaykit):
    pass


@pytest.mark.replaykit(volatile=["model"])
def test_not_a_pointer(replaykit):
    pass


@pytest.mark.replaykit(timing=5)
def test_timing_not_text(replaykit):
    pass


@pytest.mark.replaykit(timing="slow")
def test_unknown_timing(replaykit):
    pass


@pytest.mark.replaykit(profile="loose")
def test_unknown_profile(replaykit):
    pass


@pytest.mark.replaykit(repeat="yes")
def test_repeat_not_a_bool(replaykit):
    pass
'''


def test_the_marker_takes_the_servers_settings(rk: pytest.Pytester) -> None:
    rk.makepyfile(test_inner=INNER)
    result = rk.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=7)


def test_bad_settings_name_the_test_the_value_and_the_fix(rk: pytest.Pytester) -> None:
    rk.makepyfile(test_inner=BAD)
    result = rk.runpytest("-p", "no:randomly")
    result.assert_outcomes(errors=7)
    where = r"test_inner.py::test_\w+: @pytest.mark.replaykit"
    result.stdout.re_match_lines(
        [
            rf"{where}: match_on=\[1\] must list matcher names or callables, e.g. \['body', 'model'\]",
            rf"{where}: unknown matcher 'colour'; built-in matchers: stream, method, path, query, body, "
            r"model.*",
            rf"{where}: volatile field 'model' must be a JSON pointer starting with '/'",
            rf"{where}: timing=5 must be text, e.g. 'fixed:20'",
            rf"{where}: timing='slow' must be fast, recorded or fixed:<ms> \(e.g. fixed:20\)",
            rf"{where}: profile 'loose' is unknown; use one of strict, openai-compatible",
            rf"{where}: repeat='yes' must be True or False",
        ],
        consecutive=False,
    )
    result.stdout.no_re_match_line(r".*(pytest_plugin.py|Traceback).*")
