"""The kill matrix infers the cells a target's run never asked about (``$REPLAYKIT_MUTANTS_ASKED``): their
verdicts equal running them, cell for cell; a declared kill always runs; a target that lists nothing gets
every cell run; the inferred cells survive the JSON report and its contract."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from scenario_support import FUNCTION, ROOT, scenario_doc, tiny_target_importable, write_scenario

from replaykit import contracts
from replaykit.reference import MUTANTS
from replaykit.reference.defects import ASKED, mutant
from replaykit.scenario import DEFAULT_TARGET, Target, load, load_all
from replaykit.scenario.mutants import Matrix, run_matrix

PICKED = ("retry-529", "web-search-exa")


def _cells(matrix: Matrix) -> dict[tuple[str, str], bool]:
    return {(s.name, m): matrix.killed(s.name, m) for s in matrix.scenarios for m in matrix.mutants}


def test_inferred_cells_have_the_verdicts_running_them_gives() -> None:
    scenarios = [s for s in load_all([ROOT / "scenarios"]) if s.name in PICKED]
    target = Target.parse(DEFAULT_TARGET)
    inferred = run_matrix(scenarios, target, list(MUTANTS), jobs=2)
    every = run_matrix(scenarios, target, list(MUTANTS), jobs=2, every_cell=True)
    assert every.inferred == frozenset() and len(inferred.inferred) > len(MUTANTS)  # most are not asked about
    assert _cells(inferred) == _cells(every) and any(_cells(every).values())
    assert inferred.problems() == every.problems()
    asked = inferred.results[("retry-529", None)].asked
    assert asked is not None and "no-retry-on-529" in asked and ("retry-529", "no-retry-on-529") \
        not in inferred.inferred
    doc = inferred.to_json()
    assert list(contracts.validate("replaykit.kill-matrix", doc)) == []
    assert Matrix.from_json(doc).inferred == inferred.inferred


def test_a_declared_kill_runs_though_the_target_never_asked_about_it(tmp_path: Path) -> None:
    source = ROOT / "scenarios" / "retry-529.yaml"
    doc = yaml.safe_load(source.read_text())
    doc["kills"] = [*doc.get("kills", []), "deadline-per-stage"]  # a mutant of research deadlines only
    for folder in ("cassettes", "transcripts"):
        shutil.copytree(ROOT / "scenarios" / folder, tmp_path / folder)
    (tmp_path / "retry-529.yaml").write_text(yaml.safe_dump(doc))
    matrix = run_matrix([load(tmp_path / "retry-529.yaml")], Target.parse(DEFAULT_TARGET),
                        ["deadline-per-stage", "no-fallback"], jobs=2)
    assert matrix.inferred == {("retry-529", "no-fallback")}
    assert ("retry-529", "deadline-per-stage") in matrix.results
    assert matrix.problems()[0] == "retry-529 declares kills: deadline-per-stage, but deadline-per-stage " \
                                   "survives it"


def test_a_target_that_lists_nothing_gets_every_cell_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    tiny_target_importable(monkeypatch)
    write_scenario(tmp_path, scenario_doc("one"))
    matrix = run_matrix([load(tmp_path / "one.yaml")], Target.parse(FUNCTION), ["no-persist", "leak"])
    assert matrix.results[("one", None)].asked is None and matrix.inferred == frozenset()
    assert matrix.killed("one", "no-persist")


def test_the_reference_lists_each_mutant_it_asks_about_once(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    listed = tmp_path / "asked"
    monkeypatch.setenv(ASKED, str(listed))
    monkeypatch.delenv("REPLAYKIT_MUTANT", raising=False)
    assert not mutant("retry-on-400") and not mutant("retry-on-400") and not mutant("no-fallback")
    assert listed.read_text().splitlines() == ["retry-on-400", "no-fallback"]
