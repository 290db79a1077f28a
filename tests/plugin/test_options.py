"""Options: command line over environment over ini; clear errors for bad settings and marker arguments."""

from __future__ import annotations

import subprocess
import sys

import pytest

SHOW = '''
def test_show(replaykit_options, replaykit_server, replaykit):
    print("OPTIONS", replaykit_options)
    print("SETTINGS", replaykit_server.settings)
'''


def test_the_command_line_wins(rk: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    rk.makepyfile(test_inner=SHOW)
    monkeypatch.setenv("REPLAYKIT_TIMING", "recorded")
    monkeypatch.setenv("REPLAYKIT_RECORD_MODE", "all")
    monkeypatch.setenv("REPLAYKIT_UPSTREAM", "openai=http://127.0.0.1:7")
    result = rk.runpytest("-rA", "--replaykit-timing=fixed:5", "--replaykit-enforce-contracts",
                          "--replaykit-cassette-dir=elsewhere", "--replaykit-record-mode=NONE",
                          "--replaykit-upstream", "openai=http://127.0.0.1:8", "--replaykit-strict")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines(
        [
            rf"OPTIONS ReplaykitOptions\(cassette_dir=PosixPath\('{rk.path}/elsewhere'\), timing='fixed:5', "
            r"enforce_contracts=True, allow_network=False, record_mode='none', upstreams=\{'anthropic': "
            r"'https://api.anthropic.com', 'openai': 'http://127.0.0.1:8', 'gemini': "
            r"'https://generativelanguage.googleapis.com', 'vertex': "
            r"'https://aiplatform.googleapis.com', 'cloudflare': "
            r"'https://api.cloudflare.com'\}, strict=True\)",
            r"SETTINGS Settings\(timing=Timing\(mode='fixed', ms=5.0\), enforce_contracts=True, "
            r"profile=Profile\(name='strict', spans_optional=False\)\)",
        ]
    )


def test_the_environment_wins_over_ini(rk: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    rk.makepyfile(test_inner=SHOW)
    ini = rk.path / "pytest.ini"
    ini.write_text(ini.read_text() + "\nreplaykit_timing = fixed:9\nreplaykit_cassette_dir = data\n"
                   "replaykit_allow_network = 1\nreplaykit_record_mode = all\nreplaykit_strict = 1\n"
                   "replaykit_upstream = anthropic=http://127.0.0.1:9, azure=https://rk.openai.azure.com\n")
    monkeypatch.setenv("REPLAYKIT_TIMING", "recorded")
    monkeypatch.setenv("REPLAYKIT_ENFORCE_CONTRACTS", "yes")
    monkeypatch.setenv("REPLAYKIT_RECORD_MODE", "none")
    monkeypatch.setenv("REPLAYKIT_STRICT", "no")
    result = rk.runpytest("-rA")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines(
        [
            rf"OPTIONS ReplaykitOptions\(cassette_dir=PosixPath\('{rk.path}/data'\), timing='recorded', "
            r"enforce_contracts=True, allow_network=True, record_mode='none', upstreams=\{'anthropic': "
            r"'http://127.0.0.1:9', 'openai': 'https://api.openai.com', 'gemini': "
            r"'https://generativelanguage.googleapis.com', 'vertex': "
            r"'https://aiplatform.googleapis.com', 'cloudflare': "
            r"'https://api.cloudflare.com', 'azure': 'https://rk.openai.azure.com'\}, strict=False\)",
        ]
    )


MARKED = '''
import pytest


@pytest.mark.replaykit(cassete=["x.yaml"])
def test_unknown_argument():
    pass


@pytest.mark.replaykit(strict="yes")
def test_not_a_bool():
    pass


@pytest.mark.replaykit(cassettes=["absent.yaml"])
def test_missing_cassette():
    pass


@pytest.mark.replaykit(faults=["status=2000"])
def test_bad_fault():
    pass


@pytest.mark.replaykit(cassettes=[42])
def test_not_a_cassette():
    pass


@pytest.mark.replaykit(cassettes=["broken.yaml"])
def test_broken_cassette():
    pass


@pytest.mark.replaykit(cassettes="anthropic/web_search.yaml", allow_unused=True)
def test_cassettes_next_to_the_test_file_come_first(replaykit, request):
    assert replaykit.cassettes == [request.path.parent / "cassettes" / "anthropic" / "web_search.yaml"]
'''


def test_marker_arguments_are_checked(rk: pytest.Pytester) -> None:
    rk.makepyfile(test_inner=MARKED)
    local = rk.mkdir("cassettes") / "anthropic"
    local.mkdir()
    (local / "web_search.yaml").write_text("version: 1\ninteractions: []\n", encoding="utf-8")
    (rk.path / "cassettes" / "broken.yaml").write_text("version: 1\ninteractions: [\n", encoding="utf-8")
    result = rk.runpytest("-rA")
    result.assert_outcomes(passed=1, errors=6)
    where = r"test_inner.py::test_\w+: @pytest.mark.replaykit"
    result.stdout.re_match_lines(
        [
            rf"{where}: unknown argument 'cassete'; the arguments are cassettes, faults, allow_unused, "
            r"strict, match_on, volatile, repeat, timing, enforce_contracts, profile",
            rf"{where}: strict='yes' must be True or False",
            rf"{where}: absent.yaml: no such cassette file or folder \(looked in: "
            rf"{rk.path}/cassettes/absent.yaml, /.*/cassettes/absent.yaml\); give an absolute path, put it "
            r"there, or set --replaykit-cassette-dir",
            rf"{where} faults\[0\]: .*status.*2000.*",
            rf"{where}: cassette 42 must be a path or a replaykit.cassette.Cassette",
            rf"{rk.path}/cassettes/broken.yaml:3: invalid YAML: .*; fix the YAML syntax",
        ],
        consecutive=False,
    )
    result.stdout.no_re_match_line(r".*(pytest_plugin.py|During handling|direct cause).*")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--replaykit-timing=slow"], "",
         r"timing='slow' must be fast, recorded or fixed:<ms> \(e.g. fixed:20\)"),
        ([], "maybe",
         r"REPLAYKIT_ENFORCE_CONTRACTS='maybe' must be one of 1, true, yes, on, 0, false, no, off"),
    ],
)
def test_bad_settings_are_named(
    rk: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str], env: str, message: str
) -> None:
    rk.makepyfile(test_inner=SHOW)
    if env:
        monkeypatch.setenv("REPLAYKIT_ENFORCE_CONTRACTS", env)
    result = rk.runpytest(*args)
    result.assert_outcomes(errors=1)
    result.stdout.re_match_lines([message])


