"""The one route table: every provider endpoint replaykit knows, and the contracts of each.

A :class:`Route` names one endpoint (``anthropic.messages``...): its method and path pattern, its provider,
its API, and the contract kinds of its request, response, stream events and error envelope. :func:`known`
answers for a known endpoint only; :func:`classify` always answers. The fake provider routes and validates
with it, the cassette contract checks and the transcript converters look routes up in it; the paths and
their sources are in docs/architecture/modules.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

__all__ = ["APIS", "API_ORIGINS", "API_ROUTES", "MODEL_APIS", "MODEL_ROUTES", "PROVIDERS", "PROVIDER_APIS",
           "ROUTES", "Api", "Kinds", "Provider", "Route", "base_url_env", "base_urls", "classify",
           "classify_uri", "known", "model_of", "provider_of", "streams_by_path"]

Provider = Literal["anthropic", "openai", "azure", "gemini", "vertex", "cloudflare"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai", "azure", "gemini", "vertex", "cloudflare")
#: The wire APIs of model turns: Anthropic Messages, OpenAI Responses, OpenAI Chat Completions and Gemini's
#: generateContent (the Gemini Developer API's and Vertex AI's, one body).
Api = Literal["anthropic-messages", "openai-responses", "openai-chat", "gemini-generate"]
APIS: tuple[Api, ...] = ("anthropic-messages", "openai-responses", "openai-chat", "gemini-generate")
#: The origin of each provider's real API (Azure OpenAI has none: each resource has its own host,
#: ``https://NAME.openai.azure.com``).
API_ORIGINS: dict[str, str] = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com",
                               "gemini": "https://generativelanguage.googleapis.com",
                               "vertex": "https://aiplatform.googleapis.com",
                               "cloudflare": "https://api.cloudflare.com"}


@dataclass(frozen=True, slots=True)
class Kinds:
    """The contract kinds of a route: request, response, stream events (None: it never streams), errors."""

    request: str
    response: str
    stream_event: str | None
    error: str


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint. ``name`` is stable (journal, faults); ``provider`` picks the error envelopes; ``api`` is
    the API of the model turn a response on it carries (None: not a turn); ``contracts`` is None on a route no
    contract covers."""

    name: str
    provider: Provider | None
    pattern: re.Pattern[str]
    method: str = "POST"
    api: Api | None = None
    contracts: Kinds | None = None

    def matches(self, method: str, path: str) -> bool:
        """True when ``method`` and ``path`` (no query) are this endpoint."""
        return method.upper() == self.method and self.pattern.fullmatch(path) is not None


def _post(name: str, provider: Provider, pattern: str, api: Api | None, contracts: str) -> Route:
    """A POST route; ``contracts`` is the prefix of its request / response kinds (``anthropic``,
    ``anthropic.count_tokens``…). Its stream events and errors are those of its provider's family."""
    family = contracts.partition(".")[0]
    sep = "_" if "." in contracts else "."
    kinds = Kinds(f"{contracts}{sep}request", f"{contracts}{sep}response",
                  f"{family}.stream_event" if api else None, f"{family}.error")
    return Route(name, provider, re.compile(pattern), "POST", api, kinds)


#: Chat Completions' kinds: its own request, response and stream chunk (a ``chat.completion.chunk`` per
#: ``data:`` line, then ``data: [DONE]``), OpenAI's error envelope.
CHAT_KINDS = Kinds("openai.chat_request", "openai.chat_response", "openai.chat_chunk", "openai.error")
#: Gemini's generateContent, on the Developer API and on Vertex AI: one body, one set of contracts.
_GEMINI = Kinds("gemini.request", "gemini.response", "gemini.stream_event", "gemini.error")

