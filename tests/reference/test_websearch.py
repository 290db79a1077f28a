"""The reference's client-side ``web_search`` tool (replaykit/reference/websearch.py) against the fake
provider's Cloudflare route: host options, the capped request, the host's record and the model's text,
failures, the timeout and the cancellation. The scenarios (scenarios/web-search-*.yaml) run it end to end;
these pin each rule alone, and each test that guards a named mutant fails on it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from replaykit import contracts
from replaykit.errors import LocalRequestError, WebSearchError
from replaykit.reference.tools import Tools
from replaykit.reference.websearch import (
    BASE_URL_ENV,
    SearchOptions,
    SearchResult,
    WebSearchTool,
    advice,
    search,
)
from replaykit.replay import ProviderModel, project
from replaykit.resources import data_dir
from replaykit.search import check_request
from replaykit.server import FakeProvider

ACCOUNT = "0123456789abcdef0123456789abcdef"
CLOUDFLARE = data_dir("cassettes") / "cloudflare"
HOST = {"provider": "linkup", "accountId": ACCOUNT}
Json = dict[str, Any]


@pytest.fixture(autouse=True)
def _no_mutant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLAYKIT_MUTANT", raising=False)


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Start a fake provider on the named Cloudflare cassettes (with faults) and point the tool at it."""
    started: list[FakeProvider] = []

    def start(*names: str, faults: tuple[Json, ...] = ()) -> FakeProvider:
        provider = FakeProvider([CLOUDFLARE / name for name in names], faults=faults, journal_bodies="full")
        provider.__enter__()
        started.append(provider)
        monkeypatch.setenv(BASE_URL_ENV, provider.env()[BASE_URL_ENV])
        return provider

    yield start
    for provider in started:
        provider.__exit__(None, None, None)


def _search(options: SearchOptions, query: str, limit: int | None = None) -> SearchResult:
    async def go() -> SearchResult:
        async with httpx.AsyncClient() as client:
            return await search(client, options, query, limit)
    return asyncio.run(go())


def _run(options: SearchOptions, arguments: Json) -> Any:
    async def go() -> Any:
        async with httpx.AsyncClient() as client:
            return await WebSearchTool(options, client).run(arguments)
    return asyncio.run(go())


# ---------------------------------------------------------------- host options


def test_the_host_options_default_as_the_agents_sdk_does() -> None:
    options = SearchOptions.from_host(HOST)
    assert (options.gateway, options.byok_alias, options.limit) == ("default", None, 5)
    assert (options.max_description_chars, options.timeout_ms) == (600, 30000)
    assert SearchOptions.from_host({**HOST, "limit": 7.0}).limit == 7


@pytest.mark.parametrize(("host", "place"), [
    ({"accountId": ACCOUNT}, "/provider"),
    ({**HOST, "provider": "bing"}, "/provider"),
    ({"provider": "exa"}, "/accountId"),
    ({**HOST, "accountId": "my-account"}, "/accountId"),
    ({**HOST, "limit": 50}, "/limit"),
    ({**HOST, "limit": 0}, "/limit"),
    ({**HOST, "limit": True}, "/limit"),
    ({**HOST, "gateway": ""}, "/gateway"),
    ({**HOST, "byokAlias": "has spaces"}, "/byokAlias"),
    ({**HOST, "maxDescriptionChars": 0}, "/maxDescriptionChars"),
    ({**HOST, "timeoutMs": 0}, "/timeoutMs"),
    ({**HOST, "apiKey": "x"}, "/apiKey"),
])
def test_a_bad_host_option_is_a_local_error_at_its_pointer(host: Json, place: str) -> None:
    with pytest.raises(LocalRequestError) as raised:
        SearchOptions.from_host(host, "/tools/2/host")
    assert raised.value.phase == "validation" and raised.value.pointer == "/tools/2/host" + place
    assert "; " in str(raised.value)  # the fix follows the problem


def test_unchecked_host_options_are_the_mutant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAYKIT_MUTANT", "search-options-unchecked")
    assert SearchOptions.from_host({**HOST, "limit": 50}).limit == 50


def test_a_missing_host_object_names_what_to_add() -> None:
    with pytest.raises(LocalRequestError, match="needs a `host` object"):
        Tools([{"type": "function", "name": "web_search", "parameters": {}}], data_dir("scenarios"), None,
              httpx.AsyncClient())


