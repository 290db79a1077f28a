"""``replaykit run``, ``replaykit mutants`` and ``replaykit redgreen``: scenarios on targets.

``run SCENARIO|DIR... [--target CMD|python:module:function] [--manifest FILE] [--select GLOB] [--kind K]
[-j N] [--junit FILE] [--json] [-v] [--snapshot-update]``: each FAIL as it finishes, with its first failing
expectation in cause order (``-v``: every one; on a terminal, a progress line meanwhile); then the N/A
scenarios a line per capability set the target lacks, the passes in one line (``-v``: a line per scenario),
and a summary with the coverage; exit 0 when none fails (and at least one ran), 1 otherwise.

``mutants SCENARIO|DIR... [--target ...] [--manifest FILE] [--mutant NAME...] [-j N] [--json]``: every
scenario on the target and on each of its mutants (default: those its manifest declares); the kill matrix;
exit 1 when a declared kill survives, a mutant survives every scenario or a scenario fails on the target.

``redgreen --baseline CMD --candidate CMD SCENARIO|DIR... [--markdown] [--json] [-j N]``: the red → green
table; exit 1 when a row is wrong.

``run`` and ``mutants`` also take ``--shard K/N [--durations FILE]`` (one part of the scenarios, the same on
every machine: :mod:`replaykit.scenario.shard`; a shard fails only on what its own scenarios decide) and
``--report FILE`` (the JSON report, what ``replaykit merge`` joins).

Every command exits 2 on a bad scenario file (``file:line``, the JSON pointer and the fix) or command line.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, TextIO

from replaykit.cassette import write_atomic
from replaykit.cli import EXIT_FINDINGS, EXIT_OK, positive, table
from replaykit.errors import ScenarioError, UsageError
from replaykit.scenario import DEFAULT_TARGET, Result, Scenario, Target, load_all, run_many
from replaykit.scenario import report as reports
from replaykit.scenario.mutants import Matrix, check_kills, run_matrix
from replaykit.scenario.redgreen import markdown, redgreen, table_rows, to_json
from replaykit.scenario.shard import DEFAULT_DURATIONS, Shard, read_durations, write_durations

__all__ = ["add_shard", "matrix_text", "register", "run", "run_mutants", "run_redgreen"]

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
            help=f"the code under test: a command (run with the target protocol's environment; leading "
            f"VAR=value words set its environment) or python:module:function (default: {DEFAULT_TARGET}, the "
            "reference)",
        )
        parser.add_argument(
            "--manifest",
            type=Path,
            metavar="FILE",
            help="the target's manifest: what it has and its mutants (default: replaykit-target.yaml beside "
            "its command, if any; with none, every capability is taken as given)",
        )
    parser.add_argument(
        "--select",
        action="append",
        metavar="GLOB",
        help="run only the scenarios whose name matches GLOB (repeatable; e.g. 'web-search-*')",
    )
    parser.add_argument(
        "--kind", choices=("regression", "contract"), help="run only the scenarios of this kind"
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


def add_shard(parser: argparse.ArgumentParser) -> None:
    """``--shard K/N`` and ``--durations FILE`` (:mod:`replaykit.scenario.shard`)."""
    parser.add_argument(
        "--shard",
        type=Shard.parse,
        metavar="K/N",
        help="run only shard K of N: a part of the scenarios balanced on the durations file (by name when "
        "there is none), the same on every machine; join the shards' JSON reports with replaykit merge",
    )
    parser.add_argument(
        "--durations",
        type=Path,
        metavar="FILE",
        help=f"the durations the shards are balanced on (default: ./{DEFAULT_DURATIONS}, if any); a run "
        "without --shard records its durations there when FILE is given",
    )


def _report_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--report", type=Path, metavar="FILE",
        help="also write the JSON report to FILE (what replaykit merge reads)",
    )


def register(subparsers: Any) -> None:
    """Add the ``run``, ``mutants`` and ``redgreen`` subcommands."""
    parser = subparsers.add_parser(
        "run",
        description="Run each scenario: start a fake provider on its cassettes and faults, run the target "
        "with the target protocol's environment, check every expectation against its outcome and "
        "the journal. Exit 0 when all pass, 1 when one fails, 2 on a bad scenario file.",
    )
    _common(parser)
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML to FILE (for CI)")
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="list every failing expectation, not only the first, and each passing and n/a scenario on a "
        "line of its own"
    )
    parser.add_argument(
        "--snapshot-update",
        action="store_true",
        help="write the persisted-transcript snapshots that are missing or differ",
    )
    add_shard(parser)
    _report_arg(parser)
    parser.set_defaults(func=run)
    parser = subparsers.add_parser(
        "mutants",
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
        help="a mutant to run (repeatable; default: every mutant the target's manifest declares)",
    )
    parser.add_argument(
        "--declared",
        action="store_true",
        help="run only the cells that decide the verdict: each mutant on the scenarios that declare it in "
        "kills: (a mutant none declares: on every scenario); the same failures, vacuous scenarios unseen",
    )
    parser.add_argument(
        "--every-cell",
        action="store_true",
        help="run every cell, also those whose mutant the target's run of the scenario never asked about "
        "($REPLAYKIT_MUTANTS_ASKED), which are otherwise inferred: they cannot change the run",
    )
    add_shard(parser)
    _report_arg(parser)
    parser.set_defaults(func=run_mutants)
    parser = subparsers.add_parser(
        "redgreen",
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


def _scenarios(args: argparse.Namespace) -> list[Scenario]:
    """The scenarios the command line names, narrowed by ``--select`` and ``--kind``."""
    try:
        found = load_all(args.paths)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from exc
    globs = args.select or ["*"]
    kept = [s for s in found if any(fnmatch.fnmatchcase(s.name, glob) for glob in globs)
            and args.kind in (None, s.kind)]
    if not kept:
        raise UsageError(f"no scenario of the {len(found)} named matches --select {' '.join(globs)}"
                         + (f" --kind {args.kind}" if args.kind else "") + "; check the names")
    return kept


def _target(args: argparse.Namespace) -> Target:
    """The target named, its manifest read at once (a bad one is a usage error before anything runs)."""
    target = Target.parse(args.target, manifest=args.manifest)
    _ = target.manifest
    return target


class _Progress:
    """Each failure as it finishes (its first failing expectation; ``verbose``: every one); on a terminal,
    ``[k/N] running, M more...`` rewritten in place meanwhile. The passes and the n/a scenarios are reported
    after the run (:func:`replaykit.scenario.report.rest`), so the failures come first."""

    def __init__(self, total: int, out: TextIO, quiet: bool, verbose: bool = False) -> None:
        self.total, self.out, self.count, self.quiet, self.verbose = total, out, 0, quiet, verbose
        self.tty = out.isatty() and not quiet

    def start(self) -> None:
        if self.tty:
            self.out.write(f"running {self.total} scenario(s)...")
            self.out.flush()

    def __call__(self, result: Result) -> None:
        self.count += 1
        if self.quiet or not (result.failed or self.tty):
            return
        lines = [reports.line(result), *(reports.details(result) if self.verbose else [])]
        text = "\n".join(lines) + "\n" if result.failed else ""
        if self.tty:
            rest = self.total - self.count
            text = "\r\x1b[K" + text + (f"[{self.count}/{self.total}] running {rest} more..." if rest else "")
        self.out.write(text)
        self.out.flush()


def _shard(args: argparse.Namespace, command: str, scenarios: list[Scenario], target: Target,
           more: dict[str, Any] | None = None) -> tuple[list[Scenario], dict[str, Any] | None]:
    """The scenarios this run runs (``--shard``: its part) and its report's ``shard`` block (None: all)."""
    if args.shard is None:
        return scenarios, None
    durations = read_durations(args.durations or DEFAULT_DURATIONS, command)
    picked, block = args.shard.pick(command, scenarios, target, durations, more)
    return picked, block


