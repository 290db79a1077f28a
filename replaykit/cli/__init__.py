"""The ``replaykit`` command line: :func:`main`, its exit codes and the helpers the commands share.

Each command is its own module, ``replaykit/cli/<command>.py`` with ``register(subparsers)``, imported only
when chosen (:mod:`~replaykit.cli.parser`); this module imports only ``os`` and ``sys``. Exit codes: 0
clean, 1 findings, 2 usage, 3 internal error (a replaykit bug), 141 reader gone. An error is one line on
stderr, never a traceback (``REPLAYKIT_TRACEBACK=1`` shows it). The design: docs/architecture/cli.md.
"""

from __future__ import annotations

import os
import sys

from replaykit.cli.version import version_line

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; type checkers take it as true
if TYPE_CHECKING:
    import argparse
    from collections.abc import Collection, Sequence
    from pathlib import Path

__all__ = [
    "EXIT_FINDINGS", "EXIT_INTERNAL", "EXIT_OK", "EXIT_PIPE", "EXIT_USAGE",
    "add_max_body", "build_parser", "byte_size", "cassette_args", "main", "positive", "table",
]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_PIPE = 128 + 13  # SIGPIPE, as a shell reports a writer whose reader closed the pipe


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (:func:`replaykit.cli.parser.build_parser`)."""
    from replaykit.cli.parser import build_parser as build

    return build()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (also used by the console script)."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words == ["--version"]:  # argparse answers it too; here, before argparse is even imported
        print(version_line())
        raise SystemExit(EXIT_OK)
    from replaykit.errors import ReplaykitError, UsageError

    try:
        args = build_parser().parse_args(words)
        code: int = args.func(args)
        return code
    except UsageError as exc:
        return _fail(exc, EXIT_USAGE)
    except ReplaykitError as exc:
        return _fail(exc, EXIT_FINDINGS)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except Exception as exc:  # the CLI never shows a bare traceback
        return _fail(exc, EXIT_INTERNAL, internal=True)


def table(rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> list[str]:
    """``rows`` as aligned text lines, two spaces between columns; columns in ``right`` are right-aligned and
    the last column is left as it is (no trailing padding)."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    return ["  ".join([*(cell.rjust(width) if column in right else cell.ljust(width)
                         for column, (cell, width) in enumerate(zip(row, widths, strict=False))), row[-1]])
            for row in rows]


_SIZE = r"(\d+)\s*([kmg]i?b?)?"
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def positive(text: str) -> int:
    """An argparse type: a whole number, 1 or more (a count of jobs, of examples)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number, 1 or more")
    return value


def byte_size(text: str) -> int:
    """A positive size in bytes from ``1048576``, ``512K``, ``256M``, ``1G`` (binary units; ``MiB``, ``MB``
    and ``M`` all mean 2**20): an argparse ``type``."""
    import argparse
    import re

    match = re.fullmatch(_SIZE, text.strip(), re.IGNORECASE)
    if not match or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; write bytes, or e.g. 512K, 256M, 1G")
    return int(match[1]) * _UNITS[(match[2] or "")[:1].lower()]


def add_max_body(parser: argparse.ArgumentParser) -> None:
    """The ``--max-body SIZE`` option of the commands that read cassettes (``args.max_body``, bytes)."""
    from replaykit.cassette import MAX_BODY

    parser.add_argument("--max-body", type=byte_size, default=MAX_BODY, metavar="SIZE",
                        help=f"refuse a compressed body that decodes to more than SIZE (e.g. 512M; default "
                             f"{MAX_BODY >> 20}M): a decompression bomb is an error, not a hang")


def cassette_args(names: Sequence[str]) -> list[Path]:
    """The cassettes named on the command line, each found by :func:`replaykit.resources.find_cassette`
    (as given, else among the bundled cassettes: then a note on stderr says which file is used)."""
    from pathlib import Path

    from replaykit.resources import find_cassette

    found = [find_cassette(name) for name in names]
    for name, path in zip(names, found, strict=True):
        if path != Path(name):
            print(f"replaykit: {name}: not found here; using the bundled {path}", file=sys.stderr)
    return found


def _closed_pipe() -> int:
    """The reader closed stdout: stop quietly (point stdout at /dev/null so the interpreter's final flush
    does not complain again)."""
    import contextlib

    with contextlib.suppress(OSError, ValueError):  # stdout is not a file (captured in tests)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_PIPE


def _fail(exc: BaseException, code: int, internal: bool = False) -> int:
    from replaykit.cli.parser import CommandLineError
    from replaykit.redact import safe_message

    if os.environ.get("REPLAYKIT_TRACEBACK"):
        import traceback

        traceback.print_exception(exc)
    label = "internal error" if internal else "error"
    hint = " (a replaykit bug: rerun with REPLAYKIT_TRACEBACK=1 and report it)" if internal else ""
    text = safe_message(str(exc)) if internal else str(exc)  # ours are written safe; a bug's may hold a key
    prog = exc.prog if isinstance(exc, CommandLineError) else "replaykit"
    print(f"{prog}: {label}: {text}{hint}", file=sys.stderr)
    return code
