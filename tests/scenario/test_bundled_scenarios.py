"""The bundled scenarios (``scenarios/``) on the reference, on the mutants each one names, and on the
JavaScript target of ``tests/fixtures/targets/js``: the reference passes every one, each declared mutant
fails its scenario, the JavaScript target passes its subset and fails, on the right expectation, when it is
given a defect."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from replaykit.reference import MUTANTS
from replaykit.scenario import DEFAULT_TARGET, Result, Scenario, Target, load_all, run_jobs, run_many

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = load_all([ROOT / "scenarios"])
NAMES = {scenario.name: scenario for scenario in SCENARIOS}
JS = ROOT / "tests" / "fixtures" / "targets" / "js" / "target.mjs"
# What the JavaScript target lacks (its manifest, replaykit-target.yaml beside it): OpenAI and Azure,
# Chat Completions, Gemini, sub-tasks, the client-side web_search tool, durable turns, research steps.
JS_LACKS = {"openai-responses", "azure-responses", "openai-chat", "gemini-generate", "tool:task",
            "tool:web_search", "durable", "research"}


def _failures(results: list[Result]) -> dict[str, str]:
    return {result.scenario.name: result.failure_text() for result in results if result.failed}


def test_there_are_sixteen_scenarios_and_every_mutant_is_named_by_one() -> None:
    assert len(SCENARIOS) >= 16
    named = {mutant for scenario in SCENARIOS for mutant in scenario.kills}
    assert named == set(MUTANTS)


def test_every_bundled_scenario_passes_on_the_reference() -> None:
    results = run_many(SCENARIOS, Target.parse(DEFAULT_TARGET), jobs=2)
    assert [result.verdict for result in results] == ["pass"] * len(SCENARIOS), _failures(results)


def test_every_scenario_fails_on_each_mutant_it_names() -> None:
    reference = Target.parse(DEFAULT_TARGET)
    jobs = [(scenario, reference, mutant) for scenario in SCENARIOS for mutant in scenario.kills]
    survivors = [(result.scenario.name, result.mutant) for result in run_jobs(jobs, jobs=2) if result.passed]
    assert survivors == []


def _js(defect: str | None = None) -> Target:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the JavaScript target needs Node 20")
    prefix = f"REPLAYKIT_JS_DEFECT={defect} " if defect else ""
    return Target.parse(f"{prefix}node {JS}", ROOT)


def test_the_javascript_target_passes_or_is_na_on_every_scenario() -> None:
    results = run_many(SCENARIOS, _js(), jobs=2)
    assert _failures(results) == {}
    ran = [result.scenario.name for result in results if result.applicable]
    assert "example-nameless-search-block" in ran and len(ran) >= 15, ran
    assert {need for result in results for need in result.missing} == JS_LACKS


def test_the_javascript_target_with_a_defect_fails_on_the_right_expectation() -> None:
    scenario: Scenario = NAMES["example-nameless-search-block"]
    (result,) = run_many([scenario], _js("assume-name"))
    assert not result.passed
    failure = result.failure_text()
    assert failure.startswith("outcome: expected ok, got error (INTERNAL_ERROR: TypeError"), failure
    assert "reading 'length'" in failure


def test_the_javascript_targets_own_mutant_is_killed_by_the_scenarios_that_declare_its_class() -> None:
    from replaykit.scenario.mutants import run_matrix

    target = _js()
    assert set(target.manifest.mutants) == {"estimator-assumes-name"}
    declaring = [s for s in SCENARIOS if "estimator-assumes-name" in s.kills]
    matrix = run_matrix(declaring, target, ["estimator-assumes-name"], jobs=2, declared=True)
    assert matrix.problems() == []
    assert {"example-nameless-search-block", "nameless-search-block-after-anchor"} <= set(
        matrix.killers("estimator-assumes-name"))
