"""``replaykit serve CASSETTE...``: the loopback fake provider, for an application in any language.

Owns the command's arguments (journal, faults, timeouts, connection bounds) and what it prints: each
provider's base URL (``--json``: one line), a line per unmatched request, a summary on stderr at SIGINT or
SIGTERM; the server is :mod:`replaykit.server`. Exit 0 after a clean shutdown; 1 when a request matched no
interaction or an interaction was never served (unless ``--allow-unused``); 2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, add_max_body, cassette_args, positive
from replaykit.contracts import PROFILES
from replaykit.errors import CassetteError, UsageError
from replaykit.server import Entry, FakeProvider, Fault, load_faults
from replaykit.server.connections import BODY_DEADLINE, BODY_TIMEOUT, HEADER_TIMEOUT, MAX_CONNECTIONS
from replaykit.server.faults import kinds_help
from replaykit.server.journal import JOURNAL_BODIES, WINDOW
from replaykit.server.matching import BUILTIN_MATCHERS
from replaykit.server.seam import ADMIN_PREFIX

__all__ = ["register", "run"]


def _port(text: str) -> int:
    """An argparse type: a TCP port number, 0-65535 (0 picks a free port)."""
    fix = "give a port number in 0-65535 (0: a free port)"
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}; {fix}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is out of range; {fix}")
    return port


def register(subparsers: Any) -> None:
    """Add the ``serve`` subcommand."""
    parser = subparsers.add_parser(
        "serve",
        description="Replay cassettes from a loopback fake provider until SIGINT or SIGTERM. Prints each "
                    "provider's base URL; journals each request as it completes.",
        epilog="\n".join(kinds_help()), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cassettes", nargs="+", metavar="CASSETTE",
                        help="a cassette file or folder (else a bundled one: see replaykit cassettes)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=0, help="port to bind (default 0: a free port)")
    parser.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    parser.add_argument("--faults", metavar="FILE", help="a YAML or JSON list of fault objects")
    parser.add_argument("--fault", action="append", default=[], metavar="SPEC",
                        help="a fault, e.g. route=anthropic,nth=1,status=429,retry_after=0 (repeatable)")
    parser.add_argument("--journal", metavar="FILE",
                        help="write the journal here, one JSON line per request as each request completes "
                             "(the file is emptied at start)")
    parser.add_argument("--journal-bodies", choices=JOURNAL_BODIES, default="head",
                        help="head (default): journal the first 64 KiB of each request body, with the length "
                             "and SHA-256 of the whole; full: every byte")
    parser.add_argument("--journal-window", type=positive, default=WINDOW, metavar="N",
                        help=f"keep the last N journal entries in memory, for GET {ADMIN_PREFIX}/journal "
                             f"(default {WINDOW}; its x-replaykit-journal-dropped header counts the others; "
                             "--journal gets every entry)")
    parser.add_argument(
        "--timing",
        default="fast",
        help="fast (default: at once, in few writes), recorded, or fixed:<ms> (fixed:0: one write per event)",
    )
    parser.add_argument("--enforce-contracts", action="store_true",
                        help="answer a request that breaks its contract with the provider's 400")
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None,
                        help="contract profile: strict, or openai-compatible for xAI / OpenRouter / DeepSeek "
                             "traffic (OpenAI-only rules become warnings); default: what the cassettes "
                             "declare, else strict")
    parser.add_argument("--strict", action="store_true", help="a request body must equal the recorded one")
    parser.add_argument("--match-on", default="", metavar="LIST",
                        help=f"comma-separated matchers among {', '.join(BUILTIN_MATCHERS)}")
    parser.add_argument("--repeat", action="store_true", help="serve interactions again once all are used")
    parser.add_argument("--header-timeout", type=float, default=HEADER_TIMEOUT, metavar="SECONDS",
                        help="close a connection that has not sent a request's headers this long after "
                             f"opening or after its previous response (default {HEADER_TIMEOUT:g})")
    parser.add_argument("--body-timeout", type=float, default=BODY_TIMEOUT, metavar="SECONDS",
                        help="answer 408 when a request body pauses this long between two reads "
                             f"(default {BODY_TIMEOUT:g})")
    parser.add_argument("--body-deadline", type=float, default=BODY_DEADLINE, metavar="SECONDS",
                        help="answer 408 when a request body is not whole this long after its headers, "
                             f"however steadily it trickles (default {BODY_DEADLINE:g})")
    parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS, metavar="N",
                        help=f"answer 503 to a connection beyond N open ones (default {MAX_CONNECTIONS})")
    add_max_body(parser)
    parser.add_argument("--no-lane", dest="lane", action="store_false",
                        help="serve every request through aiohttp (no fast path for plain requests; the same "
                             "bytes, more CPU per request)")
    parser.add_argument("--json", action="store_true", help="print the base URLs as one JSON line")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print a line per request on stderr as it completes: method, path, status, the "
                             "interaction served or the nearest one missed, faults")
    parser.add_argument("--allow-unused", action="store_true",
                        help="exit 0 although some interactions were never served (an unmatched request "
                             "still exits 1)")
    parser.set_defaults(func=run)


def _faults(args: argparse.Namespace) -> list[Fault]:
    faults = load_faults(args.faults) if args.faults else []
    return faults + [Fault.parse(spec) for spec in args.fault]


def build(args: argparse.Namespace, watch: Callable[[Entry], None] | None = None) -> FakeProvider:
    """The fake provider the command line describes (not started); ``watch`` gets each entry."""
    match_on = [name.strip() for name in args.match_on.split(",") if name.strip()]
    try:
        return FakeProvider(cassette_args(args.cassettes), host=args.host, port=args.port, timing=args.timing,
                            strict=args.strict, enforce_contracts=args.enforce_contracts,
                            allow_remote=args.allow_remote, match_on=match_on, repeat=args.repeat,
                            faults=_faults(args), profile=args.profile, journal_file=args.journal,
                            journal_bodies=args.journal_bodies, journal_window=args.journal_window,
                            header_timeout=args.header_timeout,
                            body_timeout=args.body_timeout, body_deadline=args.body_deadline,
                            max_connections=args.max_connections,
                            max_body=args.max_body, watch=watch, lane=args.lane)
    except CassetteError as exc:  # a cassette named on the command line: the user's input, exit 2
        raise UsageError(str(exc)) from exc


def _announce(fake: FakeProvider, as_json: bool) -> None:
    urls = fake.base_urls()
    if as_json:
        print(json.dumps(urls), flush=True)
        return
    for provider, url in urls.items():
        print(f"{provider:<11} {url}")
    print(f"journal     {fake.url}{ADMIN_PREFIX}/journal", flush=True)


class _Served(Protocol):
    def start(self) -> object: ...
    def stop(self) -> None: ...


def until_signalled(server: _Served, announce: Callable[[], None]) -> None:
    """Start ``server``, ``announce()`` it, serve until SIGINT / SIGTERM, then stop it (``serve`` and
    ``record``)."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        try:
            announce()
            while not stop.wait(1.0):
                pass
        finally:
            server.stop()
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass(slots=True)
class _Tally:
    """Each entry as its request completes (called in the server thread): counted over the whole run, and
    printed on stderr when ``verbose``, or when no interaction answered or one with another body did."""

    verbose: bool
    requests: int = 0
    unmatched: int = 0

    def __call__(self, entry: Entry) -> None:
        self.requests += 1
        self.unmatched += entry.verdict == "unmatched"
        if self.verbose or entry.verdict == "unmatched" or entry.diff:
            print(f"replaykit serve: {entry.summary()}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT / SIGTERM (the journal file, opened at start, is written as requests complete)."""
    tally = _Tally(args.verbose)
    fake = build(args, tally)
    until_signalled(fake, lambda: _announce(fake, args.json))
    code = _summary(fake, tally, args.allow_unused)
    fake.check_errors()
    return code


def _summary(fake: FakeProvider, tally: _Tally, allow_unused: bool) -> int:
    """Print the one-line summary of the run, with why it exits 1 if it does; the exit code."""
    unused = len(fake.unused(session=True))
    why = [f"{_many(tally.unmatched, 'request')} matched no interaction"] if tally.unmatched else []
    if unused and not allow_unused:
        why.append(f"{_many(unused, 'interaction')} never served (pass --allow-unused to allow that)")
    print(f"replaykit serve: {_many(tally.requests, 'request')}, {tally.unmatched} unmatched, "
          f"{_many(unused, 'interaction')} never served" + (f"; exit 1: {', '.join(why)}" if why else ""),
          file=sys.stderr)
    return EXIT_FINDINGS if why else EXIT_OK


def _many(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
