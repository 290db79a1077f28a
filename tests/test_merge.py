"""``replaykit run|mutants --shard K/N`` and ``replaykit merge``: four shards merged equal one unsharded run,
verdict for verdict and in the kill matrix; a shard missing, twice or of other inputs, and a report that is
not JSON, are refused in one line; the merged reports are valid by their contracts."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from replaykit import contracts
from replaykit.cli import main
from replaykit.resources import data_dir

pytestmark = pytest.mark.slow  # each scenario runs a child process

JSON = dict[str, Any]
SCENARIOS = str(data_dir("scenarios"))
PICKED = ["retry-529", "no-retry-400", "web-search-empty", "web-search-429-rate-limited",
          "research-search-auth", "web-search-timeout"]
SELECT = [word for name in PICKED for word in ("--select", name)]
# The reference as its mutant no-retry-on-529 (retry-529 fails on it), on a manifest without `research`
# (research-search-auth is n/a): a run with a pass, a failure and an n/a.
MUTATED = (f"REPLAYKIT_MUTANT=no-retry-on-529 {sys.executable} -m replaykit.scenario.call "
           "replaykit.reference:run")
MUTANTS = ["--mutant", "no-retry-on-529", "--mutant", "retry-on-400"]


def _manifest(folder: Path) -> Path:
    path = folder / "replaykit-target.yaml"
    path.write_text("name: no-research\ncapabilities: [anthropic-messages, openai-responses, "
                    "azure-responses, stream, non-stream, hosted-search, tool:read, tool:task, "
                    "tool:web_search, cancel, estimates]\n")
    return path


def _cli(*words: str) -> int:
    return main(list(words))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run and the kill matrix, unsharded and in four shards, each with its report and JUnit: the run's
    shards balanced on the durations the unsharded run recorded, the matrix's by name."""
    folder = tmp_path_factory.mktemp("shards")
    target = ["--target", MUTATED, "--manifest", str(_manifest(folder))]
    common = ["run", SCENARIOS, *SELECT, *target, "-j", "2", "--durations", str(folder / "recorded.json")]
    assert _cli(*common, "--report", str(folder / "run.json"), "--junit", str(folder / "run.xml")) == 1
    assert sorted(_load(folder / "recorded.json")["run"]) == sorted(PICKED)
    for k in range(1, 5):
        _cli(*common, "--shard", f"{k}/4", "--report", str(folder / f"run-{k}.json"))
    picked = [word for name in PICKED[:4] for word in ("--select", name)]
    matrix = ["mutants", SCENARIOS, *picked, *MUTANTS, "-j", "2", "--durations", str(folder / "none.json")]
    assert _cli(*matrix, "--report", str(folder / "mutants.json")) == 0
    for k in range(1, 5):
        assert _cli(*matrix, "--shard", f"{k}/4", "--report", str(folder / f"mutants-{k}.json")) == 0
    for k in range(0, 5):  # the declared kills only: which cells run depends on every shard's scenarios
        shard = ["--shard", f"{k}/4"] if k else []
        _cli(*matrix, "--declared", *shard, "--report", str(folder / f"declared-{k}.json"))
    return folder


def _load(path: Path) -> JSON:
    doc: JSON = json.loads(path.read_text())
    return doc


def _verdicts(doc: JSON) -> list[tuple[Any, ...]]:
    return [(r["scenario"], r["verdict"], r["missing"], r["firstFailure"], r["checks"])
            for r in doc["results"]]


