"""``replaykit run``: scenarios on a target, each expectation checked against its outcome and the journal.

Owns the command's arguments and its output: each FAIL as it finishes (on a terminal, a progress line
meanwhile), then the n/a scenarios, the passes and a summary; ``--junit``, ``--json``, ``--report``. The
run itself is :mod:`replaykit.scenario.runner`, the options shared with ``mutants`` and ``redgreen``
:mod:`replaykit.cli.scenario_options`. Exit 0 when none fails (and one ran), 1 otherwise, 2 on a bad
scenario file or command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from replaykit.cli import EXIT_FINDINGS, EXIT_OK
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
from replaykit.scenario import Result, run_many
from replaykit.scenario import report as reports

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``run`` subcommand."""
    parser = subparsers.add_parser(
        "run",
        description="Run each scenario: start a fake provider on its cassettes and faults, run the target "
        "with the target protocol's environment, check every expectation against its outcome and "
        "the journal. Exit 0 when all pass, 1 when one fails, 2 on a bad scenario file.",
    )
    add_common(parser)
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
    add_report(parser)
    parser.set_defaults(func=run)


class _FailureFeed:
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


def run(args: argparse.Namespace) -> int:
    """``replaykit run``."""
    target = load_target(args)
    scenarios, shard = pick_shard(args, "run", load_scenarios(args), target)
    progress = _FailureFeed(len(scenarios), sys.stdout, args.json, args.verbose)
    progress.start()
    results = run_many(
        scenarios, target, jobs=args.jobs, update_snapshots=args.snapshot_update, done=progress
    )
    record_durations(args, "run", results)
    if args.junit is not None:
        reports.write_junit(args.junit, results)
    doc = reports.to_json(results, shard)
    write_report(args.report, doc)
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
