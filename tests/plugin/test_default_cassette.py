"""A test that names no cassette gets the one named after it, as pytest-recording names it:
``cassettes/<module>/<test>.yaml`` next to the test file (or under ``--replaykit-cassette-dir``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from replaykit.resources import data_dir

INNER = '''
import pytest
from conftest import post, recorded_body


def test_plain(replaykit, request):
    assert replaykit.cassettes == [request.path.parent / "cassettes" / "test_inner" / "test_plain.yaml"]
    body = recorded_body(replaykit.cassettes[0])
    assert post(replaykit.base_url("anthropic") + "/v1/messages", body)[0] == 200


@pytest.mark.replaykit(faults=["status=529,nth=1"])
def test_marked_without_cassettes(replaykit):
    assert [path.name for path in replaykit.cassettes] == ["test_marked_without_cassettes.yaml"]
    body = recorded_body(replaykit.cassettes[0])
    assert [post(replaykit.base_url("anthropic") + "/v1/messages", body)[0] for _ in range(2)] == [529, 200]


class TestGroup:
    @pytest.mark.replaykit(allow_unused=True)
    def test_method(self, replaykit):
        assert [path.name for path in replaykit.cassettes] == ["TestGroup.test_method.yaml"]


@pytest.mark.replaykit(allow_unused=True)
@pytest.mark.parametrize("n", [1])
def test_param(replaykit, n):
    assert [path.name for path in replaykit.cassettes] == ["test_param[1].yaml"]


@pytest.mark.replaykit(cassettes=[])
def test_an_empty_list_means_none(replaykit):
    assert replaykit.cassettes == []


def test_no_default_file(replaykit):
    assert replaykit.cassettes == []
    post(replaykit.base_url("anthropic") + "/v1/messages", {"model": "m"})
'''

NAMES = ("test_plain", "test_marked_without_cassettes", "TestGroup.test_method", "test_param[1]")


def _record(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name in NAMES:
        shutil.copy(data_dir("cassettes") / "anthropic/web_search.yaml", folder / f"{name}.yaml")


def test_the_default_cassette_is_named_after_the_test(rk: pytest.Pytester) -> None:
    rk.makepyfile(test_inner=INNER)
    _record(rk.path / "cassettes" / "test_inner")
    result = rk.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.re_match_lines(
        [
            r"_+ test_no_default_file _+",
            r"  request 1: POST /v1/messages got 404: .*",
            r"no cassette was named and the default one, cassettes/test_inner/test_no_default_file.yaml, "
            r"does not exist: record it there with --replaykit-record-mode=once \(env "
            r"REPLAYKIT_RECORD_MODE=once; from the provider's real API unless --replaykit-upstream "
            r"PROVIDER=URL names another\), or name cassettes in @pytest.mark.replaykit\(...\)",
        ],
        consecutive=False,
    )


def test_the_cassette_dir_option_moves_the_defaults_too(rk: pytest.Pytester) -> None:
    inner = INNER.replace('request.path.parent / "cassettes"', 'request.path.parent / "tapes"')
    rk.makepyfile(test_inner=inner)
    _record(rk.path / "tapes" / "test_inner")
    result = rk.runpytest("-p", "no:randomly", "--replaykit-cassette-dir=tapes", "-k", "not no_default")
    result.assert_outcomes(passed=5, deselected=1)
