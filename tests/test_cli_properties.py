"""``replaykit properties`` prints each property as it finishes; a status line on a terminal, not in CI."""

from __future__ import annotations

import contextlib
import io
import sys
import types

import pytest

from replaykit.cli import EXIT_OK, main
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
