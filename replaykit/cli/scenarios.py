"""``replaykit run``, ``replaykit mutants`` and ``replaykit redgreen``: scenarios on targets.

``run SCENARIO|DIR... [--target CMD|python:module:function] [-j N] [--junit FILE] [--json]
[--snapshot-update]``: a line per scenario (on a terminal, a progress line while they run), the first
failing expectation of each failure, a summary; exit 0 when every scenario passes, 1 otherwise.

``mutants SCENARIO|DIR... [--target ...] [--mutant NAME...] [-j N] [--json]``: every scenario on the target
and on each mutant (default: the reference's, ``replaykit.reference.mutants.MUTANTS``); the kill matrix;
exit 1 when a declared kill survives, a mutant survives every scenario or a scenario fails on the target.

``redgreen --baseline CMD --candidate CMD SCENARIO|DIR... [--markdown] [--json] [-j N]``: the red → green
table; exit 1 when a row is wrong.

Every command exits 2 on a bad scenario file (``file:line``, the JSON pointer and the fix) or command line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, positive, table
from replaykit.errors import ScenarioError, UsageError
from replaykit.scenario import DEFAULT_TARGET, Result, Scenario, Target, load_all, run_many
from replaykit.scenario import report as reports
from replaykit.scenario.mutants import Matrix, run_matrix
from replaykit.scenario.redgreen import markdown, redgreen, table_rows, to_json

__all__ = ["register", "run", "run_mutants", "run_redgreen"]



def _common(parser: argparse.ArgumentParser, target: bool = True) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="SCENARIO|DIR",
        help="a scenario file, or a folder of them (its *.yaml files)",
    )
    if target:
        parser.add_argument(
            "--target",
            default=DEFAULT_TARGET,
            metavar="CMD",
            help=f"the code under test: a command (run with the target protocol's environment) "
            f"or python:module:function (default: {DEFAULT_TARGET}, the reference)",
        )
    parser.add_argument(
        "-j",
        "--jobs",
        type=positive,
        default=1,
        metavar="N",
        help="run N scenarios at a time, each with its own fake provider (default 1); "
        "verdicts do not depend on N",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")


def register(subparsers: Any) -> None:
    """Add the ``run``, ``mutants`` and ``redgreen`` subcommands."""
    parser = subparsers.add_parser(
        "run",
        help="run scenarios on a target and check their expectations",
        description="Run each scenario: start a fake provider on its cassettes and faults, run the target "
        "with the target protocol's environment, check every expectation against its outcome and "
        "the journal. Exit 0 when all pass, 1 when one fails, 2 on a bad scenario file.",
    )
    _common(parser)
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML to FILE (for CI)")
    parser.add_argument(
        "--snapshot-update",
        action="store_true",
        help="write the persisted-transcript snapshots that are missing or differ",
    )
    parser.set_defaults(func=run)
    parser = subparsers.add_parser(
        "mutants",
        help="run scenarios on every mutant of a target: the kill matrix",
        description="Run every scenario on the target and on each mutant (REPLAYKIT_MUTANT=name) and print "
        "the kill matrix. Exit 1 when a scenario's declared kill survives, a mutant survives "
        "every scenario or a scenario fails on the target itself; a scenario that kills nothing "
        "is flagged as vacuous.",
    )
    _common(parser)
    parser.add_argument(
        "--mutant",
        action="append",
        metavar="NAME",
        help="a mutant to run (repeatable; default: every mutant of replaykit.reference)",
    )
    parser.add_argument(
        "--declared",
        action="store_true",
        help="run only the cells that decide the verdict: each mutant on the scenarios that declare it in "
        "kills: (a mutant none declares: on every scenario); the same failures, vacuous scenarios unseen",
    )
    parser.set_defaults(func=run_mutants)
    parser = subparsers.add_parser(
        "redgreen",
        help="regression scenarios red on a baseline and green on a candidate",
        description="Run every scenario on a baseline and a candidate target: a regression scenario "
        "must fail on the baseline and pass on the candidate, a contract scenario pass on both. Exit 1 "
        "when one does not.",
    )
    _common(parser, target=False)
    parser.add_argument("--baseline", required=True, metavar="CMD", help="the target before the fix")
    parser.add_argument("--candidate", required=True, metavar="CMD", help="the target with the fix")
    parser.add_argument(
        "--markdown", action="store_true", help="print the table as Markdown (e.g. >> $GITHUB_STEP_SUMMARY)"
    )
    parser.set_defaults(func=run_redgreen)


def _scenarios(paths: Sequence[str]) -> list[Scenario]:
    try:
        return load_all(paths)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from exc


class _Progress:
    """A line per finished scenario; on a terminal, ``[k/N] running...`` rewritten in place meanwhile."""

    def __init__(self, total: int, out: TextIO, quiet: bool) -> None:
        self.total, self.out, self.count, self.quiet = total, out, 0, quiet
        self.tty = out.isatty() and not quiet

    def start(self) -> None:
        if self.tty:
            self.out.write(f"running {self.total} scenario(s)...")
            self.out.flush()

    def __call__(self, result: Result) -> None:
        self.count += 1
        if self.quiet:
            return
        text = reports.line(result)
        if self.tty:
            text = f"\r\x1b[K[{self.count}/{self.total}] {text}"
            rest = self.total - self.count
            text += f"\nrunning {rest} more..." if rest else "\n"
            self.out.write(text)
        else:
            self.out.write(text + "\n")
        self.out.flush()


def run(args: argparse.Namespace) -> int:
    """``replaykit run``."""
    scenarios = _scenarios(args.paths)
    target = Target.parse(args.target)
    progress = _Progress(len(scenarios), sys.stdout, args.json)
    progress.start()
    results = run_many(
        scenarios, target, jobs=args.jobs, update_snapshots=args.snapshot_update, done=progress
    )
    if args.junit is not None:
        reports.write_junit(args.junit, results)
    if args.json:
        print(json.dumps(reports.to_json(results), indent=2, ensure_ascii=False))
    else:
        print(reports.summary(results))
    return EXIT_OK if all(result.passed for result in results) else EXIT_FINDINGS


def reference_mutants() -> Mapping[str, str]:
    """The reference's mutants (name → defect), imported only when asked for."""
    try:
        module = importlib.import_module("replaykit.reference.mutants")
    except ImportError as exc:
        raise UsageError(
            "replaykit.reference is not available to name the mutants; pass them with --mutant NAME"
        ) from exc
    found: Mapping[str, str] = module.MUTANTS
    return found


