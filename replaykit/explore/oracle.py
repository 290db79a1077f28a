"""The oracle: what must hold under any fault schedule, written as the scenario's own expectations.

For a schedule, the scenario runs with its faults added and these expectations, so the scenario written for
a failure fails the same way under ``replaykit run``. Each check stands for one invariant of
:data:`INVARIANTS` (``expectation``, ``ends-classified``, ``retries-bounded``, ``turns-kept-once``,
``partial-kept``, ``contracts-hold``, ``tool-not-rerun``), stated in full in the docs' explore page.
Called by :mod:`~replaykit.explore.exploration`; reads the runner's
:class:`~replaykit.scenario.runner.Result`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from replaykit.canonical import canonical
from replaykit.explore.space import Trial, budget_of, served, tool_call_ids, with_short_stall
from replaykit.jsondoc import JSON
from replaykit.scenario.formats import ScenarioDoc
from replaykit.scenario.model import Scenario
from replaykit.scenario.runner import Result
from replaykit.scenario.target import Target
from replaykit.server import Entry

__all__ = ["ALL_STATUSES", "INVARIANTS", "Baseline", "Judged", "first_broken", "judge"]

INVARIANTS = {
    "expectation": "the scenario's own expectation",
    "ends-classified": ("the turn ends ok, aborted, unanswered or with a classified error of the right "
                        "provenance"),
    "retries-bounded": "no provider request beyond the declared retries",
    "turns-kept-once": "no persisted turn lost or doubled",
    "partial-kept": "the partial answer is kept across an interruption",
    "tool-not-rerun": "a tool without recovery: rerun is never run again",
    "contracts-hold": "every request, the ones after a recovery included, holds its contract",
}
ALL_STATUSES = ["ok", "error", "aborted", "unanswered"]
TIMEOUT_MS = 20000  # a run under faults: a hang is a finding, not a wait of the scenario's whole timeout
_ALWAYS = ("requestContractsHold", "neverReaches", "unmatched")
_RECOVERED = ("outcome", "error", "reason", "receipts")
_PROVENANCE = {"status": "provider", "error_event": "provider", "disconnect": "transport",
               "corrupt_event": "transport", "drop_terminal": "transport", "stall": "transport"}


@dataclass(frozen=True)
class Baseline:
    """What the fault-free run showed: its request count, the length and last role of its final transcript,
    the events each request was answered with, the result each tool call gave, and whether the target
    keeps durable turns here."""

    requests: int
    receipts: int
    answered: list[tuple[Entry, list[JSON]]]
    tool_results: dict[tuple[str, int], str]
    durable: bool
    contracts_hold: bool = False

    @classmethod
    def of(cls, scenario: Scenario, result: Result, target: Target) -> Baseline:
        """The baseline of ``result``, the scenario's fault-free run on ``target``."""
        given = result.outcome.get("receipts") if result.outcome else None
        receipts = {json.dumps(r, sort_keys=True) for r in given or []}
        durable = bool(scenario.doc.get("recovery")) and not target.manifest.missing({"durable"})
        answered = served(result.journal, scenario.cassettes)
        held = not any(row.get("severity", "error") == "error" for entry in result.journal
                       for row in entry.request_violations)
        return cls(result.requests, len(receipts), answered, _tool_results(scenario, result), durable, held)


def _tool_results(scenario: Scenario, result: Result) -> dict[tuple[str, int], str]:
    """``(tool, nth) -> the first text its result sent to the provider`` in the fault-free run."""
    ids = tool_call_ids(result.journal, scenario.cassettes)
    texts: dict[str, str] = {}
    for entry in result.journal:
        body = canonical(entry.route, entry.body)
        for message in (body or {}).get("messages") or [] if isinstance(body, dict) else []:
            for block in message.get("content") or [] if isinstance(message, dict) else []:
                text = _first_text(block.get("content")) if _succeeded(block) else ""
                if text:
                    texts.setdefault(str(block.get("tool_use_id")), text)
    return {key: texts[call] for key, call in ids.items() if call in texts}


