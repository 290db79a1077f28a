"""The OpenAI-compatible search providers' bundled cassettes (profile ``openai-compatible``): each verifies
with warnings only, and xAI's ``x_search_call`` (Responses) converts to the neutral transcript as a hosted
search call (its query from the JSON arguments, the item kept whole in ``raw``), its span-less citations
verified under the profile."""

from __future__ import annotations

import pytest

from replaykit import cassette, jsondoc, transcript, verify
from replaykit.citations import errors_only, verify_transcript
from replaykit.resources import data_dir

COMPATIBLE = sorted(path.name for path in (data_dir("cassettes") / "openai").glob("compatible_*.yaml"))


@pytest.mark.parametrize("name", COMPATIBLE)
def test_each_compatible_cassette_verifies_with_warnings_only(name: str) -> None:
    path = data_dir("cassettes") / "openai" / name
    report = verify.verify_paths([path])
    assert report.ok and {f.severity for f in report.findings} == {"warning"}  # what the profile relaxes
    assert not verify.verify_paths([path], profile="strict").ok  # OpenAI's own rules break


def test_the_compatible_set_has_each_provider() -> None:
    assert {"compatible_perplexity_sonar.yaml", "compatible_perplexity_sonar_stream.yaml",
            "compatible_openrouter_web.yaml", "compatible_openrouter_web_stream.yaml",
            "compatible_xai_web_search.yaml", "compatible_xai_x_search.yaml"} <= set(COMPATIBLE)


def test_an_x_search_call_is_a_hosted_search_and_its_citations_verify() -> None:
    item = cassette.load(data_dir("cassettes") / "openai" / "compatible_xai_x_search.yaml").interactions[0]
    body = item.response.json()
    message = transcript.from_openai(body, timestamp=0)
    call, text = message["content"]
    assert (call["type"], call["phase"], call["id"]) == ("hostedSearch", "call", body["output"][0]["id"])
    assert call["query"] == jsondoc.loads(body["output"][0]["arguments"])["query"]
    assert call["raw"] == body["output"][0]
    assert text["citations"] == body["output"][1]["content"][0]["annotations"]
    conversation = {"messages": [{"role": "user", "content": "X posts?", "timestamp": 0}, message]}
    assert errors_only(verify_transcript(conversation, "openai-compatible")) == []
