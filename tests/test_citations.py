"""Citation verification: real recordings verify, every planted defect is caught at its pointer."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recordings import RECORDED, recorded

from replaykit import cassette, contracts, routes
from replaykit import transcript as transcript_module
from replaykit.citations import (
    errors_only,
    render_sources,
    search_urls,
    verify_anthropic_message,
    verify_chat_completion,
    verify_evidence_answer,
    verify_gemini_response,
    verify_openai_response,
    verify_transcript,
)
from replaykit.contracts import Profile
from replaykit.errors import CitationError
from replaykit.resources import data_dir
from replaykit.search import Evidence, Finding

DATA = Path(__file__).parent / "data" / "citations"
DELETE = object()
WEB = "/content/3/citations/0"
ANN = "/output/2/content/0/annotations/0"


def _load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _patched(document: Any, pointer: str, value: object) -> Any:
    """A deep copy of ``document`` with the value at ``pointer`` replaced (or deleted)."""
    copied = copy.deepcopy(document)
    *path, last = [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]
    parent = copied
    for part in path:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    key: Any = int(last) if isinstance(parent, list) else last
    if value is DELETE:
        del parent[key]
    else:
        parent[key] = value
    return copied


def _found(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.place, f.severity, f.code) for f in findings]


# ---------------------------------------------------------------- the clean fixtures verify


def test_the_fixtures_verify_cleanly() -> None:
    assert verify_anthropic_message(_load("anthropic_message.json")) == []
    assert verify_openai_response(_load("openai_response.json")) == []
    assert verify_transcript(_load("transcript.json")) == []


# ---------------------------------------------------------------- Anthropic defects

ANTHROPIC_DEFECTS = [
    ("/url", "javascript:alert(document.cookie)", "/url", "url-scheme"),
    ("/url", "data:text/html;base64,PHNjcmlwdD4=", "/url", "url-scheme"),
    ("/url", "ftp://example.com/changelog", "/url", "url-scheme"),
    ("/url", "https://evil.example/changelog", "/url", "unknown-url"),
    ("/url", "https://example.com/changelog-v2", "/url", "unknown-url"),
    ("/url", DELETE, "/url", "url-scheme"),
    ("/cited_text", DELETE, "/cited_text", "cited-text-missing"),
    ("/cited_text", None, "/cited_text", "cited-text-missing"),
    ("/cited_text", "x" * 151, "/cited_text", "cited-text-too-long"),
    ("/cited_text", "x" * 151 + "...", "/cited_text", "cited-text-too-long"),
    ("/encrypted_index", DELETE, "/encrypted_index", "encrypted-index-missing"),
    ("/encrypted_index", "", "/encrypted_index", "encrypted-index-missing"),
    ("/type", "char_location", "/type", "wrong-citation-type"),
    ("/type", "page_location", "/type", "wrong-citation-type"),
    ("/type", "content_block_location", "/type", "wrong-citation-type"),
    ("/type", "search_result_location", "/type", "wrong-citation-type"),
    ("/type", "url_citation", "/type", "wrong-citation-type"),
]


@pytest.mark.parametrize(("field", "value", "at", "code"), ANTHROPIC_DEFECTS)
def test_each_anthropic_defect_is_caught(field: str, value: object, at: str, code: str) -> None:
    message = _patched(_load("anthropic_message.json"), WEB + field, value)
    assert _found(verify_anthropic_message(message)) == [(WEB + at, "error", code)]


@pytest.mark.parametrize("cited", ["", "x" * 150, "x" * 150 + "...", "... " + "x" * 143 + "..."])
def test_cited_text_at_the_limit_passes(cited: str) -> None:
    message = _patched(_load("anthropic_message.json"), WEB + "/cited_text", cited)
    assert verify_anthropic_message(message) == []


def test_a_different_title_is_a_warning() -> None:
    message = _patched(_load("anthropic_message.json"), WEB + "/title", "Totally different")
    assert _found(verify_anthropic_message(message)) == [(WEB + "/title", "warning", "title-mismatch")]


def test_a_citation_before_its_search_result_is_unknown() -> None:
    message = _load("anthropic_message.json")
    message["content"] = [message["content"][3], *message["content"][:3]]
    assert {f.code for f in verify_anthropic_message(message)} == {"unknown-url"}


def test_prior_urls_cover_a_continued_turn() -> None:
    message = _load("anthropic_message.json")
    continued = {"content": message["content"][2:]}
    assert {f.code for f in verify_anthropic_message(continued)} == {"unknown-url"}
    history = {"messages": [{"role": "assistant", "content": message["content"]}]}
    assert verify_anthropic_message(continued, search_urls(history)) == []


def test_document_citations_outside_web_search_are_not_judged() -> None:
    document_citation = {"type": "char_location", "cited_text": "x", "document_index": 0}
    message = {"content": [{"type": "text", "text": "x", "citations": [document_citation]}]}
    assert verify_anthropic_message(message) == []
    fetched = {"content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
                           {"type": "web_fetch_tool_result", "tool_use_id": "f", "content": {
                               "type": "web_fetch_result", "url": "https://a.example/", "content": {
                                   "type": "document", "source": {"type": "text", "data": "x"}}}},
                           *message["content"]]}
    assert verify_anthropic_message(fetched) == []


# ---------------------------------------------------------------- OpenAI defects

OPENAI_DEFECTS = [
    ("/start_index", -1, "/start_index", "span-out-of-range"),
    ("/start_index", 86, "/start_index", "span-out-of-range"),
    ("/end_index", 86, "/end_index", "span-out-of-range"),
    ("/end_index", 10, "/end_index", "span-out-of-range"),
    ("/start_index", "40", "", "span-missing"),
    ("/end_index", DELETE, "", "span-missing"),
    ("/end_index", 52.0, "", "span-missing"),
    ("/url", "javascript:alert(1)", "/url", "url-scheme"),
    ("/url", "https://www.sqlite.org/lockingv3.html", "/url", "unknown-url"),
    ("/type", "file_citation", "/type", "wrong-citation-type"),
    ("/type", "web_search_result_location", "/type", "wrong-citation-type"),
]


@pytest.mark.parametrize(("field", "value", "at", "code"), OPENAI_DEFECTS)
def test_each_openai_defect_is_caught(field: str, value: object, at: str, code: str) -> None:
    response = _patched(_load("openai_response.json"), ANN + field, value)
    assert _found(verify_openai_response(response)) == [(ANN + at, "error", code)]


def test_the_span_may_reach_the_end_of_the_text() -> None:
    response = _load("openai_response.json")
    length = len(response["output"][2]["content"][0]["text"])
    assert verify_openai_response(_patched(response, ANN + "/end_index", length)) == []
    empty = _patched(_patched(response, ANN + "/start_index", length), ANN + "/end_index", length)
    assert verify_openai_response(empty) == []


def test_urls_are_checked_against_sources_only_when_included() -> None:
    response = _patched(_load("openai_response.json"), ANN + "/url", "https://elsewhere.example/")
    assert {f.code for f in verify_openai_response(response)} == {"unknown-url"}
    without = _patched(response, "/output/0/action/sources", [{"type": "api", "name": "oai-weather"}])
    assert verify_openai_response(without) == []
    assert verify_openai_response(_patched(response, "/output/0/action/sources", DELETE)) == []


# ---------------------------------------------------------------- transcripts


def test_transcript_defects_point_into_the_transcript() -> None:
    transcript = _load("transcript.json")
    bad = _patched(transcript, "/messages/3/content/1/citations/0/end_index", 999)
    assert _found(verify_transcript(bad)) == [
        ("/messages/3/content/1/citations/0/end_index", "error", "span-out-of-range")]
    bad = _patched(transcript, "/messages/1/content/2/citations/0/url", "https://unknown.example/")
    assert _found(verify_transcript(bad)) == [
        ("/messages/1/content/2/citations/0/url", "error", "unknown-url")]


def test_a_display_only_result_still_counts_as_evidence() -> None:
    transcript = _load("transcript.json")
    assert verify_transcript(_patched(transcript, "/messages/1/content/1/raw", DELETE)) == []
    no_results = _patched(_patched(transcript, "/messages/1/content/1/raw", DELETE),
                          "/messages/1/content/1/results", [])
    assert {f.code for f in verify_transcript(no_results)} == {"unknown-url"}


def test_transcript_messages_keep_their_order() -> None:
    transcript = _load("transcript.json")
    reordered = copy.deepcopy(transcript)
    reordered["messages"][1], reordered["messages"][3] = transcript["messages"][3], transcript["messages"][1]
    assert "unknown-url" in {f.code for f in verify_transcript(reordered)}


# ---------------------------------------------------------------- evidence-id answers


def _evidence() -> list[Evidence]:
    docs = "https://developers.cloudflare.com/"
    return [Evidence("S1", "Web Search API", docs + "web-search/", "d", "exa", "t"),
            Evidence("S2", "Changelog", docs + "changelog/", "d", "exa", "t")]


def _answer(*ids: str) -> dict[str, Any]:
    citations = [{"sourceId": source, "claim": "open beta"} for source in ids]
    return {"answer": "It is in open beta.", "citations": citations, "unsupportedClaims": []}


def test_a_cited_answer_renders_links_from_the_evidence_only() -> None:
    answer = _answer("S2", "S1")
    answer["citations"][0]["url"] = "javascript:alert(1)"
    answer["citations"][1]["url"] = "https://evil.example/S1"
    assert _found(verify_evidence_answer(answer, _evidence())) == [
        ("/citations/0/url", "warning", "url-scheme"), ("/citations/1/url", "warning", "model-url-ignored")]
    assert render_sources(answer, _evidence()) == [
        {"id": "S1", "title": "Web Search API", "url": "https://developers.cloudflare.com/web-search/",
         "retrievedAt": "t"},
        {"id": "S2", "title": "Changelog", "url": "https://developers.cloudflare.com/changelog/",
         "retrievedAt": "t"}]


@pytest.mark.parametrize("source", ["S3", "s1", "", None, 1])
def test_an_unknown_source_id_is_rejected(source: object) -> None:
    answer = _answer("S1")
    answer["citations"].append({"sourceId": source, "claim": "made up"})
    assert _found(verify_evidence_answer(answer, _evidence())) == [("/citations/1/sourceId", "error",
                                                                     "unknown-source-id")]
    with pytest.raises(CitationError, match="unknown-source-id") as caught:
        render_sources(answer, _evidence())
    assert len(caught.value.findings) == 1


@pytest.mark.parametrize(("answer", "pointer"), [
    ([], ""), ({"citations": [], "unsupportedClaims": []}, "/answer"),
    ({"answer": "a", "citations": {}, "unsupportedClaims": []}, "/citations"),
    ({"answer": "a", "citations": []}, "/unsupportedClaims"),
    ({"answer": "a", "citations": [], "unsupportedClaims": [1]}, "/unsupportedClaims"),
    ({"answer": "a", "citations": ["S1"], "unsupportedClaims": []}, "/citations/0"),
    ({"answer": "a", "citations": [{"sourceId": "S1", "claim": " "}], "unsupportedClaims": []},
     "/citations/0/claim"),
])
def test_a_malformed_answer_is_rejected(answer: object, pointer: str) -> None:
    assert _found(verify_evidence_answer(answer, _evidence())) == [(pointer, "error", "answer-shape")]


def test_evidence_records_may_be_json_objects() -> None:
    records = [record.to_json() for record in _evidence()]
    assert render_sources(_answer("S2"), records)[0]["url"] == "https://developers.cloudflare.com/changelog/"
    assert errors_only(verify_evidence_answer(_answer("S9"), records))


# ---------------------------------------------------------------- real and bundled cassettes


def _events(response: cassette.Response) -> list[Any]:
    out = []
    for event in response.events:
        try:
            out.append(event.json())
        except ValueError:
            continue
    return out


def _gemini(item: cassette.Interaction) -> bool:
    return routes.classify_uri(item.request.method, item.request.uri).api == "gemini-generate"


def _final_body(item: cassette.Interaction) -> Any:
    if not item.response.is_stream:
        return item.response.json()
    events = _events(item.response)
    if _gemini(item):
        return transcript_module.gemini_final_response(events)
    if "/chat/completions" in item.request.uri:
        return transcript_module.chat_final_completion(events)
    if "/responses" in item.request.uri:
        return transcript_module.openai_final_response(events)
    return transcript_module.anthropic_final_body(events)


def _verify_interaction(item: cassette.Interaction,
                        profile: Profile = contracts.STRICT) -> tuple[list[Finding], int]:
    body = _final_body(item)
    text = json.dumps(body)
    count = text.count('"web_search_result_location"') + text.count('"url_citation"')
    if _gemini(item):
        return verify_gemini_response(body), text.count('"groundingChunkIndices"')
    if "/chat/completions" in item.request.uri:
        return verify_chat_completion(body, profile), text.count('"url_citation":')
    if "/responses" in item.request.uri:
        return verify_openai_response(body, profile), count
    return verify_anthropic_message(body, search_urls(item.request.json())), count


def _cassettes() -> Iterator[Path]:
    for folder in ("anthropic", "openai", "azure", "gemini", "vertex", "recorded"):
        yield from sorted((data_dir("cassettes") / folder).glob("*.yaml"))


CASSETTES = list(_cassettes())


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_citation_in_a_provider_cassette_verifies(path: Path) -> None:
    loaded = cassette.load(path)
    for item in loaded.interactions:
        if item.response.status == 200:
            findings, _ = _verify_interaction(item, contracts.profile_of(loaded))
            assert errors_only(findings) == [], "\n".join(map(str, findings))


def _verified(pattern: str) -> int:
    """How many citations the real recordings named by ``pattern`` hold; each must verify."""
    total = 0
    for path in sorted(RECORDED.glob(pattern)):
        for item in cassette.load(path).interactions:
            findings, count = _verify_interaction(item)
            assert findings == [], f"{path.name}: " + "\n".join(map(str, findings))
            total += count
    return total


def test_the_real_recordings_hold_citations_that_all_verify() -> None:
    total = _verified("*anthropic*.yaml")
    assert total >= 49  # 5 + 17 + 9 + 9 + 9 real web_search_result_location citations


def test_the_real_gemini_recordings_hold_supports_that_all_verify() -> None:
    total = _verified("pydantic-ai__gemini_*.yaml")
    assert total == 25 + 13  # supports: 6 + 2, 8 + 7 streamed (in the last chunk), 1 + 1 urlContext; and
    # the 13 web_search_result_location citations of the Anthropic turn before the history sent to Gemini


def test_a_real_pause_turn_transcript_verifies_only_in_order() -> None:
    items = cassette.load(recorded("pydantic-ai__anthropic_pause_turn_web_search.yaml")).interactions
    turns = [transcript_module.from_anthropic(item.response.json(), timestamp=1_700_000_000_000 + n)
             for n, item in enumerate(items)]
    transcript = {"version": 1, "system": None, "tools": [], "messages": turns}
    assert verify_transcript(transcript) == []
    backwards = {**transcript, "messages": turns[::-1]}
    assert {f.code for f in verify_transcript(backwards)} == {"unknown-url"}


# ---------------------------------------------------------------- properties

_HOSTS = st.from_regex(r"[a-z]{1,8}\.(com|org|example)", fullmatch=True)
_PATHS = st.from_regex(r"(/[a-z0-9]{0,6}){0,3}", fullmatch=True)
_SAFE_URLS = st.builds(lambda scheme, host, path: f"{scheme}://{host}{path or '/'}",
                       st.sampled_from(["http", "https"]), _HOSTS, _PATHS)
_BAD_SCHEMES = st.sampled_from(["javascript:alert(1)", "data:text/html,x", "ftp://a.example/", "file:///etc/x",
                                "mailto:a@example.com", "vbscript:x", "//a.example/", "about:blank"])
_CITED = st.one_of(st.text(max_size=150), st.text(min_size=150, max_size=150).map(lambda t: t + "..."))


@st.composite
def anthropic_answers(draw: st.DrawFn) -> dict[str, Any]:
    """A message with one search and 1–4 citations of its results, inside every bound."""
    urls = draw(st.lists(_SAFE_URLS, min_size=1, max_size=5, unique=True))
    results = [{"type": "web_search_result", "url": u, "title": f"T{n}", "encrypted_content": "Enc"}
               for n, u in enumerate(urls)]
    picks = draw(st.lists(st.sampled_from(range(len(urls))), min_size=1, max_size=4))
    citations = [{"type": "web_search_result_location", "url": urls[n], "title": f"T{n}",
                  "encrypted_index": "EncIdx", "cited_text": draw(_CITED)} for n in picks]
    return {"content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
                        {"type": "web_search_tool_result", "tool_use_id": "s", "content": results},
                        {"type": "text", "text": "answer", "citations": citations}]}


@st.composite
def openai_answers(draw: st.DrawFn) -> dict[str, Any]:
    """A response whose url_citations span inside the text and cite the search's sources."""
    text = draw(st.text(max_size=40))
    urls = draw(st.lists(_SAFE_URLS, min_size=1, max_size=4, unique=True))
    spans = draw(st.lists(st.tuples(st.integers(0, len(text)), st.integers(0, len(text))).map(sorted),
                          min_size=1, max_size=4))
    annotations = [{"type": "url_citation", "start_index": a, "end_index": b, "title": "t",
                    "url": draw(st.sampled_from(urls))} for a, b in spans]
    return {"output": [{"type": "web_search_call", "id": "ws", "status": "completed",
                        "action": {"type": "search", "sources": [{"type": "url", "url": u} for u in urls]}},
                       {"type": "message", "content": [{"type": "output_text", "text": text,
                                                        "annotations": annotations}]}]}