def _succeeded(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result" and not block.get("is_error")


def _first_text(content: Any) -> str:
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and str(block.get("text") or "").strip():
            return str(block["text"]).strip().splitlines()[0][:80]
    return ""


@dataclass(frozen=True)
class Judged:
    """The scenario run for a schedule, and the invariant each of its checks stands for."""

    scenario: Scenario
    labels: dict[str, str] = field(default_factory=dict)


def recoverable(trial: Trial, doc: ScenarioDoc) -> bool:
    """True when every budget the schedule draws on covers its faults (then the turn must recover)."""
    used: dict[str, int] = {}
    for fault, kind in zip(trial.faults, trial.kinds, strict=True):
        name, budget = budget_of(kind, doc)
        used[name] = used.get(name, 0) + fault.times
        if used[name] > budget:
            return False
    return True


def _extra(kind: str, times: int, doc: ScenarioDoc) -> int:
    """The requests a fault may add: one per attempt within its budget (a kill at least one: the restart
    of a turn that is not durable sends its request again)."""
    budget = budget_of(kind, doc)[1]
    return min(times, max(budget, 1) if kind == "kill" else budget)


def _bound(trial: Trial, doc: ScenarioDoc, base: Baseline) -> int:
    pairs = zip(trial.faults, trial.kinds, strict=True)
    return base.requests + sum(_extra(kind, fault.times, doc) for fault, kind in pairs)


def _partial(trial: Trial, base: Baseline) -> JSON | None:
    """The ``reaches`` of the text received before the schedule's first fault, when it is a kill or stall
    in durable turns after some text."""
    if not trial.faults or not base.durable:
        return None
    point, kind = min(zip(trial.points, trial.kinds, strict=True), key=lambda pk: pk[0])
    if kind not in ("kill", "stall") or point.tool or point.after == 0:
        return None
    events = base.answered[point.request - 1][1][: point.after]
    text = "".join(_delta(event) for event in events).rstrip()
    return {"request": point.request + 1, "pointer": "/messages/*/content/*/text", "contains": text} \
        if text.strip() else None


def _delta(event: JSON) -> str:
    delta = event.get("delta")
    if isinstance(delta, dict) and delta.get("type") == "text_delta":
        return str(delta.get("text", ""))
    if event.get("type") == "response.output_text.delta" and isinstance(delta, str):
        return delta
    return ""


def _no_rerun(trial: Trial, doc: ScenarioDoc, base: Baseline) -> list[JSON]:
    """A ``neverReaches`` of the fault-free result of each tool call killed in durable turns (a turn that
    is not durable starts again from scratch after a kill, and runs its tools again)."""
    if not base.durable:
        return []
    rerun = {tool.get("name") for tool in doc.get("tools", []) if tool.get("recovery") == "rerun"}
    found = []
    for point in trial.points:
        text = base.tool_results.get((point.tool, point.nth)) if point.tool else None
        if text and point.tool not in rerun:
            found.append({"pointer": "/messages/*/content/*/content/*/text", "contains": text})
    return found


def _status_rules(trial: Trial, doc: ScenarioDoc, wanted: JSON, labels: dict[str, str]) -> None:
    if recoverable(trial, doc):
        return
    wanted["outcome"] = ALL_STATUSES
    labels["outcome"] = "ends-classified"
    kinds = {_PROVENANCE.get(fault.kind) for fault in trial.faults}
    if len(kinds) == 1 and None not in kinds:
        wanted["error"] = {"provenance": kinds.pop()}
        labels["error.provenance"] = "ends-classified"


def _kept_once(trial: Trial, doc: ScenarioDoc, base: Baseline, wanted: JSON, labels: dict[str, str]) -> None:
    """Every step's prompt is still in the final transcript, and as many distinct receipts as without a
    fault (a turn submitted twice gets a second one)."""
    if not recoverable(trial, doc) or wanted.get("outcome") != "ok":
        return
    prompts = list(dict.fromkeys(str(step["prompt"]) for step in doc["steps"]))
    has = [{"pointer": "/transcript/messages/*/content", "contains": prompt} for prompt in prompts]
    start = len(wanted.get("outcomeHas") or [])
    wanted["outcomeHas"] = [*(wanted.get("outcomeHas") or []), *has]
    labels.update({f"outcomeHas[{start + i}]": "turns-kept-once" for i in range(len(has))})
    if base.receipts and "receipts" not in wanted:
        wanted["receipts"] = base.receipts
        labels["receipts"] = "turns-kept-once"


def expectations(trial: Trial, doc: ScenarioDoc, base: Baseline) -> tuple[JSON, dict[str, str]]:
    """The expectations a schedule is judged by, and the invariant of each check (by its name)."""
    own: JSON = doc["expectations"]
    keep = _ALWAYS + (_RECOVERED if recoverable(trial, doc) else ())
    wanted: JSON = {key: copy.deepcopy(value) for key, value in own.items() if key in keep}
    labels: dict[str, str] = {"target": "ends-classified"}
    if base.contracts_hold and "requestContractsHold" not in wanted:
        wanted["requestContractsHold"] = True
        labels["requestContractsHold"] = "contracts-hold"
    wanted.setdefault("outcome", ALL_STATUSES)
    wanted["unused"] = True
    _status_rules(trial, doc, wanted, labels)
    wanted["providerRequests"] = {"max": _bound(trial, doc, base)}
    labels["providerRequests"] = "retries-bounded"
    _kept_once(trial, doc, base, wanted, labels)
    partial = _partial(trial, base)
    if partial is not None:
        wanted["reaches"] = [partial]
        labels["reaches[0]"] = "partial-kept"
    extra = _no_rerun(trial, doc, base)
    if extra:
        start = len(wanted.get("neverReaches") or [])
        wanted["neverReaches"] = [*(wanted.get("neverReaches") or []), *extra]
        labels.update({f"neverReaches[{start + i}]": "tool-not-rerun" for i in range(len(extra))})
    return wanted, labels


def judge(scenario: Scenario, trial: Trial, base: Baseline) -> Judged:
    """The scenario to run for ``trial``: its own faults and the schedule's, the oracle's expectations."""
    doc = copy.deepcopy(scenario.doc)
    doc.pop("kills", None)
    if not trial.faults:
        return Judged(dataclasses.replace(scenario, doc=doc))
    wanted, labels = expectations(trial, doc, base)
    doc["expectations"] = wanted
    doc["faults"] = [*doc.get("faults", []), *(fault.to_json() for fault in trial.faults)]
    doc["timeoutMs"] = min(int(doc.get("timeoutMs", 60000)), TIMEOUT_MS)
    if "stall" in trial.kinds:
        with_short_stall(doc)
    return Judged(dataclasses.replace(scenario, doc=doc, faults=scenario.faults + trial.faults), labels)


def first_broken(result: Result, labels: dict[str, str]) -> tuple[str, str] | None:
    """``(invariant, check)`` of the first failing check in cause order, a failed ``outcome`` or ``error``
    check with the error code the target ended with (``outcome (INTERNAL_ERROR)``: a crash and a 529 not
    retried are two findings); None when the run held (or did not run: n/a)."""
    first = result.first_failure if result.applicable else None
    if first is None:
        return None
    error = result.outcome.get("error") if result.outcome else None
    code = error.get("code") if error else None
    named = f"{first.name} ({code})" if code and first.name.startswith(("outcome", "error.")) else first.name
    return labels.get(first.name, "expectation"), named
