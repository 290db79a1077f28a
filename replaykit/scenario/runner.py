"""The runner: one scenario on one target (:func:`run_scenario`), many in parallel (:func:`run_many`).

Per scenario: a fresh temporary folder (work and state folders), one :class:`~replaykit.server.FakeProvider`
serving the scenario's cassettes with its faults, the steps run in segments split at each ``restart``, each a
new process of the target (:func:`~replaykit.scenario.target.run_segment`), restarted at each ``kill`` fault;
the outcomes merged, then every expectation checked (:mod:`replaykit.scenario.expect`). A scenario needing a
capability the target lacks is ``n/a``. Scenarios share nothing, so :func:`run_many` runs ``jobs`` in threads.
The segments and the merge in full are in docs/architecture/scenario.md.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

from replaykit.cassette import write_atomic
from replaykit.jsondoc import JSON
from replaykit.scenario.capabilities import recorded_forms
from replaykit.scenario.expect import Check, Evidence, check_all
from replaykit.scenario.formats import CancelOn, Estimate, ReportResult, TargetOutcome
from replaykit.scenario.model import Scenario
from replaykit.scenario.target import Target, TargetExit, interrupt, read_outcome, run_segment, target_env
from replaykit.scenario.warm import Parents
from replaykit.server import Entry, FakeProvider

__all__ = ["ASKED_ENV", "Result", "run_jobs", "run_many", "run_scenario"]

ASKED_ENV = "REPLAYKIT_MUTANTS_ASKED"  # where a run without a mutant lists the mutants the target asked about
MAX_ASKED = 1 << 20  # bytes of that list read at most
SETTLE = 10.0  # seconds at most for the fake provider to journal the requests of a run that ended


@dataclass
class Result:
    """One scenario's verdict: every :class:`Check`, the merged outcome, the target, the mutant (if any), the
    fake provider's journal (its entries, whole bodies), ``missing``: the capabilities the target lacks
    for it (then it did not run: n/a), and ``asked``: the mutants the target asked about on a run without
    one (``$REPLAYKIT_MUTANTS_ASKED``; None when it does not say)."""

    scenario: Scenario
    target: str
    checks: list[Check]
    outcome: TargetOutcome | None = None
    mutant: str | None = None
    seconds: float = 0.0
    requests: int = 0
    extra: JSON = field(default_factory=dict)
    journal: list[Entry] = field(default_factory=list)
    missing: tuple[str, ...] = ()
    asked: frozenset[str] | None = None

    @property
    def applicable(self) -> bool:
        """True when the scenario ran: the target has every capability it needs."""
        return not self.missing

    @property
    def passed(self) -> bool:
        """True when the scenario ran and every expectation held."""
        return self.applicable and all(check.ok for check in self.checks)

    @property
    def failed(self) -> bool:
        """True when the scenario ran and an expectation did not hold (n/a is neither passed nor failed)."""
        return self.applicable and not self.passed

    @property
    def verdict(self) -> str:
        """``pass``, ``fail`` or ``n/a``."""
        return "n/a" if not self.applicable else "pass" if self.passed else "fail"

    @property
    def reason(self) -> str:
        """Why it is n/a: ``needs research, tool:task`` ("" when it ran)."""
        return f"needs {', '.join(self.missing)}" if self.missing else ""

    @property
    def first_failure(self) -> Check | None:
        """The first expectation that failed, in report order."""
        return next((check for check in self.checks if not check.ok), None)

    def failure_text(self) -> str:
        """``name: why`` of the first failure ("" when it passed or did not run)."""
        first = self.first_failure
        return "" if first is None else f"{first.name}: {first.why}"

    def to_json(self) -> ReportResult:
        """The result as JSON: scenario, file, kind, target, mutant, verdict, passed, missing, firstFailure,
        checks, outcome."""
        first = self.first_failure
        return {
            "scenario": self.scenario.name,
            "file": str(self.scenario.path),
            "kind": self.scenario.kind,
            "target": self.target,
            "mutant": self.mutant,
            "verdict": self.verdict,
            "passed": self.passed,
            "missing": list(self.missing),
            "firstFailure": None if first is None else first.to_json(),
            "checks": [check.to_json() for check in self.checks],
            "providerRequests": self.requests,
            "seconds": round(self.seconds, 3),
            "outcome": self.outcome,
        }

    @classmethod
    def from_json(cls, doc: ReportResult) -> Result:
        """The result :meth:`to_json` wrote, read back (``replaykit merge``): its scenario holds only the
        name, kind and file, and there is no journal."""
        scenario = Scenario.named(Path(doc["file"]), doc["scenario"], doc["kind"])
        checks = [Check.from_json(check) for check in doc["checks"]]
        return cls(scenario, doc["target"], checks, doc["outcome"], doc["mutant"], doc["seconds"],
                   doc["providerRequests"], missing=tuple(doc["missing"]))


def _merge(merged: TargetOutcome | None, outcome: TargetOutcome, first_step: int) -> TargetOutcome:
    joined = outcome.copy()
    estimates = [Estimate(step=e["step"] + first_step, tokens=e["tokens"])
                 for e in outcome.get("estimates") or []]
    joined["estimates"] = estimates
    if merged is None:
        return joined
    joined["persistWrites"] = merged["persistWrites"] + outcome["persistWrites"]
    joined["estimates"] = [*merged.get("estimates", []), *estimates]
    if "receipts" in merged or "receipts" in outcome:
        joined["receipts"] = [*merged.get("receipts", []), *outcome.get("receipts", [])]
    return joined


def _without_served_twins(unused: list[JSON], scenario: Scenario) -> list[JSON]:
    """``unused`` without the interactions whose twin (the same request recorded in the other form, streamed
    or not) was served: a target of one form is never expected to take both."""
    forms = recorded_forms(scenario.cassettes)
    places = [(str(u["cassette"]), int(u["index"])) for u in unused]
    served = {form for place, form in forms.items() if place not in places}
    twins = {place for place in places if place in forms and (forms[place][0], not forms[place][1]) in served}
    return [u for u, place in zip(unused, places, strict=True) if place not in twins]


def _untimed(step: JSON) -> JSON:
    """``step`` without ``cancelAfterMs``: its cancel comes as a signal (``cancelOn``) instead."""
    return {key: value for key, value in step.items() if key != "cancelAfterMs"}


def _new_kill_point(provider: FakeProvider, seen: int) -> bool:
    return len(provider.kill_points()) > seen


def _write_files(work: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _persisted(state: Path) -> object:
    try:
        return json.loads((state / "transcript.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@dataclass
class _Segments:
    """Running the segments of one scenario: the merged outcome so far, or the problem that ended it."""

    scenario: Scenario
    target: Target
    root: Path
    mutant: str | None
    parents: Parents | None = None
    outcome: TargetOutcome | None = None
    problem: str = ""
    kills: int = 0
    cancelled: set[int] = field(default_factory=set)  # the steps whose cancelOn sent SIGINT

    def run(self, provider: FakeProvider) -> None:
        deadline = time.monotonic() + self.scenario.timeout
        for number, (first, steps) in enumerate(self.scenario.segments()):
            if not self._one(provider, number, first, steps, deadline):
                return
            if self.outcome is not None and self.outcome["status"] != "ok":
                return

    def _one(
        self, provider: FakeProvider, number: int, first: int, steps: list[JSON], deadline: float
    ) -> bool:
        given, written = self.root / f"input-{number}.json", self.root / f"outcome-{number}.json"
        cancels = self._cancels(first, len(steps))
        steps = [_untimed(step) if first + index in cancels else step for index, step in enumerate(steps)]
        write_atomic(given, json.dumps(self.scenario.target_input(steps, number == 0)).encode("utf-8"))
        extra = {
            "REPLAYKIT_INPUT": str(given),
            "REPLAYKIT_OUTCOME": str(written),
            "REPLAYKIT_STATE_DIR": str(self.root / "state"),
            **dict(self.target.env),
        }
        if self.mutant is not None:
            extra.update(self.target.mutant_env(self.mutant))
        else:
            extra[ASKED_ENV] = str(self.root / "mutants-asked")
        extra.setdefault("REPLAYKIT_TOOL_HOOK", provider.tool_hook)
        env = target_env(provider.env(), extra)
        ran = self._killed_and_restarted(provider, env, deadline, cancels)
        where = f" (segment {number + 1}, from step {first})" if len(self.scenario.segments()) > 1 else ""
        if ran.timed_out:
            self.problem = (
                f"target timed out after {self.scenario.timeout * 1000:.0f} ms (timeoutMs){where}; "
                "its process group was killed"
            )
            return False
        if ran.killed:
            self.problem = f"the target reached a kill point with no restart left{where}"
            return False
        outcome, why = read_outcome(written)
        if outcome is None:
            tail = f"; stderr: {ran.stderr_tail}" if ran.stderr_tail else ""
            self.problem = f"{why}{where} (exit code {ran.returncode}){tail}"
            return False
        self.outcome = _merge(self.outcome, outcome, first)
        return True

    def _cancels(self, first: int, count: int) -> dict[int, CancelOn]:
        """The steps of a segment (from ``first``) cancelled by a signal on this target, by index: those
        with ``cancelOn`` when it declares cancel-signal, or when they have no ``cancelAfterMs`` to fall
        back on (a target without a manifest keeps the timer it had)."""
        found = {}
        for index in range(first, first + count):
            on = self.scenario.cancel_on(index)
            timed = "cancelAfterMs" in self.scenario.steps[index]
            if on is not None and (self.target.manifest.declares("cancel-signal") or not timed):
                found[index] = on
        return found

    def _arm(self, provider: FakeProvider, cancels: dict[int, CancelOn], pgid: int) -> Callable[[], None]:
        """Interrupt the run (process group ``pgid``) once a step's ``cancelOn`` request has arrived (each
        at most once in the scenario, whatever the restarts); the function that withdraws them."""
        cancel = self._cancel
        withdraw = [provider.when_received(on["route"], on["nth"], functools.partial(cancel, index, pgid))
                    for index, on in cancels.items() if index not in self.cancelled]

        def disarm() -> None:
            for each in withdraw:
                each()
        return disarm

    def _cancel(self, index: int, pgid: int) -> None:
        if index not in self.cancelled:
            self.cancelled.add(index)
            interrupt(pgid)

    def _killed_and_restarted(self, provider: FakeProvider, env: dict[str, str],
                              deadline: float, cancels: dict[int, CancelOn]) -> TargetExit:
        """One run of the segment; each time a new kill point is reached, SIGKILL and run it again (at most
        as often as the scenario's kill faults fire). A ``cancelOn`` request arriving interrupts the run."""
        while True:
            arm = functools.partial(self._arm, provider, cancels) if cancels else None
            ran = run_segment(self.target, self.root / "work", env, deadline - time.monotonic(), self.root,
                              functools.partial(_new_kill_point, provider, len(provider.kill_points())),
                              self.parents, arm)
            if not ran.killed or self.kills >= self.scenario.kills_armed:
                return ran
            self.kills += 1


def _asked(path: Path) -> frozenset[str] | None:
    """The mutant names a target listed at ``path`` (one a line; None when it wrote none)."""
    try:
        with path.open("rb") as handle:
            text = handle.read(MAX_ASKED).decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    return frozenset(name.strip() for name in text.splitlines() if name.strip())


def run_scenario(
    scenario: Scenario, target: Target, *, mutant: str | None = None, update_snapshots: bool = False,
    parents: Parents | None = None,
) -> Result:
    """Run ``scenario`` on ``target`` (as ``mutant`` when given) and check every expectation; n/a without a
    run when the target lacks a capability it needs. ``parents``: warm parents to fork a Python target's
    runs from (:mod:`~replaykit.scenario.warm`; :func:`run_jobs` gives its batch's), else each run starts
    cold."""
    missing = target.manifest.missing(scenario.needs)
    if missing:
        return Result(scenario, target.spec, [], mutant=mutant, missing=missing)
    start = time.monotonic()
    with TemporaryDirectory(prefix="replaykit-scenario-") as folder:
        root = Path(folder)
        (root / "work").mkdir()
        (root / "state").mkdir()
        _write_files(root / "work", dict(scenario.files))
        segments = _Segments(scenario, target, root, mutant, parents)
        with FakeProvider(scenario.cassettes, faults=scenario.faults, journal_bodies="full") as provider:
            segments.run(provider)
            provider.settled(SETTLE)  # the ended run's held requests journaled before the journal is read
            journal = list(provider.journal)
            unused = _without_served_twins(provider.unused(), scenario)
        seen = Evidence(
            segments.outcome if not segments.problem else None,
            segments.problem,
            journal,
            unused,
            _persisted(root / "state"),
            update_snapshots,
        )
        checks = check_all(scenario, seen)
        asked = _asked(root / "mutants-asked") if mutant is None else None
    return Result(scenario, target.spec, checks, seen.outcome, mutant, time.monotonic() - start, len(journal),
                  journal=journal, asked=asked)


def run_many(
    scenarios: Sequence[Scenario],
    target: Target,
    *,
    jobs: int = 1,
    mutant: str | None = None,
    update_snapshots: bool = False,
    done: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Run ``scenarios``, ``jobs`` at a time; ``done`` is called with each result as it comes (from the
    calling thread, in completion order); the results are returned in the order given."""
    return run_jobs(
        [(scenario, target, mutant) for scenario in scenarios],
        jobs=jobs,
        update_snapshots=update_snapshots,
        done=done,
    )


def run_jobs(
    jobs_: Sequence[tuple[Scenario, Target, str | None]],
    *,
    jobs: int = 1,
    update_snapshots: bool = False,
    done: Callable[[Result], None] | None = None,
    parents: Parents | None = None,
) -> list[Result]:
    """Run each ``(scenario, target, mutant)``, ``jobs`` at a time (see :func:`run_many`), those that declare
    the longest waits first (:attr:`Scenario.waits`: a long one started last would end the batch alone); a
    Python target's runs are forked from warm parents: ``parents`` when given (the caller's, kept across its
    batches), else the batch's own, ended with it."""
    if jobs < 1:
        raise ValueError(f"jobs={jobs!r} must be at least 1")
    results: list[Result | None] = [None] * len(jobs_)
    order = sorted(range(len(jobs_)), key=lambda index: -jobs_[index][0].waits)
    with contextlib.ExitStack() as stack:
        warm = parents if parents is not None else stack.enter_context(Parents())
        pool = stack.enter_context(ThreadPoolExecutor(jobs, thread_name_prefix="replaykit-scenario"))
        futures = {
            pool.submit(
                run_scenario, scenario, target, mutant=mutant, update_snapshots=update_snapshots,
                parents=warm,
            ): index
            for index, (scenario, target, mutant) in ((index, jobs_[index]) for index in order)
        }
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            if done is not None:
                done(result)
    return [result for result in results if result is not None]
