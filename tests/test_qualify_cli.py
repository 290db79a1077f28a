"""``replaykit qualify`` end to end: it passes on the bundled defaults (one test runs them all) and fails,
naming the cause, when a cassette is corrupted, a contract is broken or the target is swapped for a mutant.

The other runs use a reduced selection of the bundled scenarios and mutants (``--scenarios``, ``--mutant``,
``--max-examples``) for time; they run the same stages on the same code.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, main
from replaykit.cli.qualify import Lines
from replaykit.contracts import Contracts, registry
from replaykit.properties import PROPERTIES
from replaykit.qualify.stages import Section
from replaykit.reference.defects import MUTANTS
from replaykit.resources import data_dir
from replaykit.scenario import discover

pytestmark = pytest.mark.slow  # every run starts scenario processes

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = data_dir("scenarios")
SMALL = ["--scenarios", str(SCENARIOS / "retry-529.yaml"),
         "--scenarios", str(SCENARIOS / "no-retry-400.yaml"),
         "--mutant", "no-retry-on-529", "--mutant", "retry-on-400", "--max-examples", "10", "-j", "2"]
STAGES = ["verify", "contracts", "drift", "scenarios", "mutants", "properties", "redgreen"]
JSON = dict[str, Any]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("CI", "true")  # plain lines: no status line on a terminal


def stock_errors(doc: JSON) -> list[str]:
    """report.json against its schema with a stock validator (nothing fetched)."""
    resources = []
    for path in sorted(data_dir("contracts").rglob("*.schema.json")):
        contents = json.loads(path.read_text(encoding="utf-8"))
        resources.append((contents["$id"], DRAFT202012.create_resource(contents)))
    found: Registry[Any] = Registry().with_resources(resources)
    path = data_dir("contracts") / "replaykit" / "qualification-report.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    validator = Draft202012Validator(schema, registry=found)
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(doc)]


def qualify(args: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], JSON]:
    code = main(["qualify", "--out", str(out), *args])
    lines = capsys.readouterr().out.splitlines()
    return code, lines, json.loads((out / "report.json").read_text(encoding="utf-8"))


def test_a_reduced_selection_passes_with_a_line_per_stage_and_valid_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, lines, doc = qualify(SMALL, tmp_path / "out", capsys)
    assert code == EXIT_OK, "\n".join(lines)
    assert lines[0].startswith("identity: Python ")
    decided = [line.split(":")[0] for line in lines if line.startswith(("PASS ", "FAIL ", "SKIP "))]
    assert decided == [f"{'SKIP' if s == 'redgreen' else 'PASS'} {s}" for s in STAGES]
    assert lines[-1] == "qualify: OK"
    assert doc["verdict"] == "pass" and stock_errors(doc) == []
    assert doc["sections"]["scenarios"]["verdicts"] == {"retry-529": "pass", "no-retry-400": "pass"}
    assert doc["sections"]["mutants"]["verdicts"] == {"no-retry-on-529": "killed", "retry-on-400": "killed"}
    assert doc["environment"]["packages"]["anthropic"] is not None
    assert "scenarios/cassettes/retry-529.yaml" in doc["hashes"]["scenarios"]
    assert doc["subject"]["candidate"]["label"] == "python:replaykit.reference:run"
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# replaykit qualify: PASS") and "| scenarios | ✅ pass |" in md
    assert summary.read_text(encoding="utf-8") == md + "\n"


def test_a_target_swapped_for_a_mutant_fails_naming_the_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    swapped = f"env REPLAYKIT_MUTANT=no-retry-on-529 {sys.executable} -m replaykit.reference"
    args = [arg for arg in SMALL if arg not in ("--mutant", "no-retry-on-529", "retry-on-400")]
    code, lines, doc = qualify(["--target", swapped, *args], tmp_path, capsys)
    assert code == EXIT_FINDINGS
    assert "FAIL scenarios: 2 scenarios on env REPLAYKIT_MUTANT=no-retry-on-529" in "\n".join(lines)
    assert doc["sections"]["scenarios"]["verdicts"] == {"retry-529": "fail", "no-retry-400": "pass"}
    # its manifest is the reference's, so its mutants are declared; the matrix fails: a scenario fails on it
    assert doc["sections"]["mutants"]["status"] == "fail"
    assert lines[-1].startswith("qualify: FAILED: scenarios (retry-529: ")
    assert doc["verdict"] == "fail" and stock_errors(doc) == []


def test_a_corrupted_cassette_fails_verify_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cassettes = tmp_path / "cassettes"
    shutil.copytree(data_dir("cassettes"), cassettes)
    broken = cassettes / "anthropic" / "web_search.yaml"
    text = broken.read_text(encoding="utf-8")
    broken.write_text(text[: len(text) // 2], encoding="utf-8")  # cut short, as a failed copy leaves it
    code, lines, doc = qualify(["--cassettes", str(cassettes), *SMALL], tmp_path / "out", capsys)
    assert code == EXIT_FINDINGS
    assert doc["sections"]["verify"]["verdicts"]["cassettes/anthropic/web_search.yaml"] == "fail"
    failure = doc["sections"]["verify"]["failures"][0]
    assert failure["name"] == str(broken) and failure["where"].isdigit()  # the line
    assert lines[-1].startswith(f"qualify: FAILED: verify ({broken}: ")
    assert doc["sections"]["scenarios"]["status"] == "pass"  # the rest still ran


def test_a_corrupted_scenario_cassette_fails_the_scenarios_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenarios = tmp_path / "scenarios"
    shutil.copytree(SCENARIOS, scenarios)
    (scenarios / "cassettes" / "retry-529.yaml").write_text("interactions: [\n", encoding="utf-8")
    args = ["--scenarios", str(scenarios / "retry-529.yaml"), "--max-examples", "5"]
    code, _, doc = qualify(args, tmp_path / "out", capsys)
    assert code == EXIT_FINDINGS
    message = doc["sections"]["scenarios"]["failures"][0]["message"]
    assert f"{scenarios / 'retry-529.yaml'}:" in message and "cassettes/retry-529.yaml" in message
    assert doc["sections"]["mutants"]["status"] == "skipped"


def _broken_contracts(tmp_path: Path, relative: str, edit: str) -> Path:
    root = tmp_path / "contracts"
    shutil.copytree(data_dir("contracts"), root)
    path = root / relative
    if edit == "not-json":
        path.write_text(path.read_text(encoding="utf-8")[:-20], encoding="utf-8")
    else:  # the usage object now requires a field no recording has
        schema = json.loads(path.read_text(encoding="utf-8"))
        schema["$defs"]["usage"]["required"].append("made_up_tokens")
        path.write_text(json.dumps(schema), encoding="utf-8")
    return root


@pytest.mark.parametrize("edit", ["not-json", "required"])
def test_a_broken_contract_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    root = _broken_contracts(tmp_path, "anthropic/usage.schema.json", edit)
    monkeypatch.setattr(registry, "_DEFAULT", [Contracts(root)])
    args = ["--scenarios", str(SCENARIOS / "retry-529.yaml"), "--mutant", "no-retry-on-529",
            "--max-examples", "5"]
    code, lines, doc = qualify(args, tmp_path / "out", capsys)
    assert code == EXIT_FINDINGS
    contract = doc["sections"]["contracts"]
    assert contract["status"] == "fail"
    if edit == "not-json":
        assert f"{root / 'anthropic' / 'usage.schema.json'}:" in contract["failures"][-1]["message"]
        assert doc["sections"]["scenarios"]["reason"].startswith("the contracts are broken")
    else:
        failure = contract["failures"][0]
        assert "made_up_tokens" in failure["message"] and failure["where"].startswith("interactions[")
        assert contract["verdicts"]["cassettes/anthropic/web_search.yaml"] == "fail"
    assert lines[-1].startswith("qualify: FAILED: contracts (")
    assert doc["hashes"]["contracts"]["contracts/anthropic/usage.schema.json"]


def test_progress_on_a_terminal_is_a_status_line_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI")
    out, err = io.StringIO(), Terminal()
    lines = Lines(out, err)
    lines.start("mutants")
    lines.tick(1, 40, "PASS retry-529 on no-retry-on-529")
    lines.finish("mutants", Section("pass", "1 scenarios x 40 mutants", seconds=2.0))
    assert "\r\x1b[K[" in err.getvalue()
    assert "[2/40] mutants: PASS retry-529 on no-retry-on-529" in err.getvalue()
    assert err.getvalue().endswith("\r\x1b[K")  # wiped before the stage's line
    assert out.getvalue() == "PASS mutants: 1 scenarios x 40 mutants (2.0 s)\n"


def test_progress_in_ci_is_plain_lines_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out, err = io.StringIO(), Terminal()
    lines = Lines(out, err)
    lines.start("verify")
    lines.tick(3, 3, "x")
    lines.finish("verify", Section("fail", "1 error", seconds=0.5))
    assert err.getvalue() == ""
    assert out.getvalue() == "FAIL verify: 1 error (0.5 s)\n"


def test_the_bundled_defaults_pass_from_a_fresh_folder(tmp_path: Path) -> None:
    """The defaults, all of them: every bundled scenario (discovered) on the reference, every mutant of the
    reference, the whole property suite; from a folder that is not the repository, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run([sys.executable, "-m", "replaykit", "qualify", "-j", "2", "--out", "report"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    doc = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    sections = doc["sections"]
    assert {name: s["status"] for name, s in sections.items()} == {
        **{name: "pass" for name in STAGES}, "redgreen": "skipped"}
    assert sections["scenarios"]["counts"]["scenarios"] == len(discover([SCENARIOS]))
    assert sorted(sections["mutants"]["verdicts"]) == sorted(MUTANTS)
    assert sections["properties"]["counts"]["passed"] == len(PROPERTIES)
    assert done.stdout.rstrip().endswith("qualify: OK") and stock_errors(doc) == []
