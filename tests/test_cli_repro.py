"""``replaykit repro``: what it prints, its exit codes, --target's verdict, --json, and no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from recordings import recorded
from test_redact import planted

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, main
from replaykit.repro import reported
from replaykit.resources import data_dir
from replaykit.scenario import DEFAULT_TARGET

BUNDLED = data_dir("scenarios") / "transcripts"
ROOT = Path(__file__).resolve().parents[1]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["repro", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_it_says_what_it_read_found_and_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(BUNDLED / "invalid-search-container.json")
    code, out, err = _run(capsys, source, "--out", str(tmp_path / "d"))
    assert (code, err) == (EXIT_OK, "")
    lines = out.splitlines()
    assert lines[0].endswith("invalid-search-container.json as neutral transcript")
    assert lines[1].startswith("first failure: contract violation at /messages/1/content: expected array")
    assert lines[2].startswith(f"wrote: {tmp_path / 'd'} (new): scenario.yaml, transcripts/repro.json, "
                               "cassettes/repro.yaml, repro.json")
    assert lines[3] == f"replay: replaykit run {tmp_path / 'd'}"
    assert main(["run", str(tmp_path / "d")]) == EXIT_OK  # replays offline, as said


def test_a_cassette_says_which_request_it_reproduces(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    source = recorded("pydantic-ai__openai_responses_web_search_tool.yaml")
    code, out, _ = _run(capsys, str(source), "--out", str(tmp_path / "d"), "--json")
    report = json.loads(out)
    assert code == EXIT_OK
    assert report["form"] == ("cassette, interaction 1 of 2 (the last request: no response is an error): "
                              "OpenAI Responses request body")
    assert report["estimateBand"]["min"] <= report["estimate"] <= report["estimateBand"]["max"]


def test_redacted_keys_are_listed_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = planted()["anthropic"][0]
    source = tmp_path / "leaky.json"
    source.write_text(json.dumps([{"role": "user", "content": f"key {key}"}]))
    code, out, _ = _run(capsys, str(source), "--out", str(tmp_path / "d"))
    assert code == EXIT_OK
    assert key not in out and "redacted: 1 key(s): /0/content (anthropic: sk-a" in out


def test_with_a_target_it_runs_the_scenario_and_prints_the_verdict(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    source = str(BUNDLED / "display-only-search-record.json")
    code, out, _ = _run(capsys, source, "--out", str(tmp_path / "d"), "--target", DEFAULT_TARGET)
    assert code == EXIT_OK
    assert out.splitlines()[-1].startswith("verdict: PASS repro-display-only-search-record")
    mutant = f"env REPLAYKIT_MUTANT=reject-display-only {sys.executable} -m replaykit.reference"
    code, out, _ = _run(capsys, source, "--out", str(tmp_path / "d"), "--target", mutant, "--json")
    report = json.loads(out)
    assert code == EXIT_FINDINGS
    assert report["verdict"]["passed"] is False and report["folder"]["was"] == "an earlier repro output"
    assert report["verdict"]["firstFailure"]["name"] == "outcome"


@pytest.mark.parametrize(("argv", "message"), [
    (["nothing.json", "--out", "d"], "nothing.json: no such file"),
    (["bad.json", "--out", "d"], "bad.json:/: a JSON number: not a transcript"),
    (["ok.json", "--out", "busy"], "busy: not empty and not an earlier repro output"),
    (["ok.json", "--out", "d", "--target", "'unbalanced"], "cannot be split into words"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str],
        message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text("42")
    (tmp_path / "ok.json").write_text((BUNDLED / "retry-529.json").read_text())
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    code, out, err = _run(capsys, *argv)
    assert (code, out) == (EXIT_USAGE, "")
    assert err.startswith("replaykit: error: ") and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "d").exists()


def test_a_key_left_after_redaction_exits_1_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    key = planted()["openai"][0]
    monkeypatch.setattr(reported, "redact_document", lambda doc, file: (doc, []))
    source = tmp_path / "leaky.json"
    source.write_text(json.dumps({"model": "gpt-5", "input": f"use {key}"}))
    code, out, err = _run(capsys, str(source), "--out", str(tmp_path / "d"))
    assert (code, out) == (EXIT_FINDINGS, "")
    assert "refused to write" in err and key not in err
    assert not (tmp_path / "d").exists()


@pytest.mark.slow
def test_no_traceback_from_the_command(tmp_path: Path) -> None:
    (tmp_path / "log.jsonl").write_text('{"role": "user", "content": "a"}\n{"role": "user"\n')
    command = [sys.executable, "-m", "replaykit", "repro", "log.jsonl", "--out", "d"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr
    assert done.stderr.startswith("replaykit: error: log.jsonl:line 2: not JSON: ")
