"""``replaykit repro TRANSCRIPT --out DIR [--target CMD] [--json]``: a reported transcript into a scenario.

Owns the command's arguments and output; :mod:`replaykit.repro` reads the transcript in any form users
paste, scrubs its keys, pinpoints its first failure and writes DIR (scenario, transcript, cassette,
``repro.json``). With ``--target`` the scenario runs at once and its verdict is printed. Exit 0 when written
(and passing on ``--target``); 1 when a key survived the scrub or the scenario fails; 2 on a file that is no
transcript or a DIR that is not new, empty or an earlier repro output.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from replaykit.cli import EXIT_FINDINGS, EXIT_OK
from replaykit.jsondoc import JSON
from replaykit.repro import Repro, reproduce
from replaykit.repro.bundle import CASSETTE, FILES, SCENARIO
from replaykit.scenario import Result, Target, load, run_scenario
from replaykit.scenario import report as reports

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``repro`` subcommand."""
    parser = subparsers.add_parser(
        "repro",
        description="Read a reported transcript (neutral JSON, an Anthropic Messages or OpenAI Responses "
                    "request body or its messages / input array, a JSONL session log of either, a "
                    "pydantic-ai message history, or a cassette: its last request answered with an error, "
                    "else its last request), redact it, find where restore, projection, the request (a "
                    "broken provider rule, named) or estimation first fails, and write DIR: "
                    f"{SCENARIO}, the transcript and a synthesized cassette ({CASSETTE}), so that "
                    "`replaykit run DIR` replays it offline. Exit 0 when written, 1 when a key survived "
                    "redaction (nothing written) or the scenario fails on --target, 2 on bad input.")
    parser.add_argument("transcript", type=Path, metavar="TRANSCRIPT",
                        help="the reported transcript file (JSON, JSONL, or a cassette's YAML)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="the folder to write: new, empty, or an earlier repro output (replaced)")
    parser.add_argument("--target", metavar="CMD",
                        help="also run the new scenario on this target (a command, or "
                             "python:module:function) and print its verdict")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``replaykit repro``."""
    target = Target.parse(args.target) if args.target else None  # a bad --target fails before any write
    done = reproduce(args.transcript, args.out)
    result = run_scenario(load(done.scenario), target) if target is not None else None
    if args.json:
        print(json.dumps(_json(done, result), indent=2, ensure_ascii=False))
    else:
        print("\n".join(_lines(done, args.out, result)))
    return EXIT_FINDINGS if result is not None and not result.passed else EXIT_OK


def _lines(done: Repro, out: Path, result: Result | None) -> list[str]:
    reported, failure = done.reported, done.diagnosis.failure
    lines = [f"read: {reported.path} as {reported.form}"]
    keys = reported.redacted
    if keys:
        shown = "; ".join(f"{f.field or '/'} ({f.kind}: {f.excerpt})" for f in keys[:5])
        lines.append(f"redacted: {len(keys)} key(s): {shown}" + (" ..." if len(keys) > 5 else ""))
    passed = f"none (restore, projection and estimate pass: {done.diagnosis.tokens} tokens)"
    lines.append(f"first failure: {failure or passed}")
    if failure is not None and failure.kind == "request violation":
        lines.append(f"where: {failure.request}")
        lines += [f"rule: {failure.statement}"] if failure.statement else []
        lines += [f"also broken: {other}" for other in failure.others]
    lines += [f"note: {note}" for note in done.diagnosis.notes]
    lines.append(f"wrote: {out} ({done.folder}): {', '.join(FILES)} (the cassette is origin: synthesized, "
                 "its answer plain and streamed)")
    lines.append(f"replay: replaykit run {out}" if result is None else f"verdict: {reports.line(result)}")
    return lines


def _json(done: Repro, result: Result | None) -> JSON:
    summary: JSON = json.loads(done.bundle.files["repro.json"])
    summary["folder"] = {"path": str(done.out), "was": done.folder}
    summary["verdict"] = None if result is None else result.to_json()
    return summary
