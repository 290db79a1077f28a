"""A finding: one problem replaykit found in someone's input, whichever check found it.

``replaykit verify``, :mod:`replaykit.search`, :mod:`replaykit.citations` and :mod:`replaykit.drift` all
report :class:`Finding` s, so a finding prints, serializes and fails a run the same way everywhere:
``severity`` (``error`` fails the check; ``warning``, ``info`` and ``expected`` do not), ``code``, ``file``,
``place``, ``fix`` and ``note``. The fields are described in docs/architecture/modules.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["SEVERITIES", "Finding", "Severity", "errors_only"]

Severity = Literal["error", "warning", "info", "expected"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info", "expected")


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: ``file:place: code: message; fix`` (see the module docstring)."""

    severity: Severity
    code: str
    message: str
    file: str = ""
    place: str = ""
    fix: str = ""
    note: str = ""

    @classmethod
    def at(cls, pointer: str, severity: Severity, code: str, message: str) -> Finding:
        """A finding at a JSON pointer of the document checked (the file is the caller's)."""
        return cls(severity, code, message, place=pointer)

    def __str__(self) -> str:
        where = ":".join(part for part in (self.file, self.place) if part) or "/"
        fix = f"; {self.fix}" if self.fix else ""
        tail = "" if self.severity == "error" else f" ({self.severity})"
        return f"{where}: {self.code}: {self.message}{fix}{tail}"

    def to_json(self) -> dict[str, str]:
        """The finding as a JSON object (every field, empty strings included)."""
        return {"severity": self.severity, "code": self.code, "message": self.message, "file": self.file,
                "place": self.place, "fix": self.fix, "note": self.note}


def errors_only(findings: Iterable[Finding]) -> list[Finding]:
    """The findings of severity ``error``."""
    return [finding for finding in findings if finding.severity == "error"]
