"""The contract registry: kinds, loading errors, never fetching, routes, and faithful fast paths."""

from __future__ import annotations

import base64
import copy
import json
import secrets
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from replaykit import contracts, routes, sse
from replaykit.contracts import Contracts
from replaykit.contracts.violations import _explain, _without_cascades
from replaykit.errors import ContractError, UsageError
from replaykit.resources import data_dir

CONTRACTS = data_dir("contracts")
VALID: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "contracts" / "valid-examples.json")
                                   .read_text(encoding="utf-8"))


def _write(root: Path, relative: str, schema: Any) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schema if isinstance(schema, str) else json.dumps(schema), encoding="utf-8")
    return path


def _schema(name: str, **body: Any) -> dict[str, Any]:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://replaykit.dev/contracts/replaykit/{name}.schema.json", **body}


# ---------------------------------------------------------------- the bundled files


@pytest.mark.parametrize("path", sorted(CONTRACTS.rglob("*.schema.json")), ids=lambda p: str(p.name))
def test_every_contract_is_a_valid_2020_12_schema_with_its_id(path: Path) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    relative = path.relative_to(CONTRACTS).as_posix()
    assert schema["$id"] == f"https://replaykit.dev/contracts/{relative}"
    assert schema.get("description"), "every contract says what it covers"


def test_kinds_cover_providers_and_replaykit_schemas() -> None:
    known = contracts.kinds()
    assert set(contracts.PROVIDER_KINDS) <= set(known)
    for path in CONTRACTS.rglob("*.schema.json"):
        if path.relative_to(CONTRACTS).parts[0] not in {"anthropic", "openai", "cloudflare", "gemini"}:
            assert f"replaykit.{path.name.removesuffix('.schema.json')}" in known


def test_unresolved_markers_stay_open_and_say_so() -> None:
    for relative in ("cloudflare/error.schema.json", "openai/error.schema.json"):
        text = (CONTRACTS / relative).read_text(encoding="utf-8")
        assert "UNVERIFIED" in text
        assert '"additionalProperties": false' not in text


def test_unknown_kind_names_the_known_kinds() -> None:
    with pytest.raises(ContractError, match=r"unknown contract kind 'anthropic\.nope'.*anthropic\.request"):
        contracts.validate("anthropic.nope", {})


def test_validators_are_compiled_once() -> None:
    bundled = contracts.default()
    assert bundled.validator("openai.stream_event") is bundled.validator("openai.stream_event")


# ---------------------------------------------------------------- loading errors


def test_replaykit_kinds_are_found_anywhere_under_contracts(tmp_path: Path) -> None:
    _write(tmp_path, "replaykit/journal-entry.schema.json", _schema("journal-entry", type="object"))
    root_level = _schema("scenario", type="object", required=["name"])
    root_level["$id"] = "https://replaykit.dev/contracts/scenario.schema.json"
    _write(tmp_path, "scenario.schema.json", root_level)
    local = Contracts(tmp_path)
    assert {"replaykit.journal-entry", "replaykit.scenario"} <= set(local.kinds())
    assert [v.pointer for v in local.validate("replaykit.scenario", {})] == ["/name"]


def test_a_ref_outside_the_registry_is_refused_not_fetched(tmp_path: Path) -> None:
    _write(tmp_path, "replaykit/remote.schema.json",
           _schema("remote", properties={"a": {"$ref": "https://example.com/schemas/a.json"}}))
    with pytest.raises(ContractError, match=r"remote\.schema\.json.*never fetched"):
        Contracts(tmp_path).validate("replaykit.remote", {"a": 1})


def test_invalid_json_names_the_file_and_line(tmp_path: Path) -> None:
    _write(tmp_path, "replaykit/broken.schema.json", '{\n  "$id": "x",\n  "type": \n}')
    with pytest.raises(ContractError, match=r"broken\.schema\.json:4: not valid JSON"):
        Contracts(tmp_path).kinds()


def test_a_contract_without_id_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, "replaykit/anon.schema.json", {"type": "object"})
    with pytest.raises(ContractError, match=r"anon\.schema\.json:/\$id: a contract needs a string \$id"):
        Contracts(tmp_path).kinds()


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    _write(tmp_path, "replaykit/one.schema.json", _schema("same"))
    _write(tmp_path, "replaykit/two.schema.json", _schema("same"))
    with pytest.raises(ContractError, match=r"two\.schema\.json:/\$id: .* also used by"):
        Contracts(tmp_path).kinds()


