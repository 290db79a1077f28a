"""The reference harness end to end against the fake provider, and each case failed by a named mutant.

Every case runs the reference (``replaykit.reference.run`` in-process; persist-then-restore runs
``python -m replaykit.reference`` twice, two processes) on its scenario fixture (``scenarios/``) and checks
the outcome, the provider requests (the journal), the persistence writes and the blocks in the journaled
request bodies. ``KILLS`` pairs each mutant not killed in another file, and each case, with a run that must
fail the case's check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from reference_support import (
    NOTES,
    READ_TOOL,
    SEARCH_TOOL,
    TASK_TOOL,
    WAIT_TOOL,
    Case,
    Json,
    Result,
    blocks,
    drive,
    folders,
    serve,
    step,
    stored,
)
from test_durable import KILLED_HERE as DURABLE_KILLS
from test_evidence import KILLED_HERE as EVIDENCE_KILLS
from test_research import KILLED_HERE as RESEARCH_STEP_KILLS
from test_websearch import KILLED_HERE as WEB_SEARCH_KILLS

from replaykit.contracts import validate
from replaykit.estimate import body_chars
from replaykit.reference import MUTANTS

QUESTION = "When was Python 3.13 released, and what are its headline features?"
FOLLOW = "Is the free-threaded build the default?"
QUERY = "Python 3.13 release date new features"
Check = Callable[[Result], None]


def _ok(result: Result, requests: int, writes: int) -> None:
    assert validate("replaykit.target-outcome", result.outcome) == []
    assert result.outcome["status"] == "ok", result.outcome["error"]
    assert len(result.journal) == requests
    assert result.outcome["persistWrites"] == writes


def _error(result: Result, requests: int, **error: object) -> None:
    assert validate("replaykit.target-outcome", result.outcome) == []
    assert result.outcome["status"] == "error"
    assert {key: result.outcome["error"].get(key) for key in error} == error
    assert len(result.journal) == requests
    assert result.outcome["persistWrites"] == 0
    assert not (result.state / "transcript.json").exists()


def _search_raws(transcript: Json) -> list[Json]:
    return [block["raw"] for message in transcript["messages"] if message["role"] == "assistant"
            for block in message["content"] if block["type"] == "hostedSearch"]


def _replays_search(body: Json, transcript: Json) -> None:
    sent = blocks(body, "server_tool_use") + blocks(body, "web_search_tool_result")
    raws = _search_raws(transcript)
    assert raws and sorted(map(json.dumps, sent)) == sorted(map(json.dumps, raws))


def _no_internal_fields(result: Result) -> None:
    for body in result.bodies():
        assert set(body) <= {"model", "max_tokens", "system", "tools", "messages", "stream"}
        assert '"timestamp"' not in json.dumps(body) and '"usage"' not in json.dumps(body)


def _heuristic(body: Json) -> int:
    return sum(chars.tokens for chars in body_chars(body).values())


# ---------------------------------------------------------------- the cases


def next_prompt() -> Case:
    return Case("search-next-prompt", [step(QUESTION), step(FOLLOW)])


def check_next_prompt(result: Result) -> None:
    _ok(result, 2, 2)
    transcript = result.outcome["transcript"]
    _replays_search(result.bodies()[1], transcript)
    _no_internal_fields(result)
    anchor = transcript["messages"][1]["usage"]["totalTokens"]  # the search turn's usage covers the prefix
    (first, second) = result.outcome["estimates"]
    assert first["step"] == 0 and first["tokens"] < 100
    assert second["step"] == 1 and anchor <= second["tokens"] <= anchor + 100
    assert result.persisted() == transcript


def read_tool() -> Case:
    prompt = "When was Python 3.13 released? Compare with my notes in notes.md."
    return Case("search-read-tool", [step(prompt)], tools=[SEARCH_TOOL, READ_TOOL])


def check_read_tool(result: Result) -> None:
    _ok(result, 2, 1)
    transcript, second = result.outcome["transcript"], result.bodies()[1]
    (answer,) = blocks(second, "tool_result")
    assert answer["content"] == [{"type": "text", "text": NOTES}] and answer["is_error"] is False
    _replays_search(second, transcript)
    final = transcript["messages"][-1]["content"][0]
    assert [citation["type"] for citation in final["citations"]] == ["web_search_result_location"]
    assert result.persisted()["messages"][-1]["content"][0] == final


CHANGED = "You are a careful research assistant. Cite every source."


def instruction_change() -> Case:
    return Case("search-instruction-change", [step(FOLLOW), step("And in Python 3.14?")],
                transcript=stored("search-instruction-change"), extra={"system": CHANGED})


def check_instruction_change(result: Result) -> None:
    _ok(result, 2, 2)
    first, second = result.bodies()
    assert first["system"] == second["system"] == CHANGED
    _replays_search(first, result.outcome["transcript"])
    (dropped, anchored) = result.outcome["estimates"]
    assert dropped["tokens"] == _heuristic(first)  # no anchor: everything sent is counted, searches included
    usage = result.outcome["transcript"]["messages"][3]["usage"]["totalTokens"]
    assert usage <= anchored["tokens"] <= usage + 50  # the new answer's usage anchors the next step


def delegation() -> Case:
    return Case("search-task-delegation", [step("Research Python 3.13 and have a sub-task check my notes.")],
                tools=[SEARCH_TOOL, READ_TOOL, TASK_TOOL, WAIT_TOOL])


def check_delegation(result: Result) -> None:
    _ok(result, 4, 1)
    parent, child, child_read, final = result.bodies()
    assert child["messages"] == [{"role": "user", "content": "Summarise notes.md."}]
    assert {tool["name"] for tool in child["tools"]} == {"web_search", "read"}
    assert blocks(child_read, "tool_result")[0]["content"] == [{"type": "text", "text": NOTES}]
    started, waited = blocks(final, "tool_result")
    assert started["content"][0]["text"] == "started task-1"
    assert waited["content"][0]["text"] == "task-1: The notes say Python 3.13 came out in October 2024."
    _replays_search(final, result.outcome["transcript"])
    assert len(parent["messages"]) == 1


def invalid_container() -> Case:
    return Case("invalid-search-container", [step(FOLLOW)], transcript=stored("invalid-search-container"),
                cassette=False)


def check_invalid_container(result: Result) -> None:
    _error(result, 0, code="LOCAL_REQUEST_ERROR", phase="validation", provenance="local", retryable=False)
    assert result.outcome["transcript"] is None and result.outcome["estimates"] == []


def display_only() -> Case:
    return Case("display-only-search-record", [step(FOLLOW)], transcript=stored("display-only-search-record"))


def check_display_only(result: Result) -> None:
    _ok(result, 1, 1)
    (body,) = result.bodies()
    assert blocks(body, "server_tool_use") == blocks(body, "web_search_tool_result") == []
    assert QUERY not in json.dumps(body)
    assert {"type": "text", "text": "I'll look that up."} in blocks(body, "text")


def cjk_budget() -> Case:
    prompt = "请总结这篇关于东京机器人初创企业的长篇报道，并列出每一家公司的名称。"
    return Case("cjk-near-budget", [step(prompt)], transcript=stored("cjk-near-budget"), tools=[],
                extra={"contextWindow": 4000, "reserve": 2900})


def check_cjk_budget(result: Result) -> None:
    _error(result, 0, code="LOCAL_REQUEST_ERROR", phase="estimation", provenance="local", retryable=False)
    assert len(result.outcome["estimates"]) == 1  # one attempt: a local error is never retried
    (estimate,) = result.outcome["estimates"]
    # over contextWindow - reserve, under one token per CJK character (3,394 of them: o200k_base counts 2,181)
    assert 1100 < estimate["tokens"] < 3394


def _fault_case(name: str, fault: str, **extra: object) -> Case:
    return Case(name, [step(FOLLOW)], transcript=stored(name), faults=[fault], extra=dict(extra))


def check_retried(result: Result) -> None:
    _ok(result, 2, 1)
    transcript = result.outcome["transcript"]
    roles = [message["role"] for message in transcript["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]  # the broken attempt left nothing behind
    assert transcript["messages"][-1]["stopReason"] == "stop"
    for body in result.bodies():
        _replays_search(body, transcript)


def check_529(result: Result) -> None:
    assert [entry.status for entry in result.journal] == [529, 200]
    check_retried(result)


def check_400(result: Result) -> None:
    _error(result, 1, code="PROVIDER_ERROR", provenance="provider", status=400, retryable=False)


def cancelled() -> Case:
    return Case("cancelled-subtask", [step("Research Python 3.13 and have a sub-task check my notes.",
                                           cancelAfterMs=1500)],
                tools=[SEARCH_TOOL, READ_TOOL, TASK_TOOL, WAIT_TOOL],
                faults=["kind=stall,route=anthropic,nth=2,after=1,ms=20000"], extra={"idleTimeoutMs": 10000})


def check_cancelled(result: Result) -> None:
    assert validate("replaykit.target-outcome", result.outcome) == []
    assert result.outcome["status"] == "aborted"
    assert result.outcome["error"]["code"] == "CANCELLED"
    assert result.outcome["error"]["provenance"] == "cancelled"
    assert len(result.journal) == 2 and result.outcome["persistWrites"] == 0
    assert result.bodies()[1]["messages"] == [{"role": "user", "content": "Summarise notes.md."}]


def switch() -> Case:
    return Case("model-switch-search-history", [step(QUESTION), step(FOLLOW, "openai", "gpt-5")])


def check_switch(result: Result) -> None:
    _ok(result, 2, 2)
    assert [entry.route for entry in result.journal] == ["anthropic.messages", "openai.responses"]
    second = json.dumps(result.bodies()[1])
    assert f"[web search: {QUERY}]" in second and "https://peps.python.org/pep-0719/" in second
    assert "server_tool_use" not in second and "encrypted_content" not in second


def code_execution() -> Case:
    return Case("code-execution-search-replay", [step("And Python 3.14?")],
                transcript=stored("code-execution-search-replay"))


def check_code_execution(result: Result) -> None:
    _ok(result, 1, 1)
    (body,) = result.bodies()
    sent = body["messages"][1]["content"]
    stored_blocks = result.outcome["transcript"]["messages"][1]["content"]
    raws = [block["raw"] for block in stored_blocks if "raw" in block]
    assert [block for block in sent if block["type"] != "text"] == raws
    assert [block["type"] for block in raws].count("code_execution_tool_result") == 1


DISCONNECT = "kind=disconnect,route=anthropic,nth=1,after=3"
STALL = "kind=stall,route=anthropic,nth=1,after=2,ms=3000"
G_QUESTION = "When was Python 3.13.0 released, and what does it add?"
C_QUESTION = "What line length does PEP 8 ask for, and what did Python 3.13 add?"


def bad_support() -> Case:
    return Case("gemini-grounding-bad-support", [step(G_QUESTION, "gemini", "gemini-2.5-flash")])


def check_bad_support(result: Result) -> None:
    _ok(result, 1, 1)
    assert [entry.route for entry in result.journal] == ["gemini.generate"]
    text = next(block for block in result.outcome["transcript"]["messages"][1]["content"]
                if block["type"] == "text")
    assert [support["groundingChunkIndices"] for support in text["citations"]] == [[1, 0]]  # [2]: no chunk


def chat_switch() -> Case:
    return Case("chat-annotations-provider-switch", [
        step(C_QUESTION, "openai", "gpt-4o-search-preview", api="openai-chat"),
        step("Which of those sources is a PEP?")])


def check_chat_switch(result: Result) -> None:
    _ok(result, 2, 2)
    assert [entry.route for entry in result.journal] == ["openai.chat", "anthropic.messages"]
    assert result.bodies()[0]["web_search_options"] == {}
    second = json.dumps(result.bodies()[1])
    assert "https://peps.python.org/pep-0008/" in second
    assert "https://docs.python.org/3/whatsnew/3.13.html" in second
    assert "url_citation" not in second  # as text: Anthropic takes no foreign citation object


def grounding_estimated() -> Case:
    return Case("gemini-grounding-estimated", [step("Is the free-threaded build the default?")],
                transcript=stored("gemini-grounding-estimated"),
                extra={"system": "You are a careful research assistant. Cite every source."})


def check_grounding_estimated(result: Result) -> None:
    _ok(result, 1, 1)
    (estimate,) = result.outcome["estimates"]
    # the anchor (1,784) dropped by the new system prompt; the grounding counted: 116 without it
    assert 400 < estimate["tokens"] < 1784
    assert "grounding-api-redirect" in json.dumps(result.bodies()[0])


CASES: dict[str, tuple[Callable[[], Case], Check]] = {
    "search-next-prompt": (next_prompt, check_next_prompt),
    "search-read-tool": (read_tool, check_read_tool),
    "search-instruction-change": (instruction_change, check_instruction_change),
    "search-task-delegation": (delegation, check_delegation),
    "invalid-search-container": (invalid_container, check_invalid_container),
    "display-only-search-record": (display_only, check_display_only),
    "cjk-near-budget": (cjk_budget, check_cjk_budget),
    "retry-529": (lambda: _fault_case("retry-529", "route=anthropic,nth=1,status=529,retry_after_ms=1"),
                  check_529),
    "no-retry-400": (lambda: _fault_case("no-retry-400", "route=anthropic,nth=1,status=400"), check_400),
    "midstream-disconnect": (lambda: _fault_case("midstream-disconnect", DISCONNECT), check_retried),
    "stall-idle-timeout": (lambda: _fault_case("stall-idle-timeout", STALL, idleTimeoutMs=300),
                           check_retried),
    "cancelled-subtask": (cancelled, check_cancelled),
    "model-switch-search-history": (switch, check_switch),
    "code-execution-search-replay": (code_execution, check_code_execution),
    "gemini-grounding-bad-support": (bad_support, check_bad_support),
    "chat-annotations-provider-switch": (chat_switch, check_chat_switch),
    "gemini-grounding-estimated": (grounding_estimated, check_grounding_estimated),
}

# (mutant, case): the mutant must fail the case. Every mutant and every case appears at least once.
KILLS: list[tuple[str, str]] = [
    ("estimator-assumes-name", "search-next-prompt"),
    ("search-not-estimated", "search-instruction-change"),
    ("no-cjk-correction", "cjk-near-budget"),
    ("timestamp-refresh-invalidates-usage", "search-next-prompt"),
    ("usage-double-count", "search-next-prompt"),
    ("estimate-error-to-zero", "cjk-near-budget"),
    ("local-error-retried", "cjk-near-budget"),
    ("search-dropped-on-replay", "search-next-prompt"),
    ("internal-fields-leak", "search-next-prompt"),
    ("reject-nameless-legacy", "search-persist-restore"),
    ("accept-corrupt-container", "invalid-search-container"),
    ("reject-display-only", "display-only-search-record"),
    ("non-url-citation-accepted", "search-read-tool"),
    ("cancel-reported-as-error", "cancelled-subtask"),
    ("retry-on-400", "no-retry-400"),
    ("no-retry-on-529", "retry-529"),
    ("opaque-block-dropped", "code-execution-search-replay"),
    ("search-dropped-on-replay", "search-read-tool"),
    ("search-dropped-on-replay", "search-task-delegation"),
    ("search-dropped-on-replay", "model-switch-search-history"),
    ("reject-nameless-legacy", "midstream-disconnect"),
    ("reject-nameless-legacy", "stall-idle-timeout"),
    ("estimator-assumes-name", "search-instruction-change"),
    ("grounding-index-unchecked", "gemini-grounding-bad-support"),
    ("non-url-citation-accepted", "gemini-grounding-bad-support"),
    ("annotations-dropped-on-switch", "chat-annotations-provider-switch"),
    ("grounding-not-estimated", "gemini-grounding-estimated"),
    ("search-not-estimated", "gemini-grounding-estimated"),
]


@pytest.mark.parametrize("name", list(CASES))
def test_the_reference_passes(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    make, check = CASES[name]
    check(drive(make(), monkeypatch, tmp_path))


@pytest.mark.parametrize(("mutant", "name"), [pair for pair in KILLS if pair[1] in CASES])
def test_the_mutant_fails(mutant: str, name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    make, check = CASES[name]
    result = drive(make(), monkeypatch, tmp_path, mutant)
    with pytest.raises(AssertionError):
        check(result)


def test_every_mutant_and_every_case_is_killed_somewhere() -> None:
    elsewhere = set(WEB_SEARCH_KILLS) | set(DURABLE_KILLS) | set(RESEARCH_STEP_KILLS) | set(EVIDENCE_KILLS)
    assert {mutant for mutant, _ in KILLS} | elsewhere == set(MUTANTS)
    assert {name for _, name in KILLS} == {*CASES, "search-persist-restore"}


# ---------------------------------------------------------------- persist, then restore in a new process


def _process(case: Case, env: dict[str, str], work: Path, folder: Path, index: int) -> Json:
    source, outcome = folder / f"input-{index}.json", folder / f"outcome-{index}.json"
    source.write_text(json.dumps(case.input()), encoding="utf-8")
    env = {**env, "REPLAYKIT_INPUT": str(source), "REPLAYKIT_OUTCOME": str(outcome)}
    done = subprocess.run([sys.executable, "-m", "replaykit.reference"], cwd=work, env=env, timeout=60,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded: Json = json.loads(outcome.read_text(encoding="utf-8"))
    return loaded


def persist_restore(tmp_path: Path, mutant: str | None) -> tuple[Json, Json, Result]:
    """Two processes, one store: the search turn, then (restored from the store) the next prompt."""
    first, second = (Case("search-persist-restore", [step(prompt)]) for prompt in (QUESTION, FOLLOW))
    work, state = folders(tmp_path, first, mutant or "reference")
    fake = serve(first)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, **fake.env(), "REPLAYKIT_STATE_DIR": str(state),
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    env.pop("REPLAYKIT_MUTANT", None)
    env |= {"REPLAYKIT_MUTANT": mutant} if mutant else {}
    try:
        outcomes = [_process(case, env, work, tmp_path, index) for index, case in enumerate((first, second))]
    finally:
        fake.stop()
    return outcomes[0], outcomes[1], Result(outcomes[1], list(fake.journal), state)


def check_persist_restore(first: Json, second: Json, result: Result) -> None:
    assert first["status"] == "ok" and first["persistWrites"] == 1
    _ok(result, 2, 1)
    assert result.outcome["transcript"]["messages"][:2] == first["transcript"]["messages"][:2]
    _replays_search(result.bodies()[1], result.outcome["transcript"])
    assert result.persisted() == result.outcome["transcript"]


def test_persist_then_restore_in_a_new_process(tmp_path: Path) -> None:
    check_persist_restore(*persist_restore(tmp_path, None))


@pytest.mark.parametrize("mutant", [mutant for mutant, name in KILLS if name == "search-persist-restore"])
def test_persist_then_restore_fails_on(mutant: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError):
        check_persist_restore(*persist_restore(tmp_path, mutant))