def _merge(runs: Path, capsys: pytest.CaptureFixture[str], *names: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = _cli("merge", *(str(runs / name) for name in names), "--durations", str(runs / "durations.json"),
                "--json")
    out, err = capsys.readouterr()
    return code, out, err


def test_four_shards_merged_equal_the_unsharded_run(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _merge(runs, capsys, "run-3.json", "run-1.json", "run-4.json", "run-2.json")
    merged, whole = json.loads(out), _load(runs / "run.json")
    assert code == 1
    assert _verdicts(merged) == _verdicts(whole)
    assert {r[1] for r in _verdicts(whole)} == {"pass", "fail", "n/a"}
    assert {key: merged[key] for key in ("passed", "counts", "coverage")} == \
        {key: whole[key] for key in ("passed", "counts", "coverage")}
    assert sum(len(_load(runs / f"run-{k}.json")["results"]) for k in range(1, 5)) == len(PICKED)


def test_the_merged_junit_has_the_unsharded_cases(runs: Path) -> None:
    assert _cli("merge", *(str(runs / f"run-{k}.json") for k in range(1, 5)), "--junit", str(runs / "m.xml"),
                "--durations", str(runs / "durations.json")) == 1

    def cases(path: Path) -> list[tuple[str | None, list[str]]]:
        return [(case.get("name"), [child.tag for child in case]) for case in ET.parse(path).iter("testcase")]

    assert cases(runs / "m.xml") == cases(runs / "run.xml")


def test_four_shards_merged_equal_the_unsharded_kill_matrix(runs: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _merge(runs, capsys, *(f"mutants-{k}.json" for k in (2, 4, 1, 3)))
    merged, whole = json.loads(out), _load(runs / "mutants.json")
    assert code == 0

    def timeless(doc: JSON) -> JSON:
        rows = [{k: v for k, v in row.items() if k != "seconds"} for row in doc["scenarios"]]
        return {**doc, "scenarios": rows}

    assert timeless(merged) == timeless(whole)
    assert merged["vacuous"] == ["web-search-429-rate-limited", "web-search-empty"]
    # each mutant is killed in one shard only, survives the other three: killed in the merged matrix
    assert [_load(runs / f"mutants-{k}.json")["survivors"] for k in range(1, 5)].count([]) < 4
    capsys.readouterr()
    _cli("merge", *(str(runs / f"mutants-{k}.json") for k in range(1, 5)), "--durations",
         str(runs / "durations.json"))
    text = capsys.readouterr().out
    assert text.splitlines()[:3] == ["mutant           1  2  3  4  killed by",
                                     "no-retry-on-529  .  x  .  .  1",
                                     "retry-on-400     x  .  .  .  1"]
    assert text.rstrip().endswith("4 scenarios x 2 mutants, 2 killed: OK")


def test_four_shards_of_the_declared_kills_merged_equal_the_unsharded_ones(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = _merge(runs, capsys, *(f"declared-{k}.json" for k in range(1, 5)))
    merged, whole = json.loads(out), _load(runs / "declared-0.json")
    assert [row["cells"] for row in merged["scenarios"]] == [row["cells"] for row in whole["scenarios"]]
    assert [row["cells"] for row in whole["scenarios"]] == [
        {"retry-on-400": "fail"}, {"no-retry-on-529": "fail"}, {}, {}]
    assert merged["problems"] == whole["problems"] == []


@pytest.mark.parametrize(("kind", "stem"), [("run-report", "run"), ("kill-matrix", "mutants")])
def test_the_reports_and_the_merged_report_are_valid_by_their_contract(
    runs: Path, capsys: pytest.CaptureFixture[str], kind: str, stem: str
) -> None:
    _, out, _ = _merge(runs, capsys, *(f"{stem}-{k}.json" for k in range(1, 5)))
    for doc in [json.loads(out), _load(runs / f"{stem}.json"), _load(runs / f"{stem}-1.json")]:
        assert contracts.validate(f"replaykit.{kind}", doc) == []


def test_merge_records_the_durations_the_next_shards_are_balanced_on(runs: Path) -> None:
    path = runs / "balanced.json"
    assert _cli("merge", *(str(runs / f"run-{k}.json") for k in range(1, 5)), "--durations", str(path)) == 1
    assert sorted(_load(path)["run"]) == sorted(PICKED)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_missing_shard_is_refused_naming_it(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _merge(runs, capsys, "run-1.json", "run-2.json", "run-4.json")
    assert (code, out) == (2, "")
    assert _one_line(err) == ("replaykit: error: shard 3/4 is missing (given: 1/4, 2/4, 4/4); merge the "
                              "reports of all 4 shards")


def test_a_shard_given_twice_is_refused(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _merge(runs, capsys, "run-1.json", "run-2.json", "run-2.json", "run-3.json", "run-4.json")
    assert code == 2
    assert "shard 2/4 is given twice" in _one_line(err)


def test_a_shard_of_other_inputs_is_refused_naming_both_files(runs: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other-4.json"  # the same scenarios, split in three: another partition, another hash
    _cli("run", SCENARIOS, *SELECT, "--target", MUTATED, "--manifest", str(_manifest(tmp_path)),
         "--shard", "3/3", "--report", str(other), "--durations", str(tmp_path / "none.json"))
    doc = _load(other)
    doc["shard"].update(index=4, count=4)  # posing as the missing shard
    other.write_text(json.dumps(doc))
    capsys.readouterr()
    code = _cli("merge", *(str(runs / f"run-{k}.json") for k in range(1, 4)), str(other))
    line = _one_line(capsys.readouterr().err)
    assert code == 2
    assert f"{runs / 'run-1.json'} and {other} are shards of different inputs" in line


def test_reports_of_two_commands_are_refused(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _merge(runs, capsys, "run-1.json", "mutants-2.json")
    assert code == 2
    assert "is a run report and" in _one_line(err)


def test_a_report_that_is_not_json_is_one_line_with_its_place(runs: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"passed": true,\n "counts": ')
    code = _cli("merge", str(runs / "run-1.json"), str(bad))
    line = _one_line(capsys.readouterr().err)
    assert code == 2
    assert line.startswith(f"replaykit: error: {bad}:2: not JSON")


def test_an_unsharded_report_is_refused(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _merge(runs, capsys, "run.json")
    assert code == 2
    assert "not a shard's report (no /shard)" in _one_line(err)


def test_a_report_off_its_contract_is_refused_with_the_pointer(runs: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    doc = _load(runs / "run-1.json")
    doc["results"][0]["verdict"] = "maybe"
    bad = tmp_path / "run-1.json"
    bad.write_text(json.dumps(doc))
    code = _cli("merge", str(bad))
    assert code == 2
    assert f"{bad}:/results/0/verdict: not a run report" in _one_line(capsys.readouterr().err)


def test_two_qualify_shards_merged_equal_the_unsharded_report(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    picked = [word for name in ("retry-529", "no-retry-400", "web-search-empty")
              for word in ("--scenarios", str(data_dir("scenarios") / f"{name}.yaml"))]
    common = ["qualify", *picked, *MUTANTS, "--max-examples", "2", "-j", "2", "--durations",
              str(tmp_path / "none.json")]
    assert _cli(*common, "--out", str(tmp_path / "whole")) == 0
    for k in (1, 2):
        assert _cli(*common, "--shard", f"{k}/2", "--out", str(tmp_path / f"q{k}")) == 0
    capsys.readouterr()
    code = _cli("merge", str(tmp_path / "q2" / "report.json"), str(tmp_path / "q1" / "report.json"), "--out",
                str(tmp_path / "merged"), "--durations", str(tmp_path / "durations.json"))
    assert code == 0
    merged, whole = _load(tmp_path / "merged" / "report.json"), _load(tmp_path / "whole" / "report.json")
    assert contracts.validate("replaykit.qualification-report", merged) == []
    assert "shard" not in merged and merged["verdict"] == whole["verdict"] == "pass"
    for name, section in whole["sections"].items():
        got = merged["sections"][name]
        assert (got["status"], got["counts"], got.get("verdicts")) == \
            (section["status"], section["counts"], section.get("verdicts")), name
    second = _load(tmp_path / "q2" / "report.json")
    assert second["sections"]["verify"]["reason"] == "shard 2/2: shard 1/2 runs it"
    assert (tmp_path / "merged" / "report.md").read_text().startswith("#")
    assert sorted(_load(tmp_path / "durations.json")["qualify"]) == ["no-retry-400", "retry-529",
                                                                      "web-search-empty"]


def test_qualify_shards_whose_scenarios_did_not_load_merge_into_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nkind: smoke\n")
    common = ["qualify", "--scenarios", str(broken), "--mutant", "no-retry-on-529", "--max-examples", "1",
              "--durations", str(tmp_path / "none.json")]
    for k in (1, 2):
        assert _cli(*common, "--shard", f"{k}/2", "--out", str(tmp_path / f"q{k}")) == 1
    capsys.readouterr()
    assert _cli("merge", str(tmp_path / "q1" / "report.json"), str(tmp_path / "q2" / "report.json"), "--json",
                "--durations", str(tmp_path / "durations.json")) == 1
    merged = json.loads(capsys.readouterr().out)
    assert merged["sections"]["scenarios"]["status"] == "fail"
    assert str(broken) in merged["sections"]["scenarios"]["failures"][0]["message"]
