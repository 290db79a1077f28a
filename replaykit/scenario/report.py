"""Reports of scenario runs: the text (failures first, then the n/a scenarios grouped by what they lack, the
passes in one line), a summary with the coverage, Markdown, JSON, and JUnit XML for CI.

A scenario is ``PASS``, ``FAIL`` (its first failing expectation, in cause order) or ``N/A`` (never a pass,
never a failure). The text folds passes :data:`FOLD` a line, the Markdown in ``<details>``; the JSON and the
JUnit XML (the shape pytest's ``--junitxml`` writes) hold every result. Called by the CLI and qualify; the
JUnit shape is described in docs/architecture/scenario.md.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from replaykit.cassette import write_atomic
from replaykit.jsondoc import JSON
from replaykit.scenario.formats import Counts, RunReport
from replaykit.scenario.runner import Result

__all__ = [
    "FOLD", "Case", "case", "counts", "coverage", "details", "folded", "line", "markdown", "ok", "rest",
    "summary", "text", "to_json", "write_cases", "write_junit",
]

FOLD = 8  # the scenarios a folded line names before "and N more"


def line(result: Result) -> str:
    """``PASS name (1.2 s)``, ``FAIL name: first failing expectation: why`` or ``N/A name: needs ...``."""
    if not result.applicable:
        return f"N/A  {result.scenario.name}: {result.reason}"
    head = f"{'PASS' if result.passed else 'FAIL'} {result.scenario.name}"
    if result.passed:
        return f"{head} ({result.seconds:.1f} s)"
    return f"{head}: {result.failure_text()}"


def details(result: Result) -> list[str]:
    """Every failing expectation of ``result`` after the first, in cause order (for ``-v``)."""
    failing = [check for check in result.checks if not check.ok]
    return [f"    also {check.name}: {check.why}" for check in failing[1:]]


def folded(names: Sequence[str]) -> str:
    """``a, b, c``, or the first :data:`FOLD` names ``and 980 more (-v names them)``."""
    shown = ", ".join(names[:FOLD])
    return shown if len(names) <= FOLD else f"{shown} and {len(names) - FOLD} more (-v names them)"


def _na_groups(results: Sequence[Result]) -> dict[str, list[str]]:
    """The n/a scenarios' names by what they lack, in the order first met."""
    groups: dict[str, list[str]] = {}
    for result in results:
        if not result.applicable:
            groups.setdefault(result.reason, []).append(result.scenario.name)
    return groups


def _scenarios(names: Sequence[str]) -> str:
    return f"{len(names)} scenario{'' if len(names) == 1 else 's'}"


def rest(results: Sequence[Result], verbose: bool = False) -> list[str]:
    """The lines after the failures: the n/a scenarios a line per reason (``N/A  name: needs x``, or
    ``N/A  13 scenarios: needs x: a, b, ...``), then the passes in one (``PASS 987 scenarios: a, b, ...``);
    ``verbose``: a line per scenario (:func:`line`)."""
    if verbose:
        return [line(r) for r in results if not r.applicable] + [line(r) for r in results if r.passed]
    lines = [f"N/A  {names[0]}: {reason}" if len(names) == 1 else
             f"N/A  {_scenarios(names)}: {reason}: {folded(names)}"
             for reason, names in _na_groups(results).items()]
    passed = [result.scenario.name for result in results if result.passed]
    return lines + ([f"PASS {_scenarios(passed)}: {folded(passed)}"] if passed else [])


def text(results: Sequence[Result], verbose: bool = False) -> list[str]:
    """The text report: each failure (``verbose``: with its other failing expectations), :func:`rest`, and
    the :func:`summary`."""
    failures = [part for r in results if r.failed for part in (line(r), *(details(r) if verbose else []))]
    return [*failures, *rest(results, verbose), summary(results)]


def counts(results: Sequence[Result]) -> Counts:
    """``{scenarios, passed, failed, na}``."""
    tally = Counter(result.verdict for result in results)
    return Counts(scenarios=len(results), passed=tally["pass"], failed=tally["fail"], na=tally["n/a"])


def ok(results: Sequence[Result], shard: bool = False) -> bool:
    """True when no scenario failed and at least one ran (all n/a checks nothing; ``shard``: a part of the
    scenarios, where none applying is for the merged report to judge)."""
    return not any(result.failed for result in results) and (shard or any(r.applicable for r in results))


def coverage(results: Sequence[Result]) -> str:
    """``38 of 51 apply (n/a: research 13, durable 7)``: how many ran, and what the others lacked."""
    lacking = Counter(need for result in results for need in result.missing)
    ran = sum(result.applicable for result in results)
    text = f"{ran} of {len(results)} apply"
    if lacking:
        text += " (n/a: " + ", ".join(f"{need} {n}" for need, n in lacking.most_common()) + ")"
    return text


