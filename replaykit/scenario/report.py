"""Reports of scenario runs: a line per scenario, a summary, JSON, and JUnit XML for CI.

The JUnit XML is the shape pytest's ``--junitxml`` writes (one ``<testsuites>`` holding one ``<testsuite>``;
a ``<testcase>`` per scenario, its ``classname`` the scenario file's folder and ``name`` the scenario; a
failed one holds one ``<failure>`` whose ``message`` is the first failing expectation and whose text lists
every failing one), which CI systems (GitHub, GitLab, Jenkins) read.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replaykit.cassette import write_atomic
from replaykit.scenario.runner import Result

__all__ = ["line", "summary", "to_json", "write_junit"]


def line(result: Result) -> str:
    """``PASS name (1.2 s)`` or ``FAIL name: first failing expectation: why``."""
    head = f"{'PASS' if result.passed else 'FAIL'} {result.scenario.name}"
    if result.passed:
        return f"{head} ({result.seconds:.1f} s)"
    return f"{head}: {result.failure_text()}"


def summary(results: Sequence[Result]) -> str:
    """``3 scenarios, 2 passed, 1 failed: FAILED``."""
    failed = sum(not result.passed for result in results)
    word = "scenario" if len(results) == 1 else "scenarios"
    verdict = "FAILED" if failed else "OK"
    return f"{len(results)} {word}, {len(results) - failed} passed, {failed} failed: {verdict}"


def to_json(results: Sequence[Result]) -> dict[str, Any]:
    """``{passed, counts, results}`` (each result with every check)."""
    failed = sum(not result.passed for result in results)
    return {
        "passed": failed == 0,
        "counts": {"scenarios": len(results), "failed": failed},
        "results": [result.to_json() for result in results],
    }


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
    failed = sum(not result.passed for result in results)
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
        skipped="0",
        time=seconds,
    )
    for result in results:
        _case(suite, result)
    ET.indent(root)
    write_atomic(path, ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