def test_an_unknown_rule_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, "replaykit/rules.schema.json", _schema("rules", **{"x-rules": ["start_before_end"]}))
    with pytest.raises(ContractError, match=r"unknown rule 'start_before_end'; use one of .*index_span"):
        Contracts(tmp_path).kinds()


def test_nested_ids_resolve_relative_refs_against_their_own_base(tmp_path: Path) -> None:
    inner = {"$id": "https://replaykit.dev/contracts/replaykit/inner/", "$defs": {"n": {"type": "integer"}},
             "properties": {"value": {"$ref": "#/$defs/n"}}}
    _write(tmp_path, "replaykit/outer.schema.json", _schema("outer", properties={"box": inner}))
    found = Contracts(tmp_path).validate("replaykit.outer", {"box": {"value": "x"}})
    assert [(v.pointer, v.keyword) for v in found] == [("/box/value", "type")]


def test_a_missing_kind_target_is_a_contract_error(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match=r"anthropic/request\.schema\.json: no such contract"):
        Contracts(tmp_path).validate("anthropic.request", {})


# ---------------------------------------------------------------- routes


# ---------------------------------------------------------------- fast paths keep jsonschema's verdicts


def _stock_validator(kind: str) -> Any:
    resources = []
    for path in CONTRACTS.rglob("*.schema.json"):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resources.append((schema["$id"], DRAFT202012.create_resource(schema)))
    registry: Registry[Any] = Registry().with_resources(resources)
    return Draft202012Validator({"$ref": contracts.kinds()[kind]}, registry=registry)


_STOCK: dict[str, Any] = {}
_WORDS = ["", "x", "text", "web_search", "https://example.com/a", "srvtoolu_1", "ws_1", "completed",
          "url_citation"]
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(_WORDS))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def _mutants(draw: st.DrawFn) -> tuple[str, Any]:
    """A valid example with one value replaced or one member removed."""
    kind = draw(st.sampled_from(sorted(VALID)))
    document = copy.deepcopy(VALID[kind])
    path = draw(st.sampled_from(_paths(document)[1:]))
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(_LEAVES)
    return kind, document


@settings(max_examples=150, deadline=None)
@given(_mutants())
def test_replaykit_and_stock_jsonschema_agree(mutant: tuple[str, Any]) -> None:
    kind, document = mutant
    stock = _STOCK.get(kind) or _STOCK.setdefault(kind, _stock_validator(kind))
    with mock.patch.object(Contracts, "booked", lambda self, found, profile: found):  # the schema's own words
        ours = [v for v in contracts.validate(kind, document) if v.keyword != "x-rules"]  # rules: ours only
    assert (ours == []) == stock.is_valid(document)
    parent_keywords = {"required", "additionalProperties", "unevaluatedProperties", "false"}
    ours_places = {v.pointer.rsplit("/", 1)[0] if v.keyword in parent_keywords else v.pointer for v in ours}
    explained = [v for error in stock.iter_errors(document) for v in _explain(error)]
    stock_found = _without_cascades(explained)
    stock_places = {v.pointer.rsplit("/", 1)[0] if v.keyword in parent_keywords else v.pointer
                    for v in stock_found}
    assert ours_places == stock_places


def test_a_closed_object_with_pattern_properties_reports_each_unexpected_member() -> None:
    schema = {"type": "object", "patternProperties": {"^x-": {}}, "additionalProperties": False}
    error = next(Draft202012Validator(schema).iter_errors({"bogus": 1, "x-ok": 2, "zz": 3}))
    found = _explain(error)
    assert [v.pointer for v in found] == ["/bogus", "/zz"]
    assert all("closed object" in v.message for v in found)


def test_a_binary_value_is_reported_not_crashed_on() -> None:
    found = contracts.validate("replaykit.cassette", {"version": b"\x01", "interactions": []})
    assert [v.pointer for v in found] == ["/version"]


def test_a_failing_branch_does_not_echo_every_member_as_unevaluated() -> None:
    block = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "name": "web_search",
             "content": []}
    call = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "q"}}
    body = {"model": "m", "max_tokens": 8, "messages": [{"role": "assistant", "content": [call, block]}]}
    found = contracts.validate("anthropic.request", body)
    assert {(v.pointer, v.keyword) for v in found} == {("/messages/0/content/1/name", "false")}


def test_an_unexpected_member_alone_is_still_reported() -> None:
    block = {"type": "text", "text": "hi", "timestamp": 1}
    body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [block]}]}
    found = contracts.validate("anthropic.request", body)
    assert [v.pointer for v in found] == ["/messages/0/content/0/timestamp"]


# ---------------------------------------------------------------- the wire over the SDK: no action, profiles

