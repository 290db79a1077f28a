"""``replaykit mutants``: every scenario on the target and on each of its mutants, the kill matrix.

Owns the command's arguments and the matrix as text (:func:`matrix_text`, also printed by ``replaykit
merge``); the matrix itself is :mod:`replaykit.scenario.mutants`, the options shared with ``run`` are
:mod:`replaykit.cli.scenario_options`. Exit 1 when a declared kill survives, a mutant survives every
scenario or a scenario fails on the target; 2 on a bad scenario file or command line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Collection
from typing import Any

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, table
from replaykit.cli.scenario_options import (
    add_common,
    add_report,
    add_shard,
    load_scenarios,
    load_target,
    pick_shard,
    record_durations,
    write_report,
)
from replaykit.errors import UsageError
from replaykit.reference.defects import defect_classes
from replaykit.scenario.mutants import Matrix, check_kills, run_matrix

__all__ = ["matrix_text", "register", "run_mutants"]


def register(subparsers: Any) -> None:
    """Add the ``mutants`` subcommand."""
    parser = subparsers.add_parser(
        "mutants",
        description="Run every scenario on the target and on each mutant (REPLAYKIT_MUTANT=name) and print "
        "the kill matrix. Exit 1 when a scenario's declared kill survives, a mutant survives "
        "every scenario or a scenario fails on the target itself; a scenario that kills nothing "
        "is flagged as vacuous.",
    )
    add_common(parser)
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
    add_report(parser)
    parser.set_defaults(func=run_mutants)


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


def run_mutants(args: argparse.Namespace, known: Callable[[], Collection[str]] = defect_classes) -> int:
    """``replaykit mutants``: the target's mutants (its manifest's, or ``--mutant``); ``known`` gives the
    defect classes a ``kills:`` may also name."""
    scenarios = load_scenarios(args)
    target = load_target(args)
    declared = list(target.manifest.mutants)
    names = list(dict.fromkeys(args.mutant)) if args.mutant else declared
    if not names:
        raise UsageError(f"the target {target.spec} declares no mutants, so there is no kill matrix to run: "
                         "declare its mutants in its manifest (replaykit-target.yaml: mutants: NAME: {env: "
                         "{VAR: value}, defect: ...}) or name them with --mutant NAME")
    check_kills(scenarios, {*declared, *names}, known())
    more = {"mutants": names, "declared": args.declared}
    mine, shard = pick_shard(args, "mutants", scenarios, target, more)
    matrix = run_matrix(mine, target, names, jobs=args.jobs, declared=args.declared, universe=scenarios,
                        every_cell=args.every_cell)
    record_durations(args, "mutants", list(matrix.results.values()))
    doc = matrix.to_json() if shard is None else {**matrix.to_json(), "shard": shard}
    write_report(args.report, doc)
    print(json.dumps(doc, indent=2) if args.json else matrix_text(matrix, shard is not None))
    problems = matrix.problems() if shard is None else matrix.row_problems()
    return EXIT_FINDINGS if problems else EXIT_OK
