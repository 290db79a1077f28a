"""``python -m replaykit.reference``: run the input named by ``REPLAYKIT_INPUT``, write the outcome to
``REPLAYKIT_OUTCOME`` atomically. Exit 0 when an outcome was written (whatever its status); exit 2, with the
reason on stderr, when the environment or the input is unusable (an unknown ``REPLAYKIT_MUTANT`` lists the
known ones)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from replaykit.cassette import write_atomic
from replaykit.errors import UsageError
from replaykit.reference.defects import active
from replaykit.reference.harness import run


def main() -> int:
    """The command line entry point."""
    try:
        active()
        source, target = (os.environ.get(name) for name in ("REPLAYKIT_INPUT", "REPLAYKIT_OUTCOME"))
        if not source or not target:
            raise UsageError("set REPLAYKIT_INPUT (the input JSON) and REPLAYKIT_OUTCOME (where to write)")
        data = json.loads(Path(source).read_text(encoding="utf-8"))
    except (UsageError, OSError, ValueError) as exc:
        print(f"replaykit.reference: {exc}", file=sys.stderr)
        return 2
    outcome = run(data)
    write_atomic(Path(target), json.dumps(outcome, ensure_ascii=False, indent=1).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
