"""Cloudflare Web Search: request checks, evidence records, dedupe, the model's view and failures.

:func:`check_request`, :func:`normalize` (evidence records S1...Sn), :func:`render` (the model's view) and
:func:`error_from_response` / :func:`timeout_error`; URLs made safe by :func:`safe_http_url` and compared by
:func:`dedupe_key`. Used by the reference harness's ``web_search`` tool and research step, by
:mod:`replaykit.citations` and by the fake provider's checks; the sources and URL rules are in
docs/architecture/modules.md.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, unquote_plus, urlsplit

import idna

from replaykit.cassette import header
from replaykit.errors import UsageError, WebSearchError
from replaykit.findings import Finding
from replaykit.pointer import json_pointer

__all__ = [
    "BYOK_ALIAS",
    "DEFAULT_MAX_DESCRIPTION_CHARS",
    "PROVIDERS",
    "Evidence",
    "check_request",
    "dedupe_key",
    "error_from_response",
    "normalize",
    "render",
    "result_items",
    "safe_http_url",
    "timeout_error",
]

PROVIDERS = ("ceramic", "exa", "linkup")
BYOK_ALIAS = re.compile(r"[A-Za-z0-9_-]{1,64}")
DEFAULT_MAX_DESCRIPTION_CHARS = 600
QUERY_CHARS = (1, 1024)
LIMIT_RANGE = (1, 10)
GATEWAY_ID_CHARS = (1, 64)

# ---------------------------------------------------------------- request checks

_REST_KEYS = frozenset({"query", "provider", "limit", "byokAlias", "options"})
_BINDING_KEYS = frozenset({"query", "provider", "limit", "byokAlias", "gatewayId"})


def check_request(body: object) -> list[Finding]:
    """Check a search request: the REST body (``options.gateway.id``) or the binding's (``gatewayId``)."""
    if not isinstance(body, Mapping):
        return [Finding.at("", "error", "not-an-object", "the request body must be a JSON object")]
    binding = "gatewayId" in body and "options" not in body
    findings = _check_query(body) + _check_provider(body) + _check_limit(body) + _check_byok(body)
    findings += _check_binding_gateway(body) if binding else _check_rest_gateway(body)
    known = _BINDING_KEYS if binding else _REST_KEYS
    findings += [Finding.at(json_pointer([k]), "error", "unknown-field",
                         f"{k!r} is not a documented field; check its spelling")
                 for k in body if k not in known]
    return findings


def _check_query(body: Mapping[str, object]) -> list[Finding]:
    query = body.get("query")
    low, high = QUERY_CHARS
    if not isinstance(query, str):
        return [Finding.at("/query", "error", "query-missing", "query is required and must be a string")]
    if not low <= len(query) <= high:
        return [Finding.at("/query", "error", "query-length",
                        f"query has {len(query)} characters; it must have {low} to {high}")]
    if not query.strip():
        return [Finding.at("/query", "warning", "query-blank", "query is only whitespace")]
    return []


def _check_provider(body: Mapping[str, object]) -> list[Finding]:
    if "provider" not in body or body["provider"] in PROVIDERS:
        return []
    return [Finding.at("/provider", "error", "provider-unknown",
                    f"provider {body['provider']!r} must be one of {', '.join(PROVIDERS)}")]


def _check_limit(body: Mapping[str, object]) -> list[Finding]:
    limit = body.get("limit")
    low, high = LIMIT_RANGE
    whole = _whole(limit)
    if "limit" not in body or (whole is not None and low <= whole <= high):
        return []
    return [Finding.at("/limit", "error", "limit-range",
                    f"limit {limit!r} must be an integer from {low} to {high}")]


