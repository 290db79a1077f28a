"""The argument parser of ``replaykit``: each subcommand is registered when the command line chooses it.

``replaykit --help`` lists every command from :data:`COMMANDS` (its help line) without importing one;
``replaykit verify ...`` imports :mod:`replaykit.cli.verify` alone, whose ``register`` adds
the command's arguments before argparse reads them. A refused command line raises a
:class:`~replaykit.errors.UsageError` naming the command it was given to, never exits.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from replaykit.cli.version import version_line
from replaykit.errors import UsageError

__all__ = ["COMMANDS", "CommandLineError", "build_parser"]

# Each command and its line in ``replaykit --help``; its module is replaykit/cli/<command>.py, whose
# register(subparsers) adds it, imported when the command is chosen (see _Commands).
COMMANDS: dict[str, str] = {
    "serve": "serve cassettes on loopback as a fake Anthropic / OpenAI / Azure / Cloudflare API",
    "verify": "check cassettes for parse errors, secrets, SSE framing and contract violations",
    "show": "print what a cassette expects and answers: requests, streams, event types",
    "cassettes": "list the bundled cassettes: provider, route, stream, origin, description",
    "redact": "scrub keys, tokens and credentials from cassettes",
    "drift": "compare the contracts with the installed SDKs' models",
    "properties": "check a token estimator against the replay-aware property suite",
    "run": "run scenarios on a target and check their expectations",
    "mutants": "run scenarios on every mutant of a target: the kill matrix",
    "redgreen": "regression scenarios red on a baseline and green on a candidate",
    "qualify": "qualify a target and an estimator on this environment: every check, one report",
    "record": "record a new cassette through a loopback reverse proxy to the real API",
    "merge": "join the reports of the shards of a run, mutants or qualify (--shard K/N) into one",
    "explore": "run a scenario under every fault its recording offers; write what fails",
    "repro": "turn a reported transcript into a scenario that replays its failure offline",
}


class CommandLineError(UsageError):
    """A command line argparse refused; ``prog`` is the command it was given to (``replaykit serve``)."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise CommandLineError(self.prog, message)


if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = argparse._SubParsersAction  # not subscriptable at run time


class _Commands(_SubParsers):
    """The subcommands: each starts as an empty parser holding its help line, and is registered by its
    module's ``register`` when the command line chooses it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unregistered: set[str] = set()
        for name, help_line in COMMANDS.items():
            super().add_parser(name, help=help_line)
            self._unregistered.add(name)

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if name in self._unregistered:  # replaces the empty parser; its help line is listed already
            self._unregistered.discard(name)
            del self._name_parser_map[name]
        return super().add_parser(name, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[object] | None, option_string: str | None = None) -> None:
        if values and values[0] in self._unregistered:  # values: the command's name, then its arguments
            importlib.import_module(f"replaykit.cli.{values[0]}").register(self)
        super().__call__(parser, namespace, values, option_string)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; a subcommand's arguments are registered when it is chosen."""
    parser = _Parser(prog="replaykit", description="Offline replay and contract checks for LLM harnesses.")
    parser.add_argument("--version", action="version", version=version_line())
    parser.add_subparsers(dest="command", required=True, parser_class=_Parser, action=_Commands)
    return parser
