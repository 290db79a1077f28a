"""Reports of scenario runs: a line per scenario, a summary with the coverage, JSON, and JUnit XML for CI.

A scenario is ``PASS``, ``FAIL`` (its first failing expectation, in cause order) or ``N/A`` (the target lacks
a capability it needs: never a pass, never a failure). The JUnit XML is the shape pytest's ``--junitxml``
writes (one ``<testsuites>`` holding one ``<testsuite>``; a ``<testcase>`` per scenario, its ``classname``
the scenario file's folder and ``name`` the scenario; a failed one holds one ``<failure>`` whose ``message``
is the first failing expectation and whose text lists every failing one; an n/a one a ``<skipped>`` with what
is missing), which CI systems (GitHub, GitLab, Jenkins) read.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replaykit.cassette import write_atomic
from replaykit.scenario.runner import Result

__all__ = [
    "Case", "case", "counts", "coverage", "details", "line", "markdown", "ok", "summary", "to_json",
    "write_cases", "write_junit",
]


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


def counts(results: Sequence[Result]) -> dict[str, int]:
    """``{scenarios, passed, failed, na}``."""
    tally = Counter(result.verdict for result in results)
    return {"scenarios": len(results), "passed": tally["pass"], "failed": tally["fail"], "na": tally["n/a"]}


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


def to_json(results: Sequence[Result], shard: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{passed, counts, coverage, results}`` (each result with every check), and the ``shard`` block of a
    shard's report (:meth:`replaykit.scenario.shard.Shard.pick`); its contract is
    ``contracts/replaykit/run-report.schema.json``."""
    doc = {
        "passed": ok(results, shard is not None),
        "counts": counts(results),
        "coverage": coverage(results),
        "results": [result.to_json() for result in results],
    }
    return doc if shard is None else {**doc, "shard": shard}


def _md(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown(results: Sequence[Result], title: str = "replaykit run") -> str:
    """GitHub-flavoured Markdown: a heading with the verdict, the summary, a table of the failures then the
    n/a scenarios, and the passed ones named in one line."""
    lines = [f"### {title}: {'OK' if ok(results) else 'FAILED'}", "", summary(results), ""]
    rows = [r for r in results if r.failed] + [r for r in results if not r.applicable]
    if rows:
        lines += ["| verdict | scenario | first failing expectation, or what the target lacks |",
                  "|---|---|---|"]
        lines += [f"| {r.verdict.upper()} | {_md(r.scenario.name)} | {_md(r.failure_text() or r.reason)} |"
                  for r in rows]
        lines.append("")
    passed = [r.scenario.name for r in results if r.passed]
    if passed:
        lines.append(f"Passed ({len(passed)}): {_md(', '.join(passed))}")
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