def _whole(value: object) -> int | None:
    """``value`` as an int when it is a whole JSON number (``5`` or ``5.0``, not ``True``), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value // 1:
        return None
    return int(value)


def _check_byok(body: Mapping[str, object]) -> list[Finding]:
    alias = body.get("byokAlias")
    if "byokAlias" not in body or (isinstance(alias, str) and BYOK_ALIAS.fullmatch(alias)):
        return []
    return [Finding.at("/byokAlias", "error", "byok-alias-pattern",
                    f"byokAlias {alias!r} must match ^[A-Za-z0-9_-]{{1,64}}$")]


def _gateway_id(pointer: str, value: object) -> list[Finding]:
    low, high = GATEWAY_ID_CHARS
    if not isinstance(value, str) or not low <= len(value) <= high:
        return [Finding.at(pointer, "error", "gateway-id",
                        f"gateway id {_short(value)} must be a string of {low} to {high} characters")]
    if re.search(r"[\s/]", value):
        return [Finding.at(pointer, "warning", "gateway-id-characters",
                        "a gateway id with whitespace or '/' is unlikely to name a gateway")]
    return []


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _check_rest_gateway(body: Mapping[str, object]) -> list[Finding]:
    options = body.get("options")
    gateway = options.get("gateway") if isinstance(options, Mapping) else None
    if not isinstance(gateway, Mapping) or "id" not in gateway:
        return [Finding.at("/options/gateway/id", "error", "gateway-missing",
                        "options.gateway.id is required (the AI Gateway the search runs through)")]
    return _gateway_id("/options/gateway/id", gateway["id"])


def _check_binding_gateway(body: Mapping[str, Any]) -> list[Finding]:
    return _gateway_id("/gatewayId", body.get("gatewayId"))


# ---------------------------------------------------------------- URLs

_ENCODE = re.compile(r"[\x00-\x20\x7f-\U0010ffff\"<>`]")


def _percent_encode(part: str) -> str:
    return _ENCODE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), part)


def _ascii_host(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return idna.encode(host.rstrip("."), uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        return None


def _split(raw: object) -> SplitResult | None:
    if not isinstance(raw, str):
        return None
    try:
        parts = urlsplit(raw.strip())
        parts.port  # noqa: B018 - raises ValueError on an invalid port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return None if parts.username is not None or parts.password is not None else parts


def safe_http_url(raw: object) -> str | None:
    """``raw`` as a safe absolute http(s) URL without fragment, or ``None`` when it cannot be one."""
    parts = _split(raw)
    host = _ascii_host(parts.hostname) if parts is not None and parts.hostname else None
    if parts is None or host is None:
        return None
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{parts.port}" if parts.port is not None else ""
    query = f"?{_percent_encode(parts.query)}" if parts.query else ""
    return f"{parts.scheme.lower()}://{netloc}{_percent_encode(parts.path) or '/'}{query}"


def _is_tracking(param: str) -> bool:
    name = unquote_plus(param.partition("=")[0])
    return name.startswith("utm_") or name == "ref"


def dedupe_key(url: str) -> str:
    """Host + path + query of a safe URL, without ``utm_*`` and ``ref`` parameters (others kept, in order)."""
    parts = urlsplit(url)
    kept = [p for p in parts.query.split("&") if p and not _is_tracking(p)]
    query = "?" + "&".join(kept) if kept else ""
    return f"{parts.hostname}{parts.path or '/'}{query}"


# ---------------------------------------------------------------- evidence


@dataclass(frozen=True, slots=True)
class Evidence:
    """One normalized search result the model may cite by ``id`` (``S1``, ``S2`` …)."""

    id: str
    title: str
    url: str
    description: str
    provider: str
    retrieved_at: str

    def to_json(self) -> dict[str, str]:
        """The record with the JSON field names (``retrievedAt``)."""
        return {"id": self.id, "title": self.title, "url": self.url, "description": self.description,
                "provider": self.provider, "retrievedAt": self.retrieved_at}


def result_items(response: object) -> list[Any]:
    """The result items of a response: ``{items}``, or inside the v4 envelope's ``result``."""
    root = response.get("result", response) if isinstance(response, Mapping) else None
    items = root if isinstance(root, list) else root.get("items") if isinstance(root, Mapping) else None
    if not isinstance(items, list):
        raise WebSearchError("malformed web search response: no `items` list", status=200,
                             code="web_search_invalid_response", retryable=False)
    return items


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def normalize(response: object, *, provider: str, retrieved_at: str) -> list[Evidence]:
    """Evidence records ``S1…Sn`` from a search response, in the provider's order.

    Items without a safe http(s) URL are dropped; a missing title falls back to the URL; descriptions are
    stripped of surrounding whitespace (kept whole: trimming is :func:`render`'s job); duplicates by
    :func:`dedupe_key` keep their first occurrence. ``retrieved_at`` (ISO 8601) is the caller's, never
    invented.
    Raises :class:`~replaykit.errors.WebSearchError` (``web_search_invalid_response``) when there is no list.
    """
    first: dict[str, tuple[str, Mapping[str, object]]] = {}  # dedupe key -> its first (url, item), in order
    for item in result_items(response):
        url = safe_http_url(item.get("url")) if isinstance(item, Mapping) else None
        if url is not None:
            first.setdefault(dedupe_key(url), (url, item))
    return [Evidence(f"S{number}", _text(item.get("title")) or url, url, _text(item.get("description")),
                     provider, retrieved_at) for number, (url, item) in enumerate(first.values(), start=1)]


