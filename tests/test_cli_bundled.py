"""Every command that takes cassettes finds a bundled one by its name, from any folder, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.cli import EXIT_OK, EXIT_USAGE, build_parser, main
from replaykit.cli.serve import build
from replaykit.resources import data_dir

NAME = "anthropic/web_search_stream.yaml"


@pytest.fixture(autouse=True)
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run each test from a folder with no cassettes in it (as after ``pip install replaykit``)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_verify_finds_a_bundled_cassette_and_says_which_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", NAME]) == EXIT_OK
    out, err = capsys.readouterr()
    bundled = data_dir("cassettes") / NAME
    assert err == f"replaykit: {NAME}: not found here; using the bundled {bundled}\n"
    assert str(bundled) in out


def test_serve_loads_a_bundled_cassette(capsys: pytest.CaptureFixture[str]) -> None:
    fake = build(build_parser().parse_args(["serve", NAME]))
    assert [row["cassette"] for row in fake.unused()] == [str(data_dir("cassettes") / NAME)]
    assert "using the bundled" in capsys.readouterr().err


def test_a_local_file_wins_and_is_not_announced(elsewhere: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (elsewhere / "anthropic").mkdir()
    (elsewhere / NAME).write_bytes((data_dir("cassettes") / NAME).read_bytes())
    assert main(["verify", NAME]) == EXIT_OK
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["serve", "verify"])
def test_a_name_found_nowhere_is_one_usage_line(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "anthropic/absent.yaml"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("replaykit: error: anthropic/absent.yaml: no such cassette file or folder "
                          "(looked in: ")
    assert str(data_dir("cassettes") / "anthropic/absent.yaml") in err and "replaykit cassettes" in err
