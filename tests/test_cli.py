"""The command-line dispatcher: usage errors exit 2 with one line, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from replaykit.cli import EXIT_USAGE, main


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("replaykit: error:")
    assert "Traceback" not in err


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == EXIT_USAGE
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    from replaykit.cli import COMMANDS

    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)


def test_console_entry_point_runs_as_a_module() -> None:
    proc = subprocess.run([sys.executable, "-m", "replaykit", "frobnicate"], capture_output=True, text=True)
    assert proc.returncode == EXIT_USAGE
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
