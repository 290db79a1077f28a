"""Citations: their shapes, and verification against the search evidence of the same transcript.

Anthropic ``web_search_result_location``, OpenAI ``url_citation`` (Responses and Chat Completions), Gemini
``groundingSupports`` and evidence answers are each checked against evidence seen before them: the
``verify_*`` functions return :class:`~replaykit.findings.Finding` objects (none: every citation verified).
URLs are compared by :func:`replaykit.search.dedupe_key`. Used by the reference harness and ``replaykit
verify``; the rules of each kind are in docs/architecture/modules.md.
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
    "verify_gemini_response",
    "verify_openai_response",
    "verify_transcript",
]

CITED_TEXT_MAX = 150
WEB_CITATION = "web_search_result_location"
URL_CITATION = "url_citation"
GROUNDING_SUPPORT = "groundingSupport"  # a Gemini groundingSupports entry: it has no type of its own
GEMINI_API = "gemini-generate"
CHAT_API = "openai-chat"
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
    the profile accepts a ``url_citation`` without ``start_index`` / ``end_index``; ``chunks``: how many
    ``groundingChunks`` the Gemini grounding of the message being checked holds (None: no grounding).
    """

    titles: dict[str, set[str]] = field(default_factory=dict)
    urls: set[str] = field(default_factory=set)
    sources: bool = False
    searched: bool = False
    documents: bool = False
    web_types: frozenset[str] = frozenset({"web_search_result_location", "url_citation"})
    spans_optional: bool = False
    chunks: int | None = None

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
    raw = block.get("raw")
    if block.get("api") == GEMINI_API and block.get("phase") == "result" and isinstance(raw, Mapping):
        seen.chunks = len(_list(raw.get("groundingChunks")))
    elif block.get("api") == CHAT_API and block.get("phase") == "result" and block.get("results"):
        seen.sources = True  # Perplexity's search_results: a cited URL must be among them
    _learn(seen, raw)


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
    kind = _kind(citation)
    if kind in (WEB_CITATION, URL_CITATION, GROUNDING_SUPPORT) and kind not in seen.web_types:
        return [_wrong_type(pointer, kind, seen.web_types)]
    if kind == WEB_CITATION:
        return _web_citation(pointer, citation, seen)
    nested = citation.get(URL_CITATION)
    if kind == URL_CITATION and isinstance(nested, Mapping):  # Chat Completions: {type, url_citation: {...}}
        return _url_citation(f"{pointer}/{URL_CITATION}", nested, text, seen)
    if kind == URL_CITATION:
        return _url_citation(pointer, citation, text, seen)
    if kind == GROUNDING_SUPPORT:
        return _grounding_support(pointer, citation, text, seen.chunks)
    if seen.searched and not (seen.documents and kind in DOCUMENT_CITATION_TYPES):
        return [_wrong_type(pointer, kind, seen.web_types)]
    return []  # a document citation into a fetched or given document, or an answer without web search


def _kind(citation: Mapping[str, object]) -> object:
    if "type" not in citation and ("segment" in citation or "groundingChunkIndices" in citation):
        return GROUNDING_SUPPORT
    return citation.get("type")


def _grounding_support(pointer: str, support: Mapping[str, object], text: str,
                       chunks: int | None) -> list[Finding]:
    """A Gemini grounding support: its segment's UTF-8 byte offsets cut ``text`` (the part it names) at
    character boundaries, ``segment.text`` is what they cut, and every chunk index names a groundingChunk."""
    segment = support.get("segment")
    findings = _segment(f"{pointer}/segment", segment, text) if isinstance(segment, Mapping) else [
        Finding.at(f"{pointer}/segment", "error", "span-missing", "a grounding support needs its segment")]
    for number, index in enumerate(_list(support.get("groundingChunkIndices"))):
        if type(index) is not int or not 0 <= index < (chunks or 0):
            findings.append(Finding.at(
                f"{pointer}/groundingChunkIndices/{number}", "error", "chunk-index-out-of-range",
                f"grounding chunk index {_short(index)} names no chunk: the grounding holds {chunks or 0}"))
    return findings


def _segment(pointer: str, segment: Mapping[str, object], text: str) -> list[Finding]:
    start, end = segment.get("startIndex", 0), segment.get("endIndex", 0)  # proto3 JSON leaves a 0 out
    data = text.encode("utf-8")
    if type(start) is not int or type(end) is not int:
        return [Finding.at(pointer, "error", "span-missing", "startIndex and endIndex must be integers")]
    if not 0 <= start <= end <= len(data):
        bad = "startIndex" if start < 0 or start > len(data) else "endIndex"
        return [Finding.at(f"{pointer}/{bad}", "error", "span-out-of-range",
                           f"segment [{start}, {end}) breaks 0 <= startIndex <= endIndex <= {len(data)} "
                           "(the part's length in UTF-8 bytes)")]
    try:
        cut = data[start:end].decode("utf-8")
    except UnicodeDecodeError:
        return [Finding.at(pointer, "error", "span-splits-character",
                           f"segment [{start}, {end}) cuts a character in two: offsets count UTF-8 bytes")]
    said = segment.get("text")
    if isinstance(said, str) and said != cut:
        return [Finding.at(f"{pointer}/text", "error", "segment-text-mismatch",
                           f"segment text {_short(said, 40)} is not the part's bytes [{start}, {end}): "
                           f"{_short(cut, 40)}")]
    return []


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


def _is_type(value: object, kind: str) -> bool:
    return isinstance(value, Mapping) and value.get("type") == kind


