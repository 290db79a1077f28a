"""The routes the fake provider answers, and which provider each belongs to.

A route is one provider endpoint (``anthropic.messages``, ``openai.responses``…). Received requests and
recorded interactions are both classified by their path, so the n-th request on a route can be given the
n-th interaction recorded on it. A recorded interaction on a path that no known route covers is still
served, on a route of its own named ``METHOD /path``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

__all__ = ["PROVIDERS", "ROUTES", "Provider", "Route", "base_urls", "classify", "classify_uri"]

Provider = Literal["anthropic", "openai", "azure", "cloudflare"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai", "azure", "cloudflare")


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint: ``name`` is stable (journal, faults); ``provider`` picks the error envelopes."""

    name: str
    provider: Provider | None
    pattern: re.Pattern[str]
    method: str = "POST"

    def matches(self, method: str, path: str) -> bool:
        """True when ``method`` and ``path`` are this endpoint."""
        return method.upper() == self.method and self.pattern.fullmatch(path) is not None


def _route(name: str, provider: Provider, pattern: str) -> Route:
    return Route(name, provider, re.compile(pattern))


ROUTES: tuple[Route, ...] = (
    _route("anthropic.messages", "anthropic", r"/v1/messages/?"),
    _route("anthropic.count_tokens", "anthropic", r"/v1/messages/count_tokens/?"),
    _route("openai.responses", "openai", r"/v1/responses/?"),
    # The v1 API (base_url .../openai/v1/), the preview API the AzureOpenAI client uses with an endpoint
    # (/openai/responses?api-version=...), and the deployment-scoped form.
    _route("azure.responses", "azure", r"/openai(?:/v1|/deployments/[^/]+)?/responses/?"),
    _route("cloudflare.websearch", "cloudflare", r"/client/v4/accounts/[^/]+/ai/websearch/?"),
)

_HOSTS: tuple[tuple[str, Provider], ...] = (
    ("anthropic.com", "anthropic"),
    ("openai.azure.com", "azure"),
    ("azure.com", "azure"),
    ("openai.com", "openai"),
    ("cloudflare.com", "cloudflare"),
)


def classify(method: str, path: str, host: str = "") -> Route:
    """The route of a request; an unknown path gets a route of its own, its provider guessed from ``host``."""
    known = _known(method.upper(), path)
    if known is not None:
        return known
    provider = next((p for suffix, p in _HOSTS if host.endswith(suffix)), None)
    return Route(f"{method.upper()} {path}", provider, re.compile(re.escape(path)), method.upper())


@functools.lru_cache(maxsize=256)  # once per request: the same few paths again and again
def _known(method: str, path: str) -> Route | None:
    return next((route for route in ROUTES if route.matches(method, path)), None)


def classify_uri(method: str, uri: str) -> Route:
    """The route of a recorded request, from its full URI."""
    parts = urlsplit(uri)
    return classify(method, parts.path or "/", parts.hostname or "")


def base_urls(origin: str) -> dict[str, str]:
    """The base URL each provider's SDK is given, for a server at ``origin`` (``http://host:port``).

    Checked against the SDKs: ``Anthropic(base_url=...)`` appends ``/v1/messages``; ``OpenAI(base_url=...)``
    appends ``/responses``; ``OpenAI`` or ``AzureOpenAI(base_url=..., api_version=...)`` on the Azure v1 URL;
    the Cloudflare client appends ``/accounts/{id}/ai/websearch``.
    """
    return {
        "anthropic": origin,
        "openai": f"{origin}/v1",
        "azure": f"{origin}/openai/v1",
        "cloudflare": f"{origin}/client/v4",
    }
