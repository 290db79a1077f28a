"""Red → green: the same scenarios on a baseline target and a candidate target.

A ``regression`` scenario must fail on the baseline (red: it reproduces the defect) and pass on the candidate
(green: the fix); a ``contract`` scenario must pass on both. A scenario n/a on either target (a capability it
lacks) is neither right nor wrong: its row says so. Each row shows, for a red, its first failing
expectation. :func:`table_lines` is the terminal table, :func:`markdown` the one for a CI job summary
(``$GITHUB_STEP_SUMMARY``), :func:`to_json` the document.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from replaykit.jsondoc import JSON
from replaykit.scenario.model import Scenario
from replaykit.scenario.runner import Result, run_jobs
from replaykit.scenario.target import Target

__all__ = ["Row", "markdown", "redgreen", "table_rows", "to_json"]


@dataclass(frozen=True)
class Row:
    """One scenario on both targets."""

    scenario: Scenario
    baseline: Result
    candidate: Result

    @property
    def expected(self) -> tuple[bool, bool]:
        """Whether it should pass on (baseline, candidate)."""
        return (self.scenario.kind == "contract", True)

    @property
    def applicable(self) -> bool:
        """True when the scenario ran on both targets."""
        return self.baseline.applicable and self.candidate.applicable

    @property
    def ok(self) -> bool:
        """True when both verdicts are the expected ones, or the scenario is n/a on a target."""
        return not self.applicable or (self.baseline.passed, self.candidate.passed) == self.expected

    def problem(self) -> str:
        """Why the row is wrong ("" when it is right or n/a)."""
        if self.ok:
            return ""
        if not self.candidate.passed:
            return "fails on the candidate"
        return "passes on the baseline: the regression is not reproduced"


def redgreen(
    scenarios: Sequence[Scenario], baseline: Target, candidate: Target, *, jobs: int = 1
) -> list[Row]:
    """Run every scenario on both targets (``jobs`` at a time); one :class:`Row` each, in order."""
    results = run_jobs([(s, t, None) for s in scenarios for t in (baseline, candidate)], jobs=jobs)
    return [Row(scenario, results[2 * n], results[2 * n + 1]) for n, scenario in enumerate(scenarios)]


def _cell(result: Result) -> str:
    return "n/a" if not result.applicable else "green" if result.passed else "red"


def _why(row: Row) -> str:
    reds = [
        (side, result)
        for side, result in (("baseline", row.baseline), ("candidate", row.candidate))
        if not result.passed
    ]
    return "; ".join(f"{side}: {result.failure_text() or result.reason}" for side, result in reds)


def table_rows(rows: Sequence[Row]) -> list[tuple[str, str, str, str, str, str]]:
    """The table: scenario, kind, baseline, candidate, verdict, first failing expectation of each red."""
    head = ("scenario", "kind", "baseline", "candidate", "verdict", "first failing expectation")
    body = [
        (
            row.scenario.name,
            row.scenario.kind,
            _cell(row.baseline),
            _cell(row.candidate),
            "n/a" if not row.applicable else "OK" if row.ok else f"WRONG ({row.problem()})",
            _why(row),
        )
        for row in rows
    ]
    return [head, *body]


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(rows: Sequence[Row], baseline: str, candidate: str) -> str:
    """The table as GitHub-flavoured Markdown, with a heading and a verdict line."""
    table = table_rows(rows)
    marks = {"red": "🔴 red", "green": "🟢 green", "n/a": "n/a"}
    lines = [
        f"### replaykit redgreen: `{_escape(baseline)}` → `{_escape(candidate)}`",
        "",
        "| " + " | ".join(table[0]) + " |",
        "|" + "---|" * len(table[0]),
    ]
    for cells in table[1:]:
        shown = [cells[0], cells[1], marks[cells[2]], marks[cells[3]], cells[4], cells[5]]
        lines.append("| " + " | ".join(_escape(cell) for cell in shown) + " |")
    wrong = sum(not row.ok for row in rows)
    lines += ["", f"{len(rows)} scenarios, {wrong} wrong: {'FAILED' if wrong else 'OK'}"]
    return "\n".join(lines) + "\n"


def to_json(rows: Sequence[Row], baseline: str, candidate: str) -> JSON:
    """``{ok, baseline, candidate, rows: [{scenario, kind, baseline, candidate, ok, problem}]}``; each side
    ``{passed, firstFailure}``."""

    def side(result: Result) -> JSON:
        first = result.first_failure
        return {"passed": result.passed, "verdict": result.verdict,
                "firstFailure": None if first is None else first.to_json()}

    return {
        "ok": all(row.ok for row in rows),
        "baseline": baseline,
        "candidate": candidate,
        "rows": [
            {
                "scenario": row.scenario.name,
                "file": str(row.scenario.path),
                "kind": row.scenario.kind,
                "baseline": side(row.baseline),
                "candidate": side(row.candidate),
                "ok": row.ok,
                "problem": row.problem(),
            }
            for row in rows
        ],
    }
