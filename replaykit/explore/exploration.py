"""One exploration: the fault-free run, the trials of the schedule, the groups shrunk and written.

:func:`explore` runs the scenario once as written (the baseline: it must pass; a scenario that fails without
a fault is itself the finding), lists the fault points of that run (:mod:`~replaykit.explore.space`), runs
the schedule (:mod:`~replaykit.explore.schedule`) ``jobs`` at a time, each run judged by the oracle
(:mod:`~replaykit.explore.oracle`), groups and shrinks the failures (:mod:`~replaykit.explore.group`), writes
each group's scenario and runs it again from the file: written only when it fails there too
(:mod:`~replaykit.explore.output`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from replaykit.cassette import write_atomic
from replaykit.errors import UsageError
from replaykit.explore import oracle, output, schedule, space
from replaykit.explore import report as reported
from replaykit.explore.group import Group, Key, candidates, group
from replaykit.explore.space import Trial
from replaykit.jsondoc import JSON
from replaykit.scenario.model import Scenario, load
from replaykit.scenario.runner import Result, run_jobs, run_scenario
from replaykit.scenario.shard import Shard
from replaykit.scenario.target import Target
from replaykit.scenario.warm import Parents

__all__ = ["Options", "Report", "explore"]

Progress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class Options:
    """What ``replaykit explore`` was asked: fault kinds, budget (runs), seed, jobs, shard, mutant, out."""

    out: Path
    kinds: tuple[str, ...] = space.KINDS
    budget: int = 200
    seed: int = 0
    jobs: int = 1
    shard: Shard | None = None
    mutant: str | None = None


@dataclass
class Report:
    """What one exploration did: the space, the runs, the groups and the files written."""

    scenario: Scenario
    points: int = 0
    space: int = 0
    runs: int = 0
    shrink_runs: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    unconfirmed: list[Group] = field(default_factory=list)


def _kinds(scenario: Scenario, target: Target, options: Options, notes: list[str]) -> tuple[str, ...]:
    kinds = list(options.kinds)
    if "kill" in kinds and target.manifest.missing({"durable", "restart"}):
        kinds.remove("kill")
        notes.append("kill: left out, the target declares no durable turns (durable, restart)")
    waits = space.stall_timeout(scenario.doc)
    if "stall" in kinds and waits > space.STALL_LIMIT_MS:
        key = "recovery.stallTimeoutMs" if scenario.doc.get("recovery") else "idleTimeoutMs"
        notes.append(f"stall: the target gives up on a silent stream after {waits} ms; the stall schedules "
                     f"set {key} to {space.STALL_MS}")
    return tuple(kinds)


class _Runner:
    """Runs trials of one scenario on one target, judged by the oracle; remembers every trial run."""

    def __init__(self, scenario: Scenario, target: Target, options: Options, parents: Parents) -> None:
        self.scenario, self.target, self.options, self.parents = scenario, target, options, parents
        self.base = oracle.Baseline(0, 0, [], {}, False)
        self.ran: dict[Trial, Key | None] = {}
        self.judged: dict[Trial, oracle.Judged] = {}
        self.results: dict[Trial, Result] = {}

    def run(self, trials: Sequence[Trial], progress: Progress | None = None) -> None:
        judged = [oracle.judge(self.scenario, trial, self.base) for trial in trials]
        counts = {"done": 0, "failing": 0}

        def done(result: Result) -> None:
            counts["done"] += 1
            counts["failing"] += result.failed
            if progress is not None:
                progress(counts["done"], len(trials), counts["failing"])

        runs = [(j.scenario, self.target, self.options.mutant) for j in judged]
        results = run_jobs(runs, jobs=self.options.jobs, done=done, parents=self.parents)
        for trial, judgement, result in zip(trials, judged, results, strict=True):
            self.judged[trial], self.results[trial] = judgement, result
            self.ran[trial] = oracle.first_broken(result, judgement.labels)

    def one(self, scenario: Scenario) -> Result:
        """One run of ``scenario``, forked from this exploration's warm parents."""
        return run_scenario(scenario, self.target, mutant=self.options.mutant, parents=self.parents)

    def failures(self) -> list[tuple[Key, Trial, Result]]:
        return [(key, trial, self.results[trial]) for trial, key in self.ran.items() if key is not None]