@settings(max_examples=100, deadline=None)
@given(anthropic_answers(), openai_answers())
def test_citations_inside_their_bounds_always_pass(anthropic: dict[str, Any], openai: dict[str, Any]) -> None:
    assert verify_anthropic_message(anthropic) == []
    assert verify_openai_response(openai) == []


@settings(max_examples=100, deadline=None)
@given(anthropic_answers(), st.data())
def test_a_bad_scheme_or_unknown_url_is_always_caught(message: dict[str, Any], data: st.DataObject) -> None:
    citations = message["content"][2]["citations"]
    index = data.draw(st.integers(0, len(citations) - 1))
    bad = data.draw(st.one_of(_BAD_SCHEMES, _SAFE_URLS.map(lambda u: u.replace("://", "://unknown-host."))))
    citations[index]["url"] = bad
    assert (f"/content/2/citations/{index}/url", "error") in {(f.place, f.severity)
                                                              for f in verify_anthropic_message(message)}


@settings(max_examples=100, deadline=None)
@given(openai_answers(), st.data())
def test_an_out_of_range_span_is_always_caught(response: dict[str, Any], data: st.DataObject) -> None:
    part = response["output"][1]["content"][0]
    index = data.draw(st.integers(0, len(part["annotations"]) - 1))
    size = len(part["text"])
    start, end = data.draw(st.one_of(
        st.tuples(st.integers(-50, -1), st.integers(0, size)),
        st.tuples(st.integers(0, size), st.integers(size + 1, size + 50)),
        st.tuples(st.integers(1, size + 5), st.integers(0, size)).filter(lambda p: p[0] > p[1])))
    part["annotations"][index].update(start_index=start, end_index=end)
    codes = {(f.place.rsplit("/", 1)[0], f.code) for f in verify_openai_response(response)}
    assert (f"/output/1/content/0/annotations/{index}", "span-out-of-range") in codes


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.lists(st.integers(1, 6), max_size=4), st.text(min_size=1, max_size=4))
def test_unknown_source_ids_are_always_caught(size: int, cited: list[int], stray: str) -> None:
    evidence = [Evidence(f"S{n}", "t", f"https://s{n}.example/", "d", "exa", "t") for n in range(1, size + 1)]
    answer = _answer(*(f"S{n}" for n in cited if n <= size))
    assert verify_evidence_answer(answer, evidence) == []
    unknown = f"S{size + 1}" if stray in {e.id for e in evidence} else stray
    answer["citations"].append({"sourceId": unknown, "claim": "c"})
    assert _found(verify_evidence_answer(answer, evidence))[-1] == (
        f"/citations/{len(answer['citations']) - 1}/sourceId", "error", "unknown-source-id")


