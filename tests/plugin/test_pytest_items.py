"""Scenarios as pytest items (:mod:`replaykit.scenario.pytest_items`): ``pytest DIR`` and ``replaykit run
DIR`` give the same verdicts, a failing item reports the runner's first failing expectation with its pointer,
n/a is a skip with the reason, ``-k``, ``--lf`` and ``--junitxml`` work, and only scenario files are
collected.

A few bundled scenarios are copied beside a planted failure (web-search-empty, one expectation broken) and a
manifest without ``research`` (so research-model-overloaded is n/a); every inner run is a subprocess.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from replaykit.cli import main

BUNDLED = Path(__file__).resolve().parents[2] / "scenarios"
CHOSEN = ("retry-529", "no-retry-400", "web-search-empty", "research-model-overloaded")
RIGHT = "equals: '0 results for"
PLANTED = "equals: '7 results for"
POINTER = "/messages/2/content/0/content/0/text"
MANIFEST = """\
name: no-research
capabilities: [anthropic-messages, openai-responses, azure-responses, stream, non-stream, hosted-search,
               tool:read, tool:task, tool:web_search, durable, restart, persisted-transcript, cancel,
               estimates]
mutants:
  retry-on-400: {}
  usage-double-count: {}
"""
INI = "[pytest]\nfilterwarnings = error\n"  # the cache provider on: --lf


@pytest.fixture
def suite(pytester: pytest.Pytester) -> Path:
    """``suite/``: the chosen scenarios (web-search-empty broken), their cassettes and transcripts;
    ``manifest.yaml``: the reference's capabilities but research."""
    pytester.makefile(".ini", pytest=INI)
    folder = pytester.path / "suite"
    for part in ("cassettes", "transcripts"):
        shutil.copytree(BUNDLED / part, folder / part)
    for name in CHOSEN:
        shutil.copy(BUNDLED / f"{name}.yaml", folder)
    broken = folder / "web-search-empty.yaml"
    text = broken.read_text(encoding="utf-8")
    assert RIGHT in text
    broken.write_text(text.replace(RIGHT, PLANTED), encoding="utf-8")
    (pytester.path / "manifest.yaml").write_text(MANIFEST, encoding="utf-8")
    return folder


def _junit(path: Path) -> dict[str, tuple[str, str]]:
    """``{test name: (verdict, message)}`` from pytest's JUnit XML."""
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        marks = {child.tag: child.get("message", "") for child in case}
        verdict = "fail" if "failure" in marks else "n/a" if "skipped" in marks else "pass"
        found[case.get("name", "")] = (verdict, marks.get("failure", marks.get("skipped", "")))
    return found


def test_pytest_gives_the_verdicts_of_replaykit_run(
    pytester: pytest.Pytester, suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = pytester.runpytest_subprocess("suite", "-n", "2", "-p", "no:randomly", "-rs",
                                           "--replaykit-manifest", "manifest.yaml", "--junitxml=out.xml")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    manifest = str(pytester.path / "manifest.yaml")
    capsys.readouterr()  # pytester's own lines
    assert main(["run", str(suite), "-j", "2", "--json", "--manifest", manifest]) == 1
    ran = {row["scenario"]: row for row in json.loads(capsys.readouterr().out)["results"]}
    items = _junit(pytester.path / "out.xml")
    verdicts = {name: verdict for name, (verdict, _) in items.items()}
    assert verdicts == {name: row["verdict"] for name, row in ran.items()}
    assert sorted(verdicts.values()) == ["fail", "n/a", "pass", "pass"]
    first = ran["web-search-empty"]["firstFailure"]
    assert items["web-search-empty"][1] == f"FAIL web-search-empty: {first['name']}: {first['why']}"
    assert POINTER in first["why"] + first["name"]
    result.stdout.fnmatch_lines([f"FAIL web-search-empty: *{POINTER}*",
                                 "SKIPPED [[]1] suite/research-model-overloaded.yaml:1: n/a: needs research"])
    assert items["research-model-overloaded"][1] == "n/a: needs research"


def test_k_selects_and_lf_reruns_the_failed_item(pytester: pytest.Pytester, suite: Path) -> None:
    listed = pytester.runpytest_subprocess("suite", "--co", "-q", "-k", "retry")
    listed.stdout.fnmatch_lines(["suite/no-retry-400.yaml::no-retry-400", "suite/retry-529.yaml::retry-529",
                                 "2/4 tests collected (2 deselected)*"])
    pytester.runpytest_subprocess("suite", "-k", "empty or 529", "-p", "no:randomly").assert_outcomes(
        passed=1, failed=1)
    again = pytester.runpytest_subprocess("suite", "--lf", "-v")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["suite/web-search-empty.yaml::web-search-empty FAILED*"])


