"""Capabilities: a target's manifest (found beside it, or named), what a scenario needs, and n/a for a target
that lacks it (never a pass, never a failure) in the runner, the report, the JUnit file and the exit code."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from scenario_support import COMMAND, FUNCTION, HERE, ROOT, scenario_doc, write_scenario

from replaykit.cli import main
from replaykit.errors import ScenarioError, UsageError
from replaykit.reference.defects import MANIFEST, MUTANTS
from replaykit.scenario import Target, load, run_scenario
from replaykit.scenario.capabilities import CAPABILITIES, Manifest, find_manifest, load_manifest

SEARCH = {"type": "hostedSearch", "maxUses": 5}


def _manifest(folder: Path, text: str) -> Path:
    path = folder / "replaykit-target.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_reference_is_found_with_its_manifest_however_it_is_named() -> None:
    for spec in ("python:replaykit.reference:run", f"{sys.executable} -m replaykit.reference"):
        manifest = Target.parse(spec).manifest
        assert manifest.path == MANIFEST and manifest.capabilities == frozenset(CAPABILITIES) | {
            "tool:read", "tool:task", "tool:web_search"}
        assert set(manifest.mutants) == set(MUTANTS)


def test_a_manifest_beside_the_script_a_command_runs_is_found(tmp_path: Path) -> None:
    (tmp_path / "harness.js").write_text("// a harness\n")
    path = _manifest(tmp_path, "capabilities: [anthropic-messages]\n")
    assert find_manifest(["node", str(tmp_path / "harness.js")]) == path
    assert Target.parse("node harness.js", tmp_path).manifest.capabilities == {"anthropic-messages"}
    assert find_manifest(["node", "--version"]) is None
    assert Target.parse(COMMAND).manifest == Manifest()  # none beside tiny_target.py: everything is given


def test_a_python_target_finds_the_manifest_beside_its_module_without_importing_it(tmp_path: Path) -> None:
    package = tmp_path / "harness"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('imported')\n")
    (package / "target.py").write_text("raise SystemExit('imported')\n")
    path = _manifest(package, "capabilities: [openai-responses]\n")
    assert Target.parse("python:harness.target:run", tmp_path).manifest.path == path
    assert Target.parse("python:harness:run", tmp_path).manifest.path == path


@pytest.mark.parametrize(("text", "said"), [
    ("capabilities: [anthropic-messages, streams]\n", "1 /capabilities/1: 'streams' is no capability; use "
                                                      "tool:NAME or one of anthropic-messages"),
    ("capabilities: [stream]\nmutants: {x: {envv: {}}}\n", "2 /mutants/x/envv: 'envv' is not allowed"),
    ("- a list\n", ": a manifest is a YAML mapping"),
    ("capabilities: [stream\n", ":2: invalid YAML"),
])
def test_a_bad_manifest_is_one_line_with_its_place_and_fix(tmp_path: Path, text: str, said: str) -> None:
    path = _manifest(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_manifest(path)
    assert str(caught.value).startswith(str(path)) and said in str(caught.value)
    with pytest.raises(UsageError, match="cannot read"):
        load_manifest(tmp_path / "missing.yaml")


def _needs(tmp_path: Path, **changes: Any) -> frozenset[str]:
    return load(write_scenario(tmp_path, scenario_doc(**changes))).needs


def test_what_a_scenario_needs_is_what_its_parts_show(tmp_path: Path) -> None:
    assert _needs(tmp_path) == {"anthropic-messages", "non-stream"}
    tools = [SEARCH, {"type": "function", "name": "task_wait", "parameters": {"type": "object"}}]
    step = {"prompt": "p", "provider": "openai", "model": "m", "cancelAfterMs": 5, "operationId": "op"}
    restart = {"prompt": "q", "provider": "azure", "model": "d", "restart": True}
    needs = _needs(tmp_path, name="two", cassettes=[], tools=tools, steps=[step, restart],
                   requires=["tool:read"], expectations={"outcome": "ok", "persistedSnapshot": True,
                                                         "estimates": [{"step": 0, "max": 9}]})
    assert needs == {"openai-responses", "azure-responses", "hosted-search", "tool:task", "tool:read",
                     "cancel", "durable", "restart", "persisted-transcript", "estimates"}
    assert "durable" in _needs(tmp_path, name="kill", faults=[{"kind": "kill", "after": 1}])


def test_recordings_only_streamed_need_stream_and_twins_need_neither() -> None:
    scenarios = ROOT / "scenarios"
    assert "stream" in load(scenarios / "search-next-prompt.yaml").needs
    for name in ("example-nameless-search-block", "nameless-search-block-no-anchor"):
        assert not {"stream", "non-stream"} & load(scenarios / f"{name}.yaml").needs


def test_a_scenario_the_target_cannot_run_is_na_never_pass_nor_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_scenario(tmp_path, scenario_doc("plain"))
    write_scenario(tmp_path, scenario_doc("searching", tools=[SEARCH], requires=["tool:read"]))
    manifest = _manifest(tmp_path / "cassettes", "capabilities: [anthropic-messages, non-stream]\n")
    result = run_scenario(load(tmp_path / "searching.yaml"), Target.parse(FUNCTION, manifest=manifest))
    assert (result.verdict, result.passed, result.failed, result.checks) == ("n/a", False, False, [])
    assert result.reason == "needs hosted-search, tool:read"
    junit = tmp_path / "junit.xml"
    argv = ["run", str(tmp_path), "--target", FUNCTION, "--manifest", str(manifest), "--junit", str(junit)]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert "N/A  searching: needs hosted-search, tool:read" in out
    assert out[-1] == ("2 scenarios, 1 passed, 0 failed, 1 n/a; 1 of 2 apply (n/a: hosted-search 1, "
                       "tool:read 1): OK")
    (skipped,) = ET.parse(junit).getroot().iter("skipped")
    assert skipped.attrib["message"] == "n/a: needs hosted-search, tool:read"
    assert main([*argv[:-2], "--select", "search*"]) == 1  # nothing applies: nothing was checked
    assert capsys.readouterr().out.splitlines()[-1].endswith("FAILED (no scenario applies)")


def test_a_mutant_runs_with_its_manifest_environment(tmp_path: Path) -> None:
    write_scenario(tmp_path, scenario_doc("persists", kills=["estimator-assumes-name"]))
    manifest = _manifest(tmp_path / "cassettes", "mutants:\n  estimator-assumes-name:\n"
                                                 "    env: {REPLAYKIT_MUTANT_ALIAS: no-persist}\n")
    target = Target.parse(f"{sys.executable} {HERE / 'tiny_target.py'}", manifest=manifest)
    assert target.mutant_env("estimator-assumes-name") == {
        "REPLAYKIT_MUTANT": "estimator-assumes-name", "REPLAYKIT_MUTANT_ALIAS": "no-persist"}
    assert target.mutant_env("other") == {"REPLAYKIT_MUTANT": "other"}


def test_a_relative_command_keeps_its_symlinks_and_its_leading_assignments(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)  # as a virtualenv's python is
    target = Target.parse("A=1 B=two=2 bin/python -m replaykit.reference", tmp_path)
    assert target.argv[0] == str(tmp_path / "bin" / "python")  # not the link's target: the venv would be lost
    assert ("A", "1") in target.env and ("B", "two=2") in target.env
    assert target.manifest.path == MANIFEST


def test_a_step_needs_the_capability_of_its_provider_on_its_api(tmp_path: Path) -> None:
    steps = [{"prompt": "p", "provider": "openai", "api": "openai-chat", "model": "m"},
             {"prompt": "p", "provider": "azure", "api": "openai-chat", "model": "d"},
             {"prompt": "p", "provider": "gemini", "model": "gemini-2.5-flash"},
             {"prompt": "p", "provider": "vertex", "api": "gemini-generate", "model": "gemini-2.5-pro"},
             {"prompt": "p", "provider": "openai", "model": "m"}]
    needs = _needs(tmp_path, name="apis", cassettes=[], steps=steps)
    assert needs == {"openai-chat", "azure-chat", "gemini-generate", "vertex-generate", "openai-responses"}
    assert needs <= set(CAPABILITIES)
    assert needs <= (load_manifest(MANIFEST).capabilities or set())  # the reference calls them all


def test_a_step_whose_api_is_not_its_providers_is_refused(tmp_path: Path) -> None:
    step = {"prompt": "p", "provider": "anthropic", "api": "gemini-generate", "model": "m"}
    with pytest.raises(ScenarioError, match=r"bad-api.yaml:7 /steps/0/provider: .*not one of gemini, vertex"):
        load(write_scenario(tmp_path, scenario_doc(name="bad-api", cassettes=[], steps=[step])))