def summary(results: Sequence[Result]) -> str:
    """``51 scenarios, 30 passed, 1 failed, 20 n/a; 31 of 51 apply (n/a: research 13, ...): FAILED``."""
    n = counts(results)
    word = "scenario" if len(results) == 1 else "scenarios"
    verdict = "OK" if ok(results) else "FAILED" if n["failed"] else "FAILED (no scenario applies)"
    na = f", {n['na']} n/a; {coverage(results)}" if n["na"] else ""
    return f"{len(results)} {word}, {n['passed']} passed, {n['failed']} failed{na}: {verdict}"


def to_json(results: Sequence[Result], shard: JSON | None = None) -> RunReport:
    """``{passed, counts, coverage, results}`` (each result with every check), and the ``shard`` block of a
    shard's report (:meth:`replaykit.scenario.shard.Shard.pick`); its contract is
    ``contracts/replaykit/run-report.schema.json``."""
    doc = RunReport(passed=ok(results, shard is not None), counts=counts(results), coverage=coverage(results),
                    results=[result.to_json() for result in results])
    if shard is not None:
        doc["shard"] = shard
    return doc


def _md(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _md_names(names: Sequence[str], label: str) -> str:
    """``names`` on one line, or folded in ``<details>`` under ``label`` when more than :data:`FOLD`."""
    shown = _md(", ".join(names))
    return shown if len(names) <= FOLD else f"<details><summary>{label}</summary>{shown}</details>"


def markdown(results: Sequence[Result], title: str = "replaykit run") -> str:
    """GitHub-flavoured Markdown: a heading with the verdict, the summary, a table of the failures then the
    n/a scenarios (a row per reason), and the passed ones in one line (folded when many)."""
    lines = [f"### {title}: {'OK' if ok(results) else 'FAILED'}", "", summary(results), ""]
    rows = [("FAIL", _md(r.scenario.name), _md(r.failure_text())) for r in results if r.failed]
    rows += [("N/A", _md_names(names, _scenarios(names)), _md(reason))
             for reason, names in _na_groups(results).items()]
    if rows:
        lines += ["| verdict | scenario | first failing expectation, or what the target lacks |",
                  "|---|---|---|"]
        lines += [f"| {verdict} | {names} | {why} |" for verdict, names, why in rows]
        lines.append("")
    passed = [r.scenario.name for r in results if r.passed]
    if passed:
        label = f"Passed ({len(passed)})"
        names = _md_names(passed, label)
        lines.append(f"{label}: {names}" if len(passed) <= FOLD else names)
    return "\n".join(lines) + "\n"


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (a target's stderr may carry escape codes)."""
    return _NOT_XML.sub("\ufffd", text)


@dataclass(frozen=True)
class Case:
    """One ``<testcase>``: ``failure`` (its message and text) or ``skipped`` (why), or neither: it passed."""

    classname: str
    name: str
    file: str = ""
    seconds: float = 0.0
    failure: tuple[str, str] | None = None
    skipped: str | None = None


def case(result: Result) -> Case:
    """The test case of a scenario's result."""
    first = result.first_failure
    failure = None
    if first is not None:
        failure = (f"{first.name}: {first.why}",
                   "\n".join(f"{check.name}: {check.why}" for check in result.checks if not check.ok))
    return Case(f"replaykit.{result.scenario.path.parent.name or 'scenarios'}", result.scenario.name,
                str(result.scenario.path), result.seconds, failure,
                None if result.applicable else f"n/a: {result.reason}")


def _case(suite: ET.Element, one: Case) -> None:
    attributes = {"classname": one.classname, "name": one.name}
    attributes.update({"file": one.file} if one.file else {})
    element = ET.SubElement(suite, "testcase", attributes, time=f"{one.seconds:.3f}")
    if one.skipped is not None:
        ET.SubElement(element, "skipped", message=_xml(one.skipped), type="n/a")
    elif one.failure is not None:
        failure = ET.SubElement(element, "failure", message=_xml(one.failure[0]), type="expectation")
        failure.text = _xml(one.failure[1])


def write_junit(path: Path, results: Sequence[Result], name: str = "replaykit") -> None:
    """Write ``results`` as JUnit XML to ``path`` (atomically)."""
    write_cases(path, [case(result) for result in results], name)


def write_cases(path: Path, cases: Sequence[Case], name: str = "replaykit") -> None:
    """Write ``cases`` as JUnit XML to ``path`` (atomically)."""
    failed = sum(one.failure is not None and one.skipped is None for one in cases)
    skipped = sum(one.skipped is not None for one in cases)
    seconds = f"{sum(one.seconds for one in cases):.3f}"
    root = ET.Element(
        "testsuites", name=name, tests=str(len(cases)), failures=str(failed), errors="0", time=seconds
    )
    suite = ET.SubElement(
        root,
        "testsuite",
        name=name,
        tests=str(len(cases)),
        failures=str(failed),
        errors="0",
        skipped=str(skipped),
        time=seconds,
    )
    for one in cases:
        _case(suite, one)
    ET.indent(root)
    write_atomic(path, ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
