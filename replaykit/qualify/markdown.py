"""``report.md``: the qualification report as Markdown tables, ready for a CI job summary
(``$GITHUB_STEP_SUMMARY``), rendered from ``report.json``'s document alone.

Order: the verdict and what failed; then, with a baseline report, what changed since it, the verdicts that
flipped first; the checks; each failure; the environment (versions, target, estimator) and the inputs'
manifests (files and a hash over each group; every file's hash is in ``report.json``).
"""

from __future__ import annotations

from collections.abc import Sequence

from replaykit.jsondoc import JSON
from replaykit.qualify import identity

__all__ = ["MAX_CELL", "render"]

MAX_CELL = 400  # characters of a message in a table cell (report.json has it whole)
_MARK = {"pass": "✅ pass", "fail": "❌ fail", "skipped": "⏭️ skipped"}


def _cell(text: object) -> str:
    value = "—" if text is None else str(text)
    value = " ".join(value.split()).replace("|", "\\|")
    return value if len(value) <= MAX_CELL else value[: MAX_CELL - 1] + "…"


def _code(text: object) -> str:
    return "—" if text is None else "`" + _cell(text).replace("`", "'") + "`"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    return [*lines, *("| " + " | ".join(row) + " |" for row in rows), ""]


def _failed(doc: JSON) -> list[str]:
    return [name for name, section in doc["sections"].items() if section["status"] == "fail"]


def _head(doc: JSON) -> list[str]:
    verdict = "PASS" if doc["verdict"] == "pass" else "FAIL"
    lines = [f"# replaykit qualify: {verdict}", ""]
    target = doc["subject"]["candidate"]["label"]
    lines.append(f"Target {_code(target)}, replaykit {doc['replaykitVersion']}, {doc['generatedAt']}.")
    failed = _failed(doc)
    if failed:
        lines.append(f"**Failed: {', '.join(failed)}.**")
    return [*lines, ""]


def _changes(doc: JSON) -> list[str]:
    changes = doc.get("changes")
    if not changes:
        return []
    base = changes["baseline"]
    lines = [
        "## Changes since the baseline report",
        "",
        f"Baseline: {_code(base['file'])} ({base['generatedAt']}, {base['verdict']}).",
        "",
    ]
    flips = [c for c in changes["verdicts"] if c["flipped"]]
    others = [c for c in changes["verdicts"] if not c["flipped"]]
    if flips:
        lines += [
            "### Verdicts that flipped",
            "",
            *_table(["check", "what", "was", "now"], [_verdict_row(c) for c in flips]),
        ]
    else:
        lines += ["No verdict flipped.", ""]
    if others:
        lines += [
            "### Other verdict changes",
            "",
            *_table(["check", "what", "was", "now"], [_verdict_row(c) for c in others]),
        ]
    versions = [[_code(d["name"]), _cell(d["from"]), _cell(d["to"])] for d in doc["dependencies"]]
    lines += [
        "### Versions",
        "",
        *(_table(["package", "was", "now"], versions) if versions else ["No version changed.", ""]),
    ]
    hashes = [[_cell(h["group"]), _code(h["path"]), _change(h)] for h in changes["hashes"]]
    lines += [
        "### Input files",
        "",
        *(_table(["group", "file", "change"], hashes) if hashes else ["No input file changed.", ""]),
    ]
    return lines


def _verdict_row(change: JSON) -> list[str]:
    return [_cell(change["section"]), _code(change["name"]), _cell(change["from"]), _cell(change["to"])]


def _change(change: JSON) -> str:
    if change["from"] is None:
        return "added"
    return "removed" if change["to"] is None else f"changed ({change['from'][7:19]}… → {change['to'][7:19]}…)"


def _checks(doc: JSON) -> list[str]:
    rows = [
        [
            name,
            _MARK[section["status"]],
            _cell(section.get("summary") or section.get("reason") or _counts(section["counts"])),
            f"{section.get('seconds', 0):.1f} s",
        ]
        for name, section in doc["sections"].items()
    ]
    return ["## Checks", "", *_table(["check", "result", "summary", "time"], rows)]


def _counts(counts: JSON) -> str:
    return ", ".join(f"{value} {name}" for name, value in counts.items()) or "—"


def _failures(doc: JSON) -> list[str]:
    lines: list[str] = []
    for name in _failed(doc):
        failures = doc["sections"][name]["failures"]
        rows = [[_code(f["name"]), _cell(f["message"]), _code(f.get("where"))] for f in failures]
        lines += [f"### {name}: {len(failures)} failure(s)", "", *_table(["what", "why", "where"], rows)]
    return ["## Failures", "", *lines] if lines else []


def _target_rows(role: str, target: JSON | None) -> list[list[str]]:
    if not target:
        return []
    rows = [[role, _code(target["label"])]]
    if target.get("revision"):
        rows.append([f"{role} revision", _code(target["revision"])])
    rows += [
        [f"{role} file", f"{_code(path)} {_code(digest[:19] + '…')}"]
        for path, digest in target.get("files", {}).items()
    ]
    return rows


def _environment(doc: JSON) -> list[str]:
    env = doc["environment"]
    rows = [["Python", _cell(env["python"])], ["platform", _cell(env["platform"])]]
    rows += _target_rows("target", doc["subject"]["candidate"])
    rows += _target_rows("estimator", doc["subject"].get("estimator"))
    packages = [[_code(name), _cell(version or "not installed")] for name, version in env["packages"].items()]
    return ["## Environment", "", *_table(["", ""], rows), *_table(["package", "version"], packages)]


def _inputs(doc: JSON) -> list[str]:
    rows = []
    for group, files in doc["hashes"].items():
        rows.append([group, str(len(files)), _code(f"{identity.manifest_hash(files)[:23]}…")])
    return [
        "## Inputs",
        "",
        "Each group's hash is over its manifest (`path hash` lines); report.json lists every file's SHA-256.",
        "",
        *_table(["group", "files", "manifest hash"], rows),
    ]


def render(doc: JSON) -> str:
    """The Markdown report of ``doc`` (a report.json document)."""
    lines = [*_head(doc), *_changes(doc), *_checks(doc), *_failures(doc), *_environment(doc), *_inputs(doc)]
    return "\n".join(lines).rstrip() + "\n"
