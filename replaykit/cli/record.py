"""``replaykit record --upstream URL --provider P --cassette FILE``: a recording reverse proxy on loopback.

Owns the command's arguments and what it prints: the base URL for the SDK (``--json``: as ``serve
--json``), contract violations as found, a summary on stderr at SIGINT or SIGTERM; the proxy and its modes
are :mod:`replaykit.record.proxy`. ``--check`` forwards and checks without writing. Exit 0 when done; 1 on a
contract error under ``--check``, a key that survived redaction, an unreachable upstream or a recorder that
stopped; 2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from replaykit.cli import EXIT_FINDINGS, EXIT_OK
from replaykit.cli.serve import _port, until_signalled
from replaykit.contracts import PROFILES
from replaykit.record import RecordingProxy
from replaykit.record.options import ALIASES, MODE_ENV, MODES, record_mode
from replaykit.routes import PROVIDERS

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``record`` subcommand."""
    parser = subparsers.add_parser(
        "record",
        description="Forward each request to --upstream and stream the answer back as it arrives, recording "
                    "it redacted and checked against the contracts, until SIGINT or SIGTERM. Exit 0 when "
                    "done, 1 when --check finds a contract error, a key survives redaction or the upstream "
                    "cannot be reached, 2 on usage errors.")
    parser.add_argument("--upstream", metavar="URL",
                        help="the API to forward to, e.g. https://api.anthropic.com (not needed with --mode "
                             "none)")
    parser.add_argument("--provider", choices=PROVIDERS, required=True,
                        help="whose API it is: the base URL printed, the error envelopes, the cassette's "
                             "provider")
    parser.add_argument("--cassette", metavar="FILE", help="the cassette to write (not needed with --check)")
    parser.add_argument("--mode", choices=[*MODES, *ALIASES], default=None,
                        help=f"once (default, or ${MODE_ENV}): record into a new file, refuse an existing "
                             "one; new (new_episodes): replay what the file holds, record what it does not; "
                             "all: record everything again; none: only replay, forward nothing")
    parser.add_argument("--check", action="store_true",
                        help="forward and check every exchange against the contracts, write nothing; exit 1 "
                             "on a contract error (the live contract test)")
    parser.add_argument("--port", type=_port, default=0, help="port to listen on (default 0: a free port)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="loopback address to listen on (default 127.0.0.1)")
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None,
                        help="contract profile: strict (default) or openai-compatible")
    parser.add_argument("--json", action="store_true", help="print the base URLs as one JSON line")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Record until SIGINT / SIGTERM; the summary, and the exit code."""
    mode = record_mode(args.mode, "--mode") if args.mode else _mode_from_env()
    proxy = RecordingProxy(args.cassette, upstream=args.upstream, provider=args.provider, mode=mode,
                           check=args.check, host=args.host, port=args.port, profile=args.profile)
    until_signalled(proxy, lambda: _announce(proxy, args.json))
    proxy.check_errors()
    return _summary(proxy)


def _mode_from_env() -> str:
    """The mode ``REPLAYKIT_RECORD_MODE`` names, else ``once``."""
    value = os.environ.get(MODE_ENV, "")
    return record_mode(value, MODE_ENV) if value.strip() else "once"


def _announce(proxy: RecordingProxy, as_json: bool) -> None:
    if as_json:
        print(json.dumps(proxy.base_urls()), flush=True)
        return
    print(f"{proxy.provider:<11} {proxy.base_url()}")
    print(f"{'upstream':<11} {proxy.upstream or '(none: replay only)'}")
    written = proxy.path if proxy.tape is not None else "(none: nothing written)"
    print(f"{'cassette':<11} {written}", flush=True)


def _summary(proxy: RecordingProxy) -> int:
    tally, tape = proxy.tally, proxy.tape
    written = f", {tally.recorded} recorded into {tape.path}" if tape is not None else ""
    why = proxy.problems()
    print(f"replaykit record: {tally.requests} requests, {tally.replayed} replayed{written}, "
          f"{tally.errors} contract errors, {tally.warnings} warnings, {tally.incomplete} not recorded "
          f"(incomplete)" + (f"; exit 1: {', '.join(why)}" if why else ""),
          file=sys.stderr)
    return EXIT_FINDINGS if why else EXIT_OK
