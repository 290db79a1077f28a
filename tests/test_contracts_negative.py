"""Table-driven negative examples: for each contract, a valid document and edits that must fail at a pointer.

Each valid document conforms (checked first), so every failure below is caused by its one edit.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from replaykit import contracts

DELETE = object()

# One conforming document per provider kind (shared with test_contracts.py).
VALID: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "contracts" / "valid-examples.json")
                                   .read_text(encoding="utf-8"))

# (kind, {pointer: new value or DELETE}, expected pointer, expected keyword)
NEGATIVE: list[tuple[str, dict[str, Any], str, str]] = [
    # Anthropic request: closed messages and blocks, tool definitions, replayed results
    ("anthropic.request", {"/messages/0/timestamp": 1764662400000},
     "/messages/0/timestamp", "additionalProperties"),
    ("anthropic.request", {"/messages/2/content/0/display_id": "x"}, "/messages/2/content/0/display_id",
     "unevaluatedProperties"),
    ("anthropic.request", {"/messages/1/content/1/content/0/encrypted_content": DELETE},
     "/messages/1/content/1/content/0/encrypted_content", "required"),
    ("anthropic.request", {"/messages/1/content/1/content/0/replaykit": {}},
     "/messages/1/content/1/content/0/replaykit", "unevaluatedProperties"),
    ("anthropic.request", {"/messages/1/content/2/citations/0/encrypted_index": DELETE},
     "/messages/1/content/2/citations/0/encrypted_index", "required"),
    ("anthropic.request", {"/tools/0/blocked_domains": ["spam.example"]},
     "/tools/0/blocked_domains", "x-rules"),
    ("anthropic.request", {"/tools/0/type": "web_search_20990101"}, "/tools/0/type", "enum"),
    ("anthropic.request", {"/tools/0/name": "search"}, "/tools/0/name", "const"),
    ("anthropic.request", {"/tools/0/response_inclusion": "full"}, "/tools/0/response_inclusion",
     "additionalProperties"),
    ("anthropic.request", {"/tools/0/user_location/country": "USA"},
     "/tools/0/user_location/country", "pattern"),
    ("anthropic.request", {"/max_tokens": DELETE}, "/max_tokens", "required"),
    ("anthropic.request", {"/messages/1/content/1/name": "web_search"},
     "/messages/1/content/1/name", "false"),
    # Anthropic response and content blocks
    ("anthropic.response", {"/content/1/name": "web_search"}, "/content/1/name", "false"),
    ("anthropic.response", {"/content/1/input": {}}, "/content/1/input", "false"),
    ("anthropic.response", {"/content/1/content/0/url": "javascript:alert(1)"}, "/content/1/content/0/url",
     "pattern"),
    ("anthropic.response", {"/content/1/content/0/title": DELETE}, "/content/1/content/0/title", "required"),
    ("anthropic.response", {"/content/0/id": "toolu_01"}, "/content/0/id", "pattern"),
    ("anthropic.response", {"/content/0/name": "web_browse"}, "/content/0/name", "enum"),
    ("anthropic.response", {"/content/2/citations/0/url": "ftp://example.com"}, "/content/2/citations/0/url",
     "pattern"),
    ("anthropic.response", {"/content/2/type": "markdown"}, "/content/2/type", "enum"),
    ("anthropic.response", {"/stop_reason": "finished"}, "/stop_reason", "enum"),
    ("anthropic.response", {"/stop_reason": None}, "/stop_reason", "enum"),
    ("anthropic.response", {"/usage/output_tokens": -1}, "/usage/output_tokens", "minimum"),
    ("anthropic.response", {"/usage/input_tokens": DELETE}, "/usage/input_tokens", "required"),
    ("anthropic.response", {"/role": "user"}, "/role", "const"),
    ("anthropic.content_block", {"/content/error_code": "timeout"}, "/content/error_code", "enum"),
    ("anthropic.content_block", {"/content": "no results"}, "/content", "type"),
    ("anthropic.citation", {"/start_char_index": 5}, "/end_char_index", "x-rules"),
    ("anthropic.citation", {"/type": "web_location"}, "/type", "enum"),
    ("anthropic.usage", {"/service_tier": "premium"}, "/service_tier", "enum"),
    ("anthropic.tool", {"/allowed_domains": ["a.example"], "/blocked_domains": ["b.example"]},
     "/blocked_domains",
     "x-rules"),
    ("anthropic.stream_event", {"/delta/citation/encrypted_index": DELETE}, "/delta/citation/encrypted_index",
     "required"),
    ("anthropic.stream_event", {"/delta/type": "html_delta"}, "/delta/type", "enum"),
    ("anthropic.stream_event", {"/index": -1}, "/index", "minimum"),
    ("anthropic.error", {"/error/type": "teapot_error"}, "/error/type", "enum"),
    ("anthropic.error", {"/type": "failure"}, "/type", "const"),
    ("anthropic.error", {"/error/message": DELETE}, "/error/message", "required"),
    ("anthropic.count_tokens_request", {"/messages": []}, "/messages", "minItems"),
    ("anthropic.count_tokens_response", {"/input_tokens": "12"}, "/input_tokens", "type"),
    # OpenAI request: closed input items, replayed web_search_call, tools, include
    ("openai.request", {"/input/0/timestamp": 1}, "/input/0/timestamp", "additionalProperties"),
    ("openai.request", {"/input/1/status": DELETE}, "/input/1/status", "required"),  # action: optional (wire)
    ("openai.request", {"/input/1/query": "q"}, "/input/1/query", "additionalProperties"),
    ("openai.request", {"/input/1/action/type": "find"}, "/input/1/action/type", "enum"),
    ("openai.request", {"/input/2/content/0/annotations/0/start_index": 9},
     "/input/2/content/0/annotations/0/end_index", "x-rules"),
    ("openai.request", {"/tools/0/search_context_size": "huge"}, "/tools/0/search_context_size", "enum"),
    ("openai.request", {"/tools/0/filters/blocked_domains": ["x"]}, "/tools/0/filters/blocked_domains",
     "additionalProperties"),
    ("openai.request", {"/include/0": "web_search_call.everything"}, "/include/0", "enum"),
    ("openai.request", {"/model": DELETE}, "/model", "required"),
    # OpenAI response and output items
    ("openai.response", {"/output/1/action/type": "browse"}, "/output/1/action/type", "enum"),
    ("openai.response", {"/output/1/status": "done"}, "/output/1/status", "enum"),
    ("openai.response", {"/output/1/status": DELETE}, "/output/1/status", "required"),  # action: optional
    ("openai.response", {"/output/1/id": "call_01"}, "/output/1/id", "pattern"),
    ("openai.response", {"/output/1/action/sources/0/url": "javascript:x"}, "/output/1/action/sources/0/url",
     "pattern"),
    ("openai.response", {"/output/2/action/pattern": DELETE}, "/output/2/action/pattern", "required"),
    ("openai.response", {"/output/3/content/0/annotations/0/start_index": 5},
     "/output/3/content/0/annotations/0/end_index", "x-rules"),
    ("openai.response", {"/output/3/content/0/annotations/0/url": "mailto:a@b"},
     "/output/3/content/0/annotations/0/url", "pattern"),
    ("openai.response", {"/output/3/content/0/annotations/0/title": DELETE},
     "/output/3/content/0/annotations/0/title", "required"),
    ("openai.response", {"/output/4": {"type": "hologram"}}, "/output/4/type", "enum"),
    ("openai.response", {"/object": "chat.completion"}, "/object", "const"),
    ("openai.response", {"/status": "failed"}, "/error", "type"),
    ("openai.response", {"/usage/total_tokens": 16}, "/usage/total_tokens", "x-rules"),
    ("openai.usage", {"/input_tokens_details/cached_tokens": DELETE}, "/input_tokens_details/cached_tokens",
     "required"),
    ("openai.output_item", {"/action/url": "file:///etc/passwd"}, "/action/url", "pattern"),
    ("openai.input_item", {"/encrypted_content": 5}, "/encrypted_content", "type"),
    ("openai.tool", {"/type": "web_search_preview_2099"}, "/type", "enum"),
    ("openai.stream_event", {"/sequence_number": DELETE}, "/sequence_number", "required"),
    ("openai.stream_event", {"/annotation/type": "footnote"}, "/annotation/type", "enum"),
    ("openai.stream_event", {"/type": "response.output_text.annotation.removed"}, "/type", "enum"),
    ("openai.chat_request", {"/messages": []}, "/messages", "minItems"),
    ("openai.chat_request", {"/messages/3/tool_call_id": DELETE}, "/messages/3/tool_call_id", "required"),
    ("openai.chat_request", {"/web_search_options/search_context_size": "huge"},
     "/web_search_options/search_context_size", "enum"),
    ("openai.chat_request", {"/tools/0/function/name": "has space"}, "/tools/0/function/name", "pattern"),
    ("openai.chat_response", {"/object": "response"}, "/object", "const"),
    ("openai.chat_response", {"/id": "resp_1"}, "/id", "pattern"),
    ("openai.chat_response", {"/choices/0/message/annotations/0/url_citation/title": DELETE},
     "/choices/0/message/annotations/0/url_citation/title", "required"),
    ("openai.chat_response", {"/choices/0/message/annotations/0/url_citation/start_index": 60},
     "/choices/0/message/annotations/0/url_citation/end_index", "x-rules"),
    ("openai.chat_response", {"/choices/0/message/annotations/0/url_citation/url": "javascript:x"},
     "/choices/0/message/annotations/0/url_citation/url", "pattern"),
    ("openai.chat_response", {"/choices/0/finish_reason": "end_turn"}, "/choices/0/finish_reason", "enum"),
    ("openai.chat_chunk", {"/object": "chat.completion"}, "/object", "const"),
    ("openai.chat_chunk", {"/choices/0/delta/annotations/0/url_citation": DELETE},
     "/choices/0/delta/annotations/0/url_citation", "required"),
    ("openai.chat_chunk", {"/choices/0/index": DELETE}, "/choices/0/index", "required"),
    ("openai.error", {"/error/message": DELETE}, "/error/message", "required"),
    ("openai.error", {"/error": "boom"}, "/error", "type"),
    # Cloudflare
    ("cloudflare.request", {"/query": ""}, "/query", "minLength"),
    ("cloudflare.request", {"/query": "q" * 1025}, "/query", "maxLength"),
    ("cloudflare.request", {"/limit": 11}, "/limit", "maximum"),
    ("cloudflare.request", {"/limit": 0}, "/limit", "minimum"),
    ("cloudflare.request", {"/provider": "bing"}, "/provider", "enum"),
    ("cloudflare.request", {"/byokAlias": "has space"}, "/byokAlias", "pattern"),
    ("cloudflare.request", {"/options": DELETE}, "/options", "required"),
    ("cloudflare.request", {"/options/gateway/id": DELETE}, "/options/gateway/id", "required"),
    ("cloudflare.request", {"/options/gateway/id": ""}, "/options/gateway/id", "minLength"),
    ("cloudflare.request", {"/options/gateway/id": "g" * 65}, "/options/gateway/id", "maxLength"),
    ("cloudflare.request", {"/gatewayId": "x"}, "/gatewayId", "additionalProperties"),
    ("cloudflare.binding_options", {"/gatewayId": DELETE}, "/gatewayId", "required"),
    ("cloudflare.binding_options", {"/gatewayId": ""}, "/gatewayId", "minLength"),
    ("cloudflare.binding_options", {"/gatewayId": "g" * 65}, "/gatewayId", "maxLength"),
    ("cloudflare.binding_options", {"/options": {}}, "/options", "additionalProperties"),
    ("cloudflare.response", {"/items/0/url": "javascript:alert(1)"}, "/items/0/url", "pattern"),
    ("cloudflare.response", {"/items/0/url": DELETE}, "/items/0/url", "required"),
    ("cloudflare.response", {"/metadata/requestId": DELETE}, "/metadata/requestId", "required"),
    ("cloudflare.response", {"/items": {}}, "/items", "type"),
    ("cloudflare.error", {"/success": True}, "/success", "const"),
    ("cloudflare.error", {"/errors/0/code": "7000"}, "/errors/0/code", "type"),
    ("gemini.request", {"/contents": DELETE}, "/contents", "required"),
    ("gemini.request", {"/contents/1/role": "assistant"}, "/contents/1/role", "enum"),
    ("gemini.request", {"/tools/0/google_search": "on"}, "/tools/0/google_search", "type"),
    ("gemini.request", {"/generationConfig/maxOutputTokens": 0}, "/generationConfig/maxOutputTokens",
     "minimum"),
    ("gemini.response", {"/candidates/0/finishReason": "END_TURN"}, "/candidates/0/finishReason", "enum"),
    ("gemini.response", {"/candidates/0/groundingMetadata/groundingSupports/0/segment/endIndex": DELETE},
     "/candidates/0/groundingMetadata/groundingSupports/0/segment/endIndex", "required"),
    ("gemini.response", {"/candidates/0/groundingMetadata/groundingChunks/0/web/uri": DELETE},
     "/candidates/0/groundingMetadata/groundingChunks/0/web/uri", "required"),
    ("gemini.stream_event", {"/candidates/0/groundingMetadata/groundingSupports/0/segment/startIndex": -1},
     "/candidates/0/groundingMetadata/groundingSupports/0/segment/startIndex", "minimum"),
    ("gemini.stream_event", {"/error": {"code": 503, "message": "overloaded"}}, "/error/status", "required"),
    ("gemini.error", {"/error/status": "RATE_LIMITED"}, "/error/status", "enum"),
    ("gemini.error", {"/error/code": "429"}, "/error/code", "type"),
]


def patched(document: Any, edits: dict[str, Any]) -> Any:
    """A deep copy of ``document`` with each JSON pointer set to its value (or deleted)."""
    result = copy.deepcopy(document)
    for pointer, value in edits.items():
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]
        node = result
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: Any = int(last) if isinstance(node, list) else last
        if value is DELETE:
            del node[key]
        elif isinstance(node, list) and key == len(node):
            node.append(value)
        else:
            node[key] = value
    return result


def test_every_provider_kind_has_a_valid_example() -> None:
    assert set(VALID) == set(contracts.PROVIDER_KINDS)


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_example_conforms(kind: str) -> None:
    assert contracts.validate(kind, VALID[kind]) == []


@pytest.mark.parametrize(("kind", "edits", "pointer", "keyword"), NEGATIVE,
                         ids=[f"{kind}:{next(iter(edits))}" for kind, edits, _, _ in NEGATIVE])
def test_negative_example_fails_at_its_pointer(kind: str, edits: dict[str, Any], pointer: str,
                                               keyword: str) -> None:
    found = contracts.validate(kind, patched(VALID[kind], edits))
    assert (pointer, keyword) in [(v.pointer, v.keyword) for v in found], found


def test_every_kind_has_negative_examples() -> None:
    assert {kind for kind, *_ in NEGATIVE} == set(contracts.PROVIDER_KINDS)


@pytest.mark.parametrize(("rule", "instance", "pointer", "fixed"), [
    ("index_span", {"start_index": 3, "end_index": 2}, "end_index", {"end_index": 3}),
    ("char_span", {"start_char_index": 3, "end_char_index": 2}, "end_char_index", {"end_char_index": 4}),
    ("page_span", {"start_page_number": 3, "end_page_number": 2}, "end_page_number", {"end_page_number": 3}),
    ("block_span", {"start_block_index": 3, "end_block_index": 2},
     "end_block_index", {"start_block_index": 0}),
    ("total_tokens", {"input_tokens": 1, "output_tokens": 1, "total_tokens": 3}, "total_tokens",
     {"total_tokens": 2}),
    ("one_domain_list", {"allowed_domains": ["a"], "blocked_domains": []}, "blocked_domains",
     {"blocked_domains": None}),
    ("min_max", {"min": 3, "max": 2}, "max", {"max": 3}),
    ("reserve_below_window", {"contextWindow": 100, "reserve": 100}, "reserve", {"reserve": 99}),
])
def test_each_rule_flags_its_defect_and_passes_the_fix(rule: str, instance: dict[str, Any], pointer: str,
                                                        fixed: dict[str, Any]) -> None:
    assert [list(error.path) for error in contracts.RULES[rule](instance)] == [[pointer]]
    assert list(contracts.RULES[rule]({**instance, **fixed})) == []


def test_every_rule_is_named_by_a_contract() -> None:
    named: set[str] = set()
    for kind in contracts.kinds():
        named |= set(contracts.default().rule_names(kind))
    assert named == set(contracts.RULES)
