"""The errors replaykit raises, and the one shape of their messages (:func:`located`).

:class:`ReplaykitError` is the root; below it :class:`UsageError` (CLI exit 2), :class:`CassetteError`,
:class:`ContractError`, :class:`MatchError`, :class:`ScenarioError`, :class:`TargetError`,
:class:`CitationError`, :class:`WebSearchError`, :class:`NetworkBlockedError` and :class:`LocalRequestError`.
Every message names the file, the place in it and the fix; errors of the libraries underneath are translated
where they enter (``raise CassetteError(...) from exc``). The failure taxonomy is :mod:`replaykit.provenance`;
this module imports nothing of replaykit. The tree is drawn in docs/architecture/modules.md.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "LOCAL_PHASES",
    "CassetteError",
    "CitationError",
    "ContractError",
    "LocalPhase",
    "LocalRequestError",
    "MatchError",
    "NetworkBlockedError",
    "ReplaykitError",
    "ScenarioError",
    "TargetError",
    "UsageError",
    "WebSearchError",
    "located",
]


class ReplaykitError(Exception):
    """Root of every error replaykit raises on purpose."""


class UsageError(ReplaykitError, ValueError):
    """A bad argument, option or path given by the user."""


class CassetteError(ReplaykitError):
    """A cassette file cannot be parsed, is of the wrong version, or cannot be written."""


class ContractError(ReplaykitError):
    """A contract is unknown or cannot be compiled."""


class MatchError(ReplaykitError):
    """A request matched no recorded interaction."""


class ScenarioError(ReplaykitError):
    """A scenario file is invalid."""


class TargetError(ReplaykitError):
    """A target command crashed, timed out or wrote no valid outcome."""


class NetworkBlockedError(ReplaykitError, ConnectionRefusedError):
    """The network guard refused a connection (or DNS lookup) to an address that is not loopback.

    A :class:`ConnectionRefusedError`, so the code under test sees a refused connection (``TRANSPORT_ERROR``
    to :func:`replaykit.provenance.classify`); the guard records every refusal, so one the code swallows
    is still reported.
    """


class CitationError(ReplaykitError, ValueError):
    """An answer's citations failed verification; ``findings`` lists every problem found."""

    def __init__(self, message: str, findings: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.findings = findings


LocalPhase = Literal["validation", "estimation", "preparation"]
LOCAL_PHASES: tuple[LocalPhase, ...] = ("validation", "estimation", "preparation")


class LocalRequestError(ReplaykitError, ValueError):
    """``LOCAL_REQUEST_ERROR``: refused locally before any provider request; terminal, never retried.

    ``pointer`` is the JSON pointer of the offending value, ``message_index`` the transcript message at fault.
    """

    code = "LOCAL_REQUEST_ERROR"
    provenance: Literal["local"] = "local"
    retryable = False

    def __init__(
        self, message: str, *, phase: LocalPhase, pointer: str = "", message_index: int | None = None
    ) -> None:
        if phase not in LOCAL_PHASES:
            raise ValueError(f"phase={phase!r} must be one of {LOCAL_PHASES}")
        where = f" at {pointer}" if pointer else ""
        super().__init__(f"{phase} error{where}: {message}")
        self.phase: LocalPhase = phase
        self.pointer = pointer
        self.message_index = message_index


class WebSearchError(ReplaykitError):
    """A failed Cloudflare Web Search, as the agents SDK reports it: ``{status, code, retryable, requestId}``.

    ``status`` is ``None`` when no HTTP response arrived (``web_search_timeout``). Build one from a response
    with :func:`replaykit.search.error_from_response`.
    """

    def __init__(
        self, message: str, *, status: int | None, code: str, retryable: bool, request_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retryable = retryable
        self.request_id = request_id

    def to_json(self) -> dict[str, object]:
        """The ``WebSearchError`` fields as the agents SDK names them."""
        return {"status": self.status, "code": self.code, "retryable": self.retryable,
                "requestId": self.request_id, "message": str(self)}


def located(path: object, place: object, message: str, fix: str = "") -> str:
    """Format ``path:place: message (fix)`` — the shape of every replaykit error message."""
    where = f"{path}:{place}" if place not in (None, "") else str(path)
    tail = f"; {fix}" if fix else ""
    return f"{where}: {message}{tail}"