def _shrink(runner: _Runner, groups: list[Group], singles: list[Trial]) -> int:
    """Each group's schedule made as small as the runs allow; the number of runs it took."""
    asked = [c for g in groups for c in candidates(g.trial, singles, set(runner.ran))]
    asked = list(dict.fromkeys(asked))
    if asked:
        runner.run(asked)
    for each in groups:
        for trial in candidates(each.trial, singles, set(runner.ran) - set(asked)):
            if runner.ran.get(trial) == each.key and trial.rank < each.trial.rank:
                each.trial, each.result = trial, runner.results[trial]
    return len(asked)


def _clear(out: Path, scenario: Scenario) -> None:
    """Remove the scenarios an earlier exploration of ``scenario`` wrote into ``out`` (only those: their
    first line says so), so the folder holds this run's findings alone."""
    for path in sorted(out.glob(f"{scenario.name}-*.yaml")):
        with path.open("rb") as handle:
            if handle.readline().startswith(output.HEADER.encode()):
                path.unlink()


def _write(runner: _Runner, report: Report, options: Options) -> None:
    _clear(options.out, runner.scenario)
    for each in report.groups:
        doc = runner.judged[each.trial].scenario.doc
        path = output.write_scenario(options.out, runner.scenario, each, doc, options.seed)
        again = runner.one(load(path))
        if again.failed:
            report.written.append(path)
        else:
            path.unlink()
            report.unconfirmed.append(each)


def _settings(options: Options) -> JSON:
    """The options that choose and judge the schedules: what every shard of one exploration shares."""
    return {"mutant": options.mutant, "kinds": list(options.kinds), "budget": options.budget,
            "seed": options.seed}


def _report(report: Report, target: Target, options: Options) -> JSON:
    """``report.json`` (:mod:`~replaykit.explore.report`)."""
    names = iter(path.name for path in report.written)
    found = [reported.Found(g.key, g.trial, g.runs, None if g in report.unconfirmed else next(names))
             for g in report.groups]
    settings = _settings(options)
    shard = None if options.shard is None else {
        "command": "explore", "index": options.shard.index, "count": options.shard.count,
        "inputs": reported.inputs(report.scenario, target, settings, options.shard.count)}
    head = {"scenario": report.scenario.name, "target": target.spec, **settings, "points": report.points,
            "space": report.space, "runs": report.runs, "shrinkRuns": report.shrink_runs,
            "notes": report.notes}
    return reported.to_json(head, found, shard)


def _summary(report: Report, target: Target, options: Options) -> None:
    doc = _report(report, target, options)
    write_atomic(options.out / reported.FILE, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode())
    output.write_summary(options.out, output.summary(doc))


def _explore(runner: _Runner, report: Report, progress: Progress | None) -> None:
    scenario, target, options = runner.scenario, runner.target, runner.options
    base_result = runner.one(scenario)
    if not base_result.applicable:
        raise UsageError(f"{scenario.path}: the target cannot run this scenario ({base_result.reason}); "
                         "explore a scenario it runs")
    runner.base = base = oracle.Baseline.of(scenario, base_result, target)
    empty = Trial((), (), ())
    if base_result.failed:
        runner.judged[empty], runner.results[empty] = oracle.judge(scenario, empty, base), base_result
        key = oracle.first_broken(base_result, {}) or ("expectation", "target")
        report.groups = group([(key, empty, base_result)])
        report.notes.append("the scenario fails without any fault: that is the finding; nothing else "
                            "explored")
        return
    kinds = _kinds(scenario, target, options, report.notes)
    tools = {str(tool.get("name")) for tool in scenario.doc.get("tools", []) if tool.get("name")}
    found = space.points(base_result.journal, scenario.cassettes, tools)
    singles = space.trials(found, kinds, scenario.doc)
    report.points, report.space = len(found), len(singles)
    chosen = schedule.plan(singles, options.budget, options.seed, options.shard)
    runner.run(chosen, progress)
    report.runs = len(chosen)
    report.groups = group(runner.failures())
    report.shrink_runs = _shrink(runner, report.groups, singles)


def explore(scenario: Scenario, target: Target, options: Options, progress: Progress | None = None) -> Report:
    """Explore ``scenario`` on ``target`` (see the module docstring)."""
    start = time.monotonic()
    report = Report(scenario)
    with Parents() as parents:
        runner = _Runner(scenario, target, options, parents)
        _explore(runner, report, progress)
        _write(runner, report, options)
    _summary(report, target, options)
    report.seconds = time.monotonic() - start
    return report