def _record(args: argparse.Namespace, command: str, results: Sequence[Result]) -> None:
    """An unsharded run given ``--durations FILE`` records each scenario's seconds there."""
    if args.durations is not None and args.shard is None:
        seconds: dict[str, float] = {}
        for result in results:
            seconds[result.scenario.name] = seconds.get(result.scenario.name, 0.0) + result.seconds
        write_durations(args.durations, command, seconds)


def _write(path: Path | None, doc: dict[str, Any]) -> None:
    if path is not None:
        write_atomic(path, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def run(args: argparse.Namespace) -> int:
    """``replaykit run``."""
    target = _target(args)
    scenarios, shard = _shard(args, "run", _scenarios(args), target)
    progress = _Progress(len(scenarios), sys.stdout, args.json, args.verbose)
    progress.start()
    results = run_many(
        scenarios, target, jobs=args.jobs, update_snapshots=args.snapshot_update, done=progress
    )
    _record(args, "run", results)
    if args.junit is not None:
        reports.write_junit(args.junit, results)
    doc = reports.to_json(results, shard)
    _write(args.report, doc)
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print("\n".join([*reports.rest(results, args.verbose),
                         reports.summary(results) + (f" (shard {args.shard})" if shard else "")]))
        if target.manifest.path is None and any(result.failed for result in results):
            print(f"(no manifest for {target.spec}: every capability is taken as given; declare what it has "
                  "in replaykit-target.yaml beside it, or with --manifest FILE, and the scenarios that need "
                  "more are n/a)")
    return EXIT_OK if reports.ok(results, shard is not None) else EXIT_FINDINGS


def matrix_text(matrix: Matrix, shard: bool = False) -> str:
    """The kill matrix as text: the grid, the scenarios' numbers, vacuous scenarios, the problems, a verdict
    (``shard``: a part of the scenarios, whose survivors only the merged matrix decides)."""
    problems = matrix.row_problems() if shard else matrix.problems()
    lines = table(matrix.grid())
    lines += ["", *(f"{n:>3}  {s.name}" for n, s in enumerate(matrix.scenarios, 1))]
    lines += [f"vacuous (kills no mutant): {name}" for name in matrix.vacuous()]
    lines += [f"FAIL {problem}" for problem in problems]
    lines += [matrix.inferred_note()] if matrix.inferred else []
    verdict = "FAILED" if problems else "OK"
    killed = len(matrix.mutants) - len(matrix.survivors())
    lines.append(
        f"{len(matrix.scenarios)} scenarios x {len(matrix.mutants)} mutants"
        f"{'' if matrix.full else ' (the declared kills)'}, {killed} killed: {verdict}"
    )
    return "\n".join(lines)


def defect_classes() -> frozenset[str]:
    """The defect classes a ``kills:`` may name: the reference's mutants, imported only when asked for."""
    from replaykit.reference.mutants import MUTANTS

    return frozenset(MUTANTS)


def run_mutants(args: argparse.Namespace, known: Callable[[], Collection[str]] = defect_classes) -> int:
    """``replaykit mutants``: the target's mutants (its manifest's, or ``--mutant``); ``known`` gives the
    defect classes a ``kills:`` may also name."""
    scenarios = _scenarios(args)
    target = _target(args)
    declared = list(target.manifest.mutants)
    names = list(dict.fromkeys(args.mutant)) if args.mutant else declared
    if not names:
        raise UsageError(f"the target {target.spec} declares no mutants, so there is no kill matrix to run: "
                         "declare its mutants in its manifest (replaykit-target.yaml: mutants: NAME: {env: "
                         "{VAR: value}, defect: ...}) or name them with --mutant NAME")
    check_kills(scenarios, {*declared, *names}, known())
    mine, shard = _shard(args, "mutants", scenarios, target, {"mutants": names, "declared": args.declared})
    matrix = run_matrix(mine, target, names, jobs=args.jobs, declared=args.declared, universe=scenarios,
                        every_cell=args.every_cell)
    _record(args, "mutants", list(matrix.results.values()))
    doc = matrix.to_json() if shard is None else {**matrix.to_json(), "shard": shard}
    _write(args.report, doc)
    print(json.dumps(doc, indent=2) if args.json else matrix_text(matrix, shard is not None))
    problems = matrix.problems() if shard is None else matrix.row_problems()
    return EXIT_FINDINGS if problems else EXIT_OK


def run_redgreen(args: argparse.Namespace) -> int:
    """``replaykit redgreen``."""
    scenarios = _scenarios(args)
    baseline = Target.parse(args.baseline, flag="--baseline")
    candidate = Target.parse(args.candidate, flag="--candidate")
    _ = baseline.manifest, candidate.manifest  # read now: a bad one is an error before any run
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
