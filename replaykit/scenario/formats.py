"""The scenario formats as types: the scenario document, the target input and outcome, the run report.

Each is a ``TypedDict`` whose keys are the wire's, camelCase as its contract (``contracts/replaykit/``) spells
them: a value is JSON as read or written, with no translation layer, and a test keeps keys and contract equal.
The fake provider's journal entry stays the server's typed :class:`~replaykit.server.Entry` (snake_case).
"""

# no ``from __future__ import annotations``: TypedDict reads NotRequired from evaluated annotations
from typing import Literal, NotRequired, TypedDict

from replaykit.jsondoc import JSON

__all__ = ["CancelOn", "Counts", "Estimate", "OutcomeError", "Receipt", "ReportCheck", "ReportResult",
           "RunReport", "ScenarioDoc", "Step", "TargetInput", "TargetOutcome"]

Status = Literal["ok", "error", "aborted", "unanswered"]


class Step(TypedDict):
    """One step of the target input (``target-input.schema.json#/$defs/step``)."""

    prompt: str
    provider: str
    api: NotRequired[str]
    model: str
    cancelAfterMs: NotRequired[int]
    operationId: NotRequired[str]
    research: NotRequired[JSON]


class CancelOn(TypedDict):
    """A scenario step's ``cancelOn`` (``scenario.schema.json#/$defs/step/properties/cancelOn``): the request
    whose arrival cancels the run (SIGINT), never written to the target's input."""

    route: str
    nth: int


class ScenarioDoc(TypedDict):
    """A scenario file as written (``scenario.schema.json``): defaults not filled in; its steps may hold
    ``restart``."""

    name: str
    kind: str
    description: str
    steps: list[JSON]
    expectations: JSON
    cassettes: NotRequired[list[str]]
    transcript: NotRequired[JSON | str | None]
    tools: NotRequired[list[JSON]]
    system: NotRequired[str | None]
    idleTimeoutMs: NotRequired[int]
    maxRetries: NotRequired[int]
    timeoutMs: NotRequired[int]
    files: NotRequired[dict[str, str]]
    contextWindow: NotRequired[int]
    reserve: NotRequired[int]
    recovery: NotRequired[JSON | None]
    faults: NotRequired[list[JSON]]
    requires: NotRequired[list[str]]
    kills: NotRequired[list[str]]


class TargetInput(TypedDict):
    """What the runner gives the target (``target-input.schema.json``): every field written."""

    scenario: str
    transcript: JSON | None
    steps: list[JSON]
    tools: list[JSON]
    contextWindow: int
    reserve: int
    idleTimeoutMs: int
    maxRetries: int
    recovery: NotRequired[JSON | None]
    system: str | None


class OutcomeError(TypedDict):
    """The error a run stopped on, as the target says (``target-outcome.schema.json#/$defs/error``)."""

    code: str
    provenance: str
    retryable: bool
    message: str
    phase: NotRequired[str]
    status: NotRequired[int]
    providerType: NotRequired[str]
    requestId: NotRequired[str]


class Estimate(TypedDict):
    """The target's input-token estimate before a request of step ``step`` (0-based)."""

    step: int
    tokens: int


class Receipt(TypedDict):
    """A durable step's submission receipt."""

    operationId: str
    accepted: bool
    timestamp: int


class TargetOutcome(TypedDict):
    """What the target reports (``target-outcome.schema.json``); read only once it validates."""

    status: Status
    persistWrites: int
    reason: NotRequired[str]
    receipts: NotRequired[list[Receipt]]
    error: NotRequired[OutcomeError | None]
    transcript: NotRequired[JSON | None]
    estimates: NotRequired[list[Estimate]]
    research: NotRequired[list[JSON]]


class ReportCheck(TypedDict):
    """One expectation in a report (``run-report.schema.json#/$defs/check``)."""

    name: str
    ok: bool
    why: str
    stage: str


class ReportResult(TypedDict):
    """One scenario on one target in a report (``run-report.schema.json#/$defs/result``)."""

    scenario: str
    file: str
    kind: str
    target: str
    mutant: str | None
    verdict: str
    passed: bool
    missing: list[str]
    firstFailure: ReportCheck | None
    checks: list[ReportCheck]
    providerRequests: int
    seconds: float
    outcome: TargetOutcome | None


class Counts(TypedDict):
    """How many scenarios, and how many passed, failed and were n/a."""

    scenarios: int
    passed: int
    failed: int
    na: int


class RunReport(TypedDict):
    """The JSON report of ``replaykit run`` and ``replaykit merge`` (``run-report.schema.json``)."""

    passed: bool
    counts: Counts
    coverage: str
    results: list[ReportResult]
    shard: NotRequired[JSON]
