"""``replaykit redgreen``: regression scenarios red on a baseline and green on a candidate.

Owns the command's arguments and its output (a table, ``--markdown`` or ``--json``); the rows are
:mod:`replaykit.scenario.redgreen`, the options shared with ``run`` :mod:`replaykit.cli.scenario_options`.
Exit 1 when a row is wrong; 2 on a bad scenario file or command line.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, table
from replaykit.cli.scenario_options import add_common, load_scenarios
from replaykit.scenario import Target
from replaykit.scenario.redgreen import markdown, redgreen, table_rows, to_json

__all__ = ["register", "run_redgreen"]


def register(subparsers: Any) -> None:
    """Add the ``redgreen`` subcommand."""
    parser = subparsers.add_parser(
        "redgreen",
        description="Run every scenario on a baseline and a candidate target: a regression scenario "
        "must fail on the baseline and pass on the candidate, a contract scenario pass on both. Exit 1 "
        "when one does not.",
    )
    add_common(parser, target=False)
    parser.add_argument("--baseline", required=True, metavar="CMD", help="the target before the fix")
    parser.add_argument("--candidate", required=True, metavar="CMD", help="the target with the fix")
    parser.add_argument(
        "--markdown", action="store_true", help="print the table as Markdown (e.g. >> $GITHUB_STEP_SUMMARY)"
    )
    parser.set_defaults(func=run_redgreen)


def run_redgreen(args: argparse.Namespace) -> int:
    """``replaykit redgreen``."""
    scenarios = load_scenarios(args)
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
