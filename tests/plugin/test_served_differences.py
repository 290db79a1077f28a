"""A request served although its body differs from the recording is listed in the terminal summary (test id,
the pointers that differ, values masked and cut as ``brief()`` cuts them); ``--replaykit-strict`` (env
``REPLAYKIT_STRICT``, ini ``replaykit_strict``) makes such a difference fail every test, the marker's
``strict=False`` excepted. Volatile fields never count as a difference.
"""

from __future__ import annotations

import json

import pytest

from replaykit import cassette
from replaykit.resources import find_cassette

INNER = '''
import os

import pytest
from conftest import post, recorded_body

RECORDED = recorded_body("cassettes/with_user.yaml")
KEY = os.environ["PLANTED_KEY"]
CHANGED = {**RECORDED, "model": "claude-opus-4-1", "max_tokens": 99, "tools": [],
           "messages": [{"role": "user", "content": KEY + " and something else"}]}
VOLATILE_ONLY = {**RECORDED, "metadata": {"user_id": "someone-else"}}
pytestmark = pytest.mark.replaykit("with_user.yaml")


def test_changed(replaykit):
    assert post(replaykit.base_url("anthropic") + "/v1/messages", CHANGED)[0] == 200


def test_volatile_only(replaykit):
    assert post(replaykit.base_url("anthropic") + "/v1/messages", VOLATILE_ONLY)[0] == 200


@pytest.mark.replaykit("with_user.yaml", strict=False)
def test_lenient(replaykit):
    assert post(replaykit.base_url("anthropic") + "/v1/messages", CHANGED)[0] == 200
'''
TITLE = r"=+ replaykit: served with body differences \(--replaykit-strict fails them\) =+"
PLACE = r"request 1: POST /v1/messages served cassettes/with_user.yaml:interactions\[0\]"
CHANGES = [r"  /max_tokens: sent 99, recorded 4096",
           r'  /messages/0/content/0/text: sent "sk-a…AA \(105 chars\) and something else", recorded "When '
           r'was Python 3.13 released, and wha…',
           r'  /model: sent "claude-opus-4-1", recorded "claude-sonnet-4-6"',
           r'  /tools/0: only in the recording: \{"type": "web_search_20250305", "name":…']


def planted_key() -> str:
    """A key of Anthropic's shape, made at run time (never written in a file)."""
    return "sk-ant-api03-" + "Zq7" * 30 + "AA"


@pytest.fixture
def inner(rk: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The inner tests, and their cassette: the bundled one, its request with a ``metadata.user_id``."""
    rk.makepyfile(test_inner=INNER)
    tape = cassette.load(find_cassette("anthropic/web_search.yaml"))
    request = tape.interactions[0].request
    request.body = json.dumps({**request.json(), "metadata": {"user_id": "recorded-user"}}).encode()
    cassette.save(tape, rk.path / "cassettes" / "with_user.yaml")
    monkeypatch.setenv("PLANTED_KEY", planted_key())
    return rk


def test_every_request_served_with_differences_is_in_the_summary(inner: pytest.Pytester) -> None:
    result = inner.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.re_match_lines([TITLE, rf"test_inner.py::test_changed: {PLACE}", *CHANGES,
                                  rf"test_inner.py::test_lenient: {PLACE}", *CHANGES])
    result.stdout.no_re_match_line(r".*test_volatile_only.*")
    assert planted_key()[:20] not in result.stdout.str()  # masked


def test_the_summary_gathers_what_xdist_workers_saw(inner: pytest.Pytester) -> None:
    result = inner.runpytest_subprocess("-p", "no:randomly", "-n", "2")
    result.assert_outcomes(passed=3)
    result.stdout.re_match_lines([TITLE])
    for test in ("test_changed", "test_lenient"):
        result.stdout.re_match_lines([rf"test_inner.py::{test}: {PLACE}", *CHANGES])


@pytest.mark.parametrize("how", ["option", "env", "ini"])
def test_strict_makes_a_difference_fail_every_test_but_one_marked_lenient(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    args = ["-p", "no:randomly", "-rA"]
    if how == "option":
        args.append("--replaykit-strict")
    elif how == "env":
        monkeypatch.setenv("REPLAYKIT_STRICT", "1")
    else:
        args += ["-o", "replaykit_strict=true"]
    result = inner.runpytest(*args)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.re_match_lines([r"_+ test_changed _+",
                                  r"requests no recorded interaction matched \(1\); .*",
                                  r"  request 1: POST /v1/messages got 404: .*",
                                  r"    near miss cassettes/with_user.yaml:interactions\[0\] \(line \d+, "
                                  r"refused by: body\)"], consecutive=False)
    result.stdout.re_match_lines([TITLE, rf"test_inner.py::test_lenient: {PLACE}"])
    result.stdout.re_match_lines([r"PASSED test_inner.py::test_volatile_only"])
    assert planted_key()[:20] not in result.stdout.str()
