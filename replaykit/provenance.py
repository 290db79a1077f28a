"""The taxonomy a harness's failures are judged by: code, phase, provenance and retryability.

:data:`ERROR_CODES` are exactly the codes of ``contracts/replaykit/target-outcome.schema.json``;
:func:`classify` maps an exception (its causes walked) or a raw HTTP response to an :class:`ErrorInfo` whose
message is safe to log (:func:`replaykit.redact.safe_message`); an unknown exception is ``INTERNAL_ERROR``.
:func:`status_retryable` is the provider SDKs' retry rule; :func:`research_code` maps a research step's
failure to :data:`RESEARCH_RETRYABLE`'s codes. Used by the reference harness and the scenario expectations;
the code table is in docs/architecture/modules.md.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from replaykit.cassette import header
from replaykit.errors import LocalPhase, LocalRequestError, WebSearchError
from replaykit.jsondoc import JSON
from replaykit.redact import safe_message

__all__ = [
    "ERROR_CODES",
    "PROVENANCES",
    "RESEARCH_RETRYABLE",
    "ErrorCode",
    "ErrorInfo",
    "Provenance",
    "causes",
    "classify",
    "event_error",
    "is_retryable",
    "outcome_json",
    "research_code",
    "status_retryable",
]

Provenance = Literal["local", "provider", "transport", "cancelled", "deadline"]
PROVENANCES: tuple[Provenance, ...] = ("local", "provider", "transport", "cancelled", "deadline")
ErrorCode = Literal[
    "LOCAL_REQUEST_ERROR", "PROVIDER_ERROR", "TRANSPORT_ERROR", "DEADLINE_EXCEEDED", "CANCELLED",
    "INTERNAL_ERROR",
]
ERROR_CODES: tuple[ErrorCode, ...] = (
    "LOCAL_REQUEST_ERROR", "PROVIDER_ERROR", "TRANSPORT_ERROR", "DEADLINE_EXCEEDED", "CANCELLED",
    "INTERNAL_ERROR",
)


ResearchCode = Literal["invalid_request", "search_capacity", "search_auth", "insufficient_evidence",
                       "model_failure", "citation_failure", "deadline"]
RESEARCH_RETRYABLE: dict[ResearchCode, bool] = {
    "invalid_request": False, "search_capacity": True, "search_auth": False, "insufficient_evidence": False,
    "model_failure": True, "citation_failure": True, "deadline": True,
}


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """A classified failure: the ``error`` object of a target outcome
    (``contracts/replaykit/target-outcome.schema.json``).

    ``phase`` is the local phase that failed, set for ``LOCAL_REQUEST_ERROR`` only (the outcome contract
    allows no phase on the others). ``status``, ``provider_type`` (the provider's error type or code) and
    ``request_id`` are known only for provider errors.
    """

    code: ErrorCode
    phase: LocalPhase | None
    provenance: Provenance
    retryable: bool
    message: str
    status: int | None = None
    provider_type: str | None = None
    request_id: str | None = None

    @property
    def outcome(self) -> Literal["error", "aborted"]:
        """The outcome status this failure gives a step: ``aborted`` when cancelled, else ``error``."""
        return "aborted" if self.code == "CANCELLED" else "error"

    def to_json(self) -> JSON:
        """The outcome's ``error`` object (camelCase keys; fields that do not apply are left out)."""
        fields = {"code": self.code, "phase": self.phase, "provenance": self.provenance,
                  "retryable": self.retryable, "message": self.message, "status": self.status,
                  "providerType": self.provider_type, "requestId": self.request_id}
        return {key: value for key, value in fields.items() if value is not None}


def status_retryable(status: int, should_retry: str | None = None, provider_type: str | None = None) -> bool:
    """The retry rule of the provider SDKs: ``x-should-retry`` first, then 408, 409, 429 and 5xx (529 too).

    A 2xx status carries a mid-stream error event: it is retryable when its type is a transient one.
    """
    hint = (should_retry or "").strip().lower()
    if hint in ("true", "false"):
        return hint == "true"
    if status in (408, 409, 429) or status >= 500:
        return True
    return 200 <= status < 300 and provider_type in _TRANSIENT_TYPES


_TRANSIENT_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error",
                              "server_error", "rate_limit_exceeded",
                              # Google's statuses (google.rpc.Code) of 429, 500, 503 and 504
                              "RESOURCE_EXHAUSTED", "INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED"})


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from: ``__cause__``, else ``__context__`` unless suppressed."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def classify(failure: BaseException | object) -> ErrorInfo:
    """Classify an exception (with what it wraps) or a raw HTTP error response.

    Exceptions: cancellation anywhere in the chain wins (a cancelled step is aborted whatever it broke on the
    way out); otherwise the outermost exception of a known kind decides, so a local error wrapped in a generic
    exception stays local. Known kinds: :class:`LocalRequestError`, :class:`WebSearchError`, the ``anthropic``
    and ``openai`` SDK errors, ``httpx`` / ``httpx2`` / ``aiohttp`` errors, ``TimeoutError``,
    ``ConnectionError``. Responses: anything with an int ``status_code`` or ``status`` and ``headers``
    (httpx, a cassette :class:`~replaykit.cassette.Response`).
    """
    if not isinstance(failure, BaseException):
        return _from_response(failure)
    chain = list(causes(failure))
    for exc in chain:
        if _is_cancelled(exc):
            message = safe_message(_describe(exc, "cancelled"))
            return ErrorInfo("CANCELLED", None, "cancelled", False, message)
    for exc in chain:
        info = _classify_one(exc)
        if info is not None:
            return info
    return ErrorInfo("INTERNAL_ERROR", None, "local", False, safe_message(_describe(failure, "")))


