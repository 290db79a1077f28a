"""The OpenAI-compatible search providers' bundled cassettes (profile ``openai-compatible``): each verifies
with warnings only (and so do the real OpenRouter recordings, whose annotations become the answer's
citations), and xAI's ``x_search_call`` (Responses) converts to the neutral transcript as a hosted
search call (its query from the JSON arguments, the item kept whole in ``raw``), its span-less citations
verified under the profile."""

from __future__ import annotations

import pytest
from recordings import recorded

from replaykit import cassette, jsondoc, transcript, verify
from replaykit.citations import errors_only, verify_transcript
from replaykit.jsondoc import JSON
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


# ---------------------------------------------------------------- real OpenRouter recordings

OPENROUTER = "pydantic-ai__openrouter_web_search_{}.yaml"


def _openrouter(kind: str) -> cassette.Interaction:
    return cassette.load(recorded(OPENROUTER.format(kind))).interactions[0]


def _recorded_annotations(item: cassette.Interaction) -> list[JSON]:
    """The annotations as OpenRouter sent them: the message's, or every delta's in stream order."""
    if not item.response.is_stream:
        return list(item.response.json()["choices"][0]["message"].get("annotations") or [])
    chunks = [event.json() for event in item.response.events if event.data and event.data != "[DONE]"]
    return [note for chunk in chunks for choice in chunk["choices"]
            for note in choice["delta"].get("annotations") or []]


@pytest.mark.parametrize("kind", ["annotations", "annotations_stream"])
def test_openrouters_real_annotations_are_the_texts_citations_and_verify(kind: str) -> None:
    item = _openrouter(kind)
    message = transcript.from_interaction(item, timestamp=0)
    [text] = message["content"]  # no hostedSearch block: OpenRouter reports its search as annotations only
    assert (message["api"], message["stopReason"], text["text"]) == (
        "openai-chat", "stop", "https://github.com/pydantic/pydantic-ai")
    notes = _recorded_annotations(item)
    assert text["citations"] == notes and len(notes) == 5
    urls = [note["url_citation"]["url"] for note in notes]
    assert "https://github.com/pydantic/pydantic-ai" in urls and len(set(urls)) == 5
    # real OpenRouter spans are 0..0 (no place in the text) and each carries the page excerpt it read
    assert {(n["url_citation"]["start_index"], n["url_citation"]["end_index"]) for n in notes} == {(0, 0)}
    assert all(n["url_citation"]["content"] for n in notes)
    conversation = {"messages": [{"role": "user", "content": "Pydantic AI?", "timestamp": 0}, message]}
    assert errors_only(verify_transcript(conversation, "openai-compatible")) == []


@pytest.mark.parametrize("kind", ["tool_usage", "tool_usage_stream"])
def test_an_openrouter_search_without_annotations_converts_to_plain_text(kind: str) -> None:
    message = transcript.from_interaction(_openrouter(kind), timestamp=0)
    assert [block["type"] for block in message["content"]] == ["text"]
    assert "citations" not in message["content"][0]
    usage = message["usage"]
    assert (message["stopReason"], usage["input"], usage["output"]) == ("stop", 8174, 30)


def test_openrouters_real_stream_sends_its_annotations_before_the_text() -> None:
    chunks = [event.json() for event in _openrouter("annotations_stream").response.events
              if event.data and event.data != "[DONE]"]
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    first_text = next(i for i, delta in enumerate(deltas) if delta["content"])
    assert first_text == 5 and all(delta.get("annotations") for delta in deltas[:first_text])
    assert [chunk["choices"][0]["finish_reason"] for chunk in chunks[-2:]] == ["stop", "stop"]
    assert "usage" in chunks[-1] and chunks[-1]["choices"]  # not OpenAI's usage chunk with choices []
