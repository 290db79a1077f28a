"""The error taxonomy (replaykit.provenance): classify() on local, SDK, httpx, socket and cancellation errors
and raw responses."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from typing import Any

import aiohttp
import anthropic
import httpx
import httpx2
import openai
import pytest
import yarl
from multidict import CIMultiDict, CIMultiDictProxy

from replaykit import cassette, contracts
from replaykit.errors import LOCAL_PHASES, LocalRequestError, WebSearchError
from replaykit.provenance import (
    ERROR_CODES,
    RESEARCH_RETRYABLE,
    ErrorInfo,
    causes,
    classify,
    is_retryable,
    outcome_json,
    research_code,
    status_retryable,
)

ANTHROPIC_URL = "http://127.0.0.1:9/v1/messages"
OPENAI_URL = "http://127.0.0.1:9/v1/responses"
SECRET_PROMPT = "the user's private question " + "P" * 8


def _anthropic_error(status: int, kind: str,
                     headers: dict[str, str] | None = None) -> anthropic.APIStatusError:
    body = {"type": "error", "error": {"type": kind, "message": f"{kind} happened"}, "request_id": "req_body"}
    request = httpx2.Request("POST", ANTHROPIC_URL, json={"messages": [SECRET_PROMPT]})
    response = httpx2.Response(status, headers={"request-id": "req_011", **(headers or {})}, json=body,
                               request=request)
    return anthropic.APIStatusError(f"Error code: {status}", response=response, body=body)


def _openai_error(status: int, kind: str, message: str = "oops",
                  headers: dict[str, str] | None = None) -> openai.APIStatusError:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    request = httpx2.Request("POST", OPENAI_URL, json={"input": SECRET_PROMPT})
    response = httpx2.Response(status, headers={"x-request-id": "req_oa", **(headers or {})}, json=body,
                               request=request)
    return openai.APIStatusError(f"Error code: {status}", response=response, body=body)


def _raise_from(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as caught:
        return caught


# ---------------------------------------------------------------- local errors


@pytest.mark.parametrize("phase", LOCAL_PHASES)
def test_local_error_is_terminal_with_its_phase(phase: Any) -> None:
    error = LocalRequestError("bad block", phase=phase, pointer="/messages/2/content", message_index=2)
    info = classify(error)
    assert (info.code, info.phase, info.provenance) == ("LOCAL_REQUEST_ERROR", phase, "local")
    assert info.retryable is False
    assert "/messages/2/content" in info.message
    assert info.outcome == "error"


def test_local_error_wrapped_with_raise_from_keeps_its_provenance() -> None:
    wrapped = _raise_from(RuntimeError("step failed"), LocalRequestError("x", phase="estimation"))
    info = classify(wrapped)
    assert (info.code, info.phase, info.provenance) == ("LOCAL_REQUEST_ERROR", "estimation", "local")


def test_local_error_wrapped_implicitly_in_an_except_block_keeps_its_provenance() -> None:
    def step() -> None:
        try:
            raise LocalRequestError("x", phase="preparation")
        except LocalRequestError:
            raise ValueError("while preparing")  # noqa: B904 - the implicit __context__ is what is tested

    with pytest.raises(ValueError) as caught:
        step()
    assert caught.value.__cause__ is None and caught.value.__context__ is not None
    assert classify(caught.value).phase == "preparation"


def test_raise_from_none_hides_the_context() -> None:
    try:
        try:
            raise LocalRequestError("x", phase="validation")
        except LocalRequestError:
            raise KeyError("unrelated") from None
    except KeyError as exc:
        info = classify(exc)
    assert info.code == "INTERNAL_ERROR" and not info.retryable


def test_the_outermost_known_error_decides() -> None:
    provider = _anthropic_error(429, "rate_limit_error")
    inner = _raise_from(provider, LocalRequestError("y", phase="validation"))
    wrapped = _raise_from(RuntimeError("x"), inner)
    assert classify(wrapped).code == "PROVIDER_ERROR"


def test_a_cycle_of_causes_terminates() -> None:
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__cause__, second.__cause__ = second, first
    assert [str(e) for e in causes(first)] == ["a", "b"]
    assert classify(first).code == "INTERNAL_ERROR"


def test_local_request_error_rejects_an_unknown_phase() -> None:
    with pytest.raises(ValueError, match="phase='sending'"):
        LocalRequestError("x", phase="sending")  # type: ignore[arg-type]


# ---------------------------------------------------------------- cancellation


@pytest.mark.parametrize("cancel", [asyncio.CancelledError(), concurrent.futures.CancelledError()])
def test_cancellation_is_aborted_never_retried(cancel: BaseException) -> None:
    info = classify(cancel)
    assert (info.code, info.provenance, info.outcome) == ("CANCELLED", "cancelled", "aborted")
    assert info.retryable is False
    assert outcome_json(cancel)["status"] == "aborted"


def test_wrapped_cancellation_is_still_aborted() -> None:
    wrapped = _raise_from(RuntimeError("subagent stopped"), asyncio.CancelledError())
    assert classify(wrapped).outcome == "aborted"


def test_cancellation_beats_the_transport_error_it_caused() -> None:
    broken = _raise_from(httpx.ReadError("connection closed"), asyncio.CancelledError())
    assert classify(broken).code == "CANCELLED"


def test_a_real_cancelled_task_is_aborted() -> None:
    async def main() -> BaseException:
        task = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as exc:
            return exc
        raise AssertionError("not cancelled")

    assert classify(asyncio.run(main())).code == "CANCELLED"


# ---------------------------------------------------------------- provider errors through the SDKs

STATUS_RULE = [(400, False), (401, False), (402, False), (403, False), (404, False), (413, False),
               (422, False), (408, True), (409, True), (429, True), (500, True), (502, True), (503, True),
               (529, True)]


@pytest.mark.parametrize(("status", "retryable"), STATUS_RULE)
def test_anthropic_status_errors_follow_the_sdk_retry_rule(status: int, retryable: bool) -> None:
    info = classify(_anthropic_error(status, "some_error"))
    assert (info.code, info.provenance, info.status, info.retryable) == ("PROVIDER_ERROR", "provider", status,
                                                                         retryable)
    assert info.request_id == "req_011" and info.provider_type == "some_error"


@pytest.mark.parametrize(("status", "retryable"), STATUS_RULE)
def test_openai_status_errors_follow_the_sdk_retry_rule(status: int, retryable: bool) -> None:
    info = classify(_openai_error(status, "server_error"))
    assert (info.status, info.retryable, info.request_id) == (status, retryable, "req_oa")


@pytest.mark.parametrize(("status", "header", "retryable"), [(429, "false", False), (503, "false", False),
                                                              (400, "true", True), (409, "TRUE", True)])
def test_x_should_retry_overrides_the_status(status: int, header: str, retryable: bool) -> None:
    assert classify(_anthropic_error(status, "e", {"x-should-retry": header})).retryable is retryable
    assert is_retryable(_openai_error(status, "e", headers={"x-should-retry": header})) is retryable


def test_sdk_subclasses_are_recognised() -> None:
    error = _anthropic_error(529, "overloaded_error")
    specific = anthropic.InternalServerError("overloaded", response=error.response, body=error.body)
    assert classify(specific).provider_type == "overloaded_error"


@pytest.mark.parametrize(("kind", "retryable"), [
    ("api_error", True), ("overloaded_error", True), ("rate_limit_error", True), ("timeout_error", True),
    ("invalid_request_error", False), ("authentication_error", False), ("permission_error", False),
])
def test_a_mid_stream_error_event_is_retryable_only_when_transient(kind: str, retryable: bool) -> None:
    """An ``event: error`` after a 200 (the SDK raises it with the stream's status) retries as its 5xx or 429
    twin would: ``api_error`` is Anthropic's 500."""
    assert classify(_anthropic_error(200, kind)).retryable is retryable


def test_sdk_connection_errors_are_transport_and_timeouts_are_deadlines() -> None:
    request = httpx2.Request("POST", ANTHROPIC_URL)
    refused = _raise_from(anthropic.APIConnectionError(request=request),
                          httpx2.ConnectError("[Errno 111] Connection refused"))
    info = classify(refused)
    assert (info.code, info.provenance, info.retryable) == ("TRANSPORT_ERROR", "transport", True)
    assert "Connection refused" in info.message
    timeout = classify(openai.APITimeoutError(request=request))
    assert (timeout.code, timeout.provenance, timeout.retryable) == ("DEADLINE_EXCEEDED", "deadline", True)


# ---------------------------------------------------------------- httpx, sockets


@pytest.mark.parametrize("module", [httpx, httpx2])
@pytest.mark.parametrize(("name", "code", "retryable"), [
    ("ConnectError", "TRANSPORT_ERROR", True), ("ReadError", "TRANSPORT_ERROR", True),
    ("RemoteProtocolError", "TRANSPORT_ERROR", True), ("LocalProtocolError", "TRANSPORT_ERROR", False),
    ("ReadTimeout", "DEADLINE_EXCEEDED", True), ("ConnectTimeout", "DEADLINE_EXCEEDED", True),
])
def test_httpx_errors(module: Any, name: str, code: str, retryable: bool) -> None:
    info = classify(getattr(module, name)("boom"))
    assert (info.code, info.retryable) == (code, retryable)


def test_httpx_status_error_is_a_provider_error() -> None:
    request = httpx.Request("POST", OPENAI_URL)
    response = httpx.Response(503, headers={"x-request-id": "req_h"}, request=request,
                              json={"error": {"message": "busy", "type": "server_error"}})
    error = httpx.HTTPStatusError("503", request=request, response=response)
    info = classify(error)
    assert (info.code, info.status, info.retryable, info.request_id) == ("PROVIDER_ERROR", 503, True, "req_h")


def _aiohttp_status(status: int, headers: dict[str, str]) -> BaseException:
    info = aiohttp.RequestInfo(yarl.URL(ANTHROPIC_URL), "POST", CIMultiDictProxy(CIMultiDict()))
    return aiohttp.ClientResponseError(info, (), status=status, message="Too Many Requests",
                                       headers=CIMultiDictProxy(CIMultiDict(headers)))


@pytest.mark.parametrize(("status", "headers", "retryable"), [
    (429, {"request-id": "req_ai"}, True), (400, {"request-id": "req_ai"}, False),
    (400, {"request-id": "req_ai", "x-should-retry": "true"}, True),  # the headers are read
])
def test_an_aiohttp_status_error_is_a_provider_error(status: int, headers: dict[str, str],
                                                     retryable: bool) -> None:
    info = classify(_aiohttp_status(status, headers))
    assert (info.code, info.provenance, info.status, info.retryable, info.request_id) == (
        "PROVIDER_ERROR", "provider", status, retryable, "req_ai")
    assert "Too Many Requests" in info.message


@pytest.mark.parametrize(("exc", "code", "text"), [
    (aiohttp.ServerTimeoutError("read timed out"), "DEADLINE_EXCEEDED", "read timed out"),
    (aiohttp.ServerDisconnectedError(), "TRANSPORT_ERROR", "Server disconnected"),
    (aiohttp.ClientPayloadError("truncated body"), "TRANSPORT_ERROR", "truncated body"),
    (aiohttp.ClientOSError(104, "reset"), "TRANSPORT_ERROR", "[Errno 104] reset"),
])
def test_aiohttp_transport_errors_and_timeouts(exc: BaseException, code: str, text: str) -> None:
    info = classify(exc)
    provenance = "deadline" if code == "DEADLINE_EXCEEDED" else "transport"
    assert (info.code, info.provenance, info.retryable) == (code, provenance, True)
    assert info.message == f"aiohttp: {type(exc).__name__}: {text}"


@pytest.mark.parametrize(("exc", "code"), [(ConnectionResetError(104, "reset"), "TRANSPORT_ERROR"),
                                           (ConnectionRefusedError(111, "refused"), "TRANSPORT_ERROR"),
                                           (BrokenPipeError(), "TRANSPORT_ERROR"),
                                           (TimeoutError(), "DEADLINE_EXCEEDED")])
def test_socket_errors(exc: BaseException, code: str) -> None:
    assert classify(exc).code == code and classify(exc).retryable


def test_an_unknown_exception_is_internal_and_terminal() -> None:
    info = classify(ZeroDivisionError("division by zero"))
    assert (info.code, info.provenance, info.retryable) == ("INTERNAL_ERROR", "local", False)
    assert "ZeroDivisionError" in info.message


# ---------------------------------------------------------------- raw responses


def test_a_cassette_error_response_is_classified() -> None:
    body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    headers = {"Request-Id": ["req_529"], "content-type": ["application/json"]}
    response = cassette.Response(529, headers=headers, body=body.encode())
    info = classify(response)
    assert (info.status, info.provider_type, info.request_id, info.retryable) == (529, "overloaded_error",
                                                                                   "req_529", True)


def test_an_httpx_response_is_classified() -> None:
    response = httpx.Response(400, json={"error": {"message": "bad", "type": "invalid_request_error"}})
    assert not classify(response).retryable and classify(response).provider_type == "invalid_request_error"


def test_a_cloudflare_gateway_error_body_states_its_own_retryability() -> None:
    body = {"ok": False, "error": {"category": "gateway", "code": "web_search_payment_required",
                                   "status": 402, "retryable": False, "gatewayRequestId": "gw_1"}}
    info = classify(httpx.Response(402, json=body))
    assert (info.provider_type, info.request_id) == ("web_search_payment_required", "gw_1")
    assert info.retryable is False
    v4 = {"success": False, "errors": [{"code": 7000, "message": "Invalid web search request body"}]}
    info = classify(httpx.Response(400, json=v4))
    assert info.provider_type == "7000" and "Invalid web search request body" in info.message
    says_no = {"ok": False, "error": {"code": "web_search_unavailable", "retryable": False}}
    assert classify(httpx.Response(503, json=says_no)).retryable is False
    assert classify(httpx.Response(503, json=says_no, headers={"x-should-retry": "true"})).retryable is True


def test_a_success_response_or_a_stranger_is_refused() -> None:
    with pytest.raises(ValueError, match="not an error"):
        classify(httpx.Response(200, json={}))
    with pytest.raises(TypeError, match="cannot classify"):
        classify(object())


def test_web_search_errors() -> None:
    failed = WebSearchError("rate limited", status=429, code="web_search_rate_limited", retryable=True,
                            request_id="cf_1")
    info = classify(failed)
    assert (info.code, info.status, info.request_id) == ("PROVIDER_ERROR", 429, "cf_1")
    assert info.provider_type == "web_search_rate_limited"
    timeout = classify(WebSearchError("slow", status=None, code="web_search_timeout", retryable=True))
    assert (timeout.code, timeout.provenance, timeout.retryable) == ("DEADLINE_EXCEEDED", "deadline", True)
    unreachable = classify(WebSearchError("refused", status=None, code="web_search_unavailable",
                                          retryable=True))
    assert (unreachable.code, unreachable.provenance) == ("TRANSPORT_ERROR", "transport")
    assert unreachable.retryable
    assert research_code(unreachable, "search") == "search_capacity"


# ---------------------------------------------------------------- safety and JSON


def _keys() -> list[str]:
    return ["sk-" + "ant-api03-" + "a1B2" * 12, "sk-" + "proj-" + "Zx9_" * 10, "sk-" + "Q" * 40,
            "AKIA" + "IOSFODNN7EXAMPLE", "ghp_" + "x1" * 18, "github_pat_" + "A1_" * 10]


@pytest.mark.parametrize("key", _keys())
def test_messages_never_hold_a_key(key: str) -> None:
    error = _openai_error(401, "invalid_request_error", message=f"Incorrect API key provided: {key}.")
    info = classify(error)
    assert key not in info.message and key[:12] not in info.message
    assert "[REDACTED]" in info.message and "401" in info.message
    assert key not in json.dumps(info.to_json())


def test_messages_never_hold_the_request_body() -> None:
    for error in (_anthropic_error(400, "invalid_request_error"), _openai_error(500, "server_error")):
        assert SECRET_PROMPT not in classify(error).message


def test_error_info_json_is_the_outcome_error_object() -> None:
    info = classify(_anthropic_error(429, "rate_limit_error"))
    assert info.to_json() == {"code": "PROVIDER_ERROR", "provenance": "provider",
                              "retryable": True, "message": info.message, "status": 429,
                              "providerType": "rate_limit_error", "requestId": "req_011"}
    local = ErrorInfo("LOCAL_REQUEST_ERROR", "validation", "local", False, "m")
    assert local.to_json() == {"code": "LOCAL_REQUEST_ERROR", "phase": "validation", "provenance": "local",
                               "retryable": False, "message": "m"}
    assert set(ERROR_CODES) >= {"LOCAL_REQUEST_ERROR", "PROVIDER_ERROR", "TRANSPORT_ERROR", "CANCELLED",
                                "DEADLINE_EXCEEDED"}


def _outcome_failures() -> dict[str, BaseException | object]:
    """One failure of every code (provider ones with status, type and request id), wrapped as harnesses do."""
    return {
        "local": _raise_from(RuntimeError("step failed"), LocalRequestError("x", phase="validation")),
        "provider": _anthropic_error(529, "overloaded_error"),
        "openai": _openai_error(400, "invalid_request_error"),
        "web-search": WebSearchError("rate limited", status=429, code="web_search_rate_limited",
                                     retryable=True, request_id="cf_1"),
        "response": httpx.Response(503, headers={"cf-aig-request-id": "cf_2"}, json={"errors": []}),
        "transport": ConnectionResetError(104, "reset"),
        "deadline": TimeoutError(),
        "cancelled": _raise_from(RuntimeError("stopped"), asyncio.CancelledError()),
        "internal": _raise_from(KeyError("content"), ZeroDivisionError("division by zero")),
    }


@pytest.mark.parametrize("name", sorted(_outcome_failures()))
def test_every_classified_failure_is_a_valid_outcome(name: str) -> None:
    outcome = {**outcome_json(_outcome_failures()[name]), "transcript": None, "persistWrites": 0}
    assert contracts.validate("replaykit.target-outcome", outcome) == []


def test_the_error_codes_are_the_outcome_contract_codes() -> None:
    schema = contracts.default().schema("replaykit.target-outcome")
    assert sorted(schema["$defs"]["code"]["enum"]) == sorted(ERROR_CODES)


def test_an_internal_error_with_a_phase_or_retryable_is_refused_by_the_outcome_contract() -> None:
    error = classify(ZeroDivisionError()).to_json()
    for wrong in ({"phase": "preparation"}, {"retryable": True}, {"provenance": "provider"}):
        outcome = {"status": "error", "error": {**error, **wrong}, "transcript": None, "persistWrites": 0}
        assert [v.pointer for v in contracts.validate("replaykit.target-outcome", outcome)] == [
            "/error/" + next(iter(wrong))]


@pytest.mark.parametrize(("status", "hint", "kind", "expected"), [
    (429, None, None, True), (529, None, None, True), (413, None, None, False), (429, " false ", None, False),
    (200, None, "rate_limit_error", True), (200, None, None, False), (404, "maybe", None, False),
    (200, None, "api_error", True), (200, None, "server_error", True),
    (200, None, "rate_limit_exceeded", True), (200, None, "invalid_request_error", False),
    (400, None, "api_error", False),
])
def test_status_retryable(status: int, hint: str | None, kind: str | None, expected: bool) -> None:
    assert status_retryable(status, hint, kind) is expected


def _search_failure(status: int | None, code: str = "web_search_failed") -> ErrorInfo:
    return classify(WebSearchError("failed", status=status, code=code, retryable=status in (429, 503)))


@pytest.mark.parametrize(("info", "stage", "code"), [
    (_search_failure(429, "web_search_rate_limited"), "search", "search_capacity"),
    (_search_failure(402, "web_search_payment_required"), "search", "search_capacity"),
    (_search_failure(503, "web_search_unavailable"), "search", "search_capacity"),
    (_search_failure(401, "web_search_unauthorized"), "search", "search_auth"),
    (_search_failure(403, "web_search_unauthorized"), "search", "search_auth"),
    (_search_failure(400, "web_search_bad_request"), "search", "invalid_request"),
    (_search_failure(None, "web_search_timeout"), "search", "deadline"),
    (classify(httpx.ConnectError("refused")), "search", "search_capacity"),
    (classify(LocalRequestError("two many queries", phase="validation")), "search", "invalid_request"),
    (classify(TimeoutError()), "model", "deadline"),
    (classify(httpx.ConnectError("refused")), "model", "model_failure"),
    (_search_failure(401), "model", "model_failure"),
    (classify(LocalRequestError("over budget", phase="estimation")), "model", "invalid_request"),
])
def test_research_code_maps_the_taxonomy_to_the_research_failure_classes(info: ErrorInfo, stage: Any,
                                                                          code: str) -> None:
    assert research_code(info, stage) == code


def test_research_retryability_is_the_guides_and_the_outcome_contract_holds_it() -> None:
    assert [code for code, retryable in RESEARCH_RETRYABLE.items() if retryable] == [
        "search_capacity", "model_failure", "citation_failure", "deadline"]
    schema = contracts.default().schema("replaykit.target-outcome")
    assert schema["$defs"]["research"]["properties"]["error"]["properties"]["code"]["enum"] == list(
        RESEARCH_RETRYABLE)
    entry = {"step": 0, "queries": [], "searches": [], "evidence": [], "answer": None, "claims": [],
             "sources": [], "unsupportedClaims": [], "rejected": [], "withheld": [], "notes": [],
             "ignoredToolCalls": 0}
    for code, retryable in RESEARCH_RETRYABLE.items():
        for given in (retryable, not retryable):
            transcript = {"version": 1, "system": None, "tools": [], "messages": []}
            research = [{**entry, "error": {"code": code, "retryable": given}}]
            outcome = {"status": "ok", "error": None, "transcript": transcript, "persistWrites": 0,
                       "research": research}
            violations = contracts.validate("replaykit.target-outcome", outcome)
            assert (violations == []) is (given is retryable), (code, given, violations)
