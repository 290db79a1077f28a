"""The research step in-process (replaykit.reference.research), on the research scenarios' cassettes: what the
reference does, and each step-level mutant failing the check it is for (the scenarios kill every research
mutant end to end; the pure parts' mutants are killed in test_evidence.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from reference_support import READ_TOOL, Case, Result, drive, step
from test_evidence import KILLED_HERE as EVIDENCE_KILLS

from replaykit.contracts import validate
from replaykit.reference import MUTANTS

JSON = dict[str, Any]
ACCOUNT = "0123456789abcdef0123456789abcdef"
QUESTION = "When was Python 3.13.0 released?"
QUERY = "Python 3.13.0 release date"


def research(name: str, *faults: str, tools: list[JSON] | None = None, **spec: Any) -> Case:
    """A one-step research case served the scenario ``name``'s cassette."""
    given = {"accountId": ACCOUNT, "queries": [QUERY], **spec}
    return Case(name, [step(QUESTION, research=given)], tools=tools or [], faults=list(faults),
                extra={"maxRetries": 0})


def routes(result: Result) -> list[str]:
    return [entry.route for entry in result.journal]


def entry(result: Result) -> JSON:
    assert [v for v in validate("replaykit.target-outcome", result.outcome) if v.severity == "error"] == []
    (found,) = result.outcome["research"]
    return dict(found)


def test_too_little_evidence_is_reported_and_the_model_never_asked(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    result = drive(research("research-insufficient-evidence"), monkeypatch, tmp_path)
    assert routes(result) == ["cloudflare.websearch"]
    assert (result.outcome["status"], entry(result)["error"]) == (
        "ok", {"code": "insufficient_evidence", "retryable": False})
    mutated = drive(research("research-insufficient-evidence"), monkeypatch, tmp_path,
                    "answers-without-evidence")
    assert "anthropic.messages" in routes(mutated)


def test_a_capacity_failure_falls_back_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    case = research("research-search-fallback", "kind=status,route=cloudflare.websearch,nth=1,status=429",
                    providers=["ceramic", "exa"])
    result = drive(case, monkeypatch, tmp_path)
    assert routes(result) == ["cloudflare.websearch", "cloudflare.websearch", "anthropic.messages"]
    assert [entry.body["provider"] for entry in result.journal[:2]] == ["ceramic", "exa"]
    assert entry(result)["answer"] == "Python 3.13.0 was released on Oct. 7, 2024."
    mutated = drive(case, monkeypatch, tmp_path, "no-fallback")
    assert (mutated.outcome["status"], routes(mutated)) == ("error", ["cloudflare.websearch"])


def test_the_fallback_is_tried_once_then_the_step_stops(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    case = research("research-search-capacity", "kind=status,route=cloudflare.websearch,status=429,times=9",
                    providers=["ceramic", "exa"])
    result = drive(case, monkeypatch, tmp_path)
    assert routes(result) == ["cloudflare.websearch"] * 2
    assert (result.outcome["error"]["status"], entry(result)["error"]) == (
        429, {"code": "search_capacity", "retryable": True})
    assert len(drive(case, monkeypatch, tmp_path, "fallback-unbounded").journal) > 2


def test_an_auth_failure_is_not_a_capacity_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    case = research("research-search-auth", "kind=status,route=cloudflare.websearch,status=401",
                    providers=["ceramic", "exa"])
    result = drive(case, monkeypatch, tmp_path)
    assert routes(result) == ["cloudflare.websearch"]
    assert entry(result)["error"] == {"code": "search_auth", "retryable": False}


def test_a_tool_call_in_the_reply_is_never_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    case = research("research-injected-instruction", tools=[READ_TOOL])
    case.files = {"secrets.txt": "launch phrase: BLUEBIRD-SEVEN\n"}
    result = drive(case, monkeypatch, tmp_path)
    assert routes(result) == ["cloudflare.websearch", "anthropic.messages"]
    assert "tools" not in result.journal[1].body
    assert entry(result)["ignoredToolCalls"] == 1
    assert entry(result)["withheld"][0]["reason"] == "copied-instruction"
    mutated = drive(case, monkeypatch, tmp_path, "injected-instruction-obeyed")
    assert "BLUEBIRD" in str([e.body for e in mutated.journal])


def test_one_deadline_is_shared_by_every_stage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    case = research("research-deadline", "kind=delay_headers,route=cloudflare.websearch,ms=2000",
                    "kind=delay_headers,route=anthropic.messages,ms=1500", deadlineMs=3000)
    result = drive(case, monkeypatch, tmp_path)
    assert (result.outcome["error"]["code"], entry(result)["error"]) == (
        "DEADLINE_EXCEEDED", {"code": "deadline", "retryable": True})
    assert drive(case, monkeypatch, tmp_path, "deadline-per-stage").outcome["status"] == "ok"


def test_a_blank_query_is_an_invalid_request_before_any_search(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    result = drive(research("research-insufficient-evidence", queries=["  "]), monkeypatch, tmp_path)
    assert (result.journal, result.outcome["error"]["code"]) == ([], "LOCAL_REQUEST_ERROR")
    assert entry(result)["error"] == {"code": "invalid_request", "retryable": False}


KILLED_HERE: dict[str, Callable[..., None]] = {
    "answers-without-evidence": test_too_little_evidence_is_reported_and_the_model_never_asked,
    "no-fallback": test_a_capacity_failure_falls_back_once,
    "fallback-unbounded": test_the_fallback_is_tried_once_then_the_step_stops,
    "injected-instruction-obeyed": test_a_tool_call_in_the_reply_is_never_run,
    "deadline-per-stage": test_one_deadline_is_shared_by_every_stage,
}


def test_every_research_mutant_is_killed_in_process() -> None:
    research_mutants = set(list(MUTANTS)[list(MUTANTS).index("unknown-source-accepted"):])
    assert set(KILLED_HERE) | set(EVIDENCE_KILLS) == research_mutants
