"""``replaykit cassettes [FOLDER...] [--json]``: the bundled cassettes (or those in FOLDER), one line each.

Each line: the name to give ``serve``, ``verify`` or ``show`` (relative to the folder listed), the
provider, the routes, whether the responses stream (``yes``, ``no``, ``mixed``), the origin (recorded or
synthesized) and the first sentence of the cassette's own ``replaykit: description``
(:func:`replaykit.overview.summarize`): the list is read from the files, never kept by hand. ``--json``
prints one JSON document with the whole descriptions. A file that does not load is listed as such. Exit 0,
2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from replaykit import cassette
from replaykit.cli import EXIT_OK, cassette_args, table
from replaykit.errors import CassetteError
from replaykit.overview import Summary, summarize
from replaykit.resources import data_dir

__all__ = ["register", "run"]

_HEAD = ("cassette", "provider", "route", "stream", "origin", "description")
WIDTH = 100  # characters of a description shown in the table (the whole one with --json)


def register(subparsers: Any) -> None:
    """Add the ``cassettes`` subcommand."""
    parser = subparsers.add_parser(
        "cassettes",
        description="List the cassettes bundled with replaykit (or those under FOLDER): the name to give "
                    "serve, verify or show, provider, route, streamed or not, origin and what each shows.")
    parser.add_argument("folders", nargs="*", metavar="FOLDER",
                        help="list the cassettes under FOLDER instead of the bundled ones")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List the cassettes and print them."""
    roots = cassette_args(args.folders) if args.folders else [data_dir("cassettes")]
    found = [_summary(path, root) for root in roots for path in cassette.named_paths([root])]
    if args.json:
        print(json.dumps({"folders": list(map(str, roots)), "cassettes": [s.to_json() for s in found]},
                         indent=2, ensure_ascii=False))
    else:
        print("\n".join([*table([_HEAD, *map(_row, found)]), _total(found, roots)]))
    return EXIT_OK


def _summary(path: Path, root: Path) -> Summary:
    name = str(path.relative_to(root)) if root.is_dir() else str(path)
    try:
        return summarize(cassette.load(path), name)
    except CassetteError as exc:
        problem = f"does not load ({str(exc).removeprefix(f'{path}:')}); see replaykit verify {path}"
        return Summary(name, None, (), None, None, problem, 0)


def _row(found: Summary) -> tuple[str, ...]:
    stream = {True: "yes", False: "no", None: "mixed" if found.interactions else "-"}[found.stream]
    return (found.name, found.provider or "-", ", ".join(found.routes) or "-", stream, found.origin or "-",
            _first_sentence(found.description or ""))


def _first_sentence(text: str) -> str:
    head = text.split(". ", 1)[0].strip()
    return head if len(head) <= WIDTH else head[: WIDTH - 1].rstrip() + "…"


def _total(found: list[Summary], roots: list[Path]) -> str:
    origins = [s.origin for s in found]
    where = ", ".join(map(str, roots))
    counts = f"{origins.count('synthesized')} synthesized, {origins.count('recorded')} recorded"
    hint = "`replaykit show NAME` prints what one expects and answers"
    return f"{len(found)} cassettes ({counts}) in {where}; {hint}"
