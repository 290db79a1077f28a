"""A passing replay: the anthropic SDK against a bundled cassette, the journal, env for subprocesses."""

from __future__ import annotations

import pytest

INNER = '''
import os
import subprocess
import sys

import pytest
from conftest import post, recorded_body

from replaykit.resources import data_dir

SEARCH = "anthropic/web_search.yaml"


@pytest.mark.replaykit(cassettes=[SEARCH])
def test_sdk_replays_the_recording(replaykit, client):
    assert replaykit.cassettes == [data_dir("cassettes") / SEARCH]
    message = client.messages.create(**recorded_body(replaykit.cassettes[0]))
    assert [b.type for b in message.content][:3] == ["text", "server_tool_use", "web_search_tool_result"]
    assert [(e.seq, e.verdict, e.status) for e in replaykit.journal] == [(1, "served", 200)]


@pytest.mark.replaykit(SEARCH)
def test_a_subprocess_uses_env(replaykit):
    env = {**os.environ, **replaykit.env()}
    assert env["ANTHROPIC_BASE_URL"] == replaykit.base_url("anthropic")
    assert env["HTTPS_PROXY"] == "http://127.0.0.1:9" and env["NO_PROXY"] == "127.0.0.1,localhost,::1"
    code = (
        "import os, sys; sys.path.insert(0, os.getcwd()); from conftest import post, recorded_body; "
        "status, body = post(os.environ['ANTHROPIC_BASE_URL'] + '/v1/messages', recorded_body(sys.argv[1])); "
        "print(status, body['stop_reason'])"
    )
    done = subprocess.run([sys.executable, "-c", code, str(replaykit.cassettes[0])], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["200", "end_turn"], done.stderr
    assert [(e.seq, e.verdict) for e in replaykit.journal] == [(1, "served")]


def test_cassettes_loaded_at_run_time(replaykit):
    replaykit.load(SEARCH)
    body = recorded_body(replaykit.cassettes[0])
    assert post(replaykit.base_url("anthropic") + "/v1/messages", body)[0] == 200
    assert replaykit.unused() == [] and replaykit.cassettes == [data_dir("cassettes") / SEARCH]


def test_direct_use_of_the_session_server(replaykit_server):
    replaykit_server.inject("status=500")
    assert post(replaykit_server.base_url("anthropic") + "/v1/messages", {})[0] == 500


def test_the_session_server_is_shared_and_reset(replaykit, replaykit_server):
    assert replaykit.url == replaykit_server.url
    assert replaykit.journal == [] and replaykit.server.faults == []
    assert replaykit.cassettes == [] and replaykit.unused() == []
'''


def test_a_replay_passes(rk: pytest.Pytester) -> None:
    rk.makepyfile(test_inner=INNER)
    result = rk.runpytest("-v")
    result.assert_outcomes(passed=5)
    result.stdout.re_match_lines(
        [r".*test_sdk_replays_the_recording PASSED", r".*test_a_subprocess_uses_env PASSED"]
    )