ROUTES: tuple[Route, ...] = (
    _post("anthropic.messages", "anthropic", r"/v1/messages/?", "anthropic-messages", "anthropic"),
    _post("anthropic.count_tokens", "anthropic", r"/v1/messages/count_tokens/?", None,
          "anthropic.count_tokens"),
    _post("openai.responses", "openai", r"/v1/responses/?", "openai-responses", "openai"),
    # The v1 API (base_url .../openai/v1/), the preview API the AzureOpenAI client uses with an endpoint
    # (/openai/responses?api-version=...), and the deployment-scoped form: the same bodies as OpenAI's.
    _post("azure.responses", "azure", r"/openai(?:/v1|/deployments/[^/]+)?/responses/?", "openai-responses",
          "openai"),
    # Chat Completions: OpenAI's /v1/chat/completions, and the same path under an OpenAI-compatible host
    # (OpenRouter's /api/v1/, Perplexity's bare /chat/completions); Azure's v1 and deployment-scoped forms.
    Route("openai.chat", "openai", re.compile(r"(?:/api)?(?:/v1)?/chat/completions/?"), "POST",
          "openai-chat", CHAT_KINDS),
    Route("azure.chat", "azure", re.compile(r"/openai(?:/v1|/deployments/[^/]+)/chat/completions/?"), "POST",
          "openai-chat", CHAT_KINDS),
    # Gemini: the model is in the path, the method after a colon (streamed: :streamGenerateContent?alt=sse);
    # Vertex AI: under /projects/P/locations/L/publishers/google/, or without them (express mode).
    Route("gemini.generate", "gemini",
          re.compile(r"/v1(?:alpha|beta)?/models/[^/:]+:(?:stream)?[gG]enerateContent"), "POST",
          "gemini-generate", _GEMINI),
    Route("vertex.generate", "vertex",
          re.compile(r"/v1(?:beta1)?(?:/projects/[^/]+/locations/[^/]+)?/publishers/google/models/[^/:]+"
                     r":(?:stream)?[gG]enerateContent"), "POST", "gemini-generate", _GEMINI),
    _post("cloudflare.websearch", "cloudflare", r"/client/v4/accounts/[^/]+/ai/websearch/?", None,
          "cloudflare"),
)

#: The APIs of the model turns each model provider serves, its default first (from the table): openai and
#: azure serve Responses and Chat Completions.
PROVIDER_APIS: dict[str, tuple[Api, ...]] = {}
for _route in ROUTES:
    if _route.provider and _route.api and _route.api not in PROVIDER_APIS.get(_route.provider, ()):
        PROVIDER_APIS[_route.provider] = (*PROVIDER_APIS.get(_route.provider, ()), _route.api)
#: The default API of each model provider's turns: its first in the table.
MODEL_APIS: dict[str, Api] = {provider: apis[0] for provider, apis in PROVIDER_APIS.items()}
#: The route of each model provider's turns on each of its APIs, keyed ``(provider, api)``.
API_ROUTES: dict[tuple[str, Api], Route] = {}
for _route in ROUTES:
    if _route.provider and _route.api:
        API_ROUTES.setdefault((_route.provider, _route.api), _route)
#: The route of each model provider's turns on its default API (anthropic.messages, openai.responses...).
MODEL_ROUTES: dict[str, Route] = {provider: API_ROUTES[provider, api] for provider, api in MODEL_APIS.items()}

_HOSTS: tuple[tuple[str, Provider], ...] = (
    ("anthropic.com", "anthropic"),
    ("openai.azure.com", "azure"),
    ("azure.com", "azure"),
    ("openai.com", "openai"),
    ("generativelanguage.googleapis.com", "gemini"),
    ("aiplatform.googleapis.com", "vertex"),
    ("cloudflare.com", "cloudflare"),
)


@functools.lru_cache(maxsize=256)  # once or twice per request: the same few paths again and again
def known(method: str, path: str) -> Route | None:
    """The known route of ``method path`` (a path or a full URI, query ignored), or None."""
    bare = urlsplit(path).path if "://" in path or "?" in path else path
    return next((route for route in ROUTES if route.matches(method, bare)), None)


_STREAM_METHOD = re.compile(r":streamGenerateContent$")


def streams_by_path(path: str) -> bool:
    """True when ``path`` (no query) asks for a stream by itself: Gemini's and Vertex AI's
    ``:streamGenerateContent``, whose body has no ``stream`` flag."""
    return path.endswith("Content") and _STREAM_METHOD.search(path) is not None


def classify(method: str, path: str, host: str = "") -> Route:
    """The route of a request; an unknown path gets a route of its own, its provider guessed from ``host``."""
    found = known(method.upper(), path)
    if found is not None:
        return found
    provider = next((p for suffix, p in _HOSTS if host.endswith(suffix)), None)
    return Route(f"{method.upper()} {path}", provider, re.compile(re.escape(path)), method.upper())


def classify_uri(method: str, uri: str) -> Route:
    """The route of a recorded request, from its full URI."""
    parts = urlsplit(uri)
    return classify(method, parts.path or "/", parts.hostname or "")


def provider_of(requests: Iterable[tuple[str, str]]) -> str | None:
    """The provider of recorded ``(method, uri)`` requests by their routes: the one provider, ``mixed`` for
    several, None when no route says."""
    found = {classify_uri(method, uri).provider for method, uri in requests}
    found.discard(None)
    return found.pop() if len(found) == 1 else ("mixed" if found else None)


def base_urls(origin: str) -> dict[str, str]:
    """The base URL each provider's SDK is given, for a server at ``origin`` (``http://host:port``).

    Checked against the SDKs: ``Anthropic(base_url=...)`` appends ``/v1/messages``; ``OpenAI(base_url=...)``
    appends ``/responses``; ``OpenAI`` or ``AzureOpenAI(base_url=..., api_version=...)`` on the Azure v1 URL;
    the Cloudflare client appends ``/accounts/{id}/ai/websearch``; google-genai's
    ``HttpOptions(base_url=...)`` appends its API version (``v1beta/models/...``, on Vertex
    ``v1beta1/projects/...``).
    """
    return {
        "anthropic": origin,
        "openai": f"{origin}/v1",
        "azure": f"{origin}/openai/v1",
        "gemini": origin,
        "vertex": origin,
        "cloudflare": f"{origin}/client/v4",
    }


def base_url_env(origins: Mapping[str, str]) -> dict[str, str]:
    """The target protocol's base URL variables, each provider's at its server's origin in ``origins``:
    ``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, ``REPLAYKIT_AZURE_BASE_URL``, ``AZURE_OPENAI_ENDPOINT``,
    ``GOOGLE_GEMINI_BASE_URL``, ``GOOGLE_VERTEX_BASE_URL`` (read by google-genai) and
    ``REPLAYKIT_WEBSEARCH_BASE_URL``."""
    url = {provider: base_urls(origin)[provider] for provider, origin in origins.items()}
    return {"ANTHROPIC_BASE_URL": url["anthropic"], "OPENAI_BASE_URL": url["openai"],
            "REPLAYKIT_AZURE_BASE_URL": url["azure"], "AZURE_OPENAI_ENDPOINT": origins["azure"],
            "GOOGLE_GEMINI_BASE_URL": url["gemini"], "GOOGLE_VERTEX_BASE_URL": url["vertex"],
            "REPLAYKIT_WEBSEARCH_BASE_URL": url["cloudflare"]}


_PATH_MODEL = re.compile(r"/openai/deployments/([^/]+)/|/models/([^/:]+):[A-Za-z]+$")


def model_of(body: object, path: str) -> str | None:
    """The model a request names: its body's ``model``, else its path's (an Azure deployment, or Gemini's and
    Vertex AI's ``/models/M:method``); ``path`` without the query."""
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    found = _PATH_MODEL.search(path)
    return (found.group(1) or found.group(2)) if found else None