def _xai_response(*notes: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "fc_1_0", "type": "web_search_call", "status": "completed", "name": "web_search",
            "arguments": "{}", "call_id": ""}
    part = {"type": "output_text", "text": "xAI builds Grok.", "annotations": list(notes)}
    return {"output": [call, {"type": "message", "id": "msg_1", "role": "assistant", "content": [part]}]}


def test_a_citation_without_span_is_accepted_only_under_the_openai_compatible_profile() -> None:
    response = _xai_response({"type": "url_citation", "url": "https://x.ai/company"})
    assert [f.code for f in verify_openai_response(response)] == ["span-missing"]
    assert verify_openai_response(response, "openai-compatible") == []
    transcript = {"version": 1, "messages": [{"role": "assistant", "api": "openai-responses", "content": [
        {"type": "text", "text": "xAI builds Grok.", "citations": [{"type": "url_citation",
                                                                    "url": "https://x.ai/company"}]}]}]}
    assert [f.code for f in verify_transcript(transcript)] == ["span-missing"]
    assert verify_transcript(transcript, contracts.OPENAI_COMPATIBLE) == []


def test_the_compatible_profile_still_checks_half_spans_and_urls() -> None:
    half = _xai_response({"type": "url_citation", "url": "https://x.ai/", "start_index": 0})
    assert [f.code for f in verify_openai_response(half, "openai-compatible")] == ["span-missing"]
    bad = _xai_response({"type": "url_citation", "url": "javascript:alert(1)"})
    assert [f.code for f in verify_openai_response(bad, "openai-compatible")] == ["url-scheme"]


