"""replaykit repro pinpoints the provider rule a reported request breaks (tests/data/repro/rules: real
reports, each with its source), in the reported request or in the request replaying the transcript, and
writes a scenario that fails on a harness sending the broken request and passes on one that refuses the
transcript (the reference) or repairs it (tests/fixtures/targets/rules)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from replaykit import cassette, contracts
from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.cli import EXIT_OK, main
from replaykit.reference.wire import wire_body
from replaykit.repro import reproduce
from replaykit.repro.bundle import SCENARIO, SUMMARY
from replaykit.repro.diagnosis import REPLAYED, REPORTED
from replaykit.repro.reported import read
from replaykit.scenario import DEFAULT_TARGET, Target, load, run_scenario
from replaykit.verify import verify_file

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "tests" / "data" / "repro" / "rules"
HARNESSES = ROOT / "tests" / "fixtures" / "targets" / "rules"
JS = ROOT / "tests" / "fixtures" / "targets" / "js" / "target.mjs"
#: fixture -> (the rule, its pointer, the other rules it breaks); in the reported request.
PINPOINTED = {
    "anthropic-proxy-rewrote-server-tool-id": ("anthropic.server_tool_use_id", "/messages/1/content/2/id",
                                               set()),
    "anthropic-web-search-result-without-server-call": (
        "anthropic.server_tool_use_id", "/messages/1/content/0/tool_use_id",
        {"anthropic.server_result_follows_call at /messages/1/content/0/tool_use_id"}),
    "anthropic-server-search-resent-as-tool-use": (
        "anthropic.tool_use_answered", "/messages/1/content/1/id",
        {"anthropic.server_call_as_client at /messages/1/content/1/type",
         "anthropic.server_call_as_client at /messages/1/content/3/type"}),
    "anthropic-client-tool-use-before-server-search": ("anthropic.client_tool_use_last",
                                                       "/messages/1/content/2", set()),
    "anthropic-client-tool-use-before-code-execution": ("anthropic.client_tool_use_last",
                                                        "/messages/1/content/1", set()),
    "openai-store-false-reasoning-by-id": ("openai.store_false_reference", "/input/1/id", set()),
    "openai-reasoning-without-following-item": ("openai.reasoning_followed", "/input/1/id", set()),
}
#: The error each report quotes, word for word (where it quotes one whole).
QUOTED = {
    "anthropic-server-search-resent-as-tool-use":
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "srvtoolu_01K13yuWTLUMsWXkpjYNX5es, srvtoolu_01LKCLjo1wqtRfuXBidNL2nP. Each `tool_use` block must "
        "have a corresponding `tool_result` block in the next message.",
    "openai-store-false-reasoning-by-id":
        "Item with id 'rs_688404f677dc81a1b0f94bd50c9dbc4b064a6bfa4c1e652e' not found. Items are not "
        "persisted when `store` is set to false. Try again with `store` set to true, or remove this item "
        "from your input.",
    "openai-reasoning-without-following-item":
        "Item 'rs_0c3876fcd4da19ef00692a14046bc8819eba6941c05c5ab7e7' of type 'reasoning' was provided "
        "without its required following item.",
    "anthropic-proxy-rewrote-server-tool-id":
        "messages.1.content.2.server_tool_use.id: String should match pattern '^srvtoolu_[a-zA-Z0-9_]+$'",
}
#: Replayed statelessly (store: false), the reasoning item also lacks its encrypted content: that rule first.
REPLAYED_RULE = {"openai-reasoning-without-following-item": "openai.store_false_reference"}
NAMES = sorted(PINPOINTED)


def test_every_fixture_is_pinpointed_and_has_its_source() -> None:
    assert {path.stem for path in RULES.glob("*.json")} == set(PINPOINTED)
    for name in NAMES:
        source = (RULES / f"{name}.source").read_text(encoding="utf-8")
        assert source.startswith(f"{name}.json: ") and re.search(r"https://github\.com/\S+/(issues|pull)/\d+",
                                                                  source)
        assert PINPOINTED[name][0] in source


@pytest.mark.parametrize("name", NAMES)
def test_the_reported_request_is_pinpointed_with_its_rule_and_the_providers_words(tmp_path: Path,
                                                                                    name: str) -> None:
    rule, pointer, others = PINPOINTED[name]
    done = reproduce(RULES / f"{name}.json", tmp_path / "out")
    failure = done.diagnosis.failure
    assert failure is not None
    found = (failure.kind, failure.rule, failure.pointer, failure.request)
    assert found == ("request violation", rule, pointer, REPORTED)
    assert set(failure.others) == others
    spec = contracts.rule_spec(rule)
    assert spec is not None and failure.statement.startswith(spec.statement.rstrip("."))
    body = json.loads((RULES / f"{name}.json").read_text())
    assert failure.message == contracts.refusal(spec, body).message
    assert failure.message == QUOTED.get(name, failure.message)
    summary = json.loads((tmp_path / "out" / SUMMARY).read_text())["firstFailure"]
    assert (summary["rule"], summary["pointer"], summary["request"]) == (rule, pointer, REPORTED)


@pytest.mark.parametrize("name", NAMES)
def test_a_transcript_is_pinpointed_in_the_request_replaying_it(tmp_path: Path, name: str) -> None:
    neutral = tmp_path / f"{name}.json"
    neutral.write_text(json.dumps(read(RULES / f"{name}.json").transcript))
    done = reproduce(neutral, tmp_path / "out")
    failure = done.diagnosis.failure
    assert failure is not None and done.reported.form == "neutral transcript"
    rule, pointer, _ = PINPOINTED[name]
    wanted = (REPLAYED_RULE.get(name, rule), pointer, REPLAYED)
    assert (failure.rule, failure.pointer, failure.request) == wanted
    sent = wire_body(done.diagnosis.body or {}, done.diagnosis.target)  # the request a harness would send
    kind = "anthropic.request" if done.diagnosis.target.provider == "anthropic" else "openai.request"
    assert failure.message == contracts.refusal(contracts.rule_spec(failure.rule), sent).message  # type: ignore[arg-type]
    assert failure.rule in {v.rule for v in contracts.validate(kind, sent)}


def test_a_cassette_is_pinpointed_in_its_failing_request(tmp_path: Path) -> None:
    body = json.loads((RULES / "openai-store-false-reasoning-by-id.json").read_text())
    refused = {"error": {"message": QUOTED["openai-store-false-reasoning-by-id"],
                         "type": "invalid_request_error", "param": "input", "code": None}}
    tape = Cassette(interactions=[Interaction(
        Request("POST", "https://api.openai.com/v1/responses", {"content-type": ["application/json"]},
                json.dumps(body).encode()),
        Response(404, "Not Found", {"content-type": ["application/json"]}, json.dumps(refused).encode()))],
        meta=Meta(origin="synthesized", provider="openai", description="the reported 404"))
    (tmp_path / "bug.yaml").write_text(cassette.dumps(tape))
    done = reproduce(tmp_path / "bug.yaml", tmp_path / "out")
    assert done.reported.form.startswith("cassette, interaction 0 of 1 (the last whose response is an error")
    failure = done.diagnosis.failure
    assert failure is not None
    assert (failure.rule, failure.pointer, failure.message) == ("openai.store_false_reference", "/input/1/id",
                                                                refused["error"]["message"])


def test_the_cli_names_the_rule_where_it_was_found_and_what_else_is_broken(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = RULES / "anthropic-server-search-resent-as-tool-use.json"
    assert main(["repro", str(source), "--out", str(tmp_path / "d")]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("first failure: rule anthropic.tool_use_answered at /messages/1/content/1/id: "
                        + QUOTED["anthropic-server-search-resent-as-tool-use"])
    assert lines[2:6] == [
        "where: the reported request",
        "rule: Every client tool_use of an assistant message is answered by a tool_result with its id in the "
        "next (user) message (the provider answers 400 invalid_request_error)",
        "also broken: anthropic.server_call_as_client at /messages/1/content/1/type",
        "also broken: anthropic.server_call_as_client at /messages/1/content/3/type"]


@pytest.mark.parametrize("name", NAMES)
def test_the_scenario_requires_no_broken_part_and_takes_a_refusal_or_a_repair(tmp_path: Path,
                                                                              name: str) -> None:
    reproduce(RULES / f"{name}.json", tmp_path / "out")
    expected = yaml.safe_load((tmp_path / "out" / SCENARIO).read_text())["expectations"]
    assert expected["outcome"] == ["ok", "error"] and expected["requestContractsHold"] is True
    assert expected["error"] == {"code": "LOCAL_REQUEST_ERROR", "phase": "validation", "provenance": "local"}
    assert (expected["providerRequests"], expected["persistWrites"]) == ({"max": 1}, {"max": 1})
    assert "reaches" not in expected and "estimates" not in expected
    assert contracts.validate("replaykit.scenario", load(tmp_path / "out" / SCENARIO).doc) == []
    assert verify_file(tmp_path / "out" / "cassettes" / "repro.yaml").ok  # its recorded request keeps them


def _harness(function: str) -> Target:
    return Target.parse(f"python:rule_harnesses:{function}", here=HARNESSES)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_scenario_fails_on_the_request_as_sent_and_passes_once_the_rule_is_kept(tmp_path: Path,
                                                                                    name: str) -> None:
    rule = PINPOINTED[name][0]
    reproduce(RULES / f"{name}.json", tmp_path / "out")
    scenario = load(tmp_path / "out" / SCENARIO)
    sent = run_scenario(scenario, _harness("as_sent"))
    assert not sent.passed and sent.failure_text().startswith("requestContractsHold: request #1 breaks its "
                                                              "contract at ")
    assert REPLAYED_RULE.get(name, rule) in sent.failure_text()
    refused = run_scenario(scenario, Target.parse(DEFAULT_TARGET))  # the reference refuses it locally
    assert refused.passed or refused.missing, refused.failure_text()
    for harness in ("refuses", "repairs"):  # the reference, and the reference on a repaired transcript
        result = run_scenario(scenario, _harness(harness))
        assert result.passed, f"{harness}: {result.failure_text()}"


@pytest.mark.slow
def test_a_harness_of_another_language_that_sends_the_request_as_is_fails(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the JavaScript target needs Node 20 or later")
    reproduce(RULES / "anthropic-proxy-rewrote-server-tool-id.json", tmp_path / "out")
    result = run_scenario(load(tmp_path / "out" / SCENARIO), Target.parse(f"{node} {JS}"))
    assert not result.passed
    assert "anthropic.server_tool_use_id" in result.failure_text()
