"""The checks of a qualification, each a :class:`Section`: composed from the library functions behind
``replaykit verify``, ``drift``, ``run``, ``mutants`` and ``properties``, never re-implemented.

Each stage function returns its section(s): a status (``pass`` / ``fail`` / ``skipped`` with a reason), the
counts of what it checked, the failures (:class:`~replaykit.findings.Finding` s: ``file`` names what failed
and ``place`` where), the verdict on each thing checked (what a later report is compared on) and a one-line
summary. An input that is broken (a contract that does not load, a scenario file that does not parse) is a
failure of its section, not an error of the run: the other checks still run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from replaykit import contracts, drift, properties
from replaykit.errors import ContractError, ScenarioError, UsageError
from replaykit.findings import Finding
from replaykit.jsondoc import JSON
from replaykit.qualify.identity import installed_version
from replaykit.reference.defects import MUTANTS
from replaykit.scenario.model import Scenario, load_all
from replaykit.scenario.mutants import Matrix, check_kills, decides, run_matrix
from replaykit.scenario.report import counts as report_counts
from replaykit.scenario.report import coverage
from replaykit.scenario.runner import Result, run_many
from replaykit.scenario.target import Target
from replaykit.verify import CHECKS, Report, check_contracts, verify_paths

__all__ = [
    "Section",
    "Tick",
    "cassettes_of",
    "contract_schemas",
    "drift_section",
    "failed_section",
    "inputs_of",
    "load_scenarios",
    "matrix_verdict",
    "mutants_section",
    "properties_section",
    "scenarios_section",
    "scenarios_verdict",
    "skipped",
    "verify_sections",
]

Status = Literal["pass", "fail", "skipped"]
Tick = Callable[[int, int, str], None]  # (done, total, what just finished): a stage's progress


def _quiet(done: int, total: int, what: str) -> None:
    """No progress to show."""


@dataclass
class Section:
    """One check's result (see the module docstring); ``summary`` is its line on the terminal."""

    status: Status
    summary: str
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[Finding] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    seconds: float = 0.0

    def to_json(self) -> JSON:
        """The section as ``qualification-report.schema.json`` has it."""
        out: JSON = {
            "status": self.status,
            "counts": self.counts,
            "failures": [_failure(finding) for finding in self.failures],
            "verdicts": self.verdicts,
            "seconds": round(self.seconds, 3),
            "summary": self.summary,
        }
        if self.reason:
            out["reason"] = self.reason
        return out


def _failure(finding: Finding) -> dict[str, str]:
    text = finding.message + (f"; {finding.fix}" if finding.fix else "")
    out = {"name": finding.file or finding.code, "message": text}
    if finding.place:
        out["where"] = finding.place
    return out


def skipped(reason: str) -> Section:
    """A section that did not run, and why."""
    return Section("skipped", reason, reason=reason)


def failed_section(failures: list[Finding], summary: str, **more: Any) -> Section:
    """A section that fails when ``failures`` is not empty, else passes."""
    return Section("fail" if failures else "pass", summary, failures=failures, **more)


# ---------------------------------------------------------------- contracts and cassettes