WS_NO_ACTION = {"id": "ws_0cc9", "type": "web_search_call", "status": "completed"}


def test_a_web_search_call_without_action_meets_every_contract_it_appears_in() -> None:
    assert contracts.validate("openai.output_item", WS_NO_ACTION) == []
    assert contracts.validate("openai.input_item", WS_NO_ACTION) == []
    for kind in ("response.output_item.added", "response.output_item.done"):
        event = {"type": kind, "sequence_number": 3, "output_index": 1, "item": WS_NO_ACTION}
        assert contracts.validate("openai.stream_event", event) == []
    request = {"model": "gpt-5", "input": [{"role": "user", "content": "q"}, WS_NO_ACTION]}
    assert contracts.validate("openai.request", request) == []


def test_every_other_web_search_call_rule_holds_without_action() -> None:
    for broken, pointer in (({"status": "done"}, "/status"), ({"id": "call_1"}, "/id"),
                            ({"action": {"type": "browse"}}, "/action/type")):
        found = contracts.validate("openai.output_item", WS_NO_ACTION | broken)
        assert [v.pointer for v in found] == [pointer]
    assert [v.pointer for v in contracts.validate("openai.input_item", WS_NO_ACTION | {"query": "q"})] == \
        ["/query"]


XAI_CALL = {"id": "fc_25de_0", "type": "web_search_call", "status": "completed", "name": "web_search",
            "arguments": "{}", "call_id": ""}
SPANLESS = {"type": "url_citation", "url": "https://x.ai/company"}


def _message(*notes: dict[str, Any]) -> dict[str, Any]:
    part = {"type": "output_text", "text": "xAI is a company.", "annotations": list(notes)}
    return {"type": "message", "id": "msg_25de", "role": "assistant", "status": "completed",
            "content": [part]}


