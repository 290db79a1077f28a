"""``python -m replaykit.scenario.call module:function``: a Python function as a target.

The runner runs this for ``--target python:module:function``, in a child process with the target's
environment. It reads the input JSON at ``REPLAYKIT_INPUT``, calls ``function(input) -> outcome`` and writes
the outcome, atomically, to ``REPLAYKIT_OUTCOME``. An exception escaping the function becomes an
``INTERNAL_ERROR`` outcome (its message: the exception's type and message, no traceback; the traceback goes
to stderr, which the runner shows when a scenario fails). Exit 0 once an outcome is written; 2 when the
function cannot be found or the protocol's variables are missing.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from replaykit.callables import load_callable
from replaykit.cassette import write_atomic
from replaykit.errors import UsageError
from replaykit.jsondoc import JSON

__all__ = ["internal_error", "main", "target_function"]


def internal_error(exc: BaseException) -> JSON:
    """The outcome of a target function that raised ``exc``: ``error``, ``INTERNAL_ERROR``, nothing
    persisted."""
    from replaykit.redact import safe_message  # the secret shapes, loaded only when a target fails

    text = str(exc)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return {
        "status": "error",
        "persistWrites": 0,
        "transcript": None,
        "error": {
            "code": "INTERNAL_ERROR",
            "provenance": "local",
            "retryable": False,
            "message": safe_message(message),
        },
    }


def target_function(spec: str) -> Callable[[JSON], object]:
    """The target function ``spec`` (``module:function``) names; a usage error when it cannot be found."""
    found: Callable[[JSON], object] = load_callable(
        spec, "--target python:", "replaykit.reference:run"
    )
    return found


def _variable(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        raise UsageError(
            f"{name} is not set: run this through `replaykit run --target python:mod:function`"
        )
    return Path(value)


def main(argv: Sequence[str] | None = None,
         function: Callable[[JSON], object] | None = None) -> int:
    """Run the target function named by ``argv[0]`` (see the module docstring); ``function``: that function,
    already found (a warm parent's child, :mod:`replaykit.scenario.warm`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if len(args) != 1:
            raise UsageError("usage: python -m replaykit.scenario.call module:function")
        function = function or target_function(args[0])
        source, destination = _variable("REPLAYKIT_INPUT"), _variable("REPLAYKIT_OUTCOME")
        given = json.loads(source.read_text(encoding="utf-8"))
    except (UsageError, OSError, ValueError) as exc:
        print(f"replaykit.scenario.call: error: {exc}", file=sys.stderr)
        return 2
    try:
        outcome = function(given)
    except Exception as exc:  # the target's bug: an INTERNAL_ERROR outcome, the traceback on stderr
        traceback.print_exc()
        outcome = internal_error(exc)
    write_atomic(destination, json.dumps(outcome, ensure_ascii=False).encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