def test_help_lists_the_options(rk: pytest.Pytester) -> None:
    result = rk.runpytest("--help")
    result.stdout.re_match_lines(
        [
            r"replaykit: replay recorded LLM provider traffic:",
            r"  --replaykit-cassette-dir=DIR",
            r"  --replaykit-timing=MODE",
            r"  --replaykit-enforce-contracts",
            r"  --replaykit-allow-network",
            r"  --replaykit-record-mode=MODE",
            r"  --replaykit-upstream=PROVIDER=URL",
            r"  --replaykit-strict",
        ]
    )
    result.stdout.re_match_lines(
        [r"  replaykit_cassette_dir \(string\):.*", r"  replaykit_allow_network \(bool\):.*",
         r"  replaykit_record_mode \(string\):.*", r"  replaykit_upstream \(string\):.*",
         r"  replaykit_strict \(bool\):.*"]
    )


def test_without_pytest_recording_its_record_mode_is_ours(rk: pytest.Pytester) -> None:
    result = rk.runpytest("-p", "no:recording", "--help")
    result.stdout.re_match_lines([r"  --record-mode=MODE +pytest-recording's name of "
                                  r"--replaykit-record-mode"])


INERT = '''
import _socket
import socket
import sys


def test_plain():
    assert "aiohttp" not in sys.modules and "uvloop" not in sys.modules
    assert "connect" not in vars(socket.socket) and _socket.socket is socket.socket.__base__
'''


def test_the_plugin_is_inert_unless_asked(rk: pytest.Pytester) -> None:
    rk.makepyfile(test_inner=INERT)
    result = rk.runpytest_subprocess("-p", "no:anyio", "-p", "no:pytest_httpserver", "-p", "no:syrupy")
    result.assert_outcomes(passed=1)
    code = ("import sys, replaykit.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m.startswith(('aiohttp', 'uvloop'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"