@pytest.mark.parametrize(("kind", "value", "pointers"), [
    ("openai.output_item", XAI_CALL, ["/id"]),
    ("openai.output_item", _message(SPANLESS), ["/content/0/annotations/0/start_index",
                                                "/content/0/annotations/0/end_index",
                                                "/content/0/annotations/0/title"]),
    ("openai.input_item", XAI_CALL, ["/id", "/arguments", "/call_id", "/name"]),
    ("openai.usage", {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
     ["/input_tokens_details", "/output_tokens_details"]),
    ("openai.stream_event", {"type": "response.web_search_call.searching", "sequence_number": 1,
                             "output_index": 0, "item_id": "fc_25de_0"}, ["/item_id"]),
])
def test_the_openai_compatible_profile_turns_openai_only_rules_into_warnings(
        kind: str, value: dict[str, Any], pointers: list[str]) -> None:
    strict = contracts.validate(kind, value)
    assert sorted(v.pointer for v in strict) == sorted(pointers)
    assert {v.severity for v in strict} == {"error"}
    relaxed = contracts.validate(kind, value, "openai-compatible")
    assert [(v.pointer, v.keyword) for v in relaxed] == [(v.pointer, v.keyword) for v in strict]
    assert {v.severity for v in relaxed} == {"warning"}
    assert all("a warning under profile openai-compatible" in v.message for v in relaxed)


def test_the_profile_relaxes_only_what_is_marked() -> None:
    broken = _message({"type": "url_citation", "url": "javascript:alert(1)", "start_index": 9, "end_index": 2,
                       "title": "t"})
    found = contracts.validate("openai.output_item", broken, "openai-compatible")
    assert {(v.pointer.rsplit("/", 1)[1], v.severity) for v in found} == {("url", "error"),
                                                                           ("end_index", "error")}
    assert [v.severity for v in contracts.validate("openai.output_item", XAI_CALL | {"status": "x"},
                                                   "openai-compatible")] == ["warning", "error"]


def test_profiles_are_named_and_checked(tmp_path: Path) -> None:
    assert list(contracts.PROFILES) == ["strict", "openai-compatible"]
    assert contracts.resolve_profile(None) is contracts.STRICT
    with pytest.raises(UsageError, match="'lenient' is unknown; use one of strict, openai-compatible"):
        contracts.validate("openai.usage", {}, "lenient")
    marks = {"x-profiles": {"lenient": ["type"]}}
    _write(tmp_path, "replaykit/marked.schema.json", _schema("marked", **marks))
    with pytest.raises(ContractError, match=r"marked\.schema\.json:x-profiles: unknown profile 'lenient'"):
        Contracts(tmp_path).kinds()


# ---------------------------------------------------------------- a received value is never echoed whole


def _unshaped_keys() -> dict[str, str]:
    """Keys of no shape the scanner knows, made at run time: an Azure key, a Cloudflare API token, an AWS
    secret access key, HTTP Basic credentials as typed."""
    return {"azure": secrets.token_hex(16), "cloudflare": secrets.token_urlsafe(30),
            "aws": base64.b64encode(secrets.token_bytes(30)).decode(),
            "basic": f"svc-deploy:{secrets.token_urlsafe(12)}"}


# each keyword whose message quotes the value it received, and where that value sits
_ECHOING = {
    "enum": ({"enum": ["a", "b"]}, lambda key: key),
    "const": ({"const": "message"}, lambda key: key),
    "pattern": ({"type": "string", "pattern": "^[a-z]+$"}, lambda key: key),
    "type": ({"type": "integer"}, lambda key: key),
    "maxLength": ({"type": "string", "maxLength": 4}, lambda key: key),
    "minLength": ({"type": "string", "minLength": 80}, lambda key: key),
    "anyOf": ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, lambda key: {"note": key}),
    "oneOf": ({"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, lambda key: key),
    "not": ({"not": {"type": "object"}}, lambda key: {"note": key}),
    "uniqueItems": ({"uniqueItems": True}, lambda key: [key, key]),
    "maxItems": ({"maxItems": 1}, lambda key: [key, key]),
    "contains": ({"type": "array", "contains": {"type": "integer"}}, lambda key: [key]),
    "propertyNames": ({"type": "object", "propertyNames": {"maxLength": 8}}, lambda key: {key: 1}),
    "object const": ({"const": {"a": 1}}, lambda key: {"note": key}),
    "object enum": ({"enum": [{"a": 1}]}, lambda key: {"note": key}),
}


@pytest.mark.parametrize("keyword", sorted(_ECHOING))
@pytest.mark.parametrize("kind", sorted(_unshaped_keys()))
def test_a_message_shows_a_received_value_only_as_a_short_excerpt(tmp_path: Path, keyword: str,
                                                                  kind: str) -> None:
    rule, place = _ECHOING[keyword]
    _write(tmp_path, "replaykit/echo.schema.json", _schema("echo", properties={"field": rule}))
    key = _unshaped_keys()[kind]
    local = Contracts(tmp_path)
    for found in (local.validate("replaykit.echo", {"field": place(key)}),
                  local._by_reference("replaykit.echo", {"field": place(key)}, contracts.STRICT)):
        assert found and all(key not in str(v) and key[4:-2] not in str(v) for v in found), found


def test_a_long_value_is_quoted_by_its_excerpt_and_a_short_one_whole() -> None:
    key = secrets.token_hex(16)

    def role(value: str) -> list[str]:
        body = {"model": "m", "max_tokens": 8, "messages": [{"role": value, "content": "hi"}]}
        return [v.message for v in contracts.validate("anthropic.request", body)]

    assert role(key) == [f"'{key[:4]}…{key[-2:]}' (32 chars) is not one of user, assistant, system"]
    assert role("bot") == ["'bot' is not one of user, assistant, system"]


def test_a_stream_rule_shows_a_received_type_only_as_a_short_excerpt() -> None:
    key = secrets.token_hex(16)
    route = routes.known("POST", "https://api.anthropic.com/v1/messages")
    assert route is not None
    events = [sse.encode(json.dumps({"type": key}), event="message_start")]
    found = " ".join(str(v) for v in contracts.check_events(route, events))
    assert f"the stream starts with '{key[:4]}…{key[-2:]}' (32 chars)" in found
    assert f"the SSE event name is 'mess…rt' (13 chars) but the data's type is '{key[:4]}…" in found
    assert key not in found


# ---------------------------------------------------------------- a compatible provider's own tool calls


def _xai_call(kind: str, **fields: Any) -> dict[str, Any]:
    """A tool call item of xAI's (the shape of vercel/ai packages/xai/src/responses/xai-responses-api.ts)."""
    return {"type": kind, "id": "fc_84c1a8ea_0", "status": "completed", "name": "x_semantic_search",
            "arguments": '{"query":"AI"}', "call_id": "", **fields}


@pytest.mark.parametrize("kind", ["openai.output_item", "openai.input_item"])
@pytest.mark.parametrize("item_type", ["x_search_call", "code_execution_call", "view_image_call",
                                       "view_x_video_call"])
def test_an_unknown_tool_call_item_is_a_warning_only_under_the_compatible_profile(kind: str,
                                                                                   item_type: str) -> None:
    item = _xai_call(item_type)
    strict = contracts.validate(kind, item, contracts.STRICT)
    lenient = contracts.validate(kind, item, contracts.OPENAI_COMPATIBLE)
    assert [(v.pointer, v.keyword, v.severity) for v in strict] == [("/type", "enum", "error")]
    assert [(v.pointer, v.keyword, v.severity) for v in lenient] == [("/type", "enum", "warning")]


@pytest.mark.parametrize("kind", ["openai.output_item", "openai.input_item"])
@pytest.mark.parametrize(("item", "pointer", "keyword"), [
    (_xai_call("x_search_call", status=None), "/status", "type"),  # not the shape of a tool call
    ({"type": "x_search_call", "status": "completed"}, "/id", "required"),
    (_xai_call("x_search"), "/type", "enum"),  # not a tool call: an unknown item type stays an error
    (_xai_call("X_Search_Call"), "/type", "enum"),
])
def test_an_unknown_item_is_an_error_under_both_profiles_unless_it_is_a_tool_call(
        kind: str, item: dict[str, Any], pointer: str, keyword: str) -> None:
    for profile in (contracts.STRICT, contracts.OPENAI_COMPATIBLE):
        found = contracts.validate(kind, item, profile)
        assert (pointer, keyword) in [(v.pointer, v.keyword) for v in found if v.severity == "error"]


def test_an_unknown_tool_type_is_a_warning_only_under_the_compatible_profile() -> None:
    body = {"model": "grok-4", "input": "hi", "tools": [{"type": "x_search"}]}
    assert [v.severity for v in contracts.validate("openai.request", body, contracts.STRICT)] == ["error"]
    assert [v.severity for v in contracts.validate("openai.request", body, contracts.OPENAI_COMPATIBLE)] == \
        ["warning"]


# ---------------------------------------------------------------- a Chat Completions stream


def _chat_chunk(**fields: Any) -> str:
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
             "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}], **fields}
    return json.dumps(chunk)


def _chat_route() -> routes.Route:
    route = routes.known("POST", "https://api.openai.com/v1/chat/completions")
    assert route is not None and route.contracts is not None
    return route


def test_a_chat_streams_done_line_ends_it_and_is_never_read_as_json() -> None:
    usage = _chat_chunk(choices=[], usage=None)
    events = [sse.encode(_chat_chunk()), sse.encode(usage), sse.encode("[DONE]")]
    assert contracts.check_events(_chat_route(), events) == []
    late = contracts.check_events(_chat_route(), [*events, sse.encode(_chat_chunk())])
    assert [(v.keyword, v.event) for v in late] == [("sequence", 3)]


def test_a_chat_stream_error_line_is_openais_error_envelope() -> None:
    error = json.dumps({"error": {"message": "overloaded", "type": "server_error", "param": None,
                                  "code": None}})
    assert contracts.check_events(_chat_route(), [sse.encode(_chat_chunk()), sse.encode(error)]) == []
    bad = contracts.check_events(_chat_route(), [sse.encode(json.dumps({"error": {"type": "x"}}))])
    assert [(v.pointer, v.keyword) for v in bad] == [("/error/message", "required")]


def test_perplexitys_last_chunk_is_a_warning_only_under_the_compatible_profile() -> None:
    done = _chat_chunk(id="58cb9740-f356-49e9-b71e-a02a1376c1b9", object="chat.completion.done")
    strict = contracts.check_events(_chat_route(), [sse.encode(done)])
    lenient = contracts.check_events(_chat_route(), [sse.encode(done)],
                                     profile=contracts.OPENAI_COMPATIBLE)
    assert [(v.pointer, v.severity) for v in strict] == [("/id", "error"), ("/object", "error")]
    assert [(v.pointer, v.severity) for v in lenient] == [("/id", "warning"), ("/object", "warning")]


def test_an_openrouter_server_tool_in_a_chat_request_is_a_warning_only_under_the_compatible_profile() -> None:
    tool = {"type": "openrouter:web_search", "parameters": {"max_uses": 1, "search_context_size": "medium"}}
    body = {"model": "deepseek/deepseek-chat", "messages": [{"role": "user", "content": "hi"}],
            "tools": [tool]}
    strict = contracts.validate("openai.chat_request", body, contracts.STRICT)
    lenient = contracts.validate("openai.chat_request", body, contracts.OPENAI_COMPATIBLE)
    assert [(v.pointer, v.keyword, v.severity) for v in strict] == [("/tools/0/type", "enum", "error")]
    assert [(v.pointer, v.keyword, v.severity) for v in lenient] == [("/tools/0/type", "enum", "warning")]
