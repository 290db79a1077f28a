"""Errors replaykit raises, and (later) the error taxonomy it checks harnesses against.

The exception tree::

    ReplaykitError                      every error replaykit raises on purpose
    ├── UsageError(ReplaykitError, ValueError)   a bad argument or command line (CLI exit 2)
    ├── CassetteError                   a cassette file cannot be read or written
    ├── ContractError                   a contract (JSON Schema) is missing or broken
    ├── MatchError                      a request matched no recorded interaction
    ├── ScenarioError                   a scenario file is invalid
    ├── TargetError                     a target command misbehaved (crashed, wrote no outcome)
    └── LocalRequestError(ReplaykitError, ValueError)
                                        LOCAL_REQUEST_ERROR: a request was refused before it was sent
                                        (phase validation | estimation | preparation); terminal, never retried

Every message names the file, the place in it (``path:line`` or a JSON pointer) and the fix.
Errors of the libraries underneath (YAML, jsonschema, sockets) are translated where they enter:
``raise CassetteError(...) from exc``.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "LOCAL_PHASES",
    "CassetteError",
    "LocalPhase",
    "LocalRequestError",
    "Provenance",
    "ContractError",
    "MatchError",
    "ReplaykitError",
    "ScenarioError",
    "TargetError",
    "UsageError",
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


Provenance = Literal["local", "provider", "transport", "cancelled", "deadline"]
LocalPhase = Literal["validation", "estimation", "preparation"]
LOCAL_PHASES: tuple[LocalPhase, ...] = ("validation", "estimation", "preparation")


class LocalRequestError(ReplaykitError, ValueError):
    """``LOCAL_REQUEST_ERROR``: refused locally before any provider request; terminal, never retried.

    ``pointer`` is the JSON pointer of the offending value, ``message_index`` the transcript message at fault.
    """

    code = "LOCAL_REQUEST_ERROR"
    provenance: Provenance = "local"
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


def located(path: object, place: object, message: str, fix: str = "") -> str:
    """Format ``path:place: message (fix)`` — the shape of every replaykit error message."""
    where = f"{path}:{place}" if place not in (None, "") else str(path)
    tail = f"; {fix}" if fix else ""
    return f"{where}: {message}{tail}"