def _matrix_text(matrix: Matrix) -> str:
    lines = table(matrix.grid())
    lines += ["", *(f"{n:>3}  {s.name}" for n, s in enumerate(matrix.scenarios, 1))]
    lines += [f"vacuous (kills no mutant): {name}" for name in matrix.vacuous()]
    lines += [f"FAIL {problem}" for problem in matrix.problems()]
    verdict = "FAILED" if matrix.problems() else "OK"
    killed = len(matrix.mutants) - len(matrix.survivors())
    lines.append(
        f"{len(matrix.scenarios)} scenarios x {len(matrix.mutants)} mutants"
        f"{'' if matrix.full else ' (the declared kills)'}, {killed} killed: {verdict}"
    )
    return "\n".join(lines)


def run_mutants(args: argparse.Namespace, known: Callable[[], Mapping[str, str]] = reference_mutants) -> int:
    """``replaykit mutants``; ``known`` gives the mutants when ``--mutant`` names none."""
    scenarios = _scenarios(args.paths)
    target = Target.parse(args.target)
    names = list(dict.fromkeys(args.mutant)) if args.mutant else list(known())
    if not names:
        raise UsageError("no mutants to run; pass --mutant NAME")
    matrix = run_matrix(scenarios, target, names, jobs=args.jobs, declared=args.declared)
    print(json.dumps(matrix.to_json(), indent=2) if args.json else _matrix_text(matrix))
    return EXIT_FINDINGS if matrix.problems() else EXIT_OK


def run_redgreen(args: argparse.Namespace) -> int:
    """``replaykit redgreen``."""
    scenarios = _scenarios(args.paths)
    baseline, candidate = Target.parse(args.baseline), Target.parse(args.candidate)
    rows = redgreen(scenarios, baseline, candidate, jobs=args.jobs)
    if args.json:
        print(json.dumps(to_json(rows, args.baseline, args.candidate), indent=2, ensure_ascii=False))
    elif args.markdown:
        print(markdown(rows, args.baseline, args.candidate), end="")
    else:
        print("\n".join(table(table_rows(rows))))
        wrong = sum(not row.ok for row in rows)
        print(f"{len(rows)} scenarios, {wrong} wrong: {'FAILED' if wrong else 'OK'}")
    return EXIT_OK if all(row.ok for row in rows) else EXIT_FINDINGS
