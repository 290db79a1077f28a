"""The route table: which provider endpoint a path is, its contracts, and the base URL each SDK takes."""

from __future__ import annotations

import pytest

from replaykit import contracts
from replaykit.routes import (
    ROUTES,
    Kinds,
    base_url_env,
    base_urls,
    classify,
    classify_uri,
    known,
    model_of,
    provider_of,
    streams_by_path,
)


@pytest.mark.parametrize(
    ("method", "path", "name"),
    [
        ("POST", "/v1/messages", "anthropic.messages"),
        ("POST", "/v1/messages/count_tokens", "anthropic.count_tokens"),
        ("POST", "/v1/responses", "openai.responses"),
        ("POST", "/openai/v1/responses", "azure.responses"),
        ("POST", "/openai/responses", "azure.responses"),
        ("POST", "/openai/deployments/gpt-5-mini/responses", "azure.responses"),
        ("POST", "/client/v4/accounts/abc123/ai/websearch", "cloudflare.websearch"),
        ("POST", "/client/v4/accounts/abc123/ai/websearch/", "cloudflare.websearch"),
        ("post", "/v1/messages", "anthropic.messages"),
        ("POST", "/v1/chat/completions", "openai.chat"),
        ("POST", "/api/v1/chat/completions", "openai.chat"),
        ("POST", "/chat/completions", "openai.chat"),
        ("POST", "/openai/v1/chat/completions", "azure.chat"),
        ("POST", "/openai/deployments/gpt-4o/chat/completions", "azure.chat"),
        ("POST", "/v1beta/models/gemini-2.5-flash:generateContent", "gemini.generate"),
        ("POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "gemini.generate"),
        ("POST", "/v1/models/gemini-2.5-flash:generateContent", "gemini.generate"),
        ("POST", "/v1beta1/projects/p-1/locations/us-central1/publishers/google/models/gemini-2.5-flash"
                 ":streamGenerateContent", "vertex.generate"),
        ("POST", "/v1/publishers/google/models/gemini-2.5-flash:generateContent", "vertex.generate"),
    ],
)
def test_known_routes(method: str, path: str, name: str) -> None:
    assert classify(method, path).name == name


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/messages"),
        ("POST", "/v1/messages/batches"),
        ("POST", "/openai/deployments/a/b/responses"),
        ("POST", "/client/v4/accounts//ai/websearch"),
        ("POST", "/v2/responses"),
    ],
)
def test_other_paths_get_a_route_of_their_own(method: str, path: str) -> None:
    route = classify(method, path)
    assert route.name == f"{method} {path}" and route.provider is None
    assert route.matches(method, path) and not route.matches(method, path + "x")


def test_recorded_uris_are_classified_with_their_host() -> None:
    assert (
        classify_uri("POST", "https://api.anthropic.com/v1/messages?beta=true").name == "anthropic.messages"
    )
    assert classify_uri("GET", "https://api.openai.com/v1/models").provider == "openai"
    assert classify_uri("GET", "https://res.openai.azure.com/openai/models").provider == "azure"
    assert classify_uri("GET", "https://example.com/x").provider is None


def test_every_provider_has_a_route_and_a_base_url() -> None:
    urls = base_urls("http://127.0.0.1:1")
    assert {route.provider for route in ROUTES} == set(urls)
    assert urls == {
        "anthropic": "http://127.0.0.1:1",
        "openai": "http://127.0.0.1:1/v1",
        "azure": "http://127.0.0.1:1/openai/v1",
        "gemini": "http://127.0.0.1:1",
        "vertex": "http://127.0.0.1:1",
        "cloudflare": "http://127.0.0.1:1/client/v4",
    }


