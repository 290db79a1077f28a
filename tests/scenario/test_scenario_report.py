"""The text and Markdown reports of a large suite read as its failures: failures first, the n/a scenarios a
line per reason, the passes in one line; JSON and JUnit keep every result."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from scenario_support import FUNCTION, scenario_doc, write_scenario

from replaykit.cli import main
from replaykit.scenario import Check, Result, Scenario, load_all
from replaykit.scenario import report as reports

SIZE = 1000


def _result(index: int) -> Result:
    """Scenario ``s{index}``: one in 100 fails, one in 50 is n/a, the others pass."""
    scenario = Scenario(Path(f"suite/s{index}.yaml"), {"name": f"s{index}", "kind": "contract"})
    if index % 100 == 99:
        return Result(scenario, FUNCTION, [Check("outcome", False, "expected ok, got error")])
    missing = ("research",) if index % 50 == 7 else ()
    return Result(scenario, FUNCTION, [Check("outcome", True)], seconds=0.1, missing=missing)


def _suite() -> list[Result]:
    return [_result(index) for index in range(SIZE)]


def test_the_text_of_a_thousand_scenarios_lists_the_failures_then_one_na_line_and_one_pass_line() -> None:
    lines = reports.text(_suite())
    assert lines[:10] == [f"FAIL s{k}: outcome: expected ok, got error" for k in range(99, SIZE, 100)]
    assert lines[10] == ("N/A  20 scenarios: needs research: s7, s57, s107, s157, s207, s257, s307, s357 "
                         "and 12 more (-v names them)")
    assert lines[11].startswith("PASS 970 scenarios: s0, s1, s2, s3, s4, s5, s6, s8 and 962 more")
    assert lines[12:] == ["1000 scenarios, 970 passed, 10 failed, 20 n/a; 980 of 1000 apply "
                          "(n/a: research 20): FAILED"]


def test_with_verbose_every_scenario_has_its_line_after_the_failures() -> None:
    lines = reports.text(_suite(), verbose=True)
    assert len(lines) == SIZE + 1 and all(line.startswith("FAIL") for line in lines[:10])
    assert lines[10] == "N/A  s7: needs research" and lines[30] == "PASS s0 (0.1 s)"


def test_the_markdown_of_a_thousand_scenarios_folds_the_passes_and_groups_the_na() -> None:
    lines = reports.markdown(_suite()).splitlines()
    table = [line for line in lines if line.startswith("| ")][1:]
    assert [row.split(" | ")[0] for row in table] == ["| FAIL"] * 10 + ["| N/A"]
    assert table[-1].startswith("| N/A | <details><summary>20 scenarios</summary>s7, s57, ")
    assert table[-1].endswith("</details> | needs research |")
    (passed,) = [line for line in lines if "s0," in line]
    assert passed.startswith("<details><summary>Passed (970)</summary>s0, s1, ") and passed.count(",") == 969
    assert len(lines) < 25


def test_a_few_passes_are_named_in_one_line() -> None:
    lines = reports.markdown(_suite()[:3]).splitlines()
    assert lines[-1] == "Passed (3): s0, s1, s2"
    assert reports.text(_suite()[:3])[0] == "PASS 3 scenarios: s0, s1, s2"


def test_json_and_junit_keep_every_result(tmp_path: Path) -> None:
    suite = _suite()
    assert len(reports.to_json(suite)["results"]) == SIZE
    reports.write_junit(tmp_path / "junit.xml", suite)
    assert len(list(ET.parse(tmp_path / "junit.xml").getroot().iter("testcase"))) == SIZE


def test_run_prints_the_failures_first_and_the_passes_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(30):
        write_scenario(tmp_path, scenario_doc(f"s{index:02}"))
    checks = {name: [Check("outcome", not name.endswith("7"), "expected ok, got error")]
              for name in (s.name for s in load_all([tmp_path]))}

    def finished(scenarios: Sequence[Scenario], target: Any, jobs: int, update_snapshots: bool,
                 done: Callable[[Result], None]) -> list[Result]:  # as run_many, without running a target
        results = [Result(s, FUNCTION, checks[s.name]) for s in scenarios]
        for result in results:
            done(result)
        return results

    monkeypatch.setattr("replaykit.cli.run.run_many", finished)
    assert main(["run", str(tmp_path), "--target", FUNCTION]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [f"FAIL s{k}7: outcome: expected ok, got error" for k in range(3)]
    assert out[3].startswith("PASS 27 scenarios: s00, s01, ")
    assert out[3].endswith(" and 19 more (-v names them)")
    assert out[4] == "30 scenarios, 27 passed, 3 failed: FAILED"
