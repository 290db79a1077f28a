"""Expectations: each one a :class:`Check` of the target's outcome and the fake provider's journal.

:func:`check_all` runs every expectation a scenario gives and returns them in *cause order*
(:data:`STAGES`), so the first failing one is the earliest cause: the target ran, local failures, estimates,
what it sent, what was answered, how the run ended. ``reaches`` / ``neverReaches`` read each request's
canonical view (:mod:`replaykit.canonical`) unless ``raw: true``. What they read is an :class:`Evidence`
(outcome, journal, unused interactions, persisted transcript). Called by :mod:`replaykit.scenario.runner`;
the order in full is in docs/architecture/scenario.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from replaykit.assertions import describe_journal
from replaykit.canonical import canonical, canonical_transcript
from replaykit.jsondoc import JSON
from replaykit.pointer import matches
from replaykit.scenario.formats import ReportCheck, TargetOutcome
from replaykit.scenario.model import Scenario
from replaykit.scenario.snapshot import check_snapshot, snapshot_path
from replaykit.server import Entry

__all__ = ["STAGES", "Check", "Evidence", "check_all", "in_count"]

_NO_OUTCOME = "no outcome to check"
#: The cause order of the checks: a failure of an earlier stage is what led to those of later ones.
STAGES = ("target", "local", "estimate", "sent", "answered", "ended")
_TARGET, _LOCAL, _ESTIMATE, _SENT, _ANSWERED, _ENDED = range(len(STAGES))


@dataclass(frozen=True)
class Check:
    """One expectation: its ``name`` (``outcome``, ``error.code``, ``requests[openai.responses]``...),
    whether it held, why not (``why``: what was expected and what was found), and its place in the cause
    order (``stage``, an index of :data:`STAGES`)."""

    name: str
    ok: bool
    why: str = ""
    stage: int = _ENDED

    def to_json(self) -> ReportCheck:
        """``{name, ok, why, stage}``."""
        return {"name": self.name, "ok": self.ok, "why": self.why, "stage": STAGES[self.stage]}

    @classmethod
    def from_json(cls, doc: ReportCheck) -> Check:
        """The check :meth:`to_json` wrote (a report read back, e.g. by ``replaykit merge``)."""
        return cls(doc["name"], doc["ok"], doc["why"], STAGES.index(doc["stage"]))


@dataclass
class Evidence:
    """What the checks read. ``problem`` says why there is no ``outcome`` (timed out, none written, not
    valid); ``persisted`` is the parsed ``transcript.json`` of the target's store, None when absent."""

    outcome: TargetOutcome | None
    problem: str = ""
    journal: list[Entry] = field(default_factory=list)
    unused: list[JSON] = field(default_factory=list)
    persisted: object = None
    update_snapshots: bool = False
    _views: list[object] = field(default_factory=list, repr=False)

    def bodies(self, raw: bool) -> list[object]:
        """The journaled request bodies in order: as sent (``raw``) or their canonical views (made once)."""
        if raw:
            return [entry.body for entry in self.journal]
        if not self._views:
            self._views = [canonical(entry.route, entry.body) for entry in self.journal]
        return self._views

    @property
    def error(self) -> Mapping[str, object]:
        """The outcome's ``error`` (empty when there is none, or no outcome)."""
        return (self.outcome.get("error") if self.outcome is not None else None) or {}

    @property
    def failed_locally(self) -> bool:
        """True when the target's own error is of local provenance (it failed before or without a request)."""
        return self.error.get("provenance") == "local"


def in_count(expected: int | JSON, found: int) -> bool:
    """Whether ``found`` is the count ``expected``: a number, or a ``{min, max}`` range (inclusive)."""
    if isinstance(expected, int):
        return found == expected
    return bool(expected.get("min", 0) <= found <= expected.get("max", found))


def _count_text(expected: int | JSON) -> str:
    if isinstance(expected, int):
        return str(expected)
    low, high = expected.get("min"), expected.get("max")
    return (
        f"{low}..{high}"
        if low is not None and high is not None
        else f">= {low}"
        if low is not None
        else f"<= {high}"
    )