def event_error(data: Mapping[str, Any]) -> ErrorInfo:
    """Classify a provider's mid-stream error event (HTTP 200): Anthropic's ``error`` event
    (``{"error": {"type", "message"}}``), OpenAI's ``error`` event (``{"code", "message"}``) or its
    ``response.failed`` (``{"response": {"error": {"code", "message"}}}``), a Chat Completions or Gemini
    chunk that is an error body (``{"error": {"message", "type" | "status"}}``). Retryable when its type is a
    transient one (overloaded, rate limit, server error...)."""
    response = data.get("response")
    if isinstance(response, Mapping) and isinstance(response.get("error"), Mapping):
        return _provider(200, {}, {"error": response["error"]})
    if isinstance(data.get("error"), Mapping):
        return _provider(200, {}, data)
    return _provider(200, {}, {"error": {"code": data.get("code"), "message": data.get("message")}})


def is_retryable(failure: BaseException | object) -> bool:
    """Whether a harness should retry after ``failure`` (see :func:`classify`)."""
    return classify(failure).retryable


def outcome_json(failure: BaseException | object) -> JSON:
    """The ``status`` and ``error`` fields of a target outcome for a step that ended in ``failure``."""
    info = classify(failure)
    return {"status": info.outcome, "error": info.to_json()}


def _describe(exc: BaseException, default: str) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else (default or type(exc).__name__)


