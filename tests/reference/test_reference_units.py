"""The reference's parts alone: the mutant switch, the read tool's fence, the command line, event errors, the
request's preflight."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replaykit.errors import LocalRequestError, UsageError
from replaykit.provenance import event_error
from replaykit.reference import MUTANTS, mutant
from replaykit.reference.steps import preflight
from replaykit.reference.tools import Tools
from replaykit.replay import ProviderModel

ROOT = Path(__file__).resolve().parents[2]


def test_there_are_the_forty_one_mutants_each_with_its_defect() -> None:
    assert len(MUTANTS) == 41
    assert all(isinstance(text, str) and len(text) > 20 for text in MUTANTS.values())


def test_mutant_reads_the_environment_on_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLAYKIT_MUTANT", raising=False)
    assert not mutant("retry-on-400")
    monkeypatch.setenv("REPLAYKIT_MUTANT", "retry-on-400")
    assert mutant("retry-on-400") and not mutant("no-retry-on-529")
    with pytest.raises(UsageError, match="no such mutant"):
        mutant("retry-on-401")


def test_an_unknown_mutant_exits_2_listing_them(tmp_path: Path) -> None:
    env = {**os.environ, "REPLAYKIT_MUTANT": "nope", "PYTHONPATH": str(ROOT),
           "REPLAYKIT_INPUT": str(tmp_path / "in.json"), "REPLAYKIT_OUTCOME": str(tmp_path / "out.json")}
    done = subprocess.run([sys.executable, "-m", "replaykit.reference"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "retry-on-400" in done.stderr and "opaque-block-dropped" in done.stderr
    assert not (tmp_path / "out.json").exists()


def _read(tools: Tools, path: str) -> tuple[str, bool]:
    call = {"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": path}}
    result = asyncio.run(tools.call(call))  # type: ignore[arg-type]
    return result["content"][0]["text"], result["isError"]  # type: ignore[index]


def test_read_stays_in_the_work_folder(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("inside", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside", encoding="utf-8")
    tools = Tools([{"type": "function", "name": "read", "parameters": {}}], tmp_path / "work", None)
    assert _read(tools, "a.txt") == ("inside", False)
    for escape in ("../secret.txt", str(tmp_path / "secret.txt")):
        text, failed = _read(tools, escape)
        assert failed and "outside the work folder" in text
    assert _read(tools, "missing.txt")[1] is True


def test_a_tool_not_enabled_is_a_tool_error(tmp_path: Path) -> None:
    text, failed = _read(Tools([], tmp_path, None), "a.txt")
    assert failed and "unknown tool" in text


@pytest.mark.parametrize(("event", "retryable"), [
    ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, True),
    ({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}, False),
    ({"type": "error", "code": "server_error", "message": "try again"}, True),
    ({"type": "response.failed", "response": {"error": {"code": "server_error", "message": "x"}}}, True),
])
def test_event_error_classifies_a_mid_stream_error(event: dict[str, object], retryable: bool) -> None:
    info = event_error(event)
    assert (info.code, info.status, info.retryable) == ("PROVIDER_ERROR", 200, retryable)
    assert info.provider_type in ("overloaded_error", "invalid_request_error", "server_error")


@pytest.mark.slow
def test_the_scenario_fixtures_are_what_the_generator_writes(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(ROOT / "scripts" / "synthesize_cassettes"), "--out", str(tmp_path / "c"),
               "--scenarios-out", str(tmp_path / "s")]
    subprocess.run(command, check=True, capture_output=True, timeout=300, env=env)
    for written in sorted((tmp_path / "s").rglob("*.*")):
        relative = written.relative_to(tmp_path / "s")
        committed = ROOT / "scenarios" / relative
        assert committed.read_bytes() == written.read_bytes(), f"rerun synthesize_cassettes: {relative}"
    assert json.loads((tmp_path / "s" / "transcripts" / "invalid-search-container.json").read_text())


def test_the_preflight_refuses_a_request_the_provider_would_refuse_naming_the_rule() -> None:
    call = {"type": "server_tool_use", "id": "srvtoolu_01A", "name": "web_search", "input": {"query": "q"}}
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01A", "content": []}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": [call, result]},
        {"role": "user", "content": "more"}]}
    target = ProviderModel("anthropic", "anthropic-messages", "claude-sonnet-4-5", max_tokens=64)
    preflight(body, target)  # the ids the API gave: sent
    body["messages"][1]["content"] = [{**call, "id": "ws_01A"}, {**result, "tool_use_id": "ws_01A"}]
    with pytest.raises(LocalRequestError) as refused:
        preflight(body, target)
    assert (refused.value.phase, refused.value.code) == ("validation", "LOCAL_REQUEST_ERROR")
    assert str(refused.value).startswith("validation error: the request would break its contract at "
                                         "/messages/1/content/0/id: anthropic.server_tool_use_id: ")
