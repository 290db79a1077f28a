"""``replaykit mutants`` (the kill matrix) and ``replaykit redgreen`` (the red → green table)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
from scenario_support import FUNCTION, HERE, scenario_doc, write_scenario

from replaykit.cli import main
from replaykit.cli.mutants import run_mutants

pytestmark = pytest.mark.slow  # each scenario runs a child process

RETRY = [{"kind": "status", "status": 529, "route": "anthropic.messages", "nth": 1}]


def test_the_kill_matrix_with_a_survivor_a_broken_promise_and_a_vacuous_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_scenario(tmp_path, scenario_doc("persists", kills=["no-persist", "no-retry"]))
    write_scenario(tmp_path, scenario_doc("vacuous", expectations={"outcome": "ok", "unused": True}))
    code = main(
        [
            "mutants",
            str(tmp_path),
            "--target",
            FUNCTION,
            "--mutant",
            "no-persist",
            "--mutant",
            "no-retry",
            "-j",
            "2",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[:3] == [
        "mutant      1  2  killed by",
        "no-persist  x  .  1",
        "no-retry    !  .  0",
    ]
    assert "vacuous (kills no mutant): vacuous" in out
    assert "FAIL persists declares kills: no-retry, but no-retry survives it" in out
    assert "FAIL mutant no-retry survives every scenario" in out
    assert out.rstrip().endswith("2 scenarios x 2 mutants, 1 killed: FAILED")


def test_a_clean_matrix_passes_and_names_come_from_the_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_scenario(tmp_path, scenario_doc("persists", kills=["no-persist"]))
    write_scenario(
        tmp_path,
        scenario_doc(
            "retries", faults=RETRY, kills=["no-retry"], expectations={"outcome": "ok", "providerRequests": 2}
        ),
    )
    manifest = tmp_path / "replaykit-target.yaml"  # mutants only: every capability is taken as given
    manifest.write_text("mutants: {no-persist: {defect: never writes}, no-retry: {defect: never retries}}\n")
    args = argparse.Namespace(paths=[str(tmp_path)], target=FUNCTION, manifest=manifest, mutant=None, jobs=2,
                              json=True, declared=False, every_cell=False, select=None, kind=None, shard=None,
                              durations=None, report=None)
    assert run_mutants(args, known=frozenset) == 0
    matrix = json.loads(capsys.readouterr().out)
    assert matrix["ok"] and matrix["survivors"] == [] and matrix["vacuous"] == []
    assert {row["scenario"]: row["killed"] for row in matrix["scenarios"]} == {
        "persists": ["no-persist"],
        "retries": ["no-retry"],
    }


def test_a_scenario_failing_on_the_target_itself_fails_the_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_scenario(tmp_path, scenario_doc("wrong", expectations={"outcome": "ok", "persistWrites": 5}))
    assert main(["mutants", str(tmp_path), "--target", FUNCTION, "--mutant", "no-persist"]) == 1
    out = capsys.readouterr().out
    assert "FAIL wrong fails on the target itself (persistWrites: expected 5 write(s), got 1)" in out


def test_redgreen_table_markdown_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_scenario(
        tmp_path,
        scenario_doc(
            "retries", kind="regression", faults=RETRY, expectations={"outcome": "ok", "providerRequests": 2}
        ),
    )
    write_scenario(tmp_path, scenario_doc("contract"))
    write_scenario(tmp_path, scenario_doc("not-reproduced", kind="regression"))
    baseline = f"env REPLAYKIT_MUTANT=no-retry {sys.executable} {HERE / 'tiny_target.py'}"
    argv = ["redgreen", "--baseline", baseline, "--candidate", FUNCTION, str(tmp_path), "-j", "2"]
    assert main(argv) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "scenario",
        "kind",
        "baseline",
        "candidate",
        "verdict",
        "first",
        "failing",
        "expectation",
    ]
    rows = {line.split()[0]: line for line in lines[1:4]}
    assert rows["retries"].split()[1:5] == ["regression", "red", "green", "OK"]
    assert (
        rows["retries"]
        .rstrip()
        .endswith("baseline: providerRequests: expected 2 provider request(s), the journal holds 1: #1 POST "
                  "/v1/messages -> 529 [anthropic.messages] faults: status=529")
    )
    assert rows["contract"].split()[1:5] == ["contract", "green", "green", "OK"]
    assert "WRONG (passes on the baseline: the regression is not reproduced)" in rows["not-reproduced"]
    assert lines[-1] == "3 scenarios, 1 wrong: FAILED"
    assert main([*argv, "--markdown"]) == 1
    markdown = capsys.readouterr().out
    assert (
        "| retries | regression | 🔴 red | 🟢 green | OK | baseline: providerRequests: expected 2 provider "
        "request(s), the journal holds 1: #1 POST /v1/messages -> 529 [anthropic.messages] faults: "
        "status=529 |" in markdown
    )
    assert markdown.splitlines()[2].startswith("| scenario | kind |")
    assert main([*argv, "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert not document["ok"]
    retries = next(row for row in document["rows"] if row["scenario"] == "retries")
    assert retries["baseline"]["firstFailure"]["name"] == "providerRequests"
    assert retries["candidate"]["passed"]


def test_a_bad_command_line_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_scenario(tmp_path, scenario_doc())
    assert main(["run", str(path), "-j", "0"]) == 2
    assert main(["run", str(path), "--target", "python:nocolon"]) == 2
    assert main(["run", str(path), "--target", "'unbalanced"]) == 2
    err = capsys.readouterr().err
    assert "must be python:module:function" in err and "balance its quotes" in err and "Traceback" not in err


def test_a_target_that_declares_no_mutants_is_one_clear_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_scenario(tmp_path, scenario_doc("persists", kills=["no-persist"]))
    assert main(["mutants", str(tmp_path), "--target", FUNCTION]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "declares no mutants" in err[0] and "--mutant NAME" in err[0]


def test_a_kill_naming_no_mutant_of_the_target_nor_a_defect_class_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_scenario(tmp_path, scenario_doc("persists", kills=["no-persits"]))
    assert main(["mutants", str(tmp_path), "--target", FUNCTION, "--mutant", "no-persist"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: kills: no-persits is neither a mutant of the target" in err and "Traceback" not in err


def test_a_kill_naming_a_defect_class_the_target_lacks_is_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_scenario(tmp_path, scenario_doc("persists", kills=["no-persist", "retry-on-400"]))
    assert main(["mutants", str(tmp_path), "--target", FUNCTION, "--mutant", "no-persist", "--json"]) == 0
    matrix = json.loads(capsys.readouterr().out)
    assert matrix["ok"] and matrix["mutants"] == ["no-persist"]


def test_redgreen_takes_leading_assignments_and_names_the_flag_of_a_bad_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_scenario(tmp_path, scenario_doc("persists", kind="regression"))
    baseline = f"REPLAYKIT_MUTANT=no-persist {sys.executable} {HERE / 'tiny_target.py'}"
    argv = ["redgreen", "--baseline", baseline, "--candidate", FUNCTION, str(tmp_path)]
    assert main(argv) == 0, capsys.readouterr().out
    assert main(["redgreen", "--baseline", "VAR=x", "--candidate", FUNCTION, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--baseline 'VAR=x' names no command" in err and "--target" not in err


def test_progress_prints_each_failure_and_on_a_terminal_a_line_rewritten_meanwhile(tmp_path: Path) -> None:
    import io

    from replaykit.cli.run import _FailureFeed
    from replaykit.scenario import Check, Result, load

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    scenario = load(write_scenario(tmp_path, scenario_doc()))
    results = [
        Result(scenario, FUNCTION, [Check("target", True)], seconds=0.5),
        Result(scenario, FUNCTION, [Check("outcome", False, "expected ok, got error")]),
    ]
    plain, terminal = io.StringIO(), Terminal()
    for stream in (plain, terminal):
        progress = _FailureFeed(2, stream, quiet=False)
        progress.start()
        for result in results:
            progress(result)
    assert plain.getvalue() == "FAIL one-step: outcome: expected ok, got error\n"  # the passes come after
    assert terminal.getvalue() == (
        "running 2 scenario(s)...\r\x1b[K[1/2] running 1 more..."
        "\r\x1b[KFAIL one-step: outcome: expected ok, got error\n"
    )


def test_a_declared_kills_matrix_runs_only_the_deciding_cells_and_fails_alike(tmp_path: Path) -> None:
    from replaykit.scenario import load
    from replaykit.scenario.mutants import run_matrix
    from replaykit.scenario.target import Target

    scenarios = [load(write_scenario(tmp_path, scenario_doc("persists", kills=["no-persist", "no-retry"]))),
                 load(write_scenario(tmp_path, scenario_doc("other", expectations={"outcome": "ok"})))]
    target = Target.parse(FUNCTION)
    mutants = ["no-persist", "no-retry", "no-request"]  # no scenario declares no-request: it runs on both
    matrix = run_matrix(scenarios, target, mutants, jobs=2, declared=True)
    assert sorted(matrix.results, key=str) == sorted(
        [("persists", None), ("other", None), ("persists", "no-persist"), ("persists", "no-retry"),
         ("persists", "no-request"), ("other", "no-request")], key=str)
    assert matrix.problems() == [
        "persists declares kills: no-retry, but no-retry survives it",
        "mutant no-retry survives every scenario",
    ]
    assert matrix.vacuous() == [] and not matrix.full
    assert matrix.grid()[1:] == [["no-persist", "x", " ", "1"], ["no-retry", "!", " ", "0"],
                                 ["no-request", "x", "x", "2"]]


def test_mutants_declared_says_so_and_fails_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_scenario(tmp_path, scenario_doc("persists", kills=["no-persist", "no-retry"]))
    code = main(["mutants", str(tmp_path), "--target", FUNCTION, "--mutant", "no-persist", "--mutant",
                 "no-retry", "--declared"])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL persists declares kills: no-retry, but no-retry survives it" in out
    assert out.rstrip().endswith("1 scenarios x 2 mutants (the declared kills), 1 killed: FAILED")
