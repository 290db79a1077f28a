"""The rulebook (``contracts/<provider>/request.rules.json``): every rule red on its failing example and green
on its passing one, through ``contracts.validate``, ``first_violation`` and ``verify``; the rulebook's own
checks (its schema, a check and an ``x-rules`` name for every rule); real recordings that break none."""

from __future__ import annotations

import json
import shutil
import string
from pathlib import Path
from typing import Any

import pytest

from replaykit import contracts
from replaykit.cassette import Cassette, Interaction, Request, Response, save
from replaykit.contracts import Contracts, RuleSpec
from replaykit.errors import ContractError
from replaykit.resources import data_dir
from replaykit.verify import verify_file

SPECS = list(contracts.default().rulebook().specs.values())
URIS = {"anthropic.request": "https://api.anthropic.com/v1/messages",
        "openai.request": "https://api.openai.com/v1/responses",
        "cloudflare.request": "https://api.cloudflare.com/client/v4/accounts/0123456789abcdef0123456789abcdef"
                              "/ai/websearch/"}


def _ids(spec: RuleSpec) -> str:
    return spec.id


def test_the_rulebook_has_at_least_25_rules_for_every_provider() -> None:
    assert len(SPECS) >= 25
    assert {spec.contract for spec in SPECS} == set(URIS)
    assert all(spec.sources and spec.statement for spec in SPECS)


@pytest.mark.parametrize("spec", SPECS, ids=_ids)
def test_each_rule_is_red_on_its_failing_example_and_green_on_its_passing_one(spec: RuleSpec) -> None:
    found = contracts.validate(spec.contract, spec.examples["fails"])
    assert {v.rule for v in found} == {spec.id}  # its own rule only: the provider answers that one
    failing = [v for v in found if v.rule == spec.id]
    assert [v.pointer for v in failing][:1] == [spec.examples["pointer"]]
    assert failing[0].message.startswith(f"{spec.id}: ") and failing[0].keyword == "x-rules"
    assert contracts.validate(spec.contract, spec.examples["passes"]) == []


@pytest.mark.parametrize("spec", SPECS, ids=_ids)
def test_first_violation_names_a_rule_of_the_failing_example(spec: RuleSpec) -> None:
    first = contracts.first_violation(spec.contract, spec.examples["fails"])
    assert first is not None and first.rule.startswith(spec.contract.partition(".")[0] + ".")
    assert contracts.first_violation(spec.contract, spec.examples["passes"]) is None


@pytest.mark.parametrize("spec", SPECS, ids=_ids)
def test_the_provider_answer_is_real_or_says_it_is_not_public(spec: RuleSpec) -> None:
    answer = contracts.refusal(spec, spec.examples["fails"])
    assert answer.status == spec.error.status and answer.type == spec.error.type
    if spec.wording == "not-public":
        said = f"(replaykit rule {spec.id}; the provider's exact wording is not public)"
        assert answer.message.endswith(said)
    else:
        names = {name for _, name, _, _ in string.Formatter().parse(spec.error.message) if name}
        first = next(contracts.RULES[spec.id](spec.examples["fails"]))
        assert names <= set(first.params), names - set(first.params)  # the failure names what it quotes
        assert answer.message.startswith(spec.error.message.split("{")[0])


def _cassette(tmp_path: Path, spec: RuleSpec, body: dict[str, Any], status: int = 200) -> Path:
    head = {"content-type": ["application/json"]}
    request = Request("POST", URIS[spec.contract], head, json.dumps(body).encode())
    response = Response(status, "", {"content-type": ["application/json"]}, b"{}")
    path = tmp_path / f"{spec.id}.yaml"
    save(Cassette([Interaction(request, response)]), path)
    return path


@pytest.mark.parametrize("spec", SPECS, ids=_ids)
def test_verify_reports_a_cassette_whose_request_breaks_the_rule(tmp_path: Path, spec: RuleSpec) -> None:
    broken = verify_file(_cassette(tmp_path, spec, spec.examples["fails"]))
    said = f"request {spec.examples['pointer']} {spec.id}: "
    ruled = [f for f in broken.findings if f.code == "contract" and f.message.startswith(said)]
    assert [(f.severity, f.place) for f in ruled] == [("error", "interactions[0]")]
    kept = verify_file(_cassette(tmp_path, spec, spec.examples["passes"]))
    assert [f for f in kept.findings if f.message.startswith("request ")] == []


def test_a_recorded_refusal_of_the_rule_verifies_as_expected(tmp_path: Path) -> None:
    spec = contracts.rule_spec("openai.store_false_reference")
    assert spec is not None
    found = verify_file(_cassette(tmp_path, spec, spec.examples["fails"], status=404)).findings
    ruled = [f for f in found if spec.id in f.message]
    assert [(f.severity, f.note) for f in ruled] == [
        ("expected", "the recorded response refuses it too (HTTP 404): it records the rule")]


def test_openai_id_prefixes_are_warnings_under_the_openai_compatible_profile() -> None:
    spec = contracts.rule_spec("openai.item_id_prefix")
    assert spec is not None
    strict = contracts.validate("openai.request", spec.examples["fails"])
    lenient = contracts.validate("openai.request", spec.examples["fails"], "openai-compatible")
    assert [(v.rule, v.severity) for v in strict] == [(spec.id, "error")]
    assert [(v.rule, v.severity) for v in lenient] == [(spec.id, "warning")]
    assert contracts.first_violation("openai.request", spec.examples["fails"], "openai-compatible") is None


def test_a_rule_replaces_the_schema_report_of_the_same_place() -> None:
    spec = contracts.rule_spec("anthropic.server_tool_use_id")
    assert spec is not None
    found = contracts.validate("anthropic.request", spec.examples["fails"])
    assert {(v.pointer, v.rule) for v in found} == {
        ("/messages/1/content/0/id", spec.id), ("/messages/1/content/1/tool_use_id", spec.id)}


# ---------------------------------------------------------------- the rulebook's own checks


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "contracts"
    shutil.copytree(data_dir("contracts"), root)
    return root


def _edit(root: Path, edit: Any) -> None:
    path = root / "anthropic" / "request.rules.json"
    book = json.loads(path.read_text(encoding="utf-8"))
    edit(book)
    path.write_text(json.dumps(book), encoding="utf-8")


@pytest.mark.parametrize(("edit", "says"), [
    (lambda book: book["rules"][0].pop("sources"), "'sources' is required"),
    (lambda book: book["rules"][0].update(id="anthropic.no_such_rule"), "has no check"),
    (lambda book: book["rules"].append(book["rules"][0]), "is defined twice"),
    (lambda book: book["rules"].pop(0), "have no rulebook entry"),
    (lambda book: book["rules"][0]["error"].pop("message"), "'message' is required"),
])
def test_a_broken_rulebook_is_refused_naming_the_file(tmp_path: Path, edit: Any, says: str) -> None:
    root = _copy(tmp_path)
    _edit(root, edit)
    with pytest.raises(ContractError, match=says):
        Contracts(root).rulebook()


def test_a_rule_its_contract_does_not_name_is_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    path = root / "anthropic" / "request.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    schema["$defs"]["params"]["x-rules"].remove("anthropic.tool_use_id")
    path.write_text(json.dumps(schema), encoding="utf-8")
    with pytest.raises(ContractError, match=r"'anthropic\.tool_use_id' is not named by anthropic\.request"):
        Contracts(root).rulebook()
