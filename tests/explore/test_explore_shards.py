"""``replaykit explore --shard K/N`` and ``replaykit merge``: two shards of one small exploration merged equal
the unsharded exploration (its groups, their smallest schedules and files, the scenarios copied with
``--out``); a missing shard, a shard of another seed and an unsharded report are refused in one line; every
report is valid by its contract. Kills only, budget 3, ``-j 2``, a mutant the schedules find."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replaykit import contracts
from replaykit.cli import main
from replaykit.scenario import load

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ROOT / "scenarios" / "durable-duplicate-submit.yaml"
EXPLORE = ["explore", str(PLAIN), "--mutant", "partial-dropped-on-recovery", "--faults", "kill",
           "--budget", "3", "-j", "2"]
JSON = dict[str, Any]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The exploration whole (``whole``), in two shards (``s1``, ``s2``), and shard 2/2 of seed 8
    (``other``)."""
    folder = tmp_path_factory.mktemp("explore-shards")
    assert main([*EXPLORE, "--seed", "7", "--out", str(folder / "whole")]) == 1
    for k in (1, 2):
        main([*EXPLORE, "--seed", "7", "--shard", f"{k}/2", "--out", str(folder / f"s{k}")])
    main([*EXPLORE, "--seed", "8", "--shard", "2/2", "--out", str(folder / "other")])
    return folder


def _load(path: Path) -> JSON:
    doc: JSON = json.loads(path.read_text(encoding="utf-8"))
    return doc


def _merge(capsys: pytest.CaptureFixture[str], *words: str | Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["merge", *map(str, words)])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_two_shards_merged_equal_the_unsharded_exploration(runs: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _merge(capsys, runs / "s2" / "report.json", runs / "s1" / "report.json", "--json")
    merged, whole = json.loads(out), _load(runs / "whole" / "report.json")
    assert code == 1
    assert merged["groups"] == whole["groups"]
    assert [(g["invariant"], g["check"], g["describe"]) for g in merged["groups"]] == [
        ("partial-kept", "reaches[0]", "kill after event 4 of 9 of request 1 (anthropic.messages #1)")]
    assert [_load(runs / f"s{k}" / "report.json")["runs"] for k in (1, 2)] == [2, 1]
    assert {key: merged[key] for key in ("runs", "points", "space", "found")} == \
        {key: whole[key] for key in ("runs", "points", "space", "found")}
    assert "shard" not in merged and "shard" in _load(runs / "s1" / "report.json")


def test_the_merged_summary_is_printed_and_the_kept_scenarios_copied(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = runs / "merged"  # beside the shards' folders: the copies' paths read as the unsharded run's
    code, printed, _ = _merge(capsys, runs / "s1" / "report.json", runs / "s2" / "report.json", "--out", out,
                              "--durations", tmp_path / "durations.json")
    assert code == 1
    name = _load(runs / "whole" / "report.json")["groups"][0]["file"]
    assert "| 1 | partial-kept | `reaches[0]` | kill after event 4 of 9 of request 1" in printed
    assert printed.startswith("# replaykit explore: durable-duplicate-submit")
    assert (out / "report.md").read_text(encoding="utf-8") == printed
    assert sorted(p.name for p in out.iterdir()) == sorted([name, "report.json", "report.md"])
    assert (out / name).read_bytes() == (runs / "whole" / name).read_bytes()
    copied, written = load(out / name), load(runs / "whole" / name)
    assert [p.resolve() for p in copied.cassettes] == [p.resolve() for p in written.cassettes]


def test_every_report_is_valid_by_its_contract(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _merge(capsys, runs / "s1" / "report.json", runs / "s2" / "report.json", "--json")
    for doc in [json.loads(out), *(_load(runs / name / "report.json") for name in ("whole", "s1", "s2"))]:
        assert contracts.validate("replaykit.explore-report", doc) == []


def test_a_missing_shard_is_refused_naming_it(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _merge(capsys, runs / "s1" / "report.json")
    assert (code, out) == (2, "")
    assert _one_line(err) == ("replaykit: error: shard 2/2 is missing (given: 1/2); merge the reports of all "
                              "2 shards")


def test_a_shard_of_another_seed_is_refused_naming_both_files(runs: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _merge(capsys, runs / "s1" / "report.json", runs / "other" / "report.json")
    assert (code, out) == (2, "")
    assert (f"{runs / 's1' / 'report.json'} and {runs / 'other' / 'report.json'} are shards of different "
            "inputs") in _one_line(err)


def test_an_unsharded_report_is_refused(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _merge(capsys, runs / "whole" / "report.json")
    assert code == 2
    assert "not a shard's report (no /shard); run replaykit explore with --shard K/N" in _one_line(err)


def test_a_kept_scenario_missing_from_its_folder_is_refused(runs: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    for k in (1, 2):  # the reports alone, without the scenarios beside them
        (tmp_path / f"s{k}").mkdir()
        (tmp_path / f"s{k}" / "report.json").write_bytes((runs / f"s{k}" / "report.json").read_bytes())
    code, _, err = _merge(capsys, tmp_path / "s1" / "report.json", tmp_path / "s2" / "report.json", "--out",
                          tmp_path / "merged")
    assert code == 2
    assert "no such file, the scenario its shard wrote for a group" in _one_line(err)
    assert not (tmp_path / "merged").exists()
