"""``replaykit redact PATH... (--in-place | --out DIR | --check)``: scrub every secret from cassettes.

Owns the command's arguments and output: each secret found as a masked ``verify`` finding, a line per file
and a summary; the scrubbing and the atomic write are :mod:`replaykit.redact`. A file is written whole or
not at all, never while a secret survives. Exit 0 when done (``--check``: nothing would change), 1 when
something would change under ``--check``, a file does not load or a secret survives, 2 on usage errors.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from replaykit.cassette import named_paths
from replaykit.cli import EXIT_FINDINGS, EXIT_OK
from replaykit.errors import CassetteError
from replaykit.redact.files import FileRedaction, redact_file, target_of
from replaykit.verify import secret_finding

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``redact`` subcommand."""
    parser = subparsers.add_parser(
        "redact",
        description="Scrub every secret replaykit finds (credential headers, keys of known shapes anywhere, "
                    "secret query parameters and JSON fields, URL-encoded or base64-encoded too) from "
                    "cassette files. Exit 0 when done, 1 when --check finds something to scrub or a file "
                    "cannot be scrubbed, 2 on usage errors.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a cassette file or a folder of cassettes")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--in-place", action="store_true", help="rewrite each file that changes, atomically")
    mode.add_argument("--out", metavar="DIR", type=Path, help="write the redacted cassettes under DIR")
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 when a file would change (for CI and pre-commit)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Redact the named cassettes as ``args`` says and print what was done."""
    failed = changed = 0
    results = 0
    for root in map(Path, args.paths):
        for path in named_paths([root]):
            target = None if args.check else target_of(path, root, args.out)
            ok, did = _redact_one(path, target)
            failed, changed, results = failed + (not ok), changed + did, results + 1
    verb = "would change" if args.check else "changed"
    print(f"{results} {_files(results)}, {changed} {verb}, {failed} failed")
    return EXIT_FINDINGS if failed or (args.check and changed) else EXIT_OK


def _redact_one(path: Path, target: Path | None) -> tuple[bool, bool]:
    """Redact one file and print its findings and outcome: ``(ok, changed)``."""
    try:
        done = redact_file(path, target)
    except CassetteError as exc:
        print(exc)
        print(f"FAILED     {path} (does not load: nothing written)")
        return False, False
    for found in done.findings:  # the key may have been shared already: it is still to be rotated
        print(replace(secret_finding(path, found), fix="rotate the key"))
    print(_outcome(done))
    return not done.left, done.changed


def _outcome(done: FileRedaction) -> str:
    count = f"{len(done.findings)} {'secret' if len(done.findings) == 1 else 'secrets'}"
    if done.left:
        left = ", ".join(f"{found.field} {found.excerpt}" for found in done.left)
        return f"FAILED     {done.path} (still holds {left} after scrubbing: nothing written; " \
               "remove it by hand)"
    if not done.changed:
        return f"clean      {done.path}" + (f" (copied to {done.written})" if done.written else "")
    if done.written is None:
        return f"would fix  {done.path} ({count})"
    into = "" if done.written == done.path else f" -> {done.written}"
    return f"redacted   {done.path}{into} ({count})"


def _files(count: int) -> str:
    return "cassette" if count == 1 else "cassettes"
