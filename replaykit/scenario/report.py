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
from pathlib import Path
from typing import Any

from replaykit.cassette import write_atomic
from replaykit.scenario.runner import Result

__all__ = ["counts", "coverage", "details", "line", "ok", "summary", "to_json", "write_junit"]


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


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (a target's stderr may carry escape codes)."""
    return _NOT_XML.sub("\ufffd", text)


def _case(suite: ET.Element, result: Result) -> None:
    folder = result.scenario.path.parent.name or "scenarios"
    case = ET.SubElement(
        suite,
        "testcase",
        classname=f"replaykit.{folder}",
        name=result.scenario.name,
        file=str(result.scenario.path),
        time=f"{result.seconds:.3f}",
    )
    if not result.applicable:
        ET.SubElement(case, "skipped", message=_xml(f"n/a: {result.reason}"), type="n/a")
        return
    first = result.first_failure
    if first is not None:
        failure = ET.SubElement(
            case, "failure", message=_xml(f"{first.name}: {first.why}"), type="expectation"
        )
        failure.text = _xml(
            "\n".join(f"{check.name}: {check.why}" for check in result.checks if not check.ok)
        )


def write_junit(path: Path, results: Sequence[Result], name: str = "replaykit") -> None:
    """Write ``results`` as JUnit XML to ``path`` (atomically)."""
    n = counts(results)
    failed, skipped = n["failed"], n["na"]
    seconds = f"{sum(result.seconds for result in results):.3f}"
    root = ET.Element(
        "testsuites", name=name, tests=str(len(results)), failures=str(failed), errors="0", time=seconds
    )
    suite = ET.SubElement(
        root,
        "testsuite",
        name=name,
        tests=str(len(results)),
        failures=str(failed),
        errors="0",
        skipped=str(skipped),
        time=seconds,
    )
    for result in results:
        _case(suite, result)
    ET.indent(root)
    write_atomic(path, ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