_ANY_WEB_TYPE = frozenset({WEB_CITATION, URL_CITATION, GROUNDING_SUPPORT})
_WEB_TYPES_BY_API = {"anthropic-messages": frozenset({WEB_CITATION}),
                     "openai-responses": frozenset({URL_CITATION}), CHAT_API: frozenset({URL_CITATION}),
                     GEMINI_API: frozenset({GROUNDING_SUPPORT})}


def verify_transcript(transcript: Mapping[str, object],
                      profile: str | Profile | None = STRICT) -> list[Finding]:
    """Verify every assistant citation of a neutral transcript against the search evidence before it.

    Search evidence: ``hostedSearch`` result blocks (``results[].url`` and the wire block in ``raw``) and the
    ``raw`` of OpenAI ``web_search_call`` blocks (``action.sources``). A Gemini message's supports are
    checked against its own grounding result (its ``groundingChunks``), a Chat Completions message's URLs
    against its own search results when it has some. Pointers are into ``transcript``. ``profile`` as for
    :func:`verify_openai_response`.
    """
    seen = _Seen(spans_optional=resolve_profile(profile).spans_optional)
    findings: list[Finding] = []
    for index, message in enumerate(_list(transcript.get("messages"))):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            seen.web_types = _WEB_TYPES_BY_API.get(str(message.get("api")), _ANY_WEB_TYPE)
            seen.chunks = None
            if message.get("api") == CHAT_API:
                seen.sources = False
            findings += _blocks(f"/messages/{index}/content", message.get("content"), seen)
    return findings


def verify_gemini_response(response: Mapping[str, object]) -> list[Finding]:
    """Verify the ``groundingSupports`` of a Gemini ``GenerateContentResponse`` (a stream's: its
    :func:`~replaykit.transcript.gemini_final_response`); pointers are into ``response``.

    Each support's ``segment`` names a text part (``partIndex``, absent: 0) and UTF-8 byte offsets into it;
    ``segment.text`` must be those bytes, every ``groundingChunkIndices`` entry a ``groundingChunks`` index.
    """
    findings: list[Finding] = []
    for number, candidate in enumerate(_list(response.get("candidates"))):
        metadata = candidate.get("groundingMetadata") if isinstance(candidate, Mapping) else None
        if isinstance(candidate, Mapping) and isinstance(metadata, Mapping):
            findings += _candidate_supports(f"/candidates/{number}", candidate, metadata)
    return findings


def _candidate_supports(pointer: str, candidate: Mapping[str, object],
                        metadata: Mapping[str, object]) -> list[Finding]:
    content = candidate.get("content")
    parts = _list(content.get("parts")) if isinstance(content, Mapping) else []
    chunks = len(_list(metadata.get("groundingChunks")))
    findings: list[Finding] = []
    for number, support in enumerate(_list(metadata.get("groundingSupports"))):
        at = f"{pointer}/groundingMetadata/groundingSupports/{number}"
        if not isinstance(support, Mapping):
            findings.append(Finding.at(at, "error", "not-an-object", "a grounding support must be an object"))
            continue
        segment = support.get("segment")
        index = segment.get("partIndex", 0) if isinstance(segment, Mapping) else 0
        part = parts[index] if type(index) is int and 0 <= index < len(parts) else None
        text = part.get("text") if isinstance(part, Mapping) and part.get("thought") is not True else None
        if not isinstance(text, str):
            findings.append(Finding.at(f"{at}/segment/partIndex", "error", "part-missing",
                                       f"part {_short(index)} of the candidate is no answer text part"))
            continue
        findings += _grounding_support(at, support, text, chunks)
    return findings


def verify_chat_completion(completion: Mapping[str, object],
                           profile: str | Profile | None = STRICT) -> list[Finding]:
    """Verify the ``url_citation`` annotations of a Chat Completions answer (a stream's: its
    :func:`~replaykit.transcript.chat_final_completion`); pointers are into ``completion``.

    The span (``start_index`` / ``end_index`` inside the nested ``url_citation``) must lie in the message's
    content, the URL be http(s). Chat Completions has no search item: the URL is checked against the
    answer's own ``search_results`` / ``citations`` (Perplexity, xAI) when it has some, else only its scheme.
    A ``[n]`` marker of Perplexity's text must name one of its ``citations``. ``profile`` as for
    :func:`verify_openai_response`.
    """
    seen = _Seen(web_types=frozenset({URL_CITATION}), spans_optional=resolve_profile(profile).spans_optional)
    for item in _list(completion.get("search_results")):
        if isinstance(item, Mapping):
            seen.add(item.get("url"), item.get("title"))
    for url in _list(completion.get("citations")):
        seen.add(url)
    seen.sources = seen.searched = bool(seen.urls)
    findings: list[Finding] = []
    for number, choice in enumerate(_list(completion.get("choices"))):
        message = choice.get("message") if isinstance(choice, Mapping) else None
        if isinstance(message, Mapping):
            text = message.get("content")
            block = {"text": text if isinstance(text, str) else "", "annotations": message.get("annotations")}
            findings += _text_block(f"/choices/{number}/message", block, seen)
            findings += _markers(f"/choices/{number}/message/content", text, completion.get("citations"))
    return findings


_MARKER = re.compile(r"\[(\d{1,4})\]")


def _markers(pointer: str, content: object, citations: object) -> list[Finding]:
    """A ``[n]`` marker of Perplexity's text past its ``citations`` list (1-based) points at no source."""
    if not isinstance(content, str) or not isinstance(citations, list):
        return []
    bad = sorted({int(n) for n in _MARKER.findall(content) if not 1 <= int(n) <= len(citations)})
    return [Finding.at(pointer, "error", "marker-out-of-range",
                       f"marker [{n}] points past the {len(citations)} citations") for n in bad]


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
