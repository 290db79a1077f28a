"""``replaykit drift [--sdk anthropic|openai] [--json]``: the contracts against the installed SDKs' models.

Prints a table of gaps (SDK type, contract entry, gap, detail, verdict) and a summary line; with
``--json``, one JSON document. Exit 1 when a gap is blocking (a payload the SDK accepts would fail a
contract) and not explained by the contract's ``x-drift-ignore``; 0 otherwise; 2 when the SDK is missing.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, table
from replaykit.drift import MAPPING, SDKS, compare, sdk_version, verdict
from replaykit.findings import Finding
from replaykit.jsondoc import JSON

__all__ = ["register", "render", "run"]

_HEAD = ("verdict", "sdk", "sdk type", "contract", "gap", "detail")


def register(subparsers: Any) -> None:
    """Add the ``drift`` subcommand."""
    parser = subparsers.add_parser(
        "drift",
        description="Compare the wire contracts with the installed anthropic / openai SDK models (enum "
                    "values, required fields, discriminators). Exit 1 when a payload the SDK accepts would "
                    "fail a contract and the contract does not explain it (x-drift-ignore).")
    parser.add_argument("--sdk", choices=SDKS, action="append",
                        help="only this SDK (repeatable; default: both)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Compare and print; the exit code says whether a blocking gap was found."""
    sdks = tuple(args.sdk or SDKS)
    gaps = compare(sdks)
    versions = {sdk: sdk_version(sdk) for sdk in sdks}
    entries = sum(entry.package in sdks for entry in MAPPING)
    text = json.dumps(_document(gaps, versions, entries), indent=2) if args.json else \
        render(gaps, versions, entries)
    print(text)
    return EXIT_FINDINGS if any(verdict(gap) == "blocking" for gap in gaps) else EXIT_OK


def _summary(gaps: list[Finding], entries: int) -> JSON:
    counts = Counter(verdict(gap) for gap in gaps)
    return {"entries": entries, "gaps": len(gaps), "blocking": counts["blocking"],
            "explained": counts["explained"], "info": counts["info"], "ok": not counts["blocking"]}


def _document(gaps: list[Finding], versions: dict[str, str], entries: int) -> JSON:
    found = [{**gap.to_json(), "verdict": verdict(gap)} for gap in gaps]
    return {"sdks": versions, "gaps": found, "summary": _summary(gaps, entries)}


def _row(gap: Finding) -> tuple[str, ...]:
    sdk, _, sdk_type = gap.place.partition(":")
    return (verdict(gap).upper(), sdk, sdk_type.rpartition(":")[2], gap.file, gap.code, gap.message)


def render(gaps: list[Finding], versions: dict[str, str], entries: int) -> str:
    """The human report: a table of gaps (blocking first), explanations and fixes, a summary line."""
    order = {"blocking": 0, "explained": 1, "info": 2}
    lines = table([_HEAD, *(_row(gap) for gap in sorted(gaps, key=lambda gap: order[verdict(gap)]))])
    lines += [f"fix: {g.file} {g.code}: {g.fix}" for g in gaps if g.fix]
    lines += [f"explained: {g.file} {g.code}: {g.note}" for g in gaps if verdict(g) == "explained"]
    counts = _summary(gaps, entries)
    sdk_text = ", ".join(f"{sdk} {version}" for sdk, version in versions.items())
    overall = "OK" if counts["ok"] else "FAILED (a payload the SDK accepts would fail a contract)"
    lines.append(f"{sdk_text}: {entries} mappings, {counts['gaps']} gaps ({counts['blocking']} blocking, "
                 f"{counts['explained']} explained, {counts['info']} info): {overall}")
    return "\n".join(lines)
