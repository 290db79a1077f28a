"""Faults from the marker and from ``replaykit.inject`` reach the client; the journal records them."""

from __future__ import annotations

import pytest

INNER = '''
import anthropic
import pytest
from conftest import recorded_body

SEARCH = "anthropic/web_search.yaml"


@pytest.mark.replaykit(cassettes=[SEARCH], faults=["status=529,route=anthropic,nth=1"])
def test_a_marker_fault_reaches_the_client(replaykit, client):
    body = recorded_body(replaykit.cassettes[0])
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(**body)
    assert caught.value.status_code == 529
    assert client.messages.create(**body).stop_reason == "end_turn"
    assert [(e.verdict, e.status) for e in replaykit.journal] == [("fault", 529), ("served", 200)]


@pytest.mark.replaykit(cassettes=[SEARCH])
def test_an_injected_fault_is_retried_by_the_sdk(replaykit):
    replaykit.inject({"kind": "status", "status": 429, "nth": 1, "retry_after_ms": 1})
    with anthropic.Anthropic(base_url=replaykit.base_url("anthropic"), api_key="dummy", max_retries=1) as sdk:
        assert sdk.messages.create(**recorded_body(replaykit.cassettes[0])).stop_reason == "end_turn"
    assert [e.status for e in replaykit.journal] == [429, 200]
'''


def test_faults_reach_the_client(rk: pytest.Pytester) -> None:
    rk.makepyfile(test_inner=INNER)
    result = rk.runpytest("-v")
    result.assert_outcomes(passed=2)
    result.stdout.re_match_lines(
        [r".*::test_a_marker_fault_reaches_the_client PASSED",
         r".*::test_an_injected_fault_is_retried_by_the_sdk PASSED"]
    )