def _journal_text(entries: list[Entry]) -> str:
    return "; ".join(line.strip() for line in describe_journal(entries).splitlines())


def _target(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    yield Check("target", seen.outcome is not None, seen.problem, _TARGET)


def _end(seen: Evidence) -> int:
    """The stage of the outcome's own checks: local when the target failed locally, else the end."""
    return _LOCAL if seen.failed_locally else _ENDED


def _statuses(scenario: Scenario) -> tuple[str, ...]:
    """The statuses the outcome may have: ``outcome``, one status or a list of them."""
    wanted = scenario.expectations["outcome"]
    return tuple(wanted) if isinstance(wanted, list) else (wanted,)


def _outcome(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    wanted = _statuses(scenario)
    if seen.outcome is None:
        yield Check("outcome", False, _NO_OUTCOME)
        return
    got, error = seen.outcome["status"], seen.error
    ok = got in wanted
    said = f" ({error.get('code')}: {error.get('message', '')})" if error and not ok else ""
    why = "" if ok else f"expected {' or '.join(wanted)}, got {got}{said}"
    yield Check("outcome", ok, why, _end(seen))


def _error(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    wanted = scenario.expectations.get("error") or {}
    error = seen.error
    if len(_statuses(scenario)) > 1 and seen.outcome is not None and seen.outcome["status"] != "error":
        return  # with a list of statuses, the error is checked when the target ended with one
    for key in ("code", "phase", "provenance"):
        if key not in wanted:
            continue
        if seen.outcome is None:
            yield Check(f"error.{key}", False, _NO_OUTCOME)
            continue
        got = error.get(key)
        why = f"expected {wanted[key]}, got {got or 'none'}" + (
            f" ({error.get('message')})" if error.get("message") else ""
        )
        yield Check(f"error.{key}", got == wanted[key], why if got != wanted[key] else "", _end(seen))


def _reason(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    wanted = scenario.expectations.get("reason")
    if wanted is None:
        return
    got = seen.outcome.get("reason") if seen.outcome is not None else None
    why = _NO_OUTCOME if seen.outcome is None else f"expected {wanted}, got {got or 'none'}"
    yield Check("reason", got == wanted, "" if got == wanted else why)


def _receipts(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    wanted = scenario.expectations.get("receipts")
    if wanted is None:
        return
    if seen.outcome is None:
        yield Check("receipts", False, _NO_OUTCOME)
        return
    given = seen.outcome.get("receipts") or []
    found = len({json.dumps(receipt, sort_keys=True) for receipt in given})
    ok = in_count(wanted, found)
    shown = json.dumps(given, ensure_ascii=False)[:200]
    yield Check("receipts", ok, "" if ok else f"expected {_count_text(wanted)} distinct receipt(s), got "
                                              f"{found}: {shown}")


def _provider_requests(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    wanted = scenario.expectations.get("providerRequests")
    if wanted is None:
        return
    found = len(seen.journal)
    ok = in_count(wanted, found)
    why = "" if ok else (f"expected {_count_text(wanted)} provider request(s), the journal holds {found}: "
                         f"{_journal_text(seen.journal)}")
    yield Check("providerRequests", ok, why, _SENT)


def _requests(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    for route, wanted in (scenario.expectations.get("requests") or {}).items():
        found = sum(1 for entry in seen.journal if entry.route == route)
        ok = in_count(wanted, found)
        why = "" if ok else (f"expected {_count_text(wanted)} request(s) on {route}, found {found}: "
                             f"{_journal_text(seen.journal)}")
        yield Check(f"requests[{route}]", ok, why, _SENT)


def _unmatched(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    if scenario.expectations.get("unmatched", False):
        return
    found = [entry for entry in seen.journal if entry.verdict == "unmatched"]
    why = "; ".join(f"request #{e.seq} {e.method} {e.path}: {e.error}" for e in found)
    yield Check("unmatched", not found,
                f"{len(found)} request(s) matched no interaction: {why}" if found else "", _ANSWERED)


def _unused(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    if scenario.expectations.get("unused", False):
        return
    names = ", ".join(f"{u['cassette']}#{u['index']} ({u['route']})" for u in seen.unused)
    why = f"{len(seen.unused)} interaction(s) never served whole: {names}" if seen.unused else ""
    yield Check("unused", not seen.unused, why, _ANSWERED)


def _contracts(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    wanted = scenario.expectations.get("requestContractsHold")
    if wanted is None:
        return
    broken = [
        (entry.seq, row)
        for entry in seen.journal
        for row in entry.request_violations
        if row.get("severity", "error") == "error"
    ]
    holds = not broken
    if holds == wanted:
        yield Check("requestContractsHold", True, stage=_SENT)
        return
    if wanted:
        seq, row = broken[0]
        why = f"request #{seq} breaks its contract at {row.get('pointer') or '/'}: {row.get('message')}" + (
            f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
        )
    else:
        why = "expected a request that breaks its contract, every request holds"
    yield Check("requestContractsHold", False, why, _SENT)


def _persist_writes(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    wanted = scenario.expectations.get("persistWrites")
    if wanted is None:
        return
    if seen.outcome is None:
        yield Check("persistWrites", False, _NO_OUTCOME)
        return
    found = seen.outcome["persistWrites"]
    ok = in_count(wanted, found)
    yield Check("persistWrites", ok, "" if ok else f"expected {_count_text(wanted)} write(s), got {found}")


def _estimates(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    for bound in scenario.expectations.get("estimates") or []:
        name = f"estimates[step {bound['step']}]"
        if seen.outcome is None:
            yield Check(name, False, _NO_OUTCOME, _ESTIMATE)
            continue
        tokens = [e["tokens"] for e in seen.outcome.get("estimates") or [] if e["step"] == bound["step"]]
        low, high = bound.get("min", 0), bound.get("max")
        wrong = [t for t in tokens if t < low or (high is not None and t > high)]
        wanted = _count_text({k: v for k, v in bound.items() if k in ("min", "max")})
        count = bound.get("count")
        if count is not None and not in_count(count, len(tokens)):
            made = f"the target made {len(tokens)}"
            yield Check(name, False, f"expected {_count_text(count)} estimate(s), {made}", _ESTIMATE)
        elif not tokens:
            none = f"expected an estimate of {wanted} tokens, the target made none"
            yield Check(name, False, none, _ESTIMATE)
        else:
            why = f"expected {wanted} tokens, got {wrong[0]}" if wrong else ""
            yield Check(name, not wrong, why, _ESTIMATE)


def _hit(value: object, spec: JSON) -> bool:
    if "equals" in spec:
        return bool(value == spec["equals"])
    if "contains" in spec:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return spec["contains"] in text
    return True


def _what(spec: JSON) -> str:
    if "equals" in spec:
        return f"{spec['pointer']} = {json.dumps(spec['equals'], ensure_ascii=False)}"
    if "contains" in spec:
        return f"{spec['pointer']} containing {spec['contains']!r}"
    return str(spec["pointer"])


def _bodies(spec: JSON, seen: Evidence) -> list[tuple[int, object]]:
    """The bodies ``spec`` reads, numbered from 1: canonical views, or as sent with ``raw: true``."""
    numbered = list(enumerate(seen.bodies(bool(spec.get("raw"))), 1))
    return [(n, body) for n, body in numbered if spec.get("request") in (None, n)]


def _reach_why(spec: JSON, seen: Evidence, found: list[tuple[int, str, object]]) -> str:
    which = f"request {spec['request']}" if "request" in spec else "any request"
    view = " as sent" if spec.get("raw") else ""
    if not found:
        return f"{which} has nothing at {spec['pointer']}{view} ({len(seen.journal)} request(s) journaled)"
    n, at, value = found[0]
    shown = json.dumps(value, ensure_ascii=False)[:120]
    return f"expected {_what(spec)} in {which}{view}, request {n} has {at} = {shown}"


def _reaches(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    for index, spec in enumerate(scenario.expectations.get("reaches") or []):
        found = [
            (n, at, value) for n, body in _bodies(spec, seen) for at, value in matches(body, spec["pointer"])
        ]
        ok = any(_hit(value, spec) for _, _, value in found)
        yield Check(f"reaches[{index}]", ok, "" if ok else _reach_why(spec, seen, found), _SENT)


def _never_reaches(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    for index, spec in enumerate(scenario.expectations.get("neverReaches") or []):
        found = [
            (n, at)
            for n, body in _bodies(spec, seen)
            for at, value in matches(body, spec["pointer"])
            if _hit(value, spec)
        ]
        why = f"{_what(spec)} reached the provider: request {found[0][0]} at {found[0][1]}" if found else ""
        yield Check(f"neverReaches[{index}]", not found, why, _SENT)


def _no_transcript(spec: JSON, seen: Evidence) -> str:
    """Why a pointer into the outcome's transcript finds nothing, when the target wrote none."""
    if str(spec["pointer"]).startswith("/transcript") and (seen.outcome is None
                                                       or seen.outcome.get("transcript") is None):
        return ("; the outcome has no transcript, and this scenario reads it: write the final transcript "
                "(target-outcome.schema.json)")
    return ""


def _outcome_has(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    for index, spec in enumerate(scenario.expectations.get("outcomeHas") or []):
        name = f"outcomeHas[{index}]"
        if seen.outcome is None:
            yield Check(name, False, _NO_OUTCOME)
            continue
        found = matches(seen.outcome, spec["pointer"])
        if any(_hit(value, spec) for _, value in found):
            yield Check(name, True)
        elif not found:
            nothing = f"the outcome has nothing at {spec['pointer']}{_no_transcript(spec, seen)}"
            yield Check(name, False, nothing)
        else:
            at, value = found[0]
            shown = json.dumps(value, ensure_ascii=False)[:120]
            yield Check(name, False, f"expected {_what(spec)}, the outcome has {at} = {shown}")


def _outcome_lacks(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    for index, spec in enumerate(scenario.expectations.get("outcomeLacks") or []):
        name = f"outcomeLacks[{index}]"
        if seen.outcome is None:
            yield Check(name, False, _NO_OUTCOME)
            continue
        found = [(at, value) for at, value in matches(seen.outcome, spec["pointer"]) if _hit(value, spec)]
        shown = json.dumps(found[0][1], ensure_ascii=False)[:120] if found else ""
        why = f"the outcome has {_what(spec)}: {found[0][0]} = {shown}" if found else ""
        yield Check(name, not found, why)


def _snapshot(scenario: Scenario, seen: Evidence) -> Iterator[Check]:
    wanted = scenario.expectations.get("persistedSnapshot", False)
    if wanted is False:
        return
    name = scenario.name if wanted is True else str(wanted)
    if seen.persisted is None:
        yield Check(
            "persistedSnapshot",
            False,
            "the target persisted no transcript ($REPLAYKIT_STATE_DIR/transcript.json)",
        )
        return
    view = canonical_transcript(seen.persisted)
    result = check_snapshot(snapshot_path(scenario.path, name), view, seen.update_snapshots)
    yield Check("persistedSnapshot", result.ok, result.why)


CHECKS: tuple[Callable[[Scenario, Evidence], Iterator[Check]], ...] = (
    _target,
    _outcome,
    _error,
    _estimates,
    _contracts,
    _provider_requests,
    _requests,
    _reaches,
    _never_reaches,
    _unmatched,
    _unused,
    _reason,
    _receipts,
    _persist_writes,
    _outcome_has,
    _outcome_lacks,
    _snapshot,
)


def check_all(scenario: Scenario, seen: Evidence) -> list[Check]:
    """Every expectation of ``scenario`` held against ``seen``, in cause order (:data:`STAGES`; within a
    stage, in the order of :data:`CHECKS`)."""
    checks = [check for run in CHECKS for check in run(scenario, seen)]
    return sorted(checks, key=lambda check: check.stage)
