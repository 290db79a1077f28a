"""``replaykit properties``: a token estimator against the property suite (:mod:`replaykit.properties`).

Owns the command's arguments (``--estimator module:function`` or ``--estimator-cmd CMD``) and its output:
a line per property as it is done, a failure's shrunk transcript, ``--json`` at the end; a status line on a
terminal (:mod:`~replaykit.cli.status_line`). Exit 0 when every property holds, 1 otherwise (a skipped one
included), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import random
from typing import TYPE_CHECKING, Any

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, positive
from replaykit.cli.status_line import StatusLine
from replaykit.jsondoc import JSON

if TYPE_CHECKING:  # replaykit.properties (and Hypothesis) load only when the command runs
    from replaykit.properties import Estimator, Outcome, Property

__all__ = ["percent", "register", "render", "run_command", "to_json"]

def register(subparsers: Any) -> None:
    """Add the ``properties`` subcommand."""
    parser = subparsers.add_parser(
        "properties",
        description="Run the estimator property suite (Hypothesis) against a Python callable or a JSON Lines "
                    "command. Exit 0 when every property holds, 1 on a failure, 2 on usage errors.")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--estimator", metavar="MODULE:FUNCTION",
                       help="a Python callable (transcript, target) -> tokens, e.g. "
                            "replaykit.estimate:estimate_tokens")
    which.add_argument("--estimator-cmd", metavar="CMD",
                       help='a command speaking the JSON Lines estimator protocol, e.g. "node estimator.js"')
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    parser.add_argument("--max-examples", type=positive, default=100, metavar="N",
                        help="examples per property (default 100)")
    parser.add_argument("--seed", type=int, default=None, help="make the run repeatable (default: random)")
    parser.add_argument("--no-shrink", action="store_false", dest="shrink",
                        help="report a failing example as found, without minimising it (faster)")
    parser.add_argument("--property", action="append", dest="names", metavar="NAME",
                        help="run only this property (repeatable): never_raises, finite_non_negative, ...")
    parser.add_argument("--search-margin", type=percent, default=10.0, metavar="PERCENT",
                        help="tracks_o200k: how far under o200k_base an estimate of search content may be "
                             "(default 10)")
    parser.add_argument("--band", type=percent, default=25.0, metavar="PERCENT",
                        help="tracks_o200k: how far from o200k_base, either way, an estimate of opaque "
                             "blocks, CJK, code and prose may be (default 25)")
    parser.set_defaults(func=run_command)


def percent(text: str) -> float:
    """An argparse type: a percentage from 0 to below 100."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"{text!r} must be a percentage from 0 to below 100")
    return value


def run_command(args: argparse.Namespace) -> int:
    """Run the suite as ``args`` say and print each property's lines as it finishes (``--json``: one strict
    JSON document at the end, no ``Infinity``)."""
    from replaykit.properties import dumps, open_estimator, selected

    chosen = selected(args.names, search_margin=args.search_margin / 100, band=args.band / 100)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    with open_estimator(args.estimator, args.estimator_cmd) as (label, estimator):
        header = {"estimator": label, "seed": seed, "maxExamples": args.max_examples}
        _say(not args.json, [_head(header)])
        outcomes = _each(chosen, estimator, args, seed)
    _say(not args.json, [_tally(outcomes)])
    _say(args.json, [dumps(to_json(header, outcomes), indent=2)])
    return EXIT_OK if all(outcome.passed for outcome in outcomes) else EXIT_FINDINGS


def _each(chosen: list[Property], estimator: Estimator, args: argparse.Namespace, seed: int) -> list[Outcome]:
    """Each property in turn, its lines printed once it is done (text output), a status line meanwhile."""
    width = max(len(prop.name) for prop in chosen)
    progress = StatusLine(len(chosen))
    outcomes: list[Outcome] = []
    for number, prop in enumerate(chosen, 1):
        progress.running(number, prop.name)
        try:
            outcomes.append(prop.outcome(estimator, args.max_examples, seed, shrink=args.shrink))
        finally:
            progress.clear()
        _say(not args.json, _lines(outcomes[-1], width))
    return outcomes


def _say(wanted: bool, lines: list[str]) -> None:
    if wanted:
        print("\n".join(lines), flush=True)


def render(header: JSON, outcomes: list[Outcome]) -> str:
    """The human report: one line per property, the failures' details, a summary line."""
    width = max(len(outcome.name) for outcome in outcomes)
    lines = [_head(header), *(line for outcome in outcomes for line in _lines(outcome, width))]
    return "\n".join([*lines, _tally(outcomes)])


def _head(header: JSON) -> str:
    return (f"estimator {header['estimator']}: {header['maxExamples']} examples per property, "
            f"seed {header['seed']}")


def _lines(outcome: Outcome, width: int) -> list[str]:
    head = f"{outcome.status.upper():9} {outcome.name.ljust(width)}  {outcome.statement}"
    return [head, *_details(outcome)]


def _counts(outcomes: list[Outcome]) -> tuple[int, int, int]:
    """Passed, failed (unchecked included) and skipped."""
    skipped = sum(outcome.skipped for outcome in outcomes)
    passed = sum(outcome.passed for outcome in outcomes)
    return passed, len(outcomes) - passed - skipped, skipped


def _tally(outcomes: list[Outcome]) -> str:
    passed, failed, skipped = _counts(outcomes)
    return (f"{len(outcomes)} properties, {passed} passed, {failed} failed"
            + (f", {skipped} skipped (not a pass)" if skipped else "")
            + (": OK" if passed == len(outcomes) else ""))


def _details(outcome: Outcome) -> list[str]:
    from replaykit.properties import dumps

    errors = [f"          {error.content:7} error against o200k_base {error.low:+.1%} to {error.high:+.1%} "
              f"({error.examples} examples)" for error in outcome.errors]
    if outcome.unchecked:
        return [f"          {outcome.unchecked}", *errors]
    if outcome.failure is None:
        return errors
    failure = outcome.failure
    return [f"          {failure.detail}", *errors, f"          target: {dumps(failure.target)}",
            f"          transcript: {dumps(failure.transcript)}"]


def to_json(header: JSON, outcomes: list[Outcome]) -> JSON:
    """The ``--json`` document: the run's settings, one entry per property and the counts."""
    entries = [_entry(outcome) for outcome in outcomes]
    passed, failed, skipped = _counts(outcomes)
    return {**header, "ok": passed == len(outcomes), "passed": passed, "failed": failed, "skipped": skipped,
            "properties": entries}


def _entry(outcome: Outcome) -> JSON:
    entry: JSON = {"name": outcome.name, "statement": outcome.statement, "status": outcome.status}
    if outcome.unchecked:
        entry["reason"] = outcome.unchecked
    if outcome.errors:
        entry["errors"] = [{"content": error.content, "examples": error.examples, "min": error.low,
                            "max": error.high} for error in outcome.errors]
    if outcome.failure is not None:
        failure = outcome.failure
        entry["failure"] = {"detail": failure.detail, "target": failure.target,
                            "transcript": failure.transcript}
    return entry
