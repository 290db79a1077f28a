"""Redacting cassette files: what ``replaykit redact`` does to each file, written whole or not at all.

:func:`redact_file` loads a cassette, scrubs it (:func:`~replaykit.redact.redact`), checks that the
result scans clean, and writes it atomically: over the file (``--in-place``) or to another path
(``--out DIR``); with ``target=None`` it writes nothing (``--check``). A file whose traffic and metadata
would not change is not rewritten. The fingerprint of a redacted cassette is that of its redacted traffic
(recomputed on save), so ``replaykit verify`` finds it fresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from replaykit import cassette as cassettes
from replaykit.redact.cassette_walk import SecretFinding, redact, scan
from replaykit.redact.names import Rules

__all__ = ["FileRedaction", "redact_file", "target_of"]


@dataclass(frozen=True, slots=True)
class FileRedaction:
    """What redacting one file found and did: ``findings`` (masked), whether it ``changed`` (would change,
    under ``--check``), where it was ``written`` (None: nowhere), and ``left``: secrets still found after
    scrubbing, which refuse the write."""

    path: Path
    findings: tuple[SecretFinding, ...]
    changed: bool
    written: Path | None = None
    left: tuple[SecretFinding, ...] = ()


def redact_file(path: Path, target: Path | None, rules: Rules | None = None) -> FileRedaction:
    """Redact the cassette at ``path`` into ``target`` (``path`` itself for in place; None: only check).

    Raises :class:`~replaykit.errors.CassetteError` when the file does not load; writes nothing when a
    secret survives scrubbing (``left``).
    """
    original = cassettes.load(path, cache=False)
    found = tuple(scan(original, rules))
    clean = redact(original, rules)
    changed = _changed(original, clean)
    left = tuple(scan(clean, rules))
    if target is None or left or (not changed and target == path):
        return FileRedaction(path, found, changed, None, left)
    cassettes.save(clean, target)
    return FileRedaction(path, found, changed, target)


def _changed(before: cassettes.Cassette, after: cassettes.Cassette) -> bool:
    """True when redacting changed the traffic or the metadata (not merely how the file would be written)."""
    return (before.fingerprint() != after.fingerprint() or before.meta.extra != after.meta.extra
            or before.extra != after.extra)


def target_of(path: Path, root: Path, out: Path | None) -> Path:
    """Where ``path`` (found under ``root``, a file or a folder named on the command line) is written."""
    if out is None:
        return path
    relative = path.relative_to(root) if root.is_dir() else Path(path.name)
    return out / relative