def test_mutants_give_an_item_per_declared_kill(pytester: pytest.Pytester, suite: Path) -> None:
    scenario = suite / "no-retry-400.yaml"
    scenario.write_text(scenario.read_text(encoding="utf-8") + "- usage-double-count\n", encoding="utf-8")
    result = pytester.runpytest_subprocess("suite", "--replaykit-mutants", "--replaykit-manifest",
                                           "manifest.yaml", "-k", "400", "-v", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*no-retry-400.yaml::no-retry-400 PASSED*",
        "*no-retry-400.yaml::no-retry-400[[]retry-on-400] PASSED*",
        "*no-retry-400.yaml::no-retry-400[[]usage-double-count] FAILED*",
        "no-retry-400 declares kills: usage-double-count, but usage-double-count survives it",
    ])


def test_only_scenario_files_are_collected(pytester: pytest.Pytester, suite: Path) -> None:
    shutil.copy(BUNDLED / "cassettes" / "retry-529.yaml", suite / "a-cassette.yaml")  # not a scenario
    named = pytester.runpytest_subprocess("suite", "--co", "-q")
    assert named.ret == pytest.ExitCode.OK  # no collection error
    assert sorted(line for line in named.outlines if "::" in line) == sorted(
        f"suite/{name}.yaml::{name}" for name in CHOSEN)  # not a-cassette.yaml nor suite/cassettes/
    assert "no tests collected" in pytester.runpytest_subprocess("--co", "-q").stdout.str()  # not named
    given = pytester.runpytest_subprocess("--replaykit-scenarios", "suite", "--co", "-q", "-k", "529")
    given.stdout.fnmatch_lines(["suite/retry-529.yaml::retry-529", "1/4 tests collected*"])


def test_a_bad_scenario_file_is_a_collection_error_with_its_place(pytester: pytest.Pytester,
                                                                  suite: Path) -> None:
    scenario = suite / "retry-529.yaml"
    scenario.write_text(scenario.read_text(encoding="utf-8").replace("kind: contract", "kind: contrakt"),
                        encoding="utf-8")
    result = pytester.runpytest_subprocess("suite", "--co", "-q")
    result.stdout.fnmatch_lines(["*suite/retry-529.yaml:3 /kind: /kind 'contrakt' is not one of regression, "
                                 "contract; use one of the values the contract lists"])
    assert "Traceback" not in result.stdout.str()


PROBE = '''
import os


def run(given):
    with open(os.environ["PARENTS"], "a") as out:
        out.write(f"{os.getppid()}\\n")
    return {"status": "ok", "persistWrites": 0}
'''
STUB = """\
name: {name}
kind: contract
description: The probe ends ok.
steps:
- {{prompt: hello, provider: anthropic, model: claude-sonnet-4-6}}
expectations:
  outcome: ok
"""
PID = """
import os


def pytest_configure(config):
    with open(os.environ["PARENTS"] + ".pytest", "w") as out:
        out.write(str(os.getpid()))
"""


def test_a_python_targets_runs_fork_from_one_warm_parent(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(probe=PROBE)
    pytester.makeconftest(PID)
    for name in ("one", "two", "three"):
        pytester.makefile(".yaml", **{name: STUB.format(name=name)})
    parents = pytester.path / "parents.txt"
    monkeypatch.setenv("PARENTS", str(parents))
    pytester.runpytest_subprocess(".", "--replaykit-target", "python:probe:run").assert_outcomes(passed=3)
    seen = parents.read_text(encoding="utf-8").split()
    assert len(seen) == 3 and len(set(seen)) == 1  # one warm parent for every item
    assert seen[0] != (pytester.path / "parents.txt.pytest").read_text(encoding="utf-8")  # not pytest itself