def _classes(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """Classes of ``module`` if it is already imported: an exception of it cannot exist otherwise."""
    loaded = sys.modules.get(module)
    found = (getattr(loaded, name, None) for name in names) if loaded is not None else ()
    return tuple(cls for cls in found if isinstance(cls, type))


def _is_cancelled(exc: BaseException) -> bool:
    kinds = (_classes("asyncio", "CancelledError") + _classes("concurrent.futures", "CancelledError")
             + _classes("trio", "Cancelled"))
    return isinstance(exc, kinds)


def _classify_one(exc: BaseException) -> ErrorInfo | None:
    for rule in (_local, _web_search, _sdk, _httpx, _aiohttp, _builtin):
        info = rule(exc)
        if info is not None:
            return info
    return None


def _local(exc: BaseException) -> ErrorInfo | None:
    if not isinstance(exc, LocalRequestError):
        return None
    return ErrorInfo("LOCAL_REQUEST_ERROR", exc.phase, "local", False, safe_message(str(exc)))


def _web_search(exc: BaseException) -> ErrorInfo | None:
    if not isinstance(exc, WebSearchError):
        return None
    if exc.status is None and exc.code == "web_search_timeout":
        return _deadline(f"web search {exc.code}: {exc}", exc.retryable)
    if exc.status is None:  # no answer at all (web_search_unavailable): the connection, not the clock
        return _transport(f"web search {exc.code}: {exc}", exc.retryable)
    return ErrorInfo("PROVIDER_ERROR", None, "provider", exc.retryable,
                     safe_message(f"web search {exc.status} {exc.code}: {exc}"), exc.status, exc.code,
                     exc.request_id)


def _sdk(exc: BaseException) -> ErrorInfo | None:
    for module in ("anthropic", "openai"):
        if isinstance(exc, _classes(module, "APITimeoutError")):
            return _deadline(f"{module}: request timed out", True)
        if isinstance(exc, _classes(module, "APIStatusError")):
            headers = getattr(getattr(exc, "response", None), "headers", {})
            return _provider(int(getattr(exc, "status_code", 0)), headers, getattr(exc, "body", None), module)
        if isinstance(exc, _classes(module, "APIConnectionError")):
            return _transport(f"{module}: {_describe(_root(exc), 'connection error')}", True)
    return None


def _root(exc: BaseException) -> BaseException:
    """The innermost cause: names the real transport failure under an SDK's generic "Connection error"."""
    return list(causes(exc))[-1]


def _httpx(exc: BaseException) -> ErrorInfo | None:
    for module in ("httpx", "httpx2"):
        if isinstance(exc, _classes(module, "TimeoutException")):
            return _deadline(f"{module}: {_describe(exc, 'timed out')}", True)
        if isinstance(exc, _classes(module, "HTTPStatusError")):
            return _from_response(getattr(exc, "response", None), module)
        if isinstance(exc, _classes(module, "TransportError")):
            terminal = isinstance(exc, _classes(module, "LocalProtocolError", "UnsupportedProtocol"))
            return _transport(f"{module}: {_describe(exc, 'transport error')}", not terminal)
    return None


def _aiohttp(exc: BaseException) -> ErrorInfo | None:
    if isinstance(exc, _classes("aiohttp", "ClientResponseError")):
        status = int(getattr(exc, "status", 0))
        headers = getattr(exc, "headers", None) or {}
        return _provider(status, headers, {"error": {"message": getattr(exc, "message", "")}}, "aiohttp")
    if isinstance(exc, _classes("aiohttp", "ServerTimeoutError")):
        return _deadline(f"aiohttp: {_describe(exc, 'timed out')}", True)
    if isinstance(exc, _classes("aiohttp", "ClientConnectionError", "ClientPayloadError")):
        return _transport(f"aiohttp: {_describe(exc, 'connection error')}", True)
    return None


def _builtin(exc: BaseException) -> ErrorInfo | None:
    if isinstance(exc, TimeoutError):
        return _deadline(_describe(exc, "timed out"), True)
    if isinstance(exc, (ConnectionError, *_classes("socket", "gaierror"))):
        return _transport(_describe(exc, "connection error"), True)
    return None


def _deadline(message: str, retryable: bool) -> ErrorInfo:
    return ErrorInfo("DEADLINE_EXCEEDED", None, "deadline", retryable, safe_message(message))


def _transport(message: str, retryable: bool) -> ErrorInfo:
    return ErrorInfo("TRANSPORT_ERROR", None, "transport", retryable, safe_message(message))


# ---------------------------------------------------------------- provider responses


def _body_of(response: Any) -> object:
    try:
        return response.json()
    except Exception:  # an unread stream or a non-JSON body simply has no error details
        return None


def _from_response(response: object, source: str = "") -> ErrorInfo:
    status = getattr(response, "status_code", None)
    status = getattr(response, "status", None) if not isinstance(status, int) else status
    if not isinstance(status, int) or not hasattr(response, "headers"):
        raise TypeError(f"cannot classify {type(response).__name__}: not an exception nor an HTTP response")
    if 200 <= status < 400:
        raise ValueError(f"HTTP {status} is not an error response")
    return _provider(status, response.headers, _body_of(response), source)


def _error_fields(body: object) -> tuple[str | None, str, str | None]:
    """(provider error type, provider message, request id) from any provider's error body."""
    if not isinstance(body, Mapping):
        return None, "", None
    error = body.get("error")
    if isinstance(error, Mapping):
        status = error.get("status") if isinstance(error.get("status"), str) else None  # Google's: a name
        kind = error.get("type") or status or error.get("code")
        message = error.get("message") or ""
        request_id = body.get("request_id") or error.get("gatewayRequestId")
        return _str_or_none(kind), str(message), _str_or_none(request_id)
    errors = body.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], Mapping):
        first = errors[0]
        return _str_or_none(first.get("code")), str(first.get("message") or ""), None
    return None, "", None


def _str_or_none(value: object) -> str | None:
    return str(value) if value is not None else None


def _request_id(headers: object, from_body: str | None) -> str | None:
    for name in ("request-id", "x-request-id", "cf-aig-request-id"):
        value = header(headers, name)
        if value:
            return value
    return from_body


def _provider(status: int, headers: object, body: object, source: str = "") -> ErrorInfo:
    kind, text, body_request_id = _error_fields(body)
    request_id = _request_id(headers, body_request_id)
    should_retry = header(headers, "x-should-retry")
    retryable = status_retryable(status, should_retry, kind)
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping) and isinstance(error.get("retryable"), bool) and not should_retry:
        retryable = error["retryable"]  # Cloudflare's gateway says so itself
    prefix = f"{source}: " if source else ""
    label = " ".join(part for part in (str(status), kind or "") if part)
    message = f"{prefix}provider error {label}" + (f": {text}" if text else "")
    return ErrorInfo("PROVIDER_ERROR", None, "provider", retryable, safe_message(message), status, kind,
                     request_id)


# ---------------------------------------------------------------- research steps


def research_code(info: ErrorInfo, stage: Literal["search", "model"]) -> ResearchCode:
    """The research failure class of ``info``, a failure of the ``search`` or the ``model`` stage (see the
    module's table; its retryability is ``RESEARCH_RETRYABLE[code]``)."""
    if info.provenance == "deadline":
        return "deadline"
    if info.code == "LOCAL_REQUEST_ERROR":
        return "invalid_request"
    if stage == "model":
        return "model_failure"
    if info.status in (401, 403):
        return "search_auth"
    return "invalid_request" if info.status in (400, 422) else "search_capacity"
