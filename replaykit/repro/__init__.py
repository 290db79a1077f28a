"""``replaykit repro``: a reported transcript into a scenario that replays its failure offline.

:func:`reproduce` reads the report in any form users paste (:mod:`~replaykit.repro.reported`), scrubs every
key from it, finds where it first fails (:mod:`~replaykit.repro.diagnosis`) and writes a folder
(:mod:`~replaykit.repro.bundle`): a scenario any correct harness passes, the transcript and a synthesized
cassette, so that ``replaykit run DIR`` replays it with no network and no key. Nothing is written when a key
survives the scrub (:class:`KeyLeft`). Called by ``replaykit repro``; the example and the reasoning are in
docs/architecture/repro.md and docs/jobs/reproduce.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from replaykit.errors import ReplaykitError
from replaykit.redact import SecretFinding
from replaykit.repro.bundle import SCENARIO, Bundle, build, leaks, prepare_folder, write
from replaykit.repro.diagnosis import Diagnosis, Failure, diagnose
from replaykit.repro.reported import Reported, read

__all__ = ["Diagnosis", "Failure", "KeyLeft", "Reported", "Repro", "reproduce"]


class KeyLeft(ReplaykitError):
    """A key survived the scrub: nothing was written. ``findings`` name each, masked."""

    def __init__(self, findings: list[SecretFinding]) -> None:
        shown = "; ".join(f"{f.file} {f.field}: {f.excerpt}" for f in findings[:5])
        super().__init__(f"refused to write: {len(findings)} key(s) survived redaction ({shown}); "
                         "remove them from the transcript and run again")
        self.findings = findings


@dataclass
class Repro:
    """What :func:`reproduce` did: what it read, what it found, where it wrote (``folder``: new, empty or
    an earlier repro output), the files written and the scenario file."""

    reported: Reported
    diagnosis: Diagnosis
    bundle: Bundle
    out: Path
    folder: str
    written: list[Path] = field(default_factory=list)

    @property
    def scenario(self) -> Path:
        """The scenario file written."""
        return self.out / SCENARIO


def reproduce(transcript: Path, out: Path) -> Repro:
    """Read, redact, diagnose the reported ``transcript`` and write its repro folder ``out``."""
    folder = prepare_folder(out)
    reported = read(transcript)
    diagnosis = diagnose(reported.transcript, str(transcript), reported.provider, reported.model,
                         reported.request, reported.api)
    bundle = build(reported, diagnosis)
    left = leaks(bundle)
    if left:
        raise KeyLeft(left)
    written = write(out, bundle)
    return Repro(reported, diagnosis, bundle, out, folder, written)
