"""``replaykit merge REPORT.json...``: the JSON reports of the shards of one ``run``, ``mutants``,
``qualify`` or ``explore`` (``--shard K/N``) joined into one; :mod:`replaykit.merge` joins them.

Owns the command's arguments and its outputs: the text the unsharded command prints (explore: its summary),
``--markdown``, ``--json``, ``--out DIR`` (explore: also the scenarios of the groups kept), ``--junit FILE``
and the durations the next shards are balanced on. Exit 0 when the joined report passes, 1 when it fails, 2
on bad input (not a shard's report, shards of different inputs, a shard missing or twice).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from replaykit.cli import EXIT_FINDINGS, EXIT_OK

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``merge`` subcommand."""
    from replaykit.scenario.shard import DEFAULT_DURATIONS

    parser = subparsers.add_parser(
        "merge",
        description="Join the JSON reports of the shards of one run, mutants, qualify or explore (--shard "
        "K/N) into one report: the results in the scenarios' order, one kill matrix, one verdict, explore's "
        "groups each once with its smallest schedule. Refuses shards of "
        "different inputs and a shard missing or given twice. Exit 0 when the joined report passes, 1 when "
        "it fails, 2 on bad input.",
    )
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json", help="a shard's JSON report")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the joined report as JSON")
    shown.add_argument("--markdown", action="store_true", help="print it as Markdown")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write DIR/report.md and DIR/report.json (explore: and the scenarios kept)")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML to FILE (for CI)")
    parser.add_argument(
        "--durations",
        type=Path,
        default=DEFAULT_DURATIONS,
        metavar="FILE",
        help=f"record each scenario's seconds in FILE, what the next shards are balanced on (default: "
        f"./{DEFAULT_DURATIONS})",
    )
    parser.add_argument(
        "--baseline-report",
        type=Path,
        metavar="FILE",
        help="qualify reports: an earlier report.json to show what changed since",
    )
    parser.set_defaults(func=run)


def _markdown(merged: Any) -> str:
    from replaykit.explore import output
    from replaykit.qualify import markdown
    from replaykit.scenario import report

    if merged.command == "explore":
        return output.summary(merged.doc)
    if merged.command == "qualify":
        return str(markdown.render(merged.doc))
    if merged.command == "mutants":
        return str(merged.matrix.markdown())
    return report.markdown(merged.results)


def _text(merged: Any) -> str:
    from replaykit.cli.mutants import matrix_text
    from replaykit.scenario import report

    if merged.command == "mutants":
        return matrix_text(merged.matrix)
    if merged.command == "explore":
        return _markdown(merged).rstrip("\n")
    if merged.command == "run":
        return "\n".join(report.text(merged.results))
    lines = [f"{section['status'].upper()} {name}: {section.get('summary', '')}"
             for name, section in merged.doc["sections"].items()]
    return "\n".join([*lines, f"qualify: {'OK' if merged.passed else 'FAILED'}"])


def _copy(files: dict[str, Path], out: Path) -> None:
    """explore: the scenarios of the groups kept, from their shards' folders into ``out``."""
    from replaykit.explore import output

    for source in files.values():
        if source.parent.resolve() != out.resolve():
            output.copy_scenario(source, out)


def _write(merged: Any, args: argparse.Namespace) -> None:
    from replaykit.cassette import write_atomic
    from replaykit.scenario import report
    from replaykit.scenario.shard import write_durations

    if args.junit is not None:
        cases = (merged.matrix.cases() if merged.command == "mutants"
                 else [report.case(result) for result in merged.results])
        report.write_cases(args.junit, cases)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        text = _markdown(merged)
        _copy(merged.files, args.out)
        write_atomic(args.out / "report.json", (json.dumps(merged.doc, indent=2, ensure_ascii=False) + "\n")
                     .encode("utf-8"))
        write_atomic(args.out / "report.md", text.encode("utf-8"))
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as handle:
                handle.write(text + "\n")
    rows = merged.matrix.results.values() if merged.matrix is not None else merged.results
    seconds = {result.scenario.name: result.seconds for result in rows if result.mutant is None}
    if seconds:
        write_durations(args.durations, merged.command, seconds)


def run(args: argparse.Namespace) -> int:
    """``replaykit merge``."""
    from replaykit.merge import merge, read

    merged = merge([read(path) for path in args.reports], args.baseline_report)
    _write(merged, args)
    if args.json:
        print(json.dumps(merged.doc, indent=2, ensure_ascii=False))
    else:
        print(_markdown(merged) if args.markdown else _text(merged), end="" if args.markdown else "\n")
    return EXIT_OK if merged.passed else EXIT_FINDINGS
