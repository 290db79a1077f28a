"""The runner end to end, on the tiny target (a Python function target and a command target)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from scenario_support import ANTHROPIC, COMMAND, FUNCTION, OPENAI, STEP, scenario_doc, write_scenario

from replaykit.cli import main
from replaykit.scenario import Target, load, run_jobs, run_scenario
from replaykit.scenario.target import target_env

pytestmark = pytest.mark.slow  # each scenario runs a child process


@pytest.mark.parametrize("spec", [FUNCTION, COMMAND], ids=["function", "command"])
def test_a_scenario_passes_on_both_kinds_of_target(tmp_path: Path, spec: str) -> None:
    expectations = {
        "outcome": "ok",
        "providerRequests": 1,
        "requests": {"anthropic.messages": 1},
        "requestContractsHold": True,
        "persistWrites": 1,
        "estimates": [{"step": 0, "min": 10, "max": 30}],
        "reaches": [{"request": 1, "pointer": "/messages/*/content/0/text", "contains": "3.13"}],
        "neverReaches": [{"pointer": "/x_internal"}],
    }
    result = run_scenario(
        load(write_scenario(tmp_path, scenario_doc(expectations=expectations))), Target.parse(spec)
    )
    assert result.passed, result.failure_text()
    assert result.outcome is not None and result.outcome["persistWrites"] == 1 and result.requests == 1


def test_restart_runs_a_new_process_on_the_same_store(tmp_path: Path) -> None:
    steps = [dict(STEP), {"prompt": "And PEP 8?", "provider": "openai", "model": "gpt-5", "restart": True}]
    expectations = {
        "outcome": "ok",
        "requests": {"anthropic.messages": 1, "openai.responses": 1},
        "persistWrites": 2,
        "estimates": [{"step": 1, "min": 10, "max": 20}],
        "persistedSnapshot": True,
    }
    path = write_scenario(
        tmp_path, scenario_doc(cassettes=[ANTHROPIC, OPENAI], steps=steps, expectations=expectations)
    )
    result = run_scenario(load(path), Target.parse(FUNCTION), update_snapshots=True)
    assert result.passed, result.failure_text()
    assert [e["step"] for e in result.outcome["estimates"]] == [0, 1]  # type: ignore[index]
    persisted = json.loads((tmp_path / "__snapshots__" / "one-step.json").read_text())
    assert [m["role"] for m in persisted["messages"]] == ["user", "assistant", "user", "assistant"]


def test_a_fault_goes_to_the_fake_provider_unchanged(tmp_path: Path) -> None:
    faults = [{"kind": "status", "status": 529, "route": "anthropic.messages", "nth": 1}]
    doc = scenario_doc(faults=faults, expectations={"outcome": "ok", "providerRequests": 2})
    scenario = load(write_scenario(tmp_path, doc))
    assert run_scenario(scenario, Target.parse(FUNCTION)).passed
    no_retry = run_scenario(scenario, Target.parse(FUNCTION), mutant="no-retry")
    assert no_retry.failure_text() == (  # cause order: what was sent before how the run ended
        "providerRequests: expected 2 provider request(s), the journal holds 1: #1 POST /v1/messages -> 529 "
        "[anthropic.messages] faults: status=529")
    assert [c.name for c in no_retry.checks if not c.ok] == ["providerRequests", "unused", "outcome"]


def test_a_timed_out_target_is_killed(tmp_path: Path) -> None:
    scenario = load(write_scenario(tmp_path, scenario_doc(timeoutMs=400, expectations={"outcome": "ok"})))
    result = run_scenario(scenario, Target.parse(COMMAND), mutant="hang")
    assert (
        result.failure_text()
        == "target: target timed out after 400 ms (timeoutMs); its process group was killed"
    )
    assert result.seconds < 30  # not the target's minute of sleep: a bound on a hang, not a speed check


def test_a_crash_is_an_internal_error_outcome_and_a_bad_outcome_names_its_pointer(tmp_path: Path) -> None:
    scenario = load(write_scenario(tmp_path, scenario_doc()))
    crashed = run_scenario(scenario, Target.parse(FUNCTION), mutant="crash")
    assert crashed.failure_text() == (
        "outcome: expected ok, got error (INTERNAL_ERROR: RuntimeError: the tiny target crashed on purpose)"
    )
    broken = run_scenario(scenario, Target.parse(COMMAND), mutant="bad-outcome")
    assert broken.failure_text().startswith(
        "target: the outcome breaks target-outcome.schema.json at /persistWrites:"
    )
    silent = run_scenario(scenario, Target.parse("true"))
    assert silent.failure_text() == "target: the target wrote no outcome to REPLAYKIT_OUTCOME (exit code 0)"


def test_the_target_environment(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "ANTHROPIC_API_KEY": "real", "GITHUB_TOKEN": "real", "REPLAYKIT_MUTANT": "x"}
    env = target_env(
        {"ANTHROPIC_BASE_URL": "http://127.0.0.1:1", "ANTHROPIC_API_KEY": "dummy"},
        {"REPLAYKIT_INPUT": "in.json"},
        base,
    )
    assert env == {
        "PATH": "/bin",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:1",
        "ANTHROPIC_API_KEY": "dummy",
        "REPLAYKIT_INPUT": "in.json",
    }


def test_files_are_written_into_the_work_folder(tmp_path: Path) -> None:
    script = tmp_path / "cat_target.sh"
    script.write_text(
        '#!/bin/sh\n[ "$(cat notes/a.txt)" = hello ] || exit 3\n'
        'printf \'{"status":"ok","transcript":{"version":1,"system":null,"tools":[],"messages":[]},'
        '"persistWrites":0}\' > "$REPLAYKIT_OUTCOME"\n'
    )
    script.chmod(0o755)
    doc = scenario_doc(
        cassettes=[],
        files={"notes/a.txt": "hello"},
        expectations={"outcome": "ok", "providerRequests": 0, "persistWrites": 0},
    )
    result = run_scenario(load(write_scenario(tmp_path, doc)), Target.parse(str(script)))
    assert result.passed, result.failure_text()


def test_verdicts_do_not_depend_on_jobs(tmp_path: Path) -> None:
    scenario = load(
        write_scenario(
            tmp_path,
            scenario_doc(
                expectations={"outcome": "ok", "persistWrites": 1, "estimates": [{"step": 0, "max": 30}]}
            ),
        )
    )
    target = Target.parse(FUNCTION)
    work = [(scenario, target, mutant) for mutant in (None, "no-persist", "big-estimate", "no-request")]
    one = [(r.passed, r.failure_text()) for r in run_jobs(work, jobs=1)]
    two = [(r.passed, r.failure_text()) for r in run_jobs(work, jobs=2)]
    assert one == two
    assert [text.split(":")[0] for _, text in one] == ["", "persistWrites", "estimates[step 0]", "unused"]


def test_run_command_junit_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_scenario(tmp_path, scenario_doc("good"))
    write_scenario(tmp_path, scenario_doc("bad", expectations={"outcome": "ok", "persistWrites": 2}))
    junit = tmp_path / "out" / "junit.xml"
    assert main(["run", str(tmp_path), "--target", FUNCTION, "-j", "2", "--junit", str(junit)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["FAIL bad: persistWrites: expected 2 write(s), got 1", "PASS 1 scenario: good",
                       "2 scenarios, 1 passed, 1 failed: FAILED"]
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuites" and suite.attrib["tests"] == "2" and suite.attrib["failures"] == "1"
    cases = {case.attrib["name"]: case for case in suite.iter("testcase")}
    assert cases["good"].find("failure") is None
    failure = cases["bad"].find("failure")
    assert failure is not None and failure.attrib["message"] == "persistWrites: expected 2 write(s), got 1"
    assert main(["run", str(tmp_path / "good.yaml"), "--target", FUNCTION, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["passed"] and document["results"][0]["checks"][0] == {
        "name": "target",
        "ok": True,
        "why": "",
        "stage": "target",
    }


def test_a_python_target_module_is_found_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_harness.py").write_text(
        "def run(given):\n    return {'status': 'aborted', 'persistWrites': 0}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.environ["PYTHONPATH"].split(os.pathsep)[0])  # the checkout only
    scenario = load(write_scenario(tmp_path, scenario_doc(cassettes=[], expectations={"outcome": "aborted"})))
    result = run_scenario(scenario, Target.parse("python:my_harness:run"))
    assert result.passed, result.failure_text()
