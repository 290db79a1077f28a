"""Each expectation holds on a good outcome and journal, and fails, saying why, on the defect it is for."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from replaykit.canonical import canonical_transcript
from replaykit.scenario import Check, Evidence, Scenario, check_all
from replaykit.scenario.expect import in_count
from replaykit.scenario.snapshot import normalize, serialize
from replaykit.server import Entry

JSON = dict[str, Any]
BODY = {
    "model": "m",
    "max_tokens": 10,
    "messages": [{"role": "user", "content": [{"type": "text", "text": "When was Python 3.13 released?"}]}],
}
TRANSCRIPT = {
    "version": 1,
    "system": None,
    "tools": [],
    "messages": [{"role": "user", "content": "hi", "timestamp": 1}],
}


def entry(seq: int = 1, route: str = "anthropic.messages", body: Any = BODY, **more: Any) -> Entry:
    """A journal entry as the fake provider makes it (``body``: the request's JSON)."""
    return Entry(seq, "2026-01-01T00:00:00Z", "anthropic", route, "POST", "/v1/messages", {}, {},
                 raw=json.dumps(body).encode(), **{"status": 200, "verdict": "served", **more})


def outcome(**more: Any) -> JSON:
    return {
        "status": "ok",
        "error": None,
        "transcript": TRANSCRIPT,
        "persistWrites": 1,
        "estimates": [{"step": 0, "tokens": 20}],
        **more,
    }


def scenario(tmp_path: Path, **expectations: Any) -> Scenario:
    doc = {
        "name": "s",
        "kind": "contract",
        "description": "d",
        "steps": [{"prompt": "p", "provider": "anthropic", "model": "m"}],
        "expectations": {"outcome": "ok", **expectations},
    }
    return Scenario(tmp_path / "s.yaml", doc)


def good() -> Evidence:
    return Evidence(outcome(), "", [entry()], [], TRANSCRIPT)


def failed(checks: list[Check]) -> list[tuple[str, str]]:
    return [(check.name, check.why) for check in checks if not check.ok]


def only_failure(tmp_path: Path, seen: Evidence, **expectations: Any) -> tuple[str, str]:
    assert failed(check_all(scenario(tmp_path, **expectations), good())) == []  # holds on the good run
    (found,) = failed(check_all(scenario(tmp_path, **expectations), seen))
    return found


def changed(**fields: Any) -> Evidence:
    seen = good()
    for key, value in fields.items():
        setattr(seen, key, value)
    return seen


def test_a_good_run_passes_every_expectation(tmp_path: Path) -> None:
    checks = check_all(
        scenario(
            tmp_path,
            providerRequests=1,
            requests={"anthropic.messages": 1},
            requestContractsHold=True,
            persistWrites=1,
            estimates=[{"step": 0, "min": 10, "max": 30}],
            reaches=[{"request": 1, "pointer": "/messages/0/role", "equals": "user"}],
            neverReaches=[{"pointer": "/x_internal"}],
        ),
        good(),
    )
    assert failed(checks) == []
    assert [check.name for check in checks] == [  # cause order: before the request, what was sent, the end
        "target",
        "estimates[step 0]",
        "requestContractsHold",
        "providerRequests",
        "requests[anthropic.messages]",
        "reaches[0]",
        "neverReaches[0]",
        "unmatched",
        "unused",
        "outcome",
        "persistWrites",
    ]


def test_no_outcome_fails_the_target_first(tmp_path: Path) -> None:
    seen = changed(outcome=None, problem="target timed out after 500 ms (timeoutMs)")
    checks = check_all(scenario(tmp_path, persistWrites=1), seen)
    assert failed(checks)[0] == ("target", "target timed out after 500 ms (timeoutMs)")
    assert ("persistWrites", "no outcome to check") in failed(checks)


def test_outcome_status(tmp_path: Path) -> None:
    error = {"code": "PROVIDER_ERROR", "provenance": "provider", "retryable": True, "message": "HTTP 529"}
    found = only_failure(tmp_path, changed(outcome=outcome(status="error", error=error)))
    assert found == ("outcome", "expected ok, got error (PROVIDER_ERROR: HTTP 529)")


def test_outcome_listing_statuses_takes_either_and_checks_the_error_only_on_an_error(tmp_path: Path) -> None:
    either = {"outcome": ["ok", "error"], "error": {"code": "LOCAL_REQUEST_ERROR", "provenance": "local"}}
    local = {"code": "LOCAL_REQUEST_ERROR", "provenance": "local", "retryable": False, "message": "refused"}
    remote = {"code": "PROVIDER_ERROR", "provenance": "provider", "retryable": False, "message": "HTTP 400"}
    assert failed(check_all(scenario(tmp_path, **either), good())) == []
    assert failed(check_all(scenario(tmp_path, **either), changed(outcome=outcome(status="error",
                                                                                  error=local)))) == []
    assert failed(check_all(scenario(tmp_path, **either), changed(outcome=outcome(status="error",
                                                                                  error=remote)))) == [
        ("error.code", "expected LOCAL_REQUEST_ERROR, got PROVIDER_ERROR (HTTP 400)"),
        ("error.provenance", "expected local, got provider (HTTP 400)")]
    aborted = changed(outcome=outcome(status="aborted", error={**local, "code": "CANCELLED"}))
    assert failed(check_all(scenario(tmp_path, **either), aborted))[0] == (
        "outcome", "expected ok or error, got aborted (CANCELLED: refused)")


@pytest.mark.parametrize(
    ("key", "wanted", "got"),
    [
        ("code", "LOCAL_REQUEST_ERROR", "INTERNAL_ERROR"),
        ("phase", "validation", None),
        ("provenance", "local", "provider"),
    ],
)
def test_error_fields(tmp_path: Path, key: str, wanted: str, got: str | None) -> None:
    error = {"code": "INTERNAL_ERROR", "provenance": "provider", "retryable": False, "message": "boom"}
    seen = changed(outcome=outcome(status="error", error=error))
    checks = check_all(
        scenario(
            tmp_path,
            outcome="error",
            error={key: wanted, "code": error["code"]} if key != "code" else {"code": wanted},
        ),
        seen,
    )
    assert failed(checks) == [(f"error.{key}", f"expected {wanted}, got {got or 'none'} (boom)")]


def test_provider_requests_exact_and_range(tmp_path: Path) -> None:
    name, why = only_failure(tmp_path, changed(journal=[entry(1), entry(2)]), providerRequests=1)
    assert name == "providerRequests" and why.startswith(
        "expected 1 provider request(s), the journal holds 2:"
    )
    assert "#2 POST /v1/messages" in why
    ranged = scenario(tmp_path, providerRequests={"min": 2, "max": 3})
    assert failed(check_all(ranged, changed(journal=[entry(1), entry(2)]))) == []
    assert failed(check_all(ranged, good()))[0][1].startswith("expected 2..3 provider request(s)")
    assert in_count({"max": 1}, 0) and not in_count({"min": 1}, 0)


def test_requests_per_route(tmp_path: Path) -> None:
    seen = changed(journal=[entry(1), entry(2, "openai.responses")])
    found = only_failure(tmp_path, seen, requests={"anthropic.messages": 1, "openai.responses": 0})
    assert found[0] == "requests[openai.responses]"
    assert found[1].startswith("expected 0 request(s) on openai.responses, found 1")


def test_unmatched_fails_unless_allowed(tmp_path: Path) -> None:
    seen = changed(journal=[entry(verdict="unmatched", error="no interaction left on anthropic.messages")])
    assert only_failure(tmp_path, seen) == (
        "unmatched",
        "1 request(s) matched no interaction: request #1 POST /v1/messages: "
        "no interaction left on anthropic.messages",
    )
    assert failed(check_all(scenario(tmp_path, unmatched=True), seen)) == []


def test_unused_fails_unless_allowed(tmp_path: Path) -> None:
    seen = changed(unused=[{"cassette": "a.yaml", "index": 1, "line": 40, "route": "anthropic.messages"}])
    assert only_failure(tmp_path, seen) == (
        "unused",
        "1 interaction(s) never served whole: a.yaml#1 (anthropic.messages)",
    )
    assert failed(check_all(scenario(tmp_path, unused=True), seen)) == []


def test_request_contracts_hold(tmp_path: Path) -> None:
    broken = [{"pointer": "/x_internal", "message": "unexpected member", "severity": "error"}]
    seen = changed(journal=[entry(request_violations=broken)])
    assert only_failure(tmp_path, seen, requestContractsHold=True) == (
        "requestContractsHold",
        "request #1 breaks its contract at /x_internal: unexpected member",
    )
    warned = changed(journal=[entry(request_violations=[{**broken[0], "severity": "warning"}])])
    assert failed(check_all(scenario(tmp_path, requestContractsHold=True), warned)) == []
    assert (
        failed(check_all(scenario(tmp_path, requestContractsHold=False), good()))[0][0]
        == "requestContractsHold"
    )


def test_persist_writes(tmp_path: Path) -> None:
    found = only_failure(tmp_path, changed(outcome=outcome(persistWrites=0)), persistWrites=1)
    assert found == ("persistWrites", "expected 1 write(s), got 0")


def test_estimates_bounds_and_missing(tmp_path: Path) -> None:
    bounds = [{"step": 0, "min": 10, "max": 30}]
    big = changed(outcome=outcome(estimates=[{"step": 0, "tokens": 2000}]))
    assert only_failure(tmp_path, big, estimates=bounds) == (
        "estimates[step 0]",
        "expected 10..30 tokens, got 2000",
    )
    none = changed(outcome=outcome(estimates=[]))
    assert only_failure(tmp_path, none, estimates=bounds) == (
        "estimates[step 0]",
        "expected an estimate of 10..30 tokens, the target made none",
    )


def test_estimates_count(tmp_path: Path) -> None:
    retried = changed(outcome=outcome(estimates=[{"step": 0, "tokens": 20}] * 3))  # a local error retried
    assert only_failure(tmp_path, retried, estimates=[{"step": 0, "count": 1, "min": 10}]) == (
        "estimates[step 0]",
        "expected 1 estimate(s), the target made 3",
    )
    assert failed(check_all(scenario(tmp_path, estimates=[{"step": 0, "count": {"min": 3}}]), retried)) == []


def test_reaches(tmp_path: Path) -> None:
    wanted = [{"request": 1, "pointer": "/messages/*/content/*/text", "contains": "Python 3.13"}]
    dropped = copy.deepcopy(BODY)
    dropped["messages"][0]["content"] = []
    name, why = only_failure(tmp_path, changed(journal=[entry(body=dropped)]), reaches=wanted)
    assert (name, why) == (
        "reaches[0]",
        "request 1 has nothing at /messages/*/content/*/text (1 request(s) journaled)",
    )
    other = copy.deepcopy(BODY)
    other["messages"][0]["content"][0]["text"] = "something else"
    assert only_failure(tmp_path, changed(journal=[entry(body=other)]), reaches=wanted)[1] == (
        "expected /messages/*/content/*/text containing 'Python 3.13' in request 1, request 1 has "
        '/messages/0/content/0/text = "something else"'
    )
    assert only_failure(tmp_path, changed(journal=[]), reaches=wanted)[0] == "reaches[0]"


def test_never_reaches(tmp_path: Path) -> None:
    leaked = {**copy.deepcopy(BODY), "x_internal": {"note": 1}}
    seen = changed(journal=[entry(1), entry(2, body=leaked)])
    assert only_failure(tmp_path, seen, neverReaches=[{"pointer": "/x_internal"}]) == (
        "neverReaches[0]",
        "/x_internal reached the provider: request 2 at /x_internal",
    )
    typed = [{"pointer": "/messages/*/content/*/type", "equals": "web_search_tool_result"}]
    sent = copy.deepcopy(BODY)
    sent["messages"][0]["content"].append({"type": "web_search_tool_result"})
    assert only_failure(tmp_path, changed(journal=[entry(body=sent)]), neverReaches=typed)[1] == (
        '/messages/*/content/*/type = "web_search_tool_result" reached the provider: request 1 at '
        "/messages/0/content/1/type"
    )


RESEARCH = [{"answer": "A [S1]", "sources": [{"id": "S1", "url": "https://a.example/"}], "error": None}]


def test_outcome_has(tmp_path: Path) -> None:
    seen = changed(outcome=outcome(research=RESEARCH))
    wanted = [{"pointer": "/research/0/sources/*/id", "equals": "S1"}, {"pointer": "/research/0/error"},
              {"pointer": "/research/0/answer", "contains": "[S1]"}]
    assert failed(check_all(scenario(tmp_path, outcomeHas=wanted), seen)) == []
    other = copy.deepcopy(RESEARCH)
    other[0]["sources"][0]["id"] = "S7"
    found = failed(check_all(scenario(tmp_path, outcomeHas=wanted), changed(outcome=outcome(research=other))))
    assert found == [("outcomeHas[0]", 'expected /research/0/sources/*/id = "S1", the outcome has '
                                       '/research/0/sources/0/id = "S7"')]
    found = failed(check_all(scenario(tmp_path, outcomeHas=wanted), good()))
    assert found[0] == ("outcomeHas[0]", "the outcome has nothing at /research/0/sources/*/id")
    assert len(found) == 3
    crashed = Evidence(None, "the target wrote no outcome", [], [], None)
    assert ("outcomeHas[1]", "no outcome to check") in failed(
        check_all(scenario(tmp_path, outcomeHas=wanted), crashed))


def test_outcome_lacks(tmp_path: Path) -> None:
    lacks = [{"pointer": "/research/*/sources/*/url", "contains": "javascript:"}, {"pointer": "/research/1"}]
    seen = changed(outcome=outcome(research=RESEARCH))
    assert failed(check_all(scenario(tmp_path, outcomeLacks=lacks), seen)) == []
    assert failed(check_all(scenario(tmp_path, outcomeLacks=lacks), good())) == []  # nothing there at all
    bad = copy.deepcopy(RESEARCH)
    bad[0]["sources"][0]["url"] = "javascript:alert(1)"
    twice = changed(outcome=outcome(research=bad * 2))
    found = failed(check_all(scenario(tmp_path, outcomeLacks=lacks), twice))
    assert found == [
        ("outcomeLacks[0]", "the outcome has /research/*/sources/*/url containing 'javascript:': "
                            '/research/0/sources/0/url = "javascript:alert(1)"'),
        ("outcomeLacks[1]", 'the outcome has /research/1: /research/1 = {"answer": "A [S1]", "sources": '
                            '[{"id": "S1", "url": "javascript:alert(1)"}], "error": null}')]


def test_persisted_snapshot(tmp_path: Path) -> None:
    seen = good()
    seen.update_snapshots = True
    assert failed(check_all(scenario(tmp_path, persistedSnapshot=True), seen)) == []
    stored = tmp_path / "__snapshots__" / "s.json"
    assert stored.read_text(encoding="utf-8") == serialize(canonical_transcript(TRANSCRIPT))
    assert failed(check_all(scenario(tmp_path, persistedSnapshot=True), good())) == []
    restamped = copy.deepcopy(TRANSCRIPT)
    restamped["messages"][0]["timestamp"] = 99  # timestamps are normalized: still equal
    assert failed(check_all(scenario(tmp_path, persistedSnapshot=True), changed(persisted=restamped))) == []
    blocks = copy.deepcopy(TRANSCRIPT)  # by meaning: a string content is a text block; no bookkeeping
    blocks["messages"][0]["content"] = [{"type": "text", "text": "hi"}]
    blocks["systemHistory"] = [{"timestamp": 1, "system": None, "tools": []}]
    assert failed(check_all(scenario(tmp_path, persistedSnapshot=True), changed(persisted=blocks))) == []
    edited = copy.deepcopy(TRANSCRIPT)
    edited["messages"][0]["content"] = "bye"
    ((name, why),) = failed(check_all(scenario(tmp_path, persistedSnapshot=True), changed(persisted=edited)))
    assert name == "persistedSnapshot" and '/messages/0/content/0/text: stored "hi", persisted "bye"' in why
    ((name, why),) = failed(check_all(scenario(tmp_path, persistedSnapshot=True), changed(persisted=None)))
    assert why.startswith("the target persisted no transcript")
    ((name, why),) = failed(check_all(scenario(tmp_path, persistedSnapshot="other"), good()))
    assert why.startswith(
        f"no snapshot {tmp_path / '__snapshots__' / 'other.json'}; run with --snapshot-update"
    )


def test_normalize_keeps_links_between_ids() -> None:
    doc = {
        "messages": [
            {
                "timestamp": 5,
                "content": [
                    {"type": "toolCall", "id": "call_9"},
                    {"toolCallId": "call_9", "tool_use_id": "srv_1"},
                ],
            }
        ]
    }
    assert normalize(doc) == {
        "messages": [
            {
                "timestamp": "<timestamp>",
                "content": [
                    {"type": "toolCall", "id": "<id:1>"},
                    {"toolCallId": "<id:1>", "tool_use_id": "<id:2>"},
                ],
            }
        ]
    }
    assert doc["messages"][0]["timestamp"] == 5


def test_without_an_outcome_each_outcome_check_fails_by_name_and_every_held_check_says_nothing(
    tmp_path: Path,
) -> None:
    wanted = {"error": {"code": "PROVIDER_ERROR"}, "persistWrites": 1, "estimates": [{"step": 0, "min": 1}],
              "persistedSnapshot": True}
    crashed = Evidence(None, "the target wrote no outcome", [entry()], [], None)
    found = failed(check_all(scenario(tmp_path, outcome="error", **wanted), crashed))
    assert found[0] == ("target", "the target wrote no outcome")  # the first failure says why
    assert found[1:5] == [(name, "no outcome to check")
                          for name in ("estimates[step 0]", "outcome", "error.code", "persistWrites")]
    assert found[5:] == [("persistedSnapshot",
                          "the target persisted no transcript ($REPLAYKIT_STATE_DIR/transcript.json)")]
    held = check_all(scenario(tmp_path, persistWrites=1, unused=True), good())
    assert [(check.ok, check.why) for check in held] == [(True, "")] * len(held)
    assert held[-2].to_json() == {"name": "outcome", "ok": True, "why": "", "stage": "ended"}
