"""``replaykit_config``: project-wide defaults for the marker's arguments, overridden by a test's marker."""

from __future__ import annotations

import pytest

CONFTEST = '''
import pytest


@pytest.fixture
def replaykit_config():
    return {"timing": "fixed:3", "allow_unused": True, "cassettes": ["anthropic/web_search.yaml"]}
'''

INNER = '''
import pytest

from replaykit.server import Timing


def test_the_config_applies(replaykit):
    assert replaykit.server.settings.timing == Timing("fixed", 3.0)
    assert [path.name for path in replaykit.cassettes] == ["web_search.yaml"]


@pytest.mark.replaykit("openai/web_search.yaml", timing="fast")
def test_the_marker_wins_key_by_key(replaykit, replaykit_server):
    assert replaykit.server is replaykit_server  # timing back to the session's: the session server
    assert [path.parent.name for path in replaykit.cassettes] == ["openai"]
    assert replaykit.allow_unused is True  # from the config

'''

OTHER = '''
import pytest

from replaykit.server import Timing


@pytest.fixture(scope="module")
def replaykit_config():
    return {"match_on": ["body"]}


def test_a_module_overrides_the_project(replaykit, replaykit_server):
    assert replaykit.server is not replaykit_server  # match_on: a server of its own
    assert replaykit.server.settings.timing == Timing("fast") and replaykit.cassettes == []
'''


def test_replaykit_config_gives_defaults_the_marker_overrides(rk: pytest.Pytester) -> None:
    rk.makeconftest(rk.path.joinpath("conftest.py").read_text() + CONFTEST)
    rk.makepyfile(test_inner=INNER, test_other=OTHER)
    result = rk.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=3)


@pytest.mark.parametrize(("config", "message"), [
    ('{"cassete": []}', r"replaykit_config: unknown argument 'cassete'; the arguments are cassettes, .*"),
    ('["fast"]', r"replaykit_config returned list; return a dict of marker arguments, e.g. .*"),
    ('{"strict": 1}', r"replaykit_config: strict=1 must be True or False"),
])
def test_a_bad_config_is_named(rk: pytest.Pytester, config: str, message: str) -> None:
    rk.makeconftest(rk.path.joinpath("conftest.py").read_text()
                    + f"\n\n@pytest.fixture\ndef replaykit_config():\n    return {config}\n")
    rk.makepyfile(test_inner="def test_x(replaykit):\n    pass\n")
    result = rk.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.re_match_lines([message])
