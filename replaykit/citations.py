"""Citations: their shapes, and verification against the search evidence of the same transcript.

Anthropic ``web_search_result_location``, OpenAI ``url_citation`` (Responses and Chat Completions) and
evidence answers are each checked against evidence seen before them: :func:`verify_transcript`,
:func:`verify_anthropic_message`, :func:`verify_openai_response`, :func:`verify_chat_completion` and
:func:`verify_evidence_answer` return :class:`~replaykit.findings.Finding` objects (none: every citation
verified). URLs are compared by :func:`replaykit.search.dedupe_key`. Used by the reference harness and
``replaykit verify``; the rules of each kind are in docs/architecture/modules.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from replaykit.contracts import STRICT, Profile, resolve_profile
from replaykit.errors import CitationError
from replaykit.findings import Finding, errors_only
from replaykit.jsondoc import JSON
from replaykit.search import Evidence, dedupe_key, safe_http_url

__all__ = [
    "CITED_TEXT_MAX",
    "DOCUMENT_CITATION_TYPES",
    "Finding",
    "errors_only",
    "render_sources",
    "search_urls",
    "verify_anthropic_message",
    "verify_chat_completion",
    "verify_evidence_answer",
    "verify_openai_response",
    "verify_transcript",
]

CITED_TEXT_MAX = 150
WEB_CITATION = "web_search_result_location"
URL_CITATION = "url_citation"
DOCUMENT_CITATION_TYPES = frozenset({"char_location", "page_location", "content_block_location",
                                     "search_result_location"})
FILE_ANNOTATION_TYPES = frozenset({"file_citation", "container_file_citation", "file_path"})


# ---------------------------------------------------------------- evidence seen so far


@dataclass(slots=True)
class _Seen:
    """What searches returned so far: URLs and their titles.

    ``sources``: OpenAI listed URL sources; ``searched``: a web search ran; ``documents``: a document that
    document citations may point into arrived (a ``web_fetch`` result, a ``document`` or ``search_result``).
    ``web_types``: the web citation types the API of the message being checked uses; ``spans_optional``:
    the profile accepts a ``url_citation`` without ``start_index`` / ``end_index``.
    """

    titles: dict[str, set[str]] = field(default_factory=dict)
    urls: set[str] = field(default_factory=set)
    sources: bool = False
    searched: bool = False
    documents: bool = False
    web_types: frozenset[str] = frozenset({"web_search_result_location", "url_citation"})
    spans_optional: bool = False

    def add(self, url: object, title: object = None) -> None:
        safe = safe_http_url(url)
        if safe is not None:
            self.urls.add(safe)
            titles = self.titles.setdefault(dedupe_key(safe), set())
            if isinstance(title, str):
                titles.add(title)


def _walk(value: object) -> Iterator[Mapping[str, object]]:
    if isinstance(value, Mapping):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


_SEARCH_TYPES = frozenset({"web_search_result", "web_search_tool_result", "web_search_call"})
_DOCUMENT_SOURCES = frozenset({"web_fetch_tool_result", "document", "search_result"})


def _learn(seen: _Seen, value: object) -> None:
    """Record every search result and source URL inside a wire object (or a neutral hostedSearch block)."""
    for node in _walk(value):
        kind = node.get("type")
        web_search_call = kind == "server_tool_use" and node.get("name") == "web_search"
        seen.searched |= kind in _SEARCH_TYPES or web_search_call
        seen.documents |= kind in _DOCUMENT_SOURCES
        if kind == "web_search_result":
            seen.add(node.get("url"), node.get("title"))
        elif kind in ("search", "open_page", "find_in_page"):
            _learn_action(seen, node)


def _learn_action(seen: _Seen, action: Mapping[str, object]) -> None:
    if action.get("type") != "search":
        seen.add(action.get("url"))
        return
    for source in _list(action.get("sources")):
        if isinstance(source, Mapping) and source.get("type") == "url":
            seen.sources = True
            seen.add(source.get("url"))


def _learn_neutral(seen: _Seen, block: Mapping[str, object]) -> None:
    seen.searched = True
    for result in _list(block.get("results")):
        if isinstance(result, Mapping):
            seen.add(result.get("url"), result.get("title"))
    _learn(seen, block.get("raw"))


def search_urls(value: object) -> set[str]:
    """Safe URLs of every search result and URL source inside any wire object (e.g. a request's history)."""
    seen = _Seen()
    _learn(seen, value)
    return seen.urls


# ---------------------------------------------------------------- one citation


def _url_findings(pointer: str, citation: Mapping[str, object], seen: _Seen,
                  check_known: bool) -> list[Finding]:
    url = citation.get("url")
    safe = safe_http_url(url)
    if safe is None:
        return [Finding.at(f"{pointer}/url", "error", "url-scheme",
                        f"{_short(url)} is not an http(s) URL; a citation may only link to a web page")]
    if not check_known:
        return []
    titles, title = seen.titles.get(dedupe_key(safe)), citation.get("title")
    if titles is None:
        return [Finding.at(f"{pointer}/url", "error", "unknown-url",
                        f"{_short(url)} was not returned by any search earlier in the transcript")]
    if isinstance(title, str) and titles and title not in titles:
        return [Finding.at(f"{pointer}/title", "warning", "title-mismatch",
                        f"title {_short(title)} differs from the search result's title")]
    return []


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cited_text(pointer: str, citation: Mapping[str, object]) -> list[Finding]:
    text = citation.get("cited_text")
    if not isinstance(text, str):
        return [Finding.at(f"{pointer}/cited_text", "error", "cited-text-missing",
                        "cited_text is required (a string, the quoted passage)")]
    length = len(text.removesuffix("..."))
    if length > CITED_TEXT_MAX:
        return [Finding.at(f"{pointer}/cited_text", "error", "cited-text-too-long",
                        f"cited_text has {length} characters; the API quotes at most {CITED_TEXT_MAX}")]
    return []


def _encrypted_index(pointer: str, citation: Mapping[str, object]) -> list[Finding]:
    value = citation.get("encrypted_index")
    if isinstance(value, str) and value:
        return []
    return [Finding.at(f"{pointer}/encrypted_index", "error", "encrypted-index-missing",
                    "encrypted_index is required and must be sent back unchanged when the turn is replayed")]


def _web_citation(pointer: str, citation: Mapping[str, object], seen: _Seen) -> list[Finding]:
    return (_url_findings(pointer, citation, seen, True) + _cited_text(pointer, citation)
            + _encrypted_index(pointer, citation))


def _wrong_type(pointer: str, kind: object, web_types: frozenset[str]) -> Finding:
    what = "a document citation" if kind in DOCUMENT_CITATION_TYPES | FILE_ANNOTATION_TYPES else "a citation"
    expected = " or ".join(sorted(web_types))
    return Finding.at(f"{pointer}/type", "error", "wrong-citation-type",
                   f"{what} of type {_short(kind)} in a web-search answer; web citations are {expected}")


def _span(pointer: str, citation: Mapping[str, object], text: str, optional: bool) -> list[Finding]:
    start, end = citation.get("start_index"), citation.get("end_index")
    if optional and start is None and end is None:
        return []  # an OpenAI-compatible provider's citation: a URL with no span
    if type(start) is not int or type(end) is not int:
        return [Finding.at(pointer, "error", "span-missing", "start_index and end_index must be integers")]
    if 0 <= start <= end <= len(text):
        return []
    bad = "start_index" if start < 0 or start > len(text) else "end_index"
    return [Finding.at(f"{pointer}/{bad}", "error", "span-out-of-range",
                    f"span [{start}, {end}) breaks 0 <= start_index <= end_index <= {len(text)} (len(text))")]


def _url_citation(pointer: str, citation: Mapping[str, object], text: str, seen: _Seen) -> list[Finding]:
    return _span(pointer, citation, text, seen.spans_optional) + _url_findings(pointer, citation, seen,
                                                                                  seen.sources)


def _citation(pointer: str, citation: object, text: str, seen: _Seen) -> list[Finding]:
    if not isinstance(citation, Mapping):
        return [Finding.at(pointer, "error", "not-an-object", "a citation must be a JSON object")]
    kind = citation.get("type")
    if kind in (WEB_CITATION, URL_CITATION) and kind not in seen.web_types:
        return [_wrong_type(pointer, kind, seen.web_types)]
    if kind == WEB_CITATION:
        return _web_citation(pointer, citation, seen)
    if kind == URL_CITATION:
        return _url_citation(pointer, citation, text, seen)
    if seen.searched and not (seen.documents and kind in DOCUMENT_CITATION_TYPES):
        return [_wrong_type(pointer, kind, seen.web_types)]
    return []  # a document citation into a fetched or given document, or an answer without web search


def _text_block(pointer: str, block: Mapping[str, object], seen: _Seen) -> list[Finding]:
    raw = block.get("text")
    text = raw if isinstance(raw, str) else ""
    findings: list[Finding] = []
    for key in ("citations", "annotations"):
        for index, citation in enumerate(_list(block.get(key))):
            findings += _citation(f"{pointer}/{key}/{index}", citation, text, seen)
    return findings


# ---------------------------------------------------------------- wire bodies and transcripts


def verify_anthropic_message(message: Mapping[str, object], prior_urls: Iterable[str] = ()) -> list[Finding]:
    """Verify the citations of an Anthropic ``Message`` body; pointers are into ``message``.

    ``prior_urls`` are the search results of earlier turns (a ``pause_turn`` continuation cites results of
    the paused turn): pass :func:`search_urls` of the request body.
    """
    seen = _Seen(web_types=frozenset({WEB_CITATION}))
    for url in prior_urls:
        seen.add(url)
    seen.searched = bool(seen.titles)
    return _blocks("/content", message.get("content"), seen)


def _blocks(pointer: str, blocks: object, seen: _Seen) -> list[Finding]:
    findings: list[Finding] = []
    for index, block in enumerate(_list(blocks)):
        if isinstance(block, Mapping) and block.get("type") in ("text", "output_text"):
            findings += _text_block(f"{pointer}/{index}", block, seen)
        elif isinstance(block, Mapping) and block.get("type") == "hostedSearch":
            _learn_neutral(seen, block)
        elif isinstance(block, Mapping) and block.get("type") == "message":
            findings += _blocks(f"{pointer}/{index}/content", block.get("content"), seen)
        else:
            _learn(seen, block)
    return findings


def verify_openai_response(response: Mapping[str, object],
                           profile: str | Profile | None = STRICT) -> list[Finding]:
    """Verify the ``url_citation`` annotations of an OpenAI ``Response`` body; pointers are into ``response``.

    Every ``web_search_call`` of the response counts as evidence for every message (their URL sources, and the
    pages opened by ``open_page`` / ``find_in_page``); URL membership is checked only when sources were
    included (``include: ["web_search_call.action.sources"]``): a ``sources`` list with only API sources
    (``{type: api, name}``) says nothing about URLs. Under ``profile="openai-compatible"`` a citation with
    neither ``start_index`` nor ``end_index`` is accepted (xAI and OpenRouter send only ``type`` and ``url``).
    """
    seen = _Seen(web_types=frozenset({URL_CITATION}), spans_optional=resolve_profile(profile).spans_optional)
    _learn(seen, [item for item in _list(response.get("output")) if _is_type(item, "web_search_call")])
    return _blocks("/output", response.get("output"), seen)


def verify_chat_completion(completion: Mapping[str, object],
                           profile: str | Profile | None = STRICT) -> list[Finding]:
    """Verify the citations of a Chat Completions body; pointers are into ``completion``.

    Each ``url_citation`` annotation (``{type, url_citation: {url, title, start_index, end_index}}``) spans
    its message's ``content`` and links to an http(s) page (the search's results never reach the wire, so
    membership is not checked); a ``[n]`` marker of Perplexity's text points into its top-level
    ``citations`` (1-based). ``profile`` as for :func:`verify_openai_response`.
    """
    seen = _Seen(web_types=frozenset({URL_CITATION}), spans_optional=resolve_profile(profile).spans_optional)
    findings: list[Finding] = []
    for index, choice in enumerate(_list(completion.get("choices"))):
        message = choice.get("message") if isinstance(choice, Mapping) else None
        if isinstance(message, Mapping):
            findings += _chat_message(f"/choices/{index}/message", message, seen)
            findings += _markers(f"/choices/{index}/message/content", message.get("content"),
                                 completion.get("citations"))
    return findings


def _chat_message(pointer: str, message: Mapping[str, object], seen: _Seen) -> list[Finding]:
    raw = message.get("content")
    text = raw if isinstance(raw, str) else ""
    findings: list[Finding] = []
    for index, note in enumerate(_list(message.get("annotations"))):
        where = f"{pointer}/annotations/{index}"
        inner = note.get("url_citation") if isinstance(note, Mapping) else None
        if not isinstance(note, Mapping) or note.get("type") != URL_CITATION:
            findings += _citation(where, note, text, seen)
        elif not isinstance(inner, Mapping):
            findings.append(Finding.at(f"{where}/url_citation", "error", "not-an-object",
                                       "a url_citation annotation holds its url_citation object"))
        else:
            findings += _url_citation(f"{where}/url_citation", inner, text, seen)
    return findings


_MARKER = re.compile(r"\[(\d{1,4})\]")


def _markers(pointer: str, content: object, citations: object) -> list[Finding]:
    """A ``[n]`` marker past the ``citations`` list (Perplexity's numbering) points at no source."""
    if not isinstance(content, str) or not isinstance(citations, list):
        return []
    bad = sorted({int(n) for n in _MARKER.findall(content) if not 1 <= int(n) <= len(citations)})
    return [Finding.at(pointer, "error", "marker-out-of-range",
                       f"marker [{n}] points past the {len(citations)} citations") for n in bad]


def _is_type(value: object, kind: str) -> bool:
    return isinstance(value, Mapping) and value.get("type") == kind


_ANY_WEB_TYPE = frozenset({WEB_CITATION, URL_CITATION})
_WEB_TYPES_BY_API = {"anthropic-messages": frozenset({WEB_CITATION}),
                     "openai-responses": frozenset({URL_CITATION})}


def verify_transcript(transcript: Mapping[str, object],
                      profile: str | Profile | None = STRICT) -> list[Finding]:
    """Verify every assistant citation of a neutral transcript against the search evidence before it.

    Search evidence: ``hostedSearch`` result blocks (``results[].url`` and the wire block in ``raw``) and the
    ``raw`` of OpenAI ``web_search_call`` blocks (``action.sources``). Pointers are into ``transcript``.
    ``profile`` as for :func:`verify_openai_response`.
    """
    seen = _Seen(spans_optional=resolve_profile(profile).spans_optional)
    findings: list[Finding] = []
    for index, message in enumerate(_list(transcript.get("messages"))):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            seen.web_types = _WEB_TYPES_BY_API.get(str(message.get("api")), _ANY_WEB_TYPE)
            findings += _blocks(f"/messages/{index}/content", message.get("content"), seen)
    return findings


# ---------------------------------------------------------------- evidence-id answers


def _record(item: Evidence | Mapping[str, object]) -> Mapping[str, object]:
    return item.to_json() if isinstance(item, Evidence) else item


def _answer_shape(answer: object) -> list[Finding]:
    if not isinstance(answer, Mapping):
        return [Finding.at("", "error", "answer-shape", "the answer must be a JSON object")]
    findings: list[Finding] = []
    if not isinstance(answer.get("answer"), str):
        findings.append(Finding.at("/answer", "error", "answer-shape", "answer must be a string"))
    if not isinstance(answer.get("citations"), list):
        findings.append(Finding.at("/citations", "error", "answer-shape", "citations must be a list"))
    claims = answer.get("unsupportedClaims")
    if not isinstance(claims, list) or not all(isinstance(claim, str) for claim in claims):
        findings.append(Finding.at("/unsupportedClaims", "error", "answer-shape",
                                "unsupportedClaims must be a list of strings"))
    return findings


def _evidence_citation(index: int, citation: object, ids: set[str]) -> list[Finding]:
    pointer = f"/citations/{index}"
    if not isinstance(citation, Mapping):
        return [Finding.at(pointer, "error", "answer-shape", "a citation must be {sourceId, claim}")]
    findings: list[Finding] = []
    source = citation.get("sourceId")
    if not isinstance(source, str) or source not in ids:
        findings.append(Finding.at(f"{pointer}/sourceId", "error", "unknown-source-id",
                                f"sourceId {_short(source)} names no evidence record ({_ids(ids)})"))
    if not isinstance(citation.get("claim"), str) or not str(citation.get("claim")).strip():
        findings.append(Finding.at(f"{pointer}/claim", "error", "answer-shape",
                                "claim must be a non-empty string"))
    if "url" in citation and safe_http_url(citation["url"]) is None:
        findings.append(Finding.at(f"{pointer}/url", "warning", "url-scheme",
                                f"{_short(citation['url'], 40)} is not an http(s) URL (a javascript: or "
                                "data: link); it is never rendered, links come from the evidence"))
    elif "url" in citation:
        findings.append(Finding.at(f"{pointer}/url", "warning", "model-url-ignored",
                                "a URL written by the model is never rendered; links come from the evidence"))
    return findings


def _ids(ids: set[str]) -> str:
    return "known: " + ", ".join(sorted(ids)) if ids else "there is no evidence"


def verify_evidence_answer(answer: object, evidence: Sequence[Evidence | Mapping[str,
                           object]]) -> list[Finding]:
    """Verify an ``{answer, citations: [{sourceId, claim}], unsupportedClaims}`` answer against evidence."""
    shape = _answer_shape(answer)
    if shape or not isinstance(answer, Mapping):
        return shape
    ids = {str(_record(item).get("id")) for item in evidence}
    findings: list[Finding] = []
    for index, citation in enumerate(answer["citations"]):
        findings += _evidence_citation(index, citation, ids)
    return findings


def render_sources(answer: object, evidence: Sequence[Evidence | Mapping[str, object]]) -> list[JSON]:
    """The links to show with a verified answer: ``{id, title, url, retrievedAt}`` of each cited record.

    Built from the evidence records only, in evidence order; the model's text is never a link source.
    Raises :class:`~replaykit.errors.CitationError` (with every finding) when the answer does not verify.
    """
    records = [_record(item) for item in evidence]
    errors = errors_only(verify_evidence_answer(answer, records))
    if errors or not isinstance(answer, Mapping):
        listed = "; ".join(str(finding) for finding in errors)
        raise CitationError(f"answer citations do not verify: {listed}", tuple(errors))
    cited = {citation["sourceId"] for citation in answer["citations"]}
    return [{key: record.get(key) for key in ("id", "title", "url", "retrievedAt")}
            for record in records if record.get("id") in cited and safe_http_url(record.get("url"))]
