"""The cassette a recording goes into: what it held before (``--mode new``), each interaction added, written
atomically (:func:`replaykit.cassette.save`) when the recorder says (:meth:`Tape.flush`), marked
``origin: recorded`` with the versions of the tools that recorded it.

A key still found in an interaction stops all writing (:attr:`Tape.refused` says why, masked); contract
violations are kept in ``replaykit: {contract_warnings: [...]}``; with no provider given, it takes it from the
routes of what it holds (``mixed`` for several). Used by :mod:`replaykit.record.recorder`.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from replaykit import cassette as cassettes
from replaykit.cassette import Cassette, Meta
from replaykit.errors import CassetteError, UsageError
from replaykit.record.capture import Checked, secrets_line, violation_line
from replaykit.routes import provider_of

__all__ = ["WARNINGS", "Tape", "recorded_with"]

WARNINGS = "contract_warnings"  # the cassette's replaykit: key listing the contract violations recorded


def recorded_with() -> str:
    """The tools that record: ``replaykit 0.1.0 record (aiohttp 3.x, Python 3.x)``."""
    import aiohttp

    version = sys.modules["replaykit"].__version__  # the package root is loaded before any of its modules
    python = platform.python_version()
    return f"replaykit {version} record (aiohttp {aiohttp.__version__}, Python {python})"


def _existing(path: Path, provider: str | None) -> Cassette:
    """The cassette at ``path`` to add to; refused when it is not a recording (never mix origins)."""
    try:
        tape = cassettes.load(path, cache=False)
    except CassetteError as exc:
        raise UsageError(f"{exc} (--mode new adds to a cassette that loads)") from exc
    if tape.meta.origin == "synthesized":
        raise UsageError(f"{path}: is synthesized (replaykit: origin: synthesized); recorded traffic is "
                         "never added to it: record into a new file")
    tape.meta.origin, tape.meta.provider = "recorded", tape.meta.provider or provider
    return tape


@dataclass(slots=True)
class Tape:
    """The cassette at ``path`` being recorded; ``keep``: start from what the file holds (``--mode new``);
    ``provider`` None: the routes of what it holds say (:func:`replaykit.routes.provider_of`)."""

    path: Path
    provider: str | None
    keep: bool = False
    say: Callable[[str], None] = print
    cassette: Cassette = field(init=False)
    refused: str | None = None
    added: int = 0
    warned: int = 0
    dirty: bool = False

    def __post_init__(self) -> None:
        if self.keep and self.path.exists():
            self.cassette = _existing(self.path, self.provider)
        else:
            self.cassette = Cassette([], Meta(origin="recorded", provider=self.provider))
        self.cassette.meta.recorded_with = recorded_with()

    def add(self, done: Checked) -> bool:
        """Add ``done`` (written by the next :meth:`flush`); False (nothing written, now or later) when a key
        survived redaction in it, or in an earlier one."""
        if self.refused is not None:
            return False
        if done.secrets:
            self.flush()  # what came before is kept
            found = secrets_line(done.secrets)
            self.refused = (f"refusing to write {self.path}: a key survived redaction ({found}); it stays as "
                            "it was before this request; rotate the key")
            self.say(self.refused)
            return False
        index = len(self.cassette.interactions)
        self.cassette.interactions.append(done.interaction)
        lines = [violation_line(index, violation) for violation in done.violations]
        if lines:
            listed = self.cassette.meta.extra.setdefault(WARNINGS, [])
            listed.extend(lines)
            self.warned += len(lines)
        self.added, self.dirty = self.added + 1, True
        return True

    def flush(self) -> bool:
        """Write the cassette atomically (never half a file) when something was added since the last write;
        True when it wrote."""
        if not self.dirty or self.refused is not None:
            return False
        if self.provider is None:
            held = [(item.request.method, item.request.uri) for item in self.cassette.interactions]
            self.cassette.meta.provider = provider_of(held)
        cassettes.save(self.cassette, self.path)
        self.dirty = False
        return True
