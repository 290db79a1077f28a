"""Routes: which provider endpoint a path is, and the base URL each SDK takes."""

from __future__ import annotations

import pytest

from replaykit.server.routes import ROUTES, base_urls, classify, classify_uri


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
        "cloudflare": "http://127.0.0.1:1/client/v4",
    }
