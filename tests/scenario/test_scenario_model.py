"""Reading scenario files: a bad one is ``file:line``, the JSON pointer and the fix (exit 2, no traceback)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scenario_support import ROOT, scenario_doc, write_scenario

from replaykit.cli import main
from replaykit.errors import ScenarioError
from replaykit.scenario import load
from replaykit.scenario.model import discover, load_all


def refused(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["run", str(path), "--target", "true"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def bad(tmp_path: Path, capsys: pytest.CaptureFixture[str], **changes: Any) -> str:
    return refused(write_scenario(tmp_path, scenario_doc(**changes)), capsys)


def test_a_missing_expectation_names_line_and_pointer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = bad(tmp_path, capsys, expectations={"providerRequests": 1})
    path = tmp_path / "one-step.yaml"
    line = path.read_text().splitlines().index("expectations:") + 2  # the mapping's first key
    assert f"{path}:{line} /expectations/outcome: /expectations/outcome 'outcome' is required; add it" in err


def test_a_misspelt_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = bad(tmp_path, capsys, expectations={"outcome": "ok", "providerRequest": 1})
    assert "/expectations/providerRequest" in err and "remove or correct the misspelt key" in err


def test_a_bad_value_deep_in_a_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = [
        {"prompt": "a", "provider": "anthropic", "model": "m"},
        {"prompt": "b", "provider": "cohere", "model": "m"},
    ]
    err = bad(tmp_path, capsys, steps=steps)
    text = (tmp_path / "one-step.yaml").read_text().splitlines()
    line = text.index("  provider: cohere") + 1
    assert f"one-step.yaml:{line} /steps/1/provider:" in err and "use one of the values" in err


def test_restart_on_the_first_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = bad(
        tmp_path, capsys, steps=[{"prompt": "a", "provider": "anthropic", "model": "m", "restart": True}]
    )
    assert "/steps/0/restart: the first step cannot restart" in err


def test_a_missing_cassette(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = bad(tmp_path, capsys, cassettes=["cassettes/none.yaml"])
    assert "/cassettes/0: cassettes/none.yaml: no such file" in err and "relative to the scenario" in err


def test_a_broken_cassette_is_the_scenario_s_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_scenario(tmp_path, scenario_doc())
    (tmp_path / "cassettes" / "broken.yaml").write_text("version: 1\ninteractions: 3\n")
    err = bad(tmp_path, capsys, cassettes=["cassettes/broken.yaml"])
    assert "/cassettes/0: cassettes/broken.yaml:" in err and "interactions must be a list" in err


def test_a_file_outside_the_work_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = bad(tmp_path, capsys, files={"../escape.txt": "x"})
    assert "/files/..~1escape.txt: ../escape.txt: a file outside the work folder" in err


def test_invalid_yaml_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nkind: [regression\n", encoding="utf-8")
    err = refused(path, capsys)
    assert f"{path}:3: invalid YAML" in err and "fix the YAML syntax" in err


def test_an_alias_bomb_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 8)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "YAML aliases expand to" in refused(path, capsys)


def test_not_a_mapping_and_not_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n", encoding="utf-8")
    assert "a scenario must be a YAML mapping" in refused(path, capsys)
    assert "no such file or folder" in refused(tmp_path / "nope.yaml", capsys)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no scenario files (*.yaml) in this folder" in refused(empty, capsys)


def test_two_scenarios_with_one_name(tmp_path: Path) -> None:
    write_scenario(tmp_path, scenario_doc())
    write_scenario(tmp_path, scenario_doc(), file="copy.yaml")
    with pytest.raises(ScenarioError, match="the name 'one-step' is also the name of"):
        load_all([tmp_path])


def test_a_folder_holds_its_yaml_files_only(tmp_path: Path) -> None:
    write_scenario(tmp_path, scenario_doc("b"))
    write_scenario(tmp_path, scenario_doc("a"))
    assert [p.name for p in discover([tmp_path])] == ["a.yaml", "b.yaml"]  # not cassettes/*.yaml


def test_segments_split_at_restart_and_the_input_is_complete(tmp_path: Path) -> None:
    steps = [
        {"prompt": "a", "provider": "anthropic", "model": "m"},
        {"prompt": "b", "provider": "openai", "model": "m", "restart": True, "cancelAfterMs": 5},
        {"prompt": "c", "provider": "openai", "model": "m"},
    ]
    scenario = load(write_scenario(tmp_path, scenario_doc(steps=steps, system="Be brief.", maxRetries=0)))
    (first, _), (second, rest) = scenario.segments()
    assert (first, second) == (0, 1) and [s["prompt"] for s in rest] == ["b", "c"]
    assert rest[0] == {"prompt": "b", "provider": "openai", "model": "m", "cancelAfterMs": 5}
    given = scenario.target_input(rest, first=False)
    assert given == {
        "scenario": "one-step",
        "transcript": None,
        "steps": rest,
        "tools": [],
        "contextWindow": 200000,
        "reserve": 16384,
        "idleTimeoutMs": 30000,
        "maxRetries": 0,
        "system": "Be brief.",
        "recovery": None,
    }
    from replaykit import contracts

    assert contracts.validate("replaykit.target-input", given) == []


def test_the_example_scenario_loads() -> None:
    scenario = load(ROOT / "scenarios" / "example-nameless-search-block.yaml")
    assert scenario.transcript is not None and scenario.transcript["version"] == 1
    assert [path.name for path in scenario.cassettes] == [  # one answer, recorded plain and streamed
        "example-nameless-search-block.yaml", "example-nameless-search-block-stream.yaml"]