CHAT_BODY = {"choices": [{"message": {"content": "Lines stop at 79 ([peps.python.org](https://peps.python.org/)).",
                                      "annotations": [{"type": "url_citation", "url_citation": {
                                          "url": "https://peps.python.org/", "title": "PEP 8",
                                          "start_index": 0, "end_index": 62}}]}}]}


def test_a_chat_annotation_is_verified_on_its_span_and_url() -> None:
    assert verify_chat_completion(CHAT_BODY) == []
    late = copy.deepcopy(CHAT_BODY)
    late["choices"][0]["message"]["annotations"][0]["url_citation"]["end_index"] = 999
    assert [f.code for f in verify_chat_completion(late)] == ["span-out-of-range"]
    unsafe = copy.deepcopy(CHAT_BODY)
    unsafe["choices"][0]["message"]["annotations"][0]["url_citation"]["url"] = "javascript:alert(1)"
    assert [f.code for f in verify_chat_completion(unsafe)] == ["url-scheme"]
    spanless = copy.deepcopy(CHAT_BODY)
    spanless["choices"][0]["message"]["annotations"][0]["url_citation"] = {"url": "https://peps.python.org/"}
    assert [f.code for f in verify_chat_completion(spanless)] == ["span-missing"]
    assert verify_chat_completion(spanless, "openai-compatible") == []


def test_a_perplexity_marker_past_its_citations_is_an_error() -> None:
    body = {"citations": ["https://a.example/", "https://b.example/"],
            "choices": [{"message": {"content": "Yes[1][2]. Also[3]."}}]}
    assert [(f.code, f.place) for f in verify_chat_completion(body)] == [
        ("marker-out-of-range", "/choices/0/message/content")]
    assert verify_chat_completion({**body, "citations": [*body["citations"], "https://c.example/"]}) == []