def test_the_request_caps_the_model_limit_and_holds_its_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    options = SearchOptions.from_host({**HOST, "limit": 3, "gateway": "research", "byokAlias": "team_1"})
    body = options.request("q", 50)
    assert body == {"query": "q", "provider": "linkup", "limit": 3, "byokAlias": "team_1",
                    "options": {"gateway": {"id": "research"}}}
    assert options.request("q", 2)["limit"] == 2 and options.request("q")["limit"] == 3
    assert check_request(body) == []
    monkeypatch.setenv("REPLAYKIT_MUTANT", "limit-not-capped")
    assert options.request("q", 8)["limit"] == 8


# ---------------------------------------------------------------- the search and the host's record


def test_the_host_keeps_whole_documented_items(serve: Any) -> None:
    serve("search_missing_fields.yaml")
    result = _search(SearchOptions.from_host(HOST), "SQLite locking", 4)
    record = result.to_json()
    assert [item["url"] for item in record["items"]] == [  # the item without a url is dropped
        "https://www.sqlite.org/wal.html", "https://sqlite.org/lockingv3.html",
        "https://sqlite.org/atomiccommit.html"]
    assert record["items"][1]["title"] == "https://sqlite.org/lockingv3.html"  # no title: the URL
    assert record["items"][0]["retrievedAt"] == "2026-10-20T09:30:00Z"  # the answer's date header
    assert record["latencyMs"] == 377 and record["requestId"] and record["provider"] == "linkup"


