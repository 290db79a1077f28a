"""What changed since an earlier qualification report (``replaykit qualify --baseline-report FILE``).

:func:`load_report` reads the earlier ``report.json`` (bounded, valid by its contract, else a usage error
naming the file, the JSON pointer and the fix); :func:`compare` gives, against the report being written, the
version changes, the verdict changes (those flipped between passing and failing first) and the input files'
hash changes. Called by :mod:`replaykit.qualify`; the rules are in docs/architecture/qualify.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replaykit import contracts
from replaykit.errors import UsageError, located
from replaykit.jsondoc import JSON

__all__ = ["MAX_REPORT", "PASSING", "check_json", "compare", "flipped", "load_report", "read_json"]

MAX_REPORT = 64 << 20  # bytes: a report is a few hundred KiB; more is not a report
PASSING = frozenset({"pass", "killed", "info", "explained", "skipped"})
_KIND = "replaykit.qualification-report"
_FIX = "give the report.json an earlier `replaykit qualify` wrote"


def load_report(path: Path) -> JSON:
    """The report at ``path``, checked (see the module docstring)."""
    report = read_json(path, _FIX, "baseline report")
    check_json(path, report, _KIND, "a qualification report", _FIX)
    result: JSON = report
    return result


def read_json(path: Path, fix: str, what: str = "report") -> Any:
    """The JSON document in the report file at ``path`` (at most :data:`MAX_REPORT` bytes of UTF-8); else a
    usage error naming the file, the line and ``fix``."""
    try:
        size = path.stat().st_size
        if not path.is_file() or size > MAX_REPORT:
            why = "not a file" if not path.is_file() else f"{size} bytes, more than a report ({MAX_REPORT})"
            raise UsageError(located(path, None, why, fix))
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(located(path, None, f"cannot read the {what}: {exc.strerror}", fix)) from exc
    except UnicodeDecodeError as exc:
        raise UsageError(located(path, None, "not UTF-8 text", fix)) from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        raise UsageError(located(path, line, f"not JSON: {exc}", fix)) from exc


def check_json(path: Path, doc: object, kind: str, what: str, fix: str) -> None:
    """Refuse ``doc`` (read from ``path``) unless it is valid by the contract ``kind``: a usage error naming
    the file, the JSON pointer and ``fix``."""
    found = [v for v in contracts.validate(kind, doc) if v.severity == "error"]
    if found:
        first = found[0]
        raise UsageError(located(path, first.pointer or "/", f"not {what}: {first.message}", fix))


def _versions(report: JSON) -> dict[str, str | None]:
    versions: dict[str, str | None] = dict(report["environment"]["packages"])
    versions.update(replaykit=report["replaykitVersion"], python=report["environment"]["python"])
    return versions


def _dependencies(before: JSON, after: JSON) -> list[JSON]:
    old, new = _versions(before), _versions(after)
    return [
        {"name": name, "from": old.get(name), "to": new.get(name)}
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    ]


def _verdicts(report: JSON) -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    for section, result in report["sections"].items():
        found[(section, section)] = result["status"]
        found.update({(section, name): verdict for name, verdict in result.get("verdicts", {}).items()})
    return found


def flipped(was: str | None, now: str | None) -> bool:
    """True when a verdict went from passing to failing or back (see :data:`PASSING`)."""
    return was is not None and now is not None and (was in PASSING) != (now in PASSING)


def _verdict_changes(before: JSON, after: JSON) -> list[JSON]:
    old, new = _verdicts(before), _verdicts(after)
    keys = sorted(old.keys() | new.keys(), key=lambda key: (key[0], key[0] != key[1], key[1]))
    changes = [
        {
            "section": section,
            "name": name,
            "from": old.get((section, name)),
            "to": new.get((section, name)),
            "flipped": flipped(old.get((section, name)), new.get((section, name))),
        }
        for section, name in keys
        if old.get((section, name)) != new.get((section, name))
    ]
    return sorted(changes, key=lambda change: not change["flipped"])  # stable: flipped first


def _hashes(report: JSON) -> dict[tuple[str, str], str]:
    found = {
        (group, path): digest for group, files in report["hashes"].items() for path, digest in files.items()
    }
    for role, group in (("candidate", "target"), ("estimator", "estimator")):
        subject = report["subject"].get(role) or {}
        found.update({(group, path): digest for path, digest in subject.get("files", {}).items()})
    return found


def _hash_changes(before: JSON, after: JSON) -> list[JSON]:
    old, new = _hashes(before), _hashes(after)
    return [
        {"group": group, "path": path, "from": old.get((group, path)), "to": new.get((group, path))}
        for group, path in sorted(old.keys() | new.keys())
        if old.get((group, path)) != new.get((group, path))
    ]


def compare(before: JSON, after: JSON, file: str) -> tuple[list[JSON], JSON]:
    """``(dependencies, changes)`` of the report ``after`` against the earlier ``before`` read from
    ``file`` (see the module docstring)."""
    changes = {
        "baseline": {"file": file, "generatedAt": before["generatedAt"], "verdict": before["verdict"]},
        "verdicts": _verdict_changes(before, after),
        "hashes": _hash_changes(before, after),
    }
    return _dependencies(before, after), changes