# ---------------------------------------------------------------- the model's view


def _check_max(max_description_chars: float | None) -> float:
    value = math.inf if max_description_chars is None else max_description_chars
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value < 0:
        raise UsageError(f"max_description_chars={max_description_chars!r} must be a non-negative integer "
                         "(or None / math.inf for whole descriptions)")
    if value != math.inf and value != int(value):
        raise UsageError(f"max_description_chars={max_description_chars!r} must be a whole number")
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _trim(text: str, limit: float) -> str:
    if len(text) <= limit:
        return text
    return text[: int(limit) - 1].rstrip() + "…" if limit >= 1 else ""


def _entry(number: int, record: Evidence, limit: float) -> str:
    lines = [f"{number}. {_one_line(record.title)}", record.url]
    description = _trim(_one_line(record.description), limit)
    return "\n".join([*lines, description] if description else lines)


def render(query: str, evidence: Sequence[Evidence],
           max_description_chars: float | None = DEFAULT_MAX_DESCRIPTION_CHARS) -> str:
    """The text the model sees: ``N results for "query":`` then a numbered title / URL / description list.

    Descriptions are trimmed to ``max_description_chars`` (the ellipsis included; ``None`` or ``math.inf``:
    whole). Titles and descriptions are put on one line each, so a result cannot forge the list's structure;
    the query is quoted as a JSON string. ``results`` is always plural, as the agents SDK prints it.
    """
    limit = _check_max(max_description_chars)
    header = f"{len(evidence)} results for {json.dumps(query, ensure_ascii=False)}:"
    return "\n\n".join([header, *(_entry(n, r, limit) for n, r in enumerate(evidence, start=1))])


# ---------------------------------------------------------------- failures

_BY_STATUS = {400: "web_search_bad_request", 401: "web_search_unauthorized",
              402: "web_search_payment_required", 403: "web_search_unauthorized",
              429: "web_search_rate_limited"}


def _code_for(status: int) -> str:
    return "web_search_unavailable" if status >= 500 else _BY_STATUS.get(status, "web_search_failed")


def _api_error(body: object) -> tuple[Mapping[str, object], str]:
    """The gateway error object and the best message in a Cloudflare error body (either envelope)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        return error, str(error.get("message") or "")
    errors = body.get("errors") if isinstance(body, Mapping) else None
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], Mapping) else {}
    return {}, str(first.get("message") or "")


def error_from_response(status: int, body: object = None,
                        headers: Mapping[str, object] | None = None) -> WebSearchError:
    """The ``WebSearchError`` for a failed search response.

    ``code`` is the API's own when it sends one (``error.code``), else derived from the status: 402 payment
    required, 429 rate limited, 5xx unavailable, 400 bad request, 401/403 unauthorized. ``retryable`` is the
    API's own when given, else true for 429 and 5xx. ``request_id`` is ``cf-aig-request-id`` or the body's
    ``gatewayRequestId``.
    """
    error, detail = _api_error(body)
    code = error.get("code") if isinstance(error.get("code"), str) else _code_for(status)
    stated = error.get("retryable")
    retryable = stated if isinstance(stated, bool) else status == 429 or status >= 500
    request_id = header(headers, "cf-aig-request-id") or error.get("gatewayRequestId")
    message = f"web search failed with HTTP {status} ({code})" + (f": {detail}" if detail else "")
    return WebSearchError(message, status=status, code=str(code), retryable=retryable,
                          request_id=str(request_id) if request_id else None)


def timeout_error(timeout_ms: float, request_id: str | None = None) -> WebSearchError:
    """The retryable ``web_search_timeout`` failure of a search that outran the client's deadline."""
    return WebSearchError(f"web search gave no answer within {timeout_ms:g} ms", status=None,
                          code="web_search_timeout", retryable=True, request_id=request_id)

