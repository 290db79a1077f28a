"""The kill matrix: every scenario on every mutant of a target (``REPLAYKIT_MUTANT=name`` and the mutant's
environment from the target's manifest), in parallel.

A mutant is killed by a scenario that fails on it; the matrix fails (:meth:`Matrix.problems`) when a scenario
fails on the target itself, a declared ``kills:`` mutant survives it or a mutant survives every scenario, and
flags vacuous scenarios (:meth:`Matrix.vacuous`). ``declared=True`` runs only the deciding cells; cells a
target never asked about (``$REPLAYKIT_MUTANTS_ASKED``) are inferred unless ``every_cell``. Runs through
:mod:`replaykit.scenario.runner`; the rules are in docs/architecture/scenario.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from replaykit.errors import UsageError
from replaykit.jsondoc import JSON
from replaykit.scenario.expect import Check
from replaykit.scenario.model import Scenario
from replaykit.scenario.report import Case
from replaykit.scenario.runner import Result, run_jobs
from replaykit.scenario.target import Target
from replaykit.scenario.warm import Parents

__all__ = ["Matrix", "check_kills", "decides", "run_matrix"]


@dataclass(frozen=True)
class Matrix:
    """Results by scenario name and mutant (None: the target itself)."""

    scenarios: tuple[Scenario, ...]
    mutants: tuple[str, ...]
    results: dict[tuple[str, str | None], Result]
    full: bool = True
    inferred: frozenset[tuple[str, str]] = frozenset()

    def killed(self, scenario: str, mutant: str) -> bool:
        """Whether ``scenario`` fails on ``mutant`` while it passes on the target itself (False for a cell
        a declared-kills matrix did not run)."""
        ran = self.results.get((scenario, mutant))
        return ran is not None and self.results[(scenario, None)].passed and not ran.passed

    def killers(self, mutant: str) -> list[str]:
        """The scenarios that kill ``mutant``."""
        return [s.name for s in self.scenarios if self.killed(s.name, mutant)]

    def survivors(self) -> list[str]:
        """Mutants no scenario kills."""
        return [mutant for mutant in self.mutants if not self.killers(mutant)]

    def vacuous(self) -> list[str]:
        """Scenarios that kill no mutant (none known when only the declared cells ran)."""
        if not self.full:
            return []
        return [s.name for s in self.scenarios if self.results[(s.name, None)].applicable
                and not any(self.killed(s.name, m) for m in self.mutants)]

    def problems(self) -> list[str]:
        """Why the matrix fails, one sentence each (empty: it passes)."""
        return [sentence for _, sentence in self.named_problems()]

    def row_problems(self) -> list[str]:
        """The problems each scenario decides alone (all but the mutants that survive every scenario): what
        fails a shard of the scenarios, whose survivors only the merged matrix knows."""
        return [sentence for _, sentence in self._scenario_problems()]

    def named_problems(self) -> list[tuple[str, str]]:
        """:meth:`problems`, each with what it is about: the scenario, or the mutant that survives."""
        found = self._scenario_problems()
        found += [(mutant, f"mutant {mutant} survives every scenario") for mutant in self.survivors()]
        return found

    def _scenario_problems(self) -> list[tuple[str, str]]:
        found = [
            (s.name, f"{s.name} fails on the target itself ({self.results[(s.name, None)].failure_text()})")
            for s in self.scenarios
            if self.results[(s.name, None)].failed
        ]
        for scenario in self.scenarios:
            if not self.results[(scenario.name, None)].applicable:
                continue
            for mutant in scenario.kills:
                if mutant in self.mutants and not self.killed(scenario.name, mutant):
                    found.append((scenario.name, f"{scenario.name} declares kills: {mutant}, but {mutant} "
                                                 "survives it"))
        return found

    def grid(self) -> list[list[str]]:
        """Rows: a header (``mutant``, then the scenarios' numbers, 1-based), then a row per mutant: ``x``
        killed, ``.`` survived, ``!`` survived although declared in the scenario's ``kills``, ``-`` n/a (the
        scenario needs what the target lacks), blank: not run."""
        rows = [["mutant", *(str(n) for n in range(1, len(self.scenarios) + 1)), "killed by"]]
        for mutant in self.mutants:
            cells = [
                "-" if not self.results[(s.name, None)].applicable
                else "x" if self.killed(s.name, mutant) else "!" if mutant in s.kills
                else "." if (s.name, mutant) in self.results else " "
                for s in self.scenarios
            ]
            rows.append([mutant, *cells, str(len(self.killers(mutant)))])
        return rows

    def inferred_note(self) -> str:
        """How many cells were inferred, not run (:func:`run_matrix`), in one phrase."""
        cells = sum(1 for _, mutant in self.results if mutant is not None)
        return (f"{len(self.inferred)} of {cells} cells inferred (the mutant never asked about on the "
                "target's run; --every-cell runs them)")

    def markdown(self) -> str:
        """GitHub-flavoured Markdown: a heading with the verdict, the grid (:meth:`grid`), the scenarios'
        numbers, the vacuous scenarios and the problems."""
        problems = self.problems()
        grid = [[cell.strip() or " " for cell in row] for row in self.grid()]
        lines = [f"### replaykit mutants: {'FAILED' if problems else 'OK'}", "",
                 "| " + " | ".join(grid[0]) + " |", "|" + "---|" * len(grid[0])]
        lines += ["| " + " | ".join(cell.replace("!", "**!**") for cell in row) + " |" for row in grid[1:]]
        lines += ["", *(f"{n}. {s.name}" for n, s in enumerate(self.scenarios, 1)), ""]
        lines += [f"- vacuous (kills no mutant): {name}" for name in self.vacuous()]
        lines += [f"- FAIL {problem.replace('|', '/')}" for problem in problems]
        killed = len(self.mutants) - len(self.survivors())
        lines.append(f"\n{len(self.scenarios)} scenarios x {len(self.mutants)} mutants, {killed} killed"
                     + (f"; {self.inferred_note()}" if self.inferred else ""))
        return "\n".join(lines) + "\n"

    def cases(self) -> list[Case]:
        """JUnit test cases: one per scenario (failed by the problems about it; skipped when n/a on the
        target) and one per mutant (failed when it survives every scenario)."""
        about: dict[str, list[str]] = {}
        for name, sentence in self.named_problems():
            about.setdefault(name, []).append(sentence)
        found = []
        for s in self.scenarios:
            said = about.get(s.name)
            on_target = self.results[(s.name, None)]
            found.append(Case("replaykit.mutants.scenarios", s.name, str(s.path),
                              sum(r.seconds for (n, _), r in self.results.items() if n == s.name),
                              (said[0], "\n".join(said)) if said else None,
                              None if on_target.applicable else f"n/a: {on_target.reason}"))
        for mutant in self.mutants:
            said = about.get(mutant)
            failure = (said[0], said[0]) if said else None
            found.append(Case("replaykit.mutants.mutants", mutant, failure=failure))
        return found

    def to_json(self) -> JSON:
        """``{ok, full, mutants, scenarios: [{scenario, kills, killed, passesOnTarget}], survivors, vacuous,
        problems}``."""
        return {
            "ok": not self.problems(),
            "full": self.full,
            "mutants": list(self.mutants),
            "scenarios": [
                {
                    "scenario": s.name,
                    "file": str(s.path),
                    "kills": list(s.kills),
                    "killed": [m for m in self.mutants if self.killed(s.name, m)],
                    "passesOnTarget": self.results[(s.name, None)].passed,
                    "verdictOnTarget": self.results[(s.name, None)].verdict,
                    **self._row(s.name),
                }
                for s in self.scenarios
            ],
            "survivors": self.survivors(),
            "vacuous": self.vacuous(),
            "problems": self.problems(),
        }


    def _row(self, name: str) -> JSON:
        """What :meth:`from_json` reads back: the first failure and the missing capabilities on the target,
        the verdict of each mutant's cell that ran, and the row's seconds."""
        first = self.results[(name, None)].first_failure
        return {
            "firstFailureOnTarget": None if first is None else first.to_json(),
            "missingOnTarget": list(self.results[(name, None)].missing),
            "cells": {m: self.results[(name, m)].verdict for m in self.mutants if (name, m) in self.results},
            "inferred": [m for m in self.mutants if (name, m) in self.inferred],
            "seconds": round(sum(r.seconds for (row, _), r in self.results.items() if row == name), 3),
        }

    @classmethod
    def from_json(cls, doc: JSON) -> Matrix:
        """The matrix :meth:`to_json` wrote, read back (``replaykit merge``): its scenarios hold only their
        name, file and kills; its results only their verdicts and the first failure on the target."""
        scenarios: list[Scenario] = []
        results: dict[tuple[str, str | None], Result] = {}
        inferred: set[tuple[str, str]] = set()
        for row in doc["scenarios"]:
            scenario = Scenario.named(Path(row["file"]), row["scenario"], kills=row["kills"])
            first = row["firstFailureOnTarget"]
            checks = [Check.from_json(first)] if first is not None else []
            missing = tuple(row["missingOnTarget"])
            results[(scenario.name, None)] = Result(scenario, "", checks, seconds=row["seconds"],
                                                    missing=missing)
            for mutant, verdict in row["cells"].items():
                failed = [] if verdict == "pass" else [Check(mutant, False, "fails on the mutant")]
                results[(scenario.name, mutant)] = Result(scenario, "", failed, mutant=mutant)
            inferred.update((scenario.name, mutant) for mutant in row.get("inferred", ()))
            scenarios.append(scenario)
        return cls(tuple(scenarios), tuple(doc["mutants"]), results, full=bool(doc["full"]),
                   inferred=frozenset(inferred))


def run_matrix(
    scenarios: Sequence[Scenario],
    target: Target,
    mutants: Sequence[str],
    *,
    jobs: int = 1,
    on_target: Sequence[Result] | None = None,
    done: Callable[[Result], None] | None = None,
    declared: bool = False,
    universe: Sequence[Scenario] | None = None,
    every_cell: bool = False,
) -> Matrix:
    """Run every scenario on ``target`` itself and on each of ``mutants``, ``jobs`` runs at a time
    (``declared``: each mutant only on the scenarios that declare it, see the module's docstring).

    ``on_target``: the scenarios' results on ``target`` itself when they are at hand (from
    :func:`~replaykit.scenario.runner.run_many`, in the order of ``scenarios``): they are not run again. The
    scenarios n/a on the target run on none of its mutants. ``universe``: every scenario of the run when
    ``scenarios`` is a shard of it (which cells decide the matrix depends on them all). A cell whose mutant
    the target's run of the scenario never asked about (:attr:`Result.asked`) is inferred, not run, unless
    the scenario declares it or ``every_cell``. ``done`` is called with each result as it comes (see
    :func:`~replaykit.scenario.runner.run_jobs`)."""
    with Parents() as parents:  # one pool for both batches: the second forks from parents already warm
        if on_target is None:
            on_target = run_jobs([(scenario, target, None) for scenario in scenarios], jobs=jobs, done=done,
                                 parents=parents)
        table: dict[tuple[str, str | None], Result] = {
            (s.name, None): result for s, result in zip(scenarios, on_target, strict=True)
        }
        every = scenarios if universe is None else universe
        cells = [(scenario, mutant) for scenario in scenarios for mutant in mutants
                 if _applies(scenario, target) and (not declared or decides(scenario, mutant, every))]
        work = [(scenario, mutant) for scenario, mutant in cells
                if every_cell or _may_change(table[(scenario.name, None)], scenario, mutant)]
        results = run_jobs([(scenario, target, mutant) for scenario, mutant in work], jobs=jobs, done=done,
                           parents=parents)
    table.update({(s.name, mutant): result for (s, mutant), result in zip(work, results, strict=True)})
    inferred = frozenset((s.name, mutant) for s, mutant in cells if (s.name, mutant) not in table)
    for name, mutant in inferred:
        table[(name, mutant)] = dataclasses.replace(table[(name, None)], mutant=mutant, seconds=0.0)
    return Matrix(tuple(scenarios), tuple(mutants), table, full=not declared, inferred=inferred)


def _may_change(on_target: Result, scenario: Scenario, mutant: str) -> bool:
    """Whether ``mutant`` may change the target's run of ``scenario``: the target asked about it, or did not
    say what it asked about; a cell the scenario declares in ``kills:`` always runs."""
    return on_target.asked is None or mutant in on_target.asked or mutant in scenario.kills


def _applies(scenario: Scenario, target: Target) -> bool:
    return not target.manifest.missing(scenario.needs)


def check_kills(scenarios: Sequence[Scenario], target_mutants: Collection[str],
                classes: Collection[str]) -> None:
    """Refuse a ``kills:`` name that is neither a mutant of the target (``target_mutants``) nor a known defect
    class (``classes``: the reference's mutant names): a misspelt kill would otherwise never be checked."""
    for scenario in scenarios:
        for name in scenario.kills:
            if name not in target_mutants and name not in classes:
                declared = ", ".join(sorted(target_mutants)) or "none"
                raise UsageError(f"{scenario.path}: kills: {name} is neither a mutant of the target (its "
                                 f"manifest declares: {declared}) nor a known defect class; fix the name or "
                                 "declare the mutant in the target's manifest (mutants:)")


def decides(scenario: Scenario, mutant: str, scenarios: Sequence[Scenario]) -> bool:
    """Whether the cell (``scenario``, ``mutant``) decides the matrix: ``scenario`` declares ``mutant``, or
    no scenario does (then every one may be its killer)."""
    return mutant in scenario.kills or not any(mutant in other.kills for other in scenarios)
