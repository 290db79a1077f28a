"""Each typed format (:mod:`replaykit.scenario.formats`, the server's journal ``Entry``) holds to its
contract: its keys are the contract's properties, its required keys the contract's ``required``, and a value
it builds validates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replaykit import contracts
from replaykit.jsondoc import JSON
from replaykit.resources import data_dir
from replaykit.scenario import Check, Result, load
from replaykit.scenario import formats as f
from replaykit.scenario import report as reports
from replaykit.server import Entry

CONTRACTS = data_dir("contracts") / "replaykit"
SCENARIOS = data_dir("scenarios")

# (the typed class, its contract file, the JSON pointer of its schema in that file)
PAIRS: list[tuple[Any, str, str]] = [
    (f.ScenarioDoc, "scenario", ""),
    (f.TargetInput, "target-input", ""),
    (f.Step, "target-input", "/$defs/step"),
    (f.CancelOn, "scenario", "/$defs/step/properties/cancelOn"),
    (f.TargetOutcome, "target-outcome", ""),
    (f.OutcomeError, "target-outcome", "/$defs/error"),
    (f.Estimate, "target-outcome", "/$defs/estimate"),
    (f.Receipt, "target-outcome", "/properties/receipts/items"),
    (f.RunReport, "run-report", ""),
    (f.Counts, "run-report", "/properties/counts"),
    (f.ReportResult, "run-report", "/$defs/result"),
    (f.ReportCheck, "run-report", "/$defs/check"),
]


def schema_at(name: str, pointer: str) -> JSON:
    node: JSON = json.loads((CONTRACTS / f"{name}.schema.json").read_text(encoding="utf-8"))
    for part in filter(None, pointer.split("/")):
        node = node[part]
    return node


@pytest.mark.parametrize(("typed", "name", "pointer"), PAIRS, ids=[typed.__name__ for typed, _, _ in PAIRS])
def test_the_typed_class_has_the_keys_of_its_contract(typed: Any, name: str, pointer: str) -> None:
    schema = schema_at(name, pointer)
    assert set(typed.__annotations__) == set(schema["properties"])
    assert set(typed.__required_keys__) == set(schema.get("required", []))


def test_the_journal_entry_has_the_fields_of_its_contract() -> None:
    schema = schema_at("journal-entry", "")
    entry = Entry(1, "2026-01-01T00:00:00Z", "anthropic", "anthropic.messages", "POST", "/v1/messages",
                  {}, {}, verdict="served", status=200, outcome="complete")
    assert list(entry.to_json()) == list(schema["properties"]) == schema["required"]
    assert contracts.validate("replaykit.journal-entry", entry.to_json()) == []


def bundled(name: str) -> Path:
    return SCENARIOS / f"{name}.yaml"


def test_the_target_input_a_scenario_builds_validates() -> None:
    scenario = load(bundled("durable-killed-mid-stream"))
    for first, (_, steps) in enumerate(scenario.segments()):
        given = scenario.target_input(steps, first == 0)
        assert contracts.validate("replaykit.target-input", given) == []
        assert set(given) <= set(f.TargetInput.__annotations__)


def test_a_scenario_doc_is_the_file_as_written() -> None:
    scenario = load(bundled("durable-killed-mid-stream"))
    assert contracts.validate("replaykit.scenario", scenario.doc) == []


def test_a_run_report_and_its_outcome_validate() -> None:
    scenario = load(bundled("durable-killed-mid-stream"))
    outcome: f.TargetOutcome = {
        "status": "error", "persistWrites": 0, "estimates": [f.Estimate(step=0, tokens=12)],
        "error": {"code": "PROVIDER_ERROR", "provenance": "provider", "retryable": True,
                  "message": "overloaded", "status": 529},
        "receipts": [f.Receipt(operationId="op-1", accepted=True, timestamp=1)],
    }
    assert contracts.validate("replaykit.target-outcome", outcome) == []
    checks = [Check("outcome", False, "expected ok, got error")]
    failed = Result(scenario, "python target.py", checks, outcome)
    report = reports.to_json([failed, Result(scenario, "python target.py", [], missing=("research",))])
    assert contracts.validate("replaykit.run-report", report) == []
    assert Result.from_json(report["results"][0]).to_json() == report["results"][0]
