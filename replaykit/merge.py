"""Joining shard reports (``replaykit merge``): the N JSON reports of ``run``, ``mutants`` or ``qualify`` run
with ``--shard K/N`` become the report one unsharded run writes.

:func:`read` loads a report (bounded, valid by its contract, with a ``shard`` block; else a
:class:`~replaykit.errors.UsageError`); :func:`merge` refuses reports of different commands or inputs and a
shard missing or given twice, then joins them. The verdicts are decided again by
:mod:`replaykit.scenario.report`, :class:`~replaykit.scenario.mutants.Matrix` and
:mod:`replaykit.qualify.stages`, never re-implemented here.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replaykit.errors import UsageError
from replaykit.jsondoc import JSON
from replaykit.qualify import baseline, stages
from replaykit.scenario import report as reports
from replaykit.scenario.mutants import Matrix
from replaykit.scenario.runner import Result

__all__ = ["KINDS", "Merged", "ShardReport", "merge", "read"]

KINDS = {"run": "run-report", "mutants": "kill-matrix", "qualify": "qualification-report"}
_FIX = "give the JSON reports that replaykit run, mutants or qualify wrote with --shard K/N"


@dataclass(frozen=True)
class ShardReport:
    """One shard's report as read: its file, its document and its ``shard`` block."""

    path: Path
    doc: JSON

    @property
    def shard(self) -> JSON:
        """The ``shard`` block (command, index, count, inputs, total, positions)."""
        block: JSON = self.doc["shard"]
        return block


def _kind(doc: object) -> str:
    """The command whose report ``doc`` looks like (checked against that command's contract next)."""
    if isinstance(doc, dict) and isinstance(doc.get("shard"), dict) and doc["shard"].get("command") in KINDS:
        return str(doc["shard"]["command"])
    if isinstance(doc, dict) and "sections" in doc:
        return "qualify"
    return "mutants" if isinstance(doc, dict) and "survivors" in doc else "run"


def read(path: Path) -> ShardReport:
    """The shard report at ``path``, checked (see the module docstring)."""
    doc = baseline.read_json(path, _FIX)
    kind = _kind(doc)
    baseline.check_json(path, doc, f"replaykit.{KINDS[kind]}", f"a {kind} report", _FIX)
    if "shard" not in doc:
        raise UsageError(f"{path}: not a shard's report (no /shard); run replaykit {kind} with --shard K/N "
                         "and merge the reports of all N shards")
    return ShardReport(path, doc)


def _refuse_foreign(shards: Sequence[ShardReport]) -> None:
    first = shards[0]
    for other in shards[1:]:
        if other.shard["command"] != first.shard["command"]:
            raise UsageError(f"{first.path} is a {first.shard['command']} report and {other.path} a "
                             f"{other.shard['command']} report; merge the shards of one run")
        if other.shard["inputs"] != first.shard["inputs"]:
            raise UsageError(f"{first.path} and {other.path} are shards of different inputs (their manifest "
                             f"hashes differ: {first.shard['inputs'][:19]}… and "
                             f"{other.shard['inputs'][:19]}…); merge the N shards of one run")


def _refuse_gaps(shards: Sequence[ShardReport]) -> None:
    count = shards[0].shard["count"]
    seen: dict[int, Path] = {}
    for report in shards:
        index = report.shard["index"]
        if index in seen:
            raise UsageError(f"shard {index}/{count} is given twice: {seen[index]} and {report.path}; give "
                             "each shard's report once")
        seen[index] = report.path
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing:
        given = ", ".join(f"{k}/{count}" for k in sorted(seen))
        what = f"shard {missing[0]} is" if len(missing) == 1 else f"shards {', '.join(missing)} are"
        raise UsageError(f"{what} missing (given: {given}); merge the reports of all {count} shards")


def _in_order(shards: Sequence[ShardReport], items: Sequence[Sequence[object]]) -> list[Any]:
    """Each shard's ``items`` (in the order of its positions) joined in the scenarios' order."""
    placed = [(position, item) for report, mine in zip(shards, items, strict=True)
              for position, item in zip(report.shard["positions"], mine, strict=True)]
    return [item for _, item in sorted(placed, key=lambda pair: pair[0])]


@dataclass
class Merged:
    """The joined report: the command, its document (valid by its contract), the scenarios' results (run and
    qualify) and the kill matrix (mutants, and qualify when it ran)."""

    command: str
    doc: JSON
    results: list[Result] = field(default_factory=list)
    matrix: Matrix | None = None

    @property
    def passed(self) -> bool:
        """The joined verdict."""
        key = {"run": "passed", "mutants": "ok"}.get(self.command)
        return bool(self.doc[key]) if key else self.doc["verdict"] == "pass"


def _run(shards: Sequence[ShardReport]) -> Merged:
    rows = _in_order(shards, [report.doc["results"] for report in shards])
    results = [Result.from_json(row) for row in rows]
    return Merged("run", dict(reports.to_json(results)), results)


def _matrix(docs: Sequence[JSON], shards: Sequence[ShardReport]) -> Matrix:
    rows = _in_order(shards, [doc["scenarios"] for doc in docs])
    return Matrix.from_json({**docs[0], "scenarios": rows})


def _mutants(shards: Sequence[ShardReport]) -> Merged:
    matrix = _matrix([report.doc for report in shards], shards)
    return Merged("mutants", matrix.to_json(), matrix=matrix)


def _qualify(shards: Sequence[ShardReport]) -> Merged:
    first = next(report for report in shards if report.shard["index"] == 1).doc
    sections = dict(first["sections"])
    parts = [report.doc.get("shardResults") for report in shards]
    results: list[Result] = []
    matrix = None
    if all(part is not None for part in parts):  # else the scenarios did not load: shard 1 says why
        results = [Result.from_json(row) for row in _in_order(shards, [p["scenarios"] for p in parts if p])]
        spec = first["subject"]["candidate"]["label"]
        section = stages.scenarios_verdict(results, spec, _seconds(shards, "scenarios"))
        sections["scenarios"] = section.to_json()
        matrices = [part["matrix"] for part in parts if part is not None and part["matrix"] is not None]
        if len(matrices) == len(shards):  # else no mutants, or a kills: name unknown: shard 1 says so
            matrix = _matrix(matrices, shards)
            sections["mutants"] = stages.matrix_verdict(matrix, _seconds(shards, "mutants")).to_json()
    failed = any(section["status"] == "fail" for section in sections.values())
    doc = {key: value for key, value in first.items() if key not in ("shard", "shardResults")}
    doc.update(verdict="fail" if failed else "pass", sections=sections, changes=None, dependencies=[],
               generatedAt=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return Merged("qualify", doc, results, matrix)


def _seconds(shards: Sequence[ShardReport], section: str) -> float:
    """The seconds the shards' ``section`` took, all told."""
    return float(sum(report.doc["sections"][section].get("seconds", 0) for report in shards))


def merge(shards: Sequence[ShardReport], baseline_report: Path | None = None) -> Merged:
    """Join ``shards`` (all N of one run, any order) into one report; ``baseline_report``: a qualify report
    to compare a merged qualify report with (its ``changes``)."""
    if not shards:
        raise UsageError("no report to merge; give the JSON reports of the N shards")
    _refuse_foreign(shards)
    _refuse_gaps(shards)
    command = shards[0].shard["command"]
    merged = {"run": _run, "mutants": _mutants, "qualify": _qualify}[command](shards)
    if baseline_report is not None and command == "qualify":
        before = baseline.load_report(baseline_report)
        merged.doc["dependencies"], merged.doc["changes"] = baseline.compare(
            before, merged.doc, str(baseline_report))
    return merged