@pytest.mark.parametrize(("method", "path", "request_kind", "provider"), [
    ("POST", "/v1/messages", "anthropic.request", "anthropic"),
    ("post", "https://api.anthropic.com/v1/messages?beta=true", "anthropic.request", "anthropic"),
    ("POST", "/v1/messages/count_tokens", "anthropic.count_tokens_request", "anthropic"),
    ("POST", "http://127.0.0.1:8080/v1/messages/count_tokens?beta=true", "anthropic.count_tokens_request",
     "anthropic"),
    ("POST", "/v1/responses", "openai.request", "openai"),
    ("POST", "https://api.openai.com/v1/responses", "openai.request", "openai"),
    ("POST", "https://res.openai.azure.com/openai/v1/responses?api-version=preview", "openai.request",
     "azure"),
    ("POST", "/openai/deployments/gpt-5-prod/responses?api-version=2025-04-01-preview", "openai.request",
     "azure"),
    ("POST", "https://res.openai.azure.com/openai/responses?api-version=2025-04-01-preview", "openai.request",
     "azure"),
    ("POST", "/client/v4/accounts/0123abcd/ai/websearch", "cloudflare.request", "cloudflare"),
    ("POST", "https://api.cloudflare.com/client/v4/accounts/0123abcd/ai/websearch/", "cloudflare.request",
     "cloudflare"),
])
def test_known_routes_name_their_contracts(method: str, path: str, request_kind: str, provider: str) -> None:
    route = known(method, path)
    assert route is not None and route.contracts is not None
    assert (route.contracts.request, route.provider) == (request_kind, provider)
    assert route.contracts.error.split(".")[0] == request_kind.split(".")[0]


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/v1/messages"),
    ("POST", "/v1/models"),
    ("POST", "/v1/completions"),
    ("POST", "/openai/deployments/a/b/responses"),
    ("POST", "/client/v4/accounts/x/ai/websearch//"),
    ("POST", "/prefix/v1/messages"),
])
def test_unknown_routes_are_not_known(method: str, path: str) -> None:
    assert known(method, path) is None


def test_streaming_routes_name_their_event_contract() -> None:
    streaming = known("POST", "/v1/responses")
    counting = known("POST", "/v1/messages/count_tokens")
    assert streaming is not None and streaming.contracts is not None
    assert counting is not None and counting.contracts is not None
    assert streaming.contracts.stream_event == "openai.stream_event"
    assert counting.contracts.stream_event is None


def test_every_kind_a_route_names_is_a_contract() -> None:
    kinds = contracts.kinds()
    named = {kind for route in ROUTES if route.contracts for kind in vars_of(route.contracts) if kind}
    assert named <= set(kinds)


def vars_of(kinds: Kinds) -> list[str | None]:
    return [kinds.request, kinds.response, kinds.stream_event, kinds.error]


SPELLINGS = ("/v1/messages", "/v1/messages/count_tokens", "/v1/responses", "/openai/v1/responses",
             "/openai/responses", "/openai/deployments/d/responses", "/client/v4/accounts/a/ai/websearch")


def test_a_trailing_slash_is_the_same_route() -> None:
    for path in SPELLINGS:
        assert known("POST", path) is known("POST", path + "/") is not None


@pytest.mark.parametrize(("body", "path", "model"), [
    ({"model": "gpt-5"}, "/openai/deployments/dep-1/responses", "gpt-5"),  # the body's first
    ({"model": 7}, "/openai/deployments/dep-1/chat/completions", "dep-1"),
    (None, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "gemini-2.5-flash"),
    ([], "/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-pro:generateContent",
     "gemini-2.5-pro"),
    ({}, "/v1/messages", None),
    ({}, "/v1beta/models/gemini-2.5-flash:generateContent/extra", None),
])
def test_the_model_of_a_request_is_its_body_s_else_its_path_s(body: object, path: str,
                                                              model: str | None) -> None:
    assert model_of(body, path) == model


def test_a_gemini_stream_is_asked_for_by_its_path_alone() -> None:
    assert streams_by_path("/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    assert not streams_by_path("/v1beta/models/gemini-2.5-flash:generateContent")
    assert not streams_by_path("/v1beta/models/gemini-2.5-flash:streamGenerateContent/x")


def test_recorded_requests_name_one_provider_or_mixed() -> None:
    anthropic, gemini = ("POST", "https://api.anthropic.com/v1/messages"), \
        ("POST", "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent")
    assert provider_of([anthropic, anthropic]) == "anthropic"
    assert provider_of([anthropic, gemini]) == "mixed"
    assert provider_of([("GET", "https://example.com/x")]) is None
    assert provider_of([]) is None


def test_each_base_url_variable_names_its_provider_s_server() -> None:
    origins = {provider: f"http://127.0.0.1:{port}" for port, provider in enumerate(base_urls("x"), 1)}
    assert base_url_env(origins) == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:1", "OPENAI_BASE_URL": "http://127.0.0.1:2/v1",
        "REPLAYKIT_AZURE_BASE_URL": "http://127.0.0.1:3/openai/v1", "AZURE_OPENAI_ENDPOINT": "http://127.0.0.1:3",
        "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:4", "GOOGLE_VERTEX_BASE_URL": "http://127.0.0.1:5",
        "REPLAYKIT_WEBSEARCH_BASE_URL": "http://127.0.0.1:6/client/v4"}


def test_an_unknown_path_s_route_is_named_by_its_method_in_capitals() -> None:
    route = classify_uri("get", "https://api.anthropic.com")
    assert (route.name, route.method, route.provider) == ("GET /", "GET", "anthropic")
    assert classify("get", "/v1/messages").name == "GET /v1/messages"
