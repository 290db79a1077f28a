"""``replaykit verify PATH... [--json]``: parse errors, secrets, SSE framing and contract violations.

Prints one line per finding (``file:place: kind: message``), then a table of the files and a summary line;
with ``--json``, one JSON document (:meth:`replaykit.verify.Report.to_json`). Exit 0 when clean, 1 on
findings (errors; warnings alone exit 0), 2 on usage errors (a missing path, a folder with no cassettes).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, add_max_body, cassette_args, table
from replaykit.contracts import PROFILES
from replaykit.verify import FileResult, Report, verify_paths

__all__ = ["register", "render", "run"]

_HEAD = ("result", "interactions", "origin", "fingerprint", "file")


def register(subparsers: Any) -> None:
    """Add the ``verify`` subcommand."""
    parser = subparsers.add_parser(
        "verify",
        description="Check cassette files (or folders of them) for parse errors, leftover secrets, SSE "
                    "framing problems and contract violations (traffic on a route no contract covers is a "
                    "warning). Exit 0 when clean, 1 on findings, 2 on usage errors.")
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a cassette file or a folder of cassettes (else a bundled one: see "
                             "replaykit cassettes)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None,
                        help="contract profile for every cassette: strict, or openai-compatible for xAI / "
                             "OpenRouter / DeepSeek traffic (OpenAI-only rules become warnings); default: "
                             "each cassette's own replaykit.profile, else strict")
    add_max_body(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Verify ``args.paths`` and print the report."""
    report = verify_paths(cassette_args(args.paths), profile=args.profile, max_body=args.max_body)
    print(json.dumps(report.to_json(), indent=2) if args.json else render(report))
    return EXIT_OK if report.ok else EXIT_FINDINGS


def render(report: Report) -> str:
    """The human report: findings, a table of files, a summary line."""
    lines = [str(finding) for finding in report.findings]
    if lines:
        lines.append("")
    lines += table([_HEAD, *map(_row, report.files)], right={1})
    lines.append(_summary(report))
    return "\n".join(lines)


def _row(result: FileResult) -> tuple[str, str, str, str, str]:
    errors = sum(f.severity == "error" for f in result.findings)
    expected = sum(f.severity == "expected" for f in result.findings)
    verdict = "OK" if result.ok else f"FAIL ({errors})"
    if result.ok and result.findings:
        counts = [(len(result.findings) - expected, "warn"), (expected, "expected")]
        verdict = f"OK ({', '.join(f'{count} {word}' for count, word in counts if count)})"
    fingerprint = f"{result.fingerprint[:15]}…" if result.fingerprint else "-"
    return (verdict, str(result.interactions), result.origin or "-", fingerprint, result.path)


def _summary(report: Report) -> str:
    counts = report.summary()
    files, items, found = counts["files"], counts["interactions"], counts["findings"]
    text = f"{files} {_plural(files, 'cassette')}, {items} {_plural(items, 'interaction')}, " \
           f"{found} {_plural(found, 'finding')}"
    if counts["warnings"] or counts["expected"]:
        errors, warnings, expected = counts["errors"], counts["warnings"], counts["expected"]
        text += f" ({errors} {_plural(errors, 'error')}, {warnings} {_plural(warnings, 'warning')}"
        text += f", {expected} expected)" if expected else ")"
    return text + (": OK" if report.ok else ": FAILED")


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"