def contract_schemas() -> tuple[int, list[Finding]]:
    """The bundled contracts: how many schema files, and what is wrong with them (each against its
    metaschema, then the registry loaded as ``validate`` loads it)."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

    files = sorted(contracts.default().root.rglob("*.schema.json"))
    found: list[Finding] = []
    for path in files:
        try:
            Draft202012Validator.check_schema(json.loads(path.read_text(encoding="utf-8")))
        except ValueError:
            continue  # not JSON: the registry's own error below names the line
        except SchemaError as exc:
            pointer = "/" + "/".join(str(part) for part in exc.absolute_path)
            found.append(
                Finding(
                    "error",
                    "contract",
                    f"not a valid JSON Schema: {exc.message}",
                    str(path),
                    pointer,
                    fix="fix the schema",
                )
            )
    try:
        contracts.default().kinds()
    except ContractError as exc:
        found.append(Finding("error", "contract", str(exc), "contracts"))
    return len(files), found


def verify_sections(
    paths: Sequence[Path], label: Callable[[str], str], schemas: tuple[int, list[Finding]]
) -> tuple[Section, Section]:
    """``verify`` over ``paths`` (cassette files and folders), split in two sections: ``verify`` (parse,
    framing, secrets, fingerprints) and ``contracts`` (``schemas``: :func:`contract_schemas`, then the
    traffic against them; when a schema is broken, the traffic is not checked). ``label`` names a file in
    verdicts."""
    start = time.monotonic()
    count, broken = schemas
    checks = CHECKS if not broken else tuple(check for check in CHECKS if check is not check_contracts)
    report = verify_paths(paths, checks=checks)
    seconds = time.monotonic() - start
    return _verify(report, label, seconds), _contracts(report, count, broken, label, seconds)


def _verdicts(report: Report, label: Callable[[str], str], contract: bool) -> dict[str, str]:
    return {
        label(result.path): "fail"
        if any(f.severity == "error" and (f.code == "contract") == contract for f in result.findings)
        else "pass"
        for result in report.files
    }


def _verify(report: Report, label: Callable[[str], str], seconds: float) -> Section:
    found = [f for f in report.findings if f.code != "contract"]
    errors = [f for f in found if f.severity == "error"]
    counts = {
        "files": len(report.files),
        "interactions": sum(r.interactions for r in report.files),
        "errors": len(errors),
        "warnings": len(found) - len(errors),
    }
    summary = f"{counts['files']} cassettes, {counts['interactions']} interactions, {len(errors)} errors"
    return failed_section(
        errors, summary, counts=counts, verdicts=_verdicts(report, label, False), seconds=seconds
    )


def _contracts(
    report: Report, schemas: int, broken: list[Finding], label: Callable[[str], str], seconds: float
) -> Section:
    found = [f for f in report.findings if f.code == "contract"]
    errors = [f for f in found if f.severity == "error"]
    counts = {
        "schemas": schemas,
        "files": len(report.files),
        "violations": len(errors),
        "warnings": sum(f.severity == "warning" for f in found),
        "expected": sum(f.severity == "expected" for f in found),
    }
    if broken:
        summary = f"{len(broken)} of {schemas} contracts broken; traffic not checked"
        return failed_section(broken, summary, counts=counts, seconds=seconds)
    summary = f"{schemas} contracts, {len(report.files)} cassettes, {len(errors)} violations"
    return failed_section(
        errors, summary, counts=counts, verdicts=_verdicts(report, label, True), seconds=seconds
    )


def cassettes_of(scenarios: Sequence[Scenario]) -> list[Path]:
    """The cassettes the scenarios name, each once."""
    return list(dict.fromkeys(path for scenario in scenarios for path in scenario.cassettes))


def inputs_of(scenarios: Sequence[Scenario]) -> list[Path]:
    """The files the scenarios read: each scenario file, its cassettes and its stored transcript file."""
    return list(dict.fromkeys(path for scenario in scenarios for path in scenario.inputs))


# ---------------------------------------------------------------- drift


def _gap_key(gap: Finding) -> str:
    return f"{gap.file} {gap.code}: {gap.message}"


def drift_section() -> Section:
    """The contracts against the installed SDKs (those not installed are left out, and said so)."""
    start = time.monotonic()
    installed = tuple(sdk for sdk in drift.SDKS if installed_version(sdk) is not None)
    if not installed:
        return skipped(f"no provider SDK installed ({', '.join(drift.SDKS)})")
    try:
        gaps = drift.compare(installed)
    except ContractError as exc:
        return failed_section([Finding("error", "drift", str(exc), "contracts")], "the contracts do not load")
    blocking = [gap for gap in gaps if drift.verdict(gap) == "blocking"]
    verdicts = {_gap_key(gap): drift.verdict(gap) for gap in gaps}
    entries = sum(entry.package in installed for entry in drift.MAPPING)
    counts = {
        "mappings": entries,
        "gaps": len(gaps),
        "blocking": len(blocking),
        "explained": sum(v == "explained" for v in verdicts.values()),
        "info": sum(v == "info" for v in verdicts.values()),
    }
    versions = ", ".join(f"{sdk} {drift.sdk_version(sdk)}" for sdk in installed)
    summary = f"{versions}: {entries} mappings, {len(gaps)} gaps, {len(blocking)} blocking"
    failures = [Finding("error", "drift", gap.message, gap.place, gap.file, fix=gap.fix) for gap in blocking]
    return failed_section(
        failures, summary, counts=counts, verdicts=verdicts, seconds=time.monotonic() - start
    )


# ---------------------------------------------------------------- scenarios and mutants


def load_scenarios(paths: Sequence[Path]) -> tuple[list[Scenario], Finding | None]:
    """The scenarios under ``paths``, or none and the bad file (``file:line``, pointer and fix)."""
    try:
        return load_all(paths), None
    except (ScenarioError, ContractError) as exc:
        return [], Finding("error", "scenario", str(exc), "scenarios")


def _counted(total: int, tick: Tick) -> Callable[[Result], None]:
    done = [0]

    def seen(result: Result) -> None:
        done[0] += 1
        mutant = f" on {result.mutant}" if result.mutant else ""
        tick(done[0], total, f"{result.verdict.upper()} {result.scenario.name}{mutant}")

    return seen


def scenarios_section(
    scenarios: Sequence[Scenario], target: Target, jobs: int, tick: Tick = _quiet, whole: bool = True
) -> tuple[Section, list[Result]]:
    """Every scenario on the target; the results too (the mutant matrix reuses them). A scenario n/a on the
    target (a capability it lacks) is counted and shown, never a failure; none applying at all is one."""
    start = time.monotonic()
    results = run_many(scenarios, target, jobs=jobs, done=_counted(len(scenarios), tick))
    return scenarios_verdict(results, target.spec, time.monotonic() - start, whole), results


def scenarios_verdict(results: Sequence[Result], spec: str, seconds: float, whole: bool = True) -> Section:
    """The scenarios section of ``results`` on the target ``spec`` (also of merged shards' results); none
    applying fails only the ``whole`` run, not a shard of it."""
    failures = [
        Finding("error", "scenario", r.failure_text(), r.scenario.name, str(r.scenario.path))
        for r in results
        if r.failed
    ]
    if whole and results and not any(r.applicable for r in results):
        none = f"no scenario applies to {spec}: {coverage(results)}"
        failures.append(Finding("error", "scenario", none, "scenarios",
                                fix="declare what the target has in its manifest"))
    counts = report_counts(results)
    summary = f"{len(results)} scenarios on {spec}, {counts['failed']} failed; {coverage(results)}"
    verdicts = {r.scenario.name: r.verdict for r in results}
    return failed_section(failures, summary, counts=counts, verdicts=verdicts, seconds=seconds)


def mutants_section(
    scenarios: Sequence[Scenario],
    target: Target,
    mutants: Sequence[str],
    on_target: Sequence[Result],
    jobs: int,
    tick: Tick = _quiet,
    full: bool = False,
    universe: Sequence[Scenario] | None = None,
) -> tuple[Section, Matrix | None]:
    """The kill matrix of ``mutants`` on the target, reusing the scenarios' results on the target itself:
    only the cells that decide it (each mutant on the scenarios that declare it) unless ``full``;
    ``universe``: every scenario when ``scenarios`` is a shard of them. The matrix too (None: a ``kills:``
    name is unknown)."""
    start = time.monotonic()
    every = scenarios if universe is None else universe
    try:
        check_kills(every, {*target.manifest.mutants, *mutants}, frozenset(MUTANTS))
    except UsageError as exc:
        failures = [Finding("error", "mutants", str(exc), "kills")]
        return failed_section(failures, "a kills: name is unknown"), None
    applies = [s for s, ran in zip(scenarios, on_target, strict=True) if ran.applicable]
    total = sum(1 for s in applies for m in mutants if full or decides(s, m, every))
    matrix = run_matrix(scenarios, target, mutants, jobs=jobs, on_target=on_target,
                        done=_counted(total, tick), declared=not full, universe=every)
    return matrix_verdict(matrix, time.monotonic() - start, universe is None), matrix


def matrix_verdict(matrix: Matrix, seconds: float, whole: bool = True) -> Section:
    """The mutants section of ``matrix`` (also of merged shards' matrices); a mutant no scenario kills
    fails only the ``whole`` matrix, not a shard of it."""
    problems = matrix.named_problems() if whole else [(n, p) for n, p in matrix.named_problems()
                                                      if p in matrix.row_problems()]
    failures = [Finding("error", "mutants", sentence, name) for name, sentence in problems]
    survivors, mutants, full = matrix.survivors(), matrix.mutants, matrix.full
    total = sum(mutant is not None for _, mutant in matrix.results)
    counts = {
        "scenarios": len(matrix.scenarios),
        "mutants": len(mutants),
        "killed": len(mutants) - len(survivors),
        "vacuous": len(matrix.vacuous()),
        "runs": total,
    }
    summary = (
        f"{len(matrix.scenarios)} scenarios x {len(mutants)} mutants ({total} runs"
        f"{'' if full else ', the declared kills'}), {counts['killed']} killed"
        + (f", {len(matrix.vacuous())} vacuous" if full else "")
    )
    verdicts = {mutant: "survived" if mutant in survivors else "killed" for mutant in mutants}
    return failed_section(failures, summary, counts=counts, verdicts=verdicts, seconds=seconds)


# ---------------------------------------------------------------- properties


def properties_section(
    estimator: properties.Estimator, label: str, max_examples: int, seed: int, tick: Tick = _quiet
) -> Section:
    """The property suite on ``estimator`` (``label``: its name in the summary)."""
    start = time.monotonic()
    chosen = properties.selected(None)
    outcomes: list[properties.Outcome] = []
    for number, prop in enumerate(chosen, 1):
        outcomes.append(prop.outcome(estimator, max_examples, seed))
        tick(number, len(chosen), f"{outcomes[-1].status.upper()} {prop.name}")
    failures = [
        Finding("error", "property", f"{o.statement}: {_why(o)}", o.name) for o in outcomes if not o.passed
    ]
    counts = {
        "properties": len(outcomes),
        "passed": len(outcomes) - len(failures),
        "failed": len(failures),
        "examples": max_examples,
    }
    summary = (
        f"{len(outcomes)} properties on {label} ({max_examples} examples, seed {seed}), "
        f"{len(failures)} failed"
    )
    verdicts = {o.name: o.status for o in outcomes}
    return failed_section(
        failures, summary, counts=counts, verdicts=verdicts, seconds=time.monotonic() - start
    )


def _why(outcome: properties.Outcome) -> str:
    if outcome.failure is not None:
        return f"{outcome.failure.detail}; transcript: {properties.dumps(outcome.failure.transcript)}"
    return outcome.unchecked or outcome.status
