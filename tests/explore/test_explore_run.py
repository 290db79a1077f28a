"""explore end to end on the reference: from a plain durable scenario (no fault), a recovery mutant is found,
shrunk and written as a scenario that fails on the mutant and passes on the reference; nothing is found on
the reference itself; one seed writes the same files. Small budgets, ``-j 2``, kills only: these run the
target a few dozen times."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from replaykit.cli import main
from replaykit.explore import Options, Report, explore
from replaykit.scenario import Target, load, run_scenario

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ROOT / "scenarios" / "durable-duplicate-submit.yaml"  # durable turns, no fault
REFERENCE = Target.parse("python:replaykit.reference:run")
MUTANT = "partial-dropped-on-recovery"


def _explore(out: Path, mutant: str | None) -> Report:
    options = Options(out, kinds=("kill",), budget=3, seed=7, jobs=2, mutant=mutant)
    return explore(load(PLAIN), REFERENCE, options)


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return _explore(tmp_path_factory.mktemp("found"), MUTANT)


def test_the_mutant_is_found_shrunk_and_written(found: Report) -> None:
    assert [group.key for group in found.groups] == [("partial-kept", "reaches[0]")]
    trial = found.groups[0].trial
    assert trial.describe() == "kill after event 4 of 9 of request 1 (anthropic.messages #1)"  # the earliest
    assert found.shrink_runs > 0 and len(found.written) == 1
    summary = (found.written[0].parent / "summary.md").read_text(encoding="utf-8")
    assert "partial-kept" in summary and found.written[0].name in summary


def test_the_written_scenario_fails_on_the_mutant_and_passes_on_the_reference(found: Report) -> None:
    written = load(found.written[0])  # valid against the scenario contract, paths relative to its folder
    assert [fault.to_json() for fault in written.faults] == [
        {"kind": "kill", "route": "anthropic.messages", "nth": 1, "after": 4}]
    on_mutant = run_scenario(written, REFERENCE, mutant=MUTANT)
    assert on_mutant.failed and on_mutant.first_failure is not None
    assert on_mutant.first_failure.name == "reaches[0]"
    assert run_scenario(written, REFERENCE).passed


def test_nothing_is_found_on_the_reference(tmp_path: Path) -> None:
    stale = tmp_path / "durable-duplicate-submit-partial-kept-reaches-0.yaml"
    stale.write_text("# Written by replaykit explore (an earlier run)\n", encoding="utf-8")
    mine = tmp_path / "durable-duplicate-submit-mine.yaml"
    mine.write_text("# my own scenario\n", encoding="utf-8")
    report = _explore(tmp_path, None)
    assert report.groups == [] and report.written == []
    assert sorted(tmp_path.iterdir()) == [mine, tmp_path / "summary.md"]  # an earlier run's finding removed
    assert "No schedule broke an invariant." in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_a_corrupted_event_is_retried_by_the_reference(tmp_path: Path) -> None:
    """A stream event cut in half is a transport failure, retried: not the reference's own crash (an
    ``INTERNAL_ERROR`` of local provenance), which is what explore first found here."""
    options = Options(tmp_path, kinds=("corrupt",), budget=3, seed=7, jobs=2)
    report = explore(load(PLAIN), REFERENCE, options)
    assert report.runs >= 3 and report.groups == [] and report.written == []


def test_one_seed_writes_the_same_files(found: Report, tmp_path: Path) -> None:
    again = _explore(tmp_path, MUTANT)
    first = found.written[0].parent
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in first.iterdir())
    for path in tmp_path.iterdir():
        assert path.read_bytes() == (first / path.name).read_bytes(), path.name
    assert [g.key for g in again.groups] == [g.key for g in found.groups]


def test_the_command_writes_the_unbounded_recovery_and_exits_1(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explore", str(PLAIN), "--mutant", "recovery-unbounded", "--faults", "kill", "--budget", "2",
                 "-j", "2", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert "FAIL retries-bounded at providerRequests: kill before the response to request 1" in printed
    written = load(tmp_path / "durable-duplicate-submit-retries-bounded-providerrequests.yaml")
    assert written.faults[0].times == 4  # one more than recovery.maxAttempts
    assert run_scenario(written, REFERENCE).passed


def test_a_529_not_retried_is_found_before_the_first_response(tmp_path: Path) -> None:
    options = Options(tmp_path, kinds=("overloaded",), budget=1, jobs=1, mutant="no-retry-on-529")
    report = explore(load(PLAIN), REFERENCE, options)
    assert [group.key for group in report.groups] == [("expectation", "outcome (PROVIDER_ERROR)")]
    assert report.groups[0].trial.faults[0].to_json() == {
        "kind": "status", "route": "anthropic.messages", "nth": 1, "status": 529, "retry_after_ms": 1}
    assert run_scenario(load(report.written[0]), REFERENCE).passed


@pytest.mark.parametrize(("words", "said"), [
    (["--faults", "kill,boom"], "'kill,boom': use fault kinds among"),
    (["--mutant", "no-such"], "--mutant no-such: the target's manifest declares no such mutant"),
    (["--budget", "0"], "argument --budget"),
])
def test_a_bad_command_line_exits_2_with_one_line(words: list[str], said: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", str(PLAIN), "--out", str(tmp_path / "out"), *words]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_missing_scenario_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", str(tmp_path / "none.yaml"), "--out", str(tmp_path)]) == 2
    assert "none.yaml" in capsys.readouterr().err


def test_no_traceback_from_the_installed_command(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, "-m", "replaykit", "explore", str(PLAIN), "--faults", "nope",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 2
    assert ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr
