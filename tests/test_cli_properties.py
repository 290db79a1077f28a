"""``replaykit properties`` prints each property as it finishes; a status line on a terminal, not in CI."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import types

import pytest

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, main
from replaykit.estimate import estimate_tokens

TWO = ["--property", "never_raises", "--property", "finite_non_negative", "--max-examples", "3",
       "--seed", "1"]


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What stdout held each time the estimator ``seen_estimator:estimate`` was called."""
    snapshots: list[str] = []

    def estimate(transcript: object, target: object) -> float:
        out = sys.stdout
        snapshots.append(out.getvalue() if isinstance(out, io.StringIO) else "")
        return estimate_tokens(transcript, target)  # type: ignore[arg-type]

    module = types.ModuleType("seen_estimator")
    module.estimate = estimate  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "seen_estimator", module)
    return snapshots


def test_each_property_is_printed_before_the_next_one_runs(seen: list[str]) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["properties", "--estimator", "seen_estimator:estimate", *TWO]) == EXIT_OK
    first = next(line for line in out.getvalue().splitlines() if "never_raises" in line)
    assert first.startswith("PASS ")
    assert seen[0].startswith("estimator seen_estimator:estimate: 3 examples per property, seed 1\n")
    assert first in seen[-1] and "finite_non_negative" not in seen[-1]  # printed while the second ran


def test_a_terminal_gets_a_status_line_on_stderr(monkeypatch: pytest.MonkeyPatch, seen: list[str]) -> None:
    monkeypatch.delenv("CI", raising=False)
    out, err = io.StringIO(), Terminal()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["properties", "--estimator", "seen_estimator:estimate", *TWO]) == EXIT_OK
    status = err.getvalue()
    assert "[1/2] never_raises" in status and "[2/2] finite_non_negative" in status
    assert status.endswith("\r\x1b[K")  # the status line is wiped: the terminal keeps only the report
    assert "\r" not in out.getvalue() and out.getvalue().count("\n") == 4


@pytest.mark.parametrize("ci", ["true", ""])
def test_ci_or_a_pipe_gets_plain_lines_only(monkeypatch: pytest.MonkeyPatch, seen: list[str],
                                            ci: str) -> None:
    if ci:
        monkeypatch.setenv("CI", ci)
    else:
        monkeypatch.delenv("CI", raising=False)
    out, err = io.StringIO(), Terminal() if ci else io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["properties", "--estimator", "seen_estimator:estimate", *TWO]) == EXIT_OK
    assert err.getvalue() == "" and out.getvalue().count("\n") == 4


ACCURACY = ["--property", "tracks_o200k", "--max-examples", "20", "--seed", "3"]


def test_the_accuracy_property_prints_the_error_per_kind_of_content(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["properties", "--estimator", "replaykit.estimate:estimate_tokens", *ACCURACY]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("PASS      tracks_o200k  on real-looking content the estimate is never more "
                               "than 10% under o200k_base on search content, and within +-25%")
    errors = [line.split()[0] for line in lines[2:-1]]
    assert errors and set(errors) <= {"search", "opaque", "cjk", "code", "prose"}
    assert all("error against o200k_base" in line and "examples)" in line for line in lines[2:-1])


def test_the_margins_are_flags_and_the_errors_are_in_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["properties", "--estimator", "replaykit.estimate:estimate_tokens", *ACCURACY, "--json",
            "--search-margin", "5", "--band", "40"]
    assert main(argv) == EXIT_OK
    entry = json.loads(capsys.readouterr().out)["properties"][0]
    assert "never more than 5% under" in entry["statement"] and "+-40%" in entry["statement"]
    assert entry["status"] == "pass" and entry["errors"]
    assert set(entry["errors"][0]) == {"content", "examples", "min", "max"}


@pytest.mark.parametrize("flag", ["--search-margin", "--band"])
@pytest.mark.parametrize("value", ["100", "-1", "ten"])
def test_a_bad_margin_is_a_usage_error(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["properties", "--estimator", "replaykit.estimate:estimate_tokens", flag, value]
    assert main(argv) == EXIT_USAGE
    assert "must be a percentage from 0 to below 100" in capsys.readouterr().err


def test_a_skipped_property_is_said_and_is_not_a_pass(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from replaykit import properties

    monkeypatch.setattr(properties, "_tokenizer_missing", lambda: "skipped: tiktoken is not installed")
    argv = ["properties", "--estimator", "replaykit.estimate:estimate_tokens", *ACCURACY]
    assert main(argv) == EXIT_FINDINGS
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("SKIPPED   tracks_o200k")
    assert out[2].strip() == "skipped: tiktoken is not installed"
    assert out[-1] == "1 properties, 0 passed, 0 failed, 1 skipped (not a pass)"
    assert main([*argv, "--json"]) == EXIT_FINDINGS
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["skipped"], report["properties"][0]["status"]) == (False, 1, "skipped")
