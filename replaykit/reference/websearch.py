"""The reference harness's client-side ``web_search`` tool over Cloudflare Web Search.

The model calls ``web_search {query, limit?}``; the host fixes the rest in the tool definition's ``host``
object (provider, accountId, gateway, limit...), checked by :meth:`SearchOptions.from_host` when the tool is
created. :func:`search` POSTs to ``$REPLAYKIT_WEBSEARCH_BASE_URL`` and returns a :class:`SearchResult` or
raises :class:`~replaykit.errors.WebSearchError`; :meth:`WebSearchTool.run` is the tool call. Built on
:mod:`replaykit.search`; used by :mod:`~replaykit.reference.tools` and :mod:`~replaykit.reference.research`.
The options and the request in full are in docs/architecture/reference.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from replaykit import jsondoc
from replaykit.cassette import header
from replaykit.errors import LocalRequestError, WebSearchError
from replaykit.jsondoc import JSON
from replaykit.reference.defects import mutant
from replaykit.search import (
    PROVIDERS,
    Evidence,
    check_request,
    dedupe_key,
    error_from_response,
    normalize,
    render,
    result_items,
    safe_http_url,
    timeout_error,
)

__all__ = [
    "BASE_URL_ENV",
    "TOOL_NAME",
    "SearchOptions",
    "SearchResult",
    "ToolAnswer",
    "WebSearchError",
    "WebSearchTool",
    "advice",
    "search",
]

TOOL_NAME = "web_search"
BASE_URL_ENV = "REPLAYKIT_WEBSEARCH_BASE_URL"
TOKEN_ENV = "CLOUDFLARE_API_TOKEN"
DEFAULT_BASE_URL = "https://api.cloudflare.com/client/v4"
ACCOUNT_ID = re.compile(r"[0-9a-f]{32}")
TIMEOUT_MS = (1, 600_000)
MAX_RESPONSE = 8 << 20  # bytes: a search answer is a few KB; more is refused, never parsed
ITEM_FIELDS = ("imageUrl", "faviconUrl", "lastModifiedDate")  # documented besides url, title, description
_HOST_KEYS = {"provider": "provider", "accountId": "account_id", "gateway": "gateway",
              "byokAlias": "byok_alias", "limit": "limit", "maxDescriptionChars": "max_description_chars",
              "timeoutMs": "timeout_ms"}
_CHECKED = {"/provider": "provider", "/limit": "limit", "/byokAlias": "byokAlias",
            "/options/gateway/id": "gateway"}  # check_request's pointers -> the host option


# ---------------------------------------------------------------- the host's options


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """What the host fixes for every search (see the module docstring for the defaults)."""

    provider: str
    account_id: str
    gateway: str = "default"
    byok_alias: str | None = None
    limit: int = 5
    max_description_chars: int = 600
    timeout_ms: int = 30_000

    @classmethod
    def from_host(cls, host: object, pointer: str = "/host") -> SearchOptions:
        """The options of a tool's ``host`` object at ``pointer``; a bad one is LOCAL_REQUEST_ERROR
        (phase validation) at its own pointer, naming the fix."""
        if not isinstance(host, Mapping):
            raise _bad(pointer, "a web_search tool needs a `host` object (provider, accountId...)",
                       "add host: {provider: ceramic|exa|linkup, accountId: <32 hex digits>}")
        unknown = [key for key in host if key not in _HOST_KEYS]
        if unknown:
            raise _bad(f"{pointer}/{unknown[0]}", f"{unknown[0]!r} is no web_search host option",
                       f"use only {', '.join(_HOST_KEYS)}")
        for required in ("provider", "accountId"):
            if required not in host:
                raise _bad(f"{pointer}/{required}", f"the web_search host option {required} is required",
                           "add it (provider: ceramic|exa|linkup; accountId: 32 hex digits)")
        options = cls(**{_HOST_KEYS[key]: value for key, value in host.items()})
        if mutant("search-options-unchecked"):
            return options
        options._check(pointer)
        return dataclasses.replace(options, limit=int(options.limit))  # 5.0 is 5

    def _check(self, pointer: str) -> None:
        if self.provider not in PROVIDERS:
            raise _bad(f"{pointer}/provider", f"provider {self.provider!r} is not a web search provider",
                       f"use one of {', '.join(PROVIDERS)}")
        if not isinstance(self.account_id, str) or not ACCOUNT_ID.fullmatch(self.account_id):
            raise _bad(f"{pointer}/accountId",
                       f"accountId {self.account_id!r} is not a Cloudflare account id",
                       "give the account's 32 lower-case hex digits (dashboard, Account Home)")
        for finding in check_request(self.request("probe")):
            if finding.severity == "error":
                raise _bad(f"{pointer}/{_CHECKED.get(finding.place, finding.place.lstrip('/'))}",
                           finding.message, "see replaykit/reference/websearch.py for the host options")
        self._check_count(pointer, "maxDescriptionChars", self.max_description_chars, (1, 100_000))
        self._check_count(pointer, "timeoutMs", self.timeout_ms, TIMEOUT_MS)

    @staticmethod
    def _check_count(pointer: str, name: str, value: object, bounds: tuple[int, int]) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not bounds[0] <= value <= bounds[1]:
            raise _bad(f"{pointer}/{name}", f"{name} {value!r} is out of range",
                       f"give a whole number from {bounds[0]} to {bounds[1]}")

    def request(self, query: str, asked: int | None = None) -> JSON:
        """The REST body of a search for ``query``: the model's ``asked`` limit capped at the host's."""
        limit = self.limit if asked is None else min(asked, self.limit)
        if asked is not None and mutant("limit-not-capped"):
            limit = asked
        body: JSON = {"query": query, "provider": self.provider, "limit": limit}
        body |= {"byokAlias": self.byok_alias} if self.byok_alias is not None else {}
        return body | {"options": {"gateway": {"id": self.gateway}}}

    def endpoint(self) -> tuple[str, dict[str, str]]:
        """The URL and headers of a search (the token from ``CLOUDFLARE_API_TOKEN``, when set)."""
        base = (os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
        headers = {"content-type": "application/json", "accept": "application/json"}
        token = os.environ.get(TOKEN_ENV)
        if token:
            headers["authorization"] = f"Bearer {token}"
        return f"{base}/accounts/{self.account_id}/ai/websearch", headers


def _bad(pointer: str, message: str, fix: str) -> LocalRequestError:
    return LocalRequestError(f"{message}; {fix}", phase="validation", pointer=pointer)


# ---------------------------------------------------------------- one search


@dataclass(frozen=True, slots=True)
class SearchResult:
    """A search's whole answer, for the host: the evidence records ``S1…Sn`` and each one's documented
    extra fields (``extras``, by record id), the provider, ``metadata.requestId`` and ``latencyMs``."""

    query: str
    provider: str
    limit: int
    evidence: tuple[Evidence, ...]
    extras: Mapping[str, JSON]
    request_id: str | None
    latency_ms: float | None

    def to_json(self) -> JSON:
        """The host's record (a tool result's ``details``): whole descriptions, documented fields only."""
        items = [record.to_json() | dict(self.extras.get(record.id, {})) for record in self.evidence]
        return {"provider": self.provider, "query": self.query, "limit": self.limit,
                "requestId": self.request_id, "latencyMs": self.latency_ms, "items": items}


async def search(client: httpx.AsyncClient, options: SearchOptions, query: str,
                 limit: int | None = None) -> SearchResult:
    """Search ``query`` with ``options`` (``limit``: what the caller asks for, capped at the host's).

    Raises :class:`~replaykit.errors.WebSearchError`: ``web_search_invalid_input`` when the query breaks the
    request rules (no request sent), the API's failure (402, 429, 5xx, 400...), ``web_search_timeout`` past
    ``timeoutMs``, ``web_search_unavailable`` when no connection could be made,
    ``web_search_invalid_response`` for an answer that is not a result list. A cancellation propagates.
    """
    body = options.request(query, limit)
    problems = [finding for finding in check_request(body) if finding.severity == "error"]
    if problems:
        raise WebSearchError(f"invalid search: {problems[0].message}", status=None,
                             code="web_search_invalid_input", retryable=False)
    response = await _post(client, options, body)
    data = _json(response)
    if response.status >= 400:
        raise error_from_response(response.status, data, response.headers)
    evidence = normalize(data, provider=body["provider"], retrieved_at=_retrieved_at(response.headers))
    kept = tuple(evidence[: body["limit"]])
    metadata = data.get("metadata") if isinstance(data, Mapping) else None
    metadata = metadata if isinstance(metadata, Mapping) else {}
    request_id = metadata.get("requestId") or header(response.headers, "cf-aig-request-id")
    latency = metadata.get("latencyMs")
    return SearchResult(query, body["provider"], body["limit"], kept, _extras(data, kept),
                        str(request_id) if request_id else None,
                        _number(latency))


def _number(value: object) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, int | float) else value


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    headers: httpx.Headers
    body: bytes


async def _post(client: httpx.AsyncClient, options: SearchOptions, body: JSON) -> _Answer:
    """POST the search; its answer read whole (at most :data:`MAX_RESPONSE` bytes) within ``timeoutMs``."""
    url, headers = options.endpoint()
    seconds = options.timeout_ms / 1000
    try:
        async with asyncio.timeout(seconds):
            async with client.stream("POST", url, json=body, headers=headers,
                                     timeout=httpx.Timeout(seconds)) as response:
                return _Answer(response.status_code, response.headers, await _read_bounded(response))
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise timeout_error(options.timeout_ms) from exc
    except httpx.TransportError as exc:
        raise WebSearchError(f"web search could not reach {url}: {type(exc).__name__}", status=None,
                             code="web_search_unavailable", retryable=True) from exc


async def _read_bounded(response: httpx.Response) -> bytes:
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE:
            raise WebSearchError(f"web search answer over {MAX_RESPONSE} bytes", status=response.status_code,
                                 code="web_search_invalid_response", retryable=False)
        chunks.append(chunk)
    return b"".join(chunks)


def _json(answer: _Answer) -> object:
    try:
        return jsondoc.loads(answer.body)
    except ValueError:
        if answer.status >= 400:
            return None  # the status alone classifies it
        raise WebSearchError("web search answered with a body that is not JSON", status=answer.status,
                             code="web_search_invalid_response", retryable=False) from None


def _retrieved_at(headers: httpx.Headers) -> str:
    """When the answer was made: its ``date`` header (a replay gives the recorded one), else now."""
    try:
        when = parsedate_to_datetime(header(headers, "date") or "")
    except (TypeError, ValueError):
        when = datetime.now(UTC)
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _extras(data: object, kept: tuple[Evidence, ...]) -> dict[str, JSON]:
    """The documented extra fields (:data:`ITEM_FIELDS`) of the item each record came from."""
    first: dict[str, Mapping[str, object]] = {}
    for item in result_items(data):  # a response normalize() took: its items are a list
        url = safe_http_url(item.get("url")) if isinstance(item, Mapping) else None
        if url is not None:
            first.setdefault(dedupe_key(url), item)
    found: dict[str, JSON] = {}
    for record in kept:
        item = first.get(dedupe_key(record.url), {})
        found[record.id] = {key: item[key] for key in ITEM_FIELDS if isinstance(item.get(key), str)}
    return found


# ---------------------------------------------------------------- the tool


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """A tool call's result: the model's ``text``, whether it is an error, and the host's ``details``."""

    text: str
    is_error: bool
    details: JSON


def advice(error: WebSearchError) -> str:
    """The model's text for a failed search: what failed and what to do next."""
    what = f"web_search failed ({error.code}"
    what += f", HTTP {error.status})" if error.status is not None else ")"
    if error.code == "web_search_invalid_input" or error.status == 400:
        return (f"{what}: the search request was rejected. Fix the query (1 to 1024 characters of plain "
                "search words, limit a whole number from 1) and call web_search again.")
    if error.retryable:
        return (f"{what}: this is temporary. Retry once with the same query; if it fails again, carry on "
                "without web search.")
    return (f"{what}: web search is not available. Do not retry: carry on without web search and say that "
            "the answer is not based on a search.")


class WebSearchTool:
    """The ``web_search`` tool of one agent: the host's options and the HTTP client it searches with."""

    def __init__(self, options: SearchOptions, client: httpx.AsyncClient) -> None:
        self.options = options
        self.client = client

    @classmethod
    def create(cls, tool: Mapping[str, object], client: httpx.AsyncClient, pointer: str) -> WebSearchTool:
        """The tool of the definition ``tool`` at ``pointer`` (its options checked: LOCAL_REQUEST_ERROR)."""
        return cls(SearchOptions.from_host(tool.get("host"), f"{pointer}/host"), client)

    async def run(self, arguments: Mapping[str, Any]) -> ToolAnswer:
        """One call ``{query, limit?}``; any other argument is ignored (the host chooses the rest)."""
        options = self.options
        if mutant("model-chooses-provider") and isinstance(arguments.get("provider"), str):
            options = dataclasses.replace(options, provider=arguments["provider"])
        query = arguments.get("query")
        try:
            result = await search(self.client, options, *_arguments(arguments))
        except WebSearchError as exc:
            details: JSON = {"provider": options.provider, "query": query, "error": exc.to_json()}
            if mutant("search-error-swallowed"):
                return ToolAnswer(render(str(query), []), False, details)
            return ToolAnswer(advice(exc), True, details)
        except asyncio.CancelledError:
            if mutant("abort-becomes-failure"):
                cut = WebSearchError("interrupted", status=None, code="web_search_failed", retryable=True)
                return ToolAnswer(advice(cut), True, {"provider": options.provider, "query": query,
                                                      "error": cut.to_json()})
            raise
        if not result.evidence and mutant("empty-results-reported-as-error"):
            return ToolAnswer("web_search failed: no results", True, result.to_json())
        trim = None if mutant("description-not-trimmed") else options.max_description_chars
        return ToolAnswer(render(result.query, result.evidence, trim), False, result.to_json())


def _arguments(arguments: Mapping[str, Any]) -> tuple[str, int | None]:
    """The model's ``query`` and ``limit``; anything else of theirs is refused as invalid input."""
    query, limit = arguments.get("query"), arguments.get("limit")
    whole = limit is None or (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1)
    if not isinstance(query, str) or not whole:
        shown = json.dumps({"query": query, "limit": limit}, ensure_ascii=False, default=str)[:200]
        raise WebSearchError(f"web_search takes {{query: string, limit?: integer >= 1}}, got {shown}",
                             status=None, code="web_search_invalid_input", retryable=False)
    return query, limit
