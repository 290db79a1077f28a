"""What each entry point imports, in a fresh interpreter: every command, and a Python target run by a
scenario, import what they use when they use it, so none pays for the fake provider, the test tools or the
contract engine it never touches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from replaykit.resources import data_dir

TEST_TOOLS = ("aiohttp", "pytest", "_pytest", "syrupy", "hypothesis")
CONTRACT_ENGINE = ("jsonschema", "jsonschema_rs", "referencing")

# Runs the entry point, then writes the names in sys.modules when the interpreter exits (after a SystemExit).
PROBE = """\
import atexit, json, runpy, sys
out, how, target, *argv = sys.argv[1:]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = [target, *argv]
if how == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(target)
"""


def loaded(tmp_path: Path, how: str, target: str, *argv: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules loaded by ``python -m TARGET ARGV...`` (``how="-m"``) or ``python -c TARGET``, run in
    ``tmp_path`` with ``env`` added to the environment."""
    out = tmp_path / "modules.json"
    subprocess.run([sys.executable, "-c", PROBE, str(out), how, target, *argv], cwd=tmp_path,
                   env={**os.environ, **(env or {})}, capture_output=True, check=False)
    names: list[str] = json.loads(out.read_text())
    return set(names)


def among(names: set[str], packages: tuple[str, ...]) -> list[str]:
    """The ``packages`` of which a module is in ``names``."""
    return sorted(package for package in packages if any(name.split(".")[0] == package for name in names))


def test_import_replaykit_loads_none_of_its_modules(tmp_path: Path) -> None:
    names = loaded(tmp_path, "-c", "import replaykit")
    assert among(names, TEST_TOOLS + CONTRACT_ENGINE) == []
    assert sorted(name for name in names if name.startswith("replaykit.")) == []


def test_version_loads_nothing_but_the_command_line(tmp_path: Path) -> None:
    names = loaded(tmp_path, "-m", "replaykit", "--version")
    assert among(names, TEST_TOOLS + CONTRACT_ENGINE + ("argparse", "typing")) == []
    assert sorted(name for name in names if name.startswith("replaykit")) == [
        "replaykit", "replaykit.cli", "replaykit.cli.version"]


def test_help_loads_no_command(tmp_path: Path) -> None:
    from replaykit.cli.parser import COMMANDS

    names = loaded(tmp_path, "-m", "replaykit", "--help")
    assert among(names, TEST_TOOLS + CONTRACT_ENGINE) == []
    assert sorted({f"replaykit.cli.{command}" for command in COMMANDS} & names) == []


def test_verify_loads_the_contract_engine_and_no_test_tool(tmp_path: Path) -> None:
    cassette = data_dir("cassettes") / "anthropic" / "web_search.yaml"
    names = loaded(tmp_path, "-m", "replaykit", "verify", str(cassette))
    assert "replaykit.contracts" in names and among(names, TEST_TOOLS) == []
    assert sorted(name for name in names if name.startswith("replaykit.cli.")) == [
        "replaykit.cli.parser", "replaykit.cli.verify", "replaykit.cli.version"]


def test_a_python_target_run_loads_no_test_tool_nor_the_contract_engine(tmp_path: Path) -> None:
    (tmp_path / "probe_target.py").write_text("def run(given):\n    return {'status': 'ok'}\n")
    (tmp_path / "input.json").write_text("{}")
    env = {"REPLAYKIT_INPUT": str(tmp_path / "input.json"),
           "REPLAYKIT_OUTCOME": str(tmp_path / "outcome.json")}
    names = loaded(tmp_path, "-m", "replaykit.scenario.call", "probe_target:run", env=env)
    assert json.loads((tmp_path / "outcome.json").read_text()) == {"status": "ok"}
    assert among(names, TEST_TOOLS + CONTRACT_ENGINE) == []


def test_the_reference_target_loads_no_test_tool_nor_the_contract_engine(tmp_path: Path) -> None:
    assert among(loaded(tmp_path, "-c", "import replaykit.reference"), TEST_TOOLS + CONTRACT_ENGINE) == []