def test_descriptions_are_trimmed_for_the_model_and_whole_for_the_host(
        serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    serve("search_adversarial.yaml", "search_adversarial.yaml")
    options = SearchOptions.from_host({"provider": "ceramic", "accountId": ACCOUNT, "limit": 10})
    answer = _run(options, {"query": "bike lanes city council news", "limit": 10})
    essay = next(item for item in answer.details["items"] if item["url"].endswith("/essay"))
    assert len(essay["description"]) >= 7999 and not answer.is_error  # whole (stripped)
    assert "javascript:" not in answer.text and "data:" not in answer.text
    longest = max(len(line) for line in answer.text.splitlines())
    assert longest <= 600 and answer.text.count("…") >= 1
    monkeypatch.setenv("REPLAYKIT_MUTANT", "description-not-trimmed")
    untrimmed = _run(options, {"query": "bike lanes city council news", "limit": 10})
    assert max(len(line) for line in untrimmed.text.splitlines()) >= 7999


def test_extra_documented_fields_stay_with_the_host(serve: Any) -> None:
    serve("search_ceramic.yaml")
    answer = _run(SearchOptions.from_host({**HOST, "provider": "ceramic"}),
                  {"query": "how does HTTP/3 differ from HTTP/2"})
    assert answer.details["items"][0]["faviconUrl"].endswith("wikipedia.ico")
    assert answer.details["items"][1]["lastModifiedDate"] == "2022-06-06T00:00:00Z"
    assert "wikipedia.ico" not in answer.text
    assert answer.text.startswith('3 results for "how does HTTP/3 differ from HTTP/2":\n\n1. HTTP/3')


def test_the_model_cannot_choose_the_provider(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = serve("search_ceramic.yaml", "search_ceramic.yaml")
    options = SearchOptions.from_host({**HOST, "provider": "ceramic"})
    _run(options, {"query": "q", "provider": "exa"})
    monkeypatch.setenv("REPLAYKIT_MUTANT", "model-chooses-provider")
    _run(options, {"query": "q", "provider": "exa"})
    assert [entry.body["provider"] for entry in provider.journal] == ["ceramic", "exa"]


def test_an_empty_list_is_zero_results_not_an_error(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    serve("search_empty.yaml", "search_empty.yaml")
    options = SearchOptions.from_host(HOST)
    answer = _run(options, {"query": "zqxjv"})
    assert (answer.text, answer.is_error, answer.details["items"]) == ('0 results for "zqxjv":', False, [])
    monkeypatch.setenv("REPLAYKIT_MUTANT", "empty-results-reported-as-error")
    assert _run(options, {"query": "zqxjv"}).is_error


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize(("status", "code", "retryable", "says"), [
    (402, "web_search_payment_required", False, "Do not retry"),
    (429, "web_search_rate_limited", True, "Retry once"),
    (503, "web_search_unavailable", True, "Retry once"),
    (400, "web_search_bad_request", False, "Fix the query"),
])
def test_a_failed_search_is_a_web_search_error_with_advice(
        serve: Any, monkeypatch: pytest.MonkeyPatch, status: int, code: str, retryable: bool,
        says: str) -> None:
    serve(faults=({"kind": "status", "route": "cloudflare", "status": status, "times": 3, "nth": 1},))
    options = SearchOptions.from_host(HOST)
    with pytest.raises(WebSearchError) as raised:
        _search(options, "q")
    error = raised.value
    assert (error.status, error.code, error.retryable) == (status, code, retryable)
    assert error.request_id  # the gateway's request id
    answer = _run(options, {"query": "q"})
    assert answer.is_error and says in answer.text and code in answer.text
    assert answer.details["error"]["code"] == code and answer.text == advice(error)
    monkeypatch.setenv("REPLAYKIT_MUTANT", "search-error-swallowed")
    assert not _run(options, {"query": "q"}).is_error


def test_a_timeout_is_a_retryable_web_search_timeout(serve: Any) -> None:
    serve("search_exa.yaml", faults=({"kind": "delay_headers", "route": "cloudflare", "nth": 1,
                                      "ms": 2000},))
    with pytest.raises(WebSearchError) as raised:
        _search(SearchOptions.from_host({**HOST, "timeoutMs": 200}), "q")
    error = raised.value
    assert (error.code, error.retryable, error.status) == ("web_search_timeout", True, None)


def test_an_answer_nested_past_the_limit_is_an_invalid_response() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=deep))

    async def go() -> SearchResult:
        async with httpx.AsyncClient(transport=transport) as client:
            return await search(client, SearchOptions.from_host(HOST), "q")

    with pytest.raises(WebSearchError, match="a body that is not JSON") as raised:
        asyncio.run(go())
    assert (raised.value.code, raised.value.retryable) == ("web_search_invalid_response", False)


@pytest.mark.parametrize("arguments", [{}, {"query": 5}, {"query": "q", "limit": 0},
                                       {"query": "q", "limit": "3"}, {"query": ""}])
def test_bad_model_input_asks_for_a_fixed_query_without_a_request(arguments: Json) -> None:
    answer = _run(SearchOptions.from_host(HOST), arguments)  # no server: a request would fail otherwise
    assert answer.is_error and "Fix the query" in answer.text
    assert answer.details["error"]["code"] == "web_search_invalid_input"


def test_a_cancelled_search_propagates_the_abort(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    serve("search_exa.yaml", faults=({"kind": "delay_headers", "route": "cloudflare", "ms": 5000},))
    options = SearchOptions.from_host(HOST)

    async def cancelled() -> Any:
        async with httpx.AsyncClient() as client:
            task = asyncio.create_task(WebSearchTool(options, client).run({"query": "q"}))
            await asyncio.sleep(0.3)
            task.cancel()
            return await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())
    monkeypatch.setenv("REPLAYKIT_MUTANT", "abort-becomes-failure")
    assert asyncio.run(cancelled()).is_error


# ---------------------------------------------------------------- what reaches a provider


def test_details_and_host_options_never_reach_a_model_provider(serve: Any) -> None:
    serve("search_exa.yaml")
    tool = {"type": "function", "name": "web_search", "parameters": {"type": "object"},
            "host": {**HOST, "provider": "exa"}}
    call = {"type": "toolCall", "id": "t1", "name": "web_search", "arguments": {"query": "tokio"}}

    async def go() -> Any:
        async with httpx.AsyncClient() as client:
            return await Tools([tool], data_dir("scenarios"), None, client).call(call)  # type: ignore[arg-type]

    result = asyncio.run(go())
    assert result["details"]["items"] and not result["isError"]
    transcript = {"version": 1, "system": None, "tools": [tool], "messages": [
        {"role": "user", "content": "tokio?", "timestamp": 1},
        {"role": "assistant", "provider": "anthropic", "api": "anthropic-messages", "model": "m",
         "content": [call], "stopReason": "toolUse", "timestamp": 2,
         "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}},
        result]}
    assert [v for v in contracts.validate("replaykit.transcript", transcript) if v.severity == "error"] == []
    for provider, api in (("anthropic", "anthropic-messages"), ("openai", "openai-responses")):
        body = str(project(transcript, ProviderModel(provider, api, "m")))  # type: ignore[arg-type]
        assert "latencyMs" not in body and ACCOUNT not in body and "items" not in body
        assert '3 results for "tokio":' in body


# Each web_search mutant and the test here that fails on it (the in-process cases of
# test_reference_cases.py cover the others; the scenarios kill every one end to end).
KILLED_HERE = {
    "search-options-unchecked": test_unchecked_host_options_are_the_mutant,
    "limit-not-capped": test_the_request_caps_the_model_limit_and_holds_its_contract,
    "description-not-trimmed": test_descriptions_are_trimmed_for_the_model_and_whole_for_the_host,
    "model-chooses-provider": test_the_model_cannot_choose_the_provider,
    "empty-results-reported-as-error": test_an_empty_list_is_zero_results_not_an_error,
    "search-error-swallowed": test_a_failed_search_is_a_web_search_error_with_advice,
    "abort-becomes-failure": test_a_cancelled_search_propagates_the_abort,
}
