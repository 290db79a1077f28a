"""The command-line dispatcher: usage errors exit 2, internal errors 3, with one line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from replaykit.cli import EXIT_INTERNAL, EXIT_USAGE, main
from replaykit.cli.parser import COMMANDS


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("replaykit: error:")
    assert "Traceback" not in err


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == EXIT_USAGE
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
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


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_a_usage_error(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--port", port, "cassette.yaml"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("replaykit serve: error: argument --port") and "--port" in err and "0-65535" in err


def test_an_unterminated_estimator_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["properties", "--estimator-cmd", '"unterminated', "--max-examples", "1"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("replaykit: error: --estimator-cmd") and "quotation" in err


@pytest.mark.parametrize(("source", "words"), [("raise RuntimeError('boom')\n", "RuntimeError: boom"),
                                                ("def broken(:\n", "SyntaxError")])
def test_an_estimator_module_that_fails_to_import_is_a_usage_error(
    source: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "broken_estimator_mod.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["properties", "--estimator", "broken_estimator_mod:estimate", "--max-examples", "1"]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("replaykit: error: --estimator 'broken_estimator_mod:estimate'") and words in err
    assert err.count("\n") == 1


def test_an_internal_error_exits_3_with_a_masked_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from replaykit.cli import verify

    key = "sk-" + "ant-" + "api03-" + "Ab1" * 12

    def explode(args: object) -> int:
        raise RuntimeError(f"unexpected state with {key}\nsecond line")

    monkeypatch.setattr(verify, "run", explode)
    assert main(["verify", "x.yaml"]) == EXIT_INTERNAL == 3
    err = capsys.readouterr().err
    assert err.startswith("replaykit: internal error: unexpected state with [REDACTED] second line")
    assert key[:12] not in err and err.count("\n") == 1


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import replaykit

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"replaykit {replaykit.__version__} (replaykit-llm)\n"


def test_version_anywhere_else_on_the_line_is_argparse_s_with_the_same_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version", "verify"])
    assert exit_info.value.code == 0
    with pytest.raises(SystemExit):
        main(["--version"])
    argparse_said, ours = capsys.readouterr().out.splitlines()
    assert argparse_said == ours


def test_each_command_has_a_module_of_its_name_and_each_module_with_register_is_a_command() -> None:
    folder = Path(__file__).resolve().parents[1] / "replaykit" / "cli"
    registering = {path.stem for path in folder.glob("*.py") if "\ndef register(" in path.read_text()}
    assert registering == set(COMMANDS)


def test_each_module_docstring_says_what_it_owns_in_eight_lines_at_most() -> None:
    import ast

    folder = Path(__file__).resolve().parents[1] / "replaykit" / "cli"
    lines = {path.name: len((ast.get_docstring(ast.parse(path.read_text()), clean=False) or "").splitlines())
             for path in folder.glob("*.py")}
    assert {name: count for name, count in lines.items() if not 1 <= count <= 8} == {}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_gets_its_arguments_when_chosen(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    usage = capsys.readouterr().out.split("\n\n")[0].split()
    assert usage[:4] == ["usage:", "replaykit", name, "[-h]"] and len(usage) > 4  # unregistered: [-h] alone


@pytest.mark.parametrize(("argv", "start"), [
    (["serve", "--port", "x", "a.yaml"], "replaykit serve: error: argument --port: invalid int value: 'x'"),
    (["verify"], "replaykit verify: error: the following arguments are required: PATH"),
    (["properties"], "replaykit properties: error: one of the arguments --estimator --estimator-cmd"),
    (["redact", "x.yaml"], "replaykit redact: error: one of the arguments --in-place --out --check"),
    (["drift", "--sdk", "x"], "replaykit drift: error: argument --sdk: invalid choice: 'x'"),
    (["show"], "replaykit show: error: the following arguments are required: CASSETTE"),
    (["frobnicate"], "replaykit: error: argument command: invalid choice: 'frobnicate'"),
    (["cassettes", "--bogus"], "replaykit: error: unrecognized arguments: --bogus"),
])
def test_a_command_line_error_is_prefixed_once(argv: list[str], start: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(start)
    assert err.count("replaykit") == 1 and err.count("error:") == 1 and err.count("\n") == 1
