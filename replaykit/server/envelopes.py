"""Error bodies and headers in each provider's own envelope, so SDKs raise their normal errors.

Anthropic ``{"type": "error", "error": {...}}``, OpenAI and Azure ``{"error": {...}}``, Google's (Gemini,
Vertex AI) ``{"error": {"code", "message", "status"}}``, Cloudflare's v4 and AI Gateway envelopes, and the
mid-stream error events (a Chat Completions or Gemini stream's: an unnamed ``data:`` line holding the
provider's error envelope); the shapes and their sources:
docs/architecture/server.md.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field

from replaykit import sse
from replaykit.sse import event_type

__all__ = [
    "ERROR_EVENTS",
    "ERROR_TAIL",
    "ErrorReply",
    "chat_error_event",
    "error_event",
    "error_reply",
    "failed_event",
    "request_id",
    "streams_an_error",
]

ERROR_EVENTS = frozenset({"error", "response.failed"})  # a stream that sends one of these failed
ERROR_TAIL = 64 << 10  # bytes at the end of a stream that streams_an_error reads
_BLANK_LINE = re.compile(rb"\r\n\r\n|\n\n|\r\r")  # the end of an SSE event
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_OPENAI_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
_CLOUDFLARE_V4 = {
    400: (7000, "Invalid web search request body"),
    401: (10000, "Authentication error"),
    403: (10000, "Authentication error"),
    404: (7003, "Could not route to the requested path"),
}
#: Google's canonical error codes by HTTP status (google.rpc.Code; Gemini's troubleshooting page lists 400,
#: 403, 404, 429, 500, 503 and 504).
_GOOGLE_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_GOOGLE = frozenset({"gemini", "vertex"})
_CLOUDFLARE_GATEWAY = {402: "web_search_payment_required", 429: "web_search_rate_limited"}
_REQUEST_ID_HEADER = {
    "anthropic": "request-id",
    "openai": "x-request-id",
    "azure": "x-request-id",
    "cloudflare": "cf-aig-request-id",
}


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An HTTP error to serve: status, JSON body and headers (content-type included)."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def request_id(provider: str | None) -> str:
    """A fresh request id in the provider's style (``req_…`` for Anthropic and OpenAI)."""
    return f"req_{secrets.token_hex(12)}"


def _anthropic(status: int, message: str, error_type: str | None, rid: str) -> dict[str, object]:
    kind = error_type or _ANTHROPIC_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": rid}


def _openai(status: int, message: str, error_type: str | None, code: str | None,
            param: str | None = None) -> dict[str, object]:
    kind, default_code = _OPENAI_TYPES.get(
        status, ("server_error", None) if status >= 500 else ("invalid_request_error", None)
    )
    return {
        "error": {"message": message, "type": error_type or kind, "param": param,
                  "code": code or default_code}
    }


def _google(status: int, message: str, error_type: str | None) -> dict[str, object]:
    """``{"error": {code, message, status}}``; ``error_type`` names the status (``FAILED_PRECONDITION``)."""
    name = error_type or _GOOGLE_STATUSES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
    return {"error": {"code": status, "message": message, "status": name}}


def _cloudflare(status: int, message: str, code: str | None, rid: str) -> dict[str, object]:
    if status in _CLOUDFLARE_V4:
        number, text = _CLOUDFLARE_V4[status]
        return {
            "success": False,
            "errors": [{"code": number, "message": message or text}],
            "messages": [],
            "result": None,
        }
    name = code or _CLOUDFLARE_GATEWAY.get(status, "web_search_unavailable")
    return {
        "ok": False,
        "error": {
            "category": "gateway",
            "code": name,
            "status": status,
            "retryable": status == 429 or status >= 500,
            "gatewayRequestId": rid,
            "message": message,
        },
    }


def error_reply(
    provider: str | None,
    status: int,
    *,
    message: str = "",
    error_type: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    param: str | None = None,
) -> ErrorReply:
    """The body and headers ``provider`` answers ``status`` with (``None``: the OpenAI shape; ``param`` is
    OpenAI's only)."""
    rid = request_id(provider)
    text = message or f"replaykit fault: HTTP {status}"
    if provider == "anthropic":
        body = _anthropic(status, text, error_type, rid)
    elif provider == "cloudflare":
        body = _cloudflare(status, message, code, rid)
    elif provider in _GOOGLE:
        body = _google(status, text, error_type)
    else:
        body = _openai(status, text, error_type, code, param)
    head = {"content-type": "application/json", _REQUEST_ID_HEADER.get(provider or "", "x-request-id"): rid}
    head.update(headers or {})
    return ErrorReply(status, json.dumps(body).encode(), head)


def error_event(provider: str | None, *, error_type: str | None, message: str, sequence_number: int) -> bytes:
    """A mid-stream ``event: error`` block in the provider's shape (Google's: a ``data:`` line holding the
    error envelope, with no ``event:`` field, as google-genai reads it)."""
    if provider in _GOOGLE:
        code = next((code for code, name in _GOOGLE_STATUSES.items() if name == error_type), 500)
        body = _google(code, message or "An internal error has occurred.", error_type)
        return sse.encode(json.dumps(body)).raw
    if provider == "anthropic":
        data: dict[str, object] = {
            "type": "error",
            "error": {"type": error_type or "overloaded_error", "message": message or "Overloaded"},
        }
    else:
        data = {
            "type": "error",
            "code": error_type or "server_error",
            "message": message or "The server had an error processing your request.",
            "param": None,
            "sequence_number": sequence_number,
        }
    return sse.encode(json.dumps(data), event="error").raw


def chat_error_event(*, error_type: str | None, message: str) -> bytes:
    """A mid-stream error of a Chat Completions stream: ``data: {"error": {...}}`` (OpenAI's error envelope,
    no event name), which the openai SDKs raise as ``APIError``."""
    error = {"message": message or "The server had an error processing your request.",
             "type": error_type or "server_error", "param": None, "code": None}
    return sse.encode(json.dumps({"error": error})).raw


def is_error_line(event: sse.Event) -> bool:
    """True for a mid-stream error line of Chat Completions or Gemini: an unnamed event whose JSON holds
    an ``error`` object and no ``choices`` or ``candidates``."""
    if event.event is not None or '"error"' not in (event.data or ""):
        return False
    try:
        data = event.json()
    except ValueError:
        return False
    answer = isinstance(data, dict) and bool({"choices", "candidates"} & set(data))
    return isinstance(data, dict) and isinstance(data.get("error"), dict) and not answer


def failed_event(
    response: dict[str, object] | None, *, code: str | None, message: str, sequence_number: int
) -> bytes:
    """An OpenAI ``response.failed`` block: the last response object seen, now ``failed`` with ``error``."""
    failed = dict(response or {"object": "response", "output": []})
    failed.update(
        status="failed",
        error={
            "code": code or "server_error",
            "message": message or "The server had an error processing your request.",
        },
    )
    data = {"type": "response.failed", "sequence_number": sequence_number, "response": failed}
    return sse.encode(json.dumps(data), event="response.failed").raw


def streams_an_error(body: bytes) -> bool:
    """True when the last event of the stream ``body`` is an error (:data:`ERROR_EVENTS`, or Google's ``data:
    {"error": ...}``; every provider ends a stream with its error event): it answers with a failure although
    its status is 200.

    Only the events in its last :data:`ERROR_TAIL` bytes are read: a stream of any size costs the same.
    """
    tail = body
    if len(body) > ERROR_TAIL:
        boundary = _BLANK_LINE.search(body, len(body) - ERROR_TAIL)
        if boundary is None:  # the last bytes are all one long event: not an error event
            return False
        tail = body[boundary.end():]
    events = [event for event in sse.iter_events([tail]) if event.dispatched]
    return bool(events) and (event_type(events[-1]) in ERROR_EVENTS or is_error_line(events[-1]))
