"""``replaykit qualify``: every check on this environment, one report (:mod:`replaykit.qualify` runs them).

Owns the command's arguments and what it says: the identity line, a line per check as it is decided, a
status line on a terminal (:mod:`~replaykit.cli.status_line`), the flipped verdicts against
``--baseline-report``; writes ``DIR/report.md`` and ``DIR/report.json``. ``--shard K/N`` runs one part, for
``replaykit merge``. Exit 0 when every check passes, 1 when one fails, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, positive
from replaykit.cli.status_line import StatusLine
from replaykit.jsondoc import JSON

__all__ = ["Lines", "register", "run"]

_DEFAULT_OUT = "qualify-report"


def register(subparsers: Any) -> None:
    """Add the ``qualify`` subcommand."""
    from replaykit.cli.scenario_options import add_shard
    from replaykit.qualify import DEFAULT_ESTIMATOR
    from replaykit.scenario.target import DEFAULT_TARGET

    parser = subparsers.add_parser(
        "qualify",
        description="Record the environment (versions, SHA-256 of contracts, cassettes, scenarios and the "
        "target), then run verify, the contracts, drift, the scenarios on the target, the mutant "
        "matrix and the estimator property suite; write report.md and report.json. With "
        "--baseline-report, also what changed since that report, flipped verdicts first. Exit 0 "
        "when every check passes, 1 when one fails, 2 on usage errors.",
    )
    parser.add_argument(
        "--target",
        default=DEFAULT_TARGET,
        metavar="CMD",
        help=f"the harness under test: a command or python:module:function (default: "
        f"{DEFAULT_TARGET}, the reference harness)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--estimator",
        default=None,
        metavar="MODULE:FUNCTION",
        help=f"the token estimator for the property suite (default: {DEFAULT_ESTIMATOR})",
    )
    which.add_argument(
        "--estimator-cmd",
        metavar="CMD",
        help="an estimator command speaking the JSON Lines estimator protocol",
    )
    parser.add_argument(
        "--baseline-report",
        type=Path,
        metavar="FILE",
        help="an earlier report.json: show what changed since (versions, hashes, verdicts)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(_DEFAULT_OUT),
        metavar="DIR",
        help=f"where report.md and report.json go (default: ./{_DEFAULT_OUT})",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=positive,
        default=min(os.cpu_count() or 1, 8),
        metavar="N",
        help="scenario runs at a time in the scenario and mutant stages (default: the "
        "number of CPUs, at most 8); verdicts do not depend on N",
    )
    parser.add_argument(
        "--scenarios",
        type=Path,
        action="append",
        metavar="PATH",
        help="a scenario file or folder (repeatable; default: the bundled scenarios)",
    )
    parser.add_argument(
        "--cassettes",
        type=Path,
        action="append",
        metavar="PATH",
        help="a cassette file or folder to verify (repeatable; default: the bundled "
        "cassettes); the scenarios' cassettes are verified too",
    )
    parser.add_argument(
        "--mutant",
        action="append",
        metavar="NAME",
        help="a mutant of the target for the kill matrix (repeatable; default: every mutant its manifest "
        "declares; with none, the matrix is skipped)",
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        metavar="FILE",
        help="the target's manifest: what it has and its mutants (default: replaykit-target.yaml beside it)",
    )
    parser.add_argument(
        "--full-matrix",
        action="store_true",
        help="run every scenario on every mutant (default: each mutant on the scenarios that declare it in "
        "kills:, which decides the verdict; the full matrix also finds scenarios that kill nothing)",
    )
    parser.add_argument(
        "--max-examples", type=positive, default=100, metavar="N", help="examples per property (default 100)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the property suite's seed (default 0: repeatable)"
    )
    add_shard(parser)
    parser.set_defaults(func=run)


class Lines:
    """What ``qualify`` says: plain lines on ``out``; a status line on ``err`` while a stage runs, only on a
    terminal (:class:`replaykit.cli.status_line.StatusLine` decides)."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.stage = ""
        self.status: StatusLine | None = None

    def note(self, text: str) -> None:
        """Print a line."""
        self._say(text)

    def start(self, stage: str) -> None:
        """A stage begins: its name on the status line."""
        self.stage = stage
        self.status = StatusLine(1, self.err)
        self.status.running(1, f"{stage}...")

    def tick(self, done: int, total: int, what: str) -> None:
        """How far the stage is."""
        if self.status is None or self.status.total != total:
            self.status = StatusLine(total, self.err)
        self.status.running(min(done + 1, total), f"{self.stage}: {what}")

    def finish(self, stage: str, section: Any) -> None:
        """A check is decided: its line."""
        word = {"pass": "PASS", "fail": "FAIL", "skipped": "SKIP"}[section.status]
        seconds = f" ({section.seconds:.1f} s)" if section.status != "skipped" else ""
        self._say(f"{word} {stage}: {section.summary}{seconds}")
        for failure in section.failures[:5]:
            self._say(f"     {failure.file or failure.code}: {_short(failure.message)}")
        if len(section.failures) > 5:
            self._say(f"     ... and {len(section.failures) - 5} more (see report.md)")

    def _say(self, text: str) -> None:
        if self.status is not None:
            self.status.clear()
        print(text, file=self.out, flush=True)


def _short(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _mutants(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The mutants named, else None: those the target's manifest declares."""
    return tuple(dict.fromkeys(args.mutant)) if args.mutant else None


def run(args: argparse.Namespace) -> int:
    """``replaykit qualify``."""
    from replaykit.qualify import DEFAULT_ESTIMATOR, Options, qualify, write

    options = Options(
        target=args.target,
        manifest=args.manifest,
        estimator=args.estimator or (None if args.estimator_cmd else DEFAULT_ESTIMATOR),
        estimator_cmd=args.estimator_cmd,
        cassettes=tuple(args.cassettes or ()),
        scenarios=tuple(args.scenarios or ()),
        mutants=_mutants(args),
        jobs=args.jobs,
        max_examples=args.max_examples,
        seed=args.seed,
        baseline_report=args.baseline_report,
        full_matrix=args.full_matrix,
        shard=args.shard,
        durations=args.durations,
    )
    lines = Lines()
    done = qualify(options, lines)
    changes = done.document.get("changes")
    if changes:
        _changes(lines, changes, done.document["dependencies"])
    md, js = write(done, args.out)
    lines.note(f"wrote {md} and {js}")
    if done.passed:
        lines.note("qualify: OK")
        return EXIT_OK
    lines.note(f"qualify: FAILED: {'; '.join(_short(text, 200) for text in done.failed())}")
    return EXIT_FINDINGS


def _changes(lines: Lines, changes: JSON, dependencies: list[JSON]) -> None:
    """Since the baseline report: flipped verdicts first, then versions, then counts of the rest."""
    base = changes["baseline"]
    lines.note(f"since {base['file']} ({base['generatedAt']}, {base['verdict']}):")
    for change in changes["verdicts"]:
        if change["flipped"]:
            lines.note(f"  FLIPPED {change['section']}: {change['name']}: {change['from']} -> {change['to']}")
    for dependency in dependencies:
        lines.note(f"  version {dependency['name']}: {dependency['from']} -> {dependency['to']}")
    others = sum(not change["flipped"] for change in changes["verdicts"])
    lines.note(f"  {others} other verdict change(s), {len(changes['hashes'])} input file(s) changed")
