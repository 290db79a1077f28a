"""``replaykit show CASSETTE [--interaction N] [--full] [--json]``: what a cassette expects and answers.

Owns the command's arguments and the page it prints: per interaction its method, path, route, the request
body with every secret scrubbed, whether the response streams, its status and event types; the content is
:func:`replaykit.overview.exchanges`. A name not found is looked up among the bundled cassettes. Exit 0, 2 on
usage errors.
"""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

from replaykit import cassette
from replaykit.cli import EXIT_OK, add_max_body, cassette_args
from replaykit.errors import CassetteError, UsageError, located
from replaykit.overview import Exchange, Summary, exchanges, summarize

__all__ = ["register", "render", "run"]

LONG = 240  # characters a string of the body may have before it is shortened (text output only)


def register(subparsers: Any) -> None:
    """Add the ``show`` subcommand."""
    parser = subparsers.add_parser(
        "show",
        description="Print each interaction of a cassette: method, path, route, the request body (secrets "
                    "scrubbed), whether the response streams, its status and its events' types.")
    parser.add_argument("cassette", metavar="CASSETTE",
                        help="a cassette file (else a bundled one: see replaykit cassettes)")
    parser.add_argument("--interaction", type=int, metavar="N", help="only interactions[N] (from 0)")
    parser.add_argument("--full", action="store_true",
                        help=f"print long strings whole (default: shortened past {LONG} characters)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    add_max_body(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the cassette, pick the interactions and print them."""
    [path] = cassette_args([args.cassette])
    if not path.is_file():
        raise UsageError(located(path, None, "not a cassette file", "name one file (replaykit cassettes "
                                                                    "lists the bundled ones)"))
    try:
        tape = cassette.load(path, max_body=args.max_body)
    except CassetteError as exc:
        raise UsageError(f"{exc} (replaykit verify {path} lists every problem)") from exc
    shown = _chosen(exchanges(tape), args.interaction, str(path))
    about = summarize(tape, str(path))
    if args.json:
        print(json.dumps({**about.to_json(), "interactions": [e.to_json() for e in shown]}, indent=2,
                         ensure_ascii=False))
    else:
        print(render(about, shown, full=args.full))
    return EXIT_OK


def _chosen(found: list[Exchange], index: int | None, where: str) -> list[Exchange]:
    if index is None:
        return found
    if not 0 <= index < len(found):
        count = len(found)
        have = f"{count} interaction{'s' if count != 1 else ''}" if found else "no interactions"
        fix = f"give 0 to {count - 1}" if count > 1 else "give 0" if found else "name another cassette"
        raise UsageError(located(where, None, f"--interaction {index}: the cassette has {have}", fix))
    return [found[index]]


def render(about: Summary, shown: list[Exchange], *, full: bool = False) -> str:
    """The text page: a header, then one block per interaction."""
    count = f"{about.interactions} interaction{'s' if about.interactions != 1 else ''}"
    origin, provider = about.origin or "origin unknown", about.provider or "provider unknown"
    head = [f"{about.name}: {origin}, {provider}, {count}"]
    head += [f"  {about.description}"] if about.description else []
    return "\n".join(head + [line for exchange in shown for line in _block(exchange, full)])


def _block(exchange: Exchange, full: bool) -> list[str]:
    line = f" (line {exchange.line})" if exchange.line else ""
    lines = ["", f"interactions[{exchange.index}]{line}: {exchange.method} {exchange.path}  "
                 f"route {exchange.route}"]
    lines += [f"  request body{_body_note(exchange)}", *_indented(_body_text(exchange, full), 4)]
    kind = "stream" if exchange.stream else (exchange.content_type or "no content-type")
    lines.append(f"  response: {exchange.status}, {kind}")
    if exchange.stream:
        lines.append(f"  events ({len(exchange.events)}): {_runs(exchange.events)}")
    return lines


def _body_note(exchange: Exchange) -> str:
    sizes = {"none": " (none)", "binary": f" ({exchange.body_bytes} bytes, not text)",
             "text": f" ({exchange.body_bytes} bytes, not JSON):", "json": ":"}
    return sizes[exchange.body_kind]


def _body_text(exchange: Exchange, full: bool) -> str:
    if exchange.body_kind == "json":
        return json.dumps(exchange.body if full else _shortened(exchange.body), indent=2, ensure_ascii=False)
    return str(exchange.body) if exchange.body_kind == "text" else ""


def _indented(text: str, width: int) -> list[str]:
    return [" " * width + line for line in text.splitlines()]


def _shortened(value: object) -> object:
    """``value`` with every string longer than :data:`LONG` cut to its head and length."""
    if isinstance(value, str) and len(value) > LONG:
        return f"{value[:LONG // 2]}… ({len(value)} characters)"
    if isinstance(value, dict):
        return {key: _shortened(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shortened(item) for item in value]
    return value


def _runs(types: tuple[str, ...]) -> str:
    """Event types in order, a run of the same type written once with its count (``x ×3``)."""
    parts = []
    for name, run in itertools.groupby(types):
        count = len(list(run))
        parts.append(name if count == 1 else f"{name} ×{count}")
    return ", ".join(parts) or "none"
