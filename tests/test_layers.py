"""Modules depend downward only: no import cycle, ``errors`` imports nothing of replaykit, and the lowest
modules (``sse``, ``cassette``, ``redact``, ``contracts`` and its submodules…) import neither the taxonomy nor
the server.

Every import counts, at module level or inside a function: an import moved into a function to dodge a cycle
is still a cycle.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import replaykit

PACKAGE = Path(__file__).resolve().parents[1] / "replaykit"
HOMES: dict[str, str] = replaykit._HOMES  # each name the package root exports -> the module it comes from
LOWEST = ("errors", "pointer", "findings", "sse", "resources", "cassette", "routes", "redact", "contracts")


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def graph() -> dict[str, set[str]]:
    """``{module: the replaykit modules it imports}`` for every module of the package."""
    modules = {_name(path): path for path in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "replaykit":  # a name: its home module
                found |= {f"replaykit.{HOMES.get(alias.name, alias.name)}" for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules
                          else node.module for alias in node.names}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        edges[name] = {target for target in found if target in modules and target != name}
    # the package root imports its names for type checkers only (tests/test_imports.py: ``import replaykit``
    # loads no module of replaykit's); a name taken from it reaches its home module (above), __version__ none
    edges["replaykit"] = set()
    return edges


def _reach(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph()[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_the_graph_sees_the_package() -> None:
    assert {"replaykit.errors", "replaykit.server.exchange", "replaykit.cli"} <= set(graph())
    assert "replaykit.contracts" in graph()["replaykit.verify"]


def test_there_is_no_import_cycle() -> None:
    cycles = sorted(name for name in graph() if name in _reach(name))
    assert cycles == []


def test_errors_imports_nothing_of_replaykit() -> None:
    assert graph()["replaykit.errors"] == set()


def _within(name: str) -> set[str]:
    """``name`` and, when it is a package (``contracts``), every module below it."""
    return {module for module in graph() if module == name or module.startswith(name + ".")}


def test_the_lowest_modules_import_neither_the_taxonomy_nor_the_server() -> None:
    for low in LOWEST:
        above = {name for module in _within(f"replaykit.{low}") for name in _reach(module)
                 if name == "replaykit.provenance" or name.startswith("replaykit.server")}
        assert above == set(), low


OUTSIDE = re.compile(r"WIRE\.md|DESIGN\.md|STYLE\.md|/work/|\.\./shared|shared/(?:recorded|seeds)")


def test_what_ships_cites_only_what_ships_or_a_public_url() -> None:
    root = PACKAGE.parent
    shipped = [*PACKAGE.rglob("*.py"), *(root / "contracts").rglob("*.json"),
               *(root / "cassettes").rglob("*"), *(root / "scenarios").rglob("*")]
    cited = [str(path.relative_to(root)) for path in shipped
             if path.is_file() and OUTSIDE.search(path.read_text(encoding="utf-8", errors="replace"))]
    assert cited == []


ABOVE_SCENARIO = ("cli", "explore", "merge", "pytest_plugin", "qualify", "record", "repro")
BELOW_SCENARIO = ("server", "replay", "estimate", "citations", "search", "provenance", "transcript",
                  "contracts", "routes", "cassette", "sse", "redact", "errors", "pointer", "findings")


def test_scenario_and_reference_sit_above_the_server_and_below_the_cli() -> None:
    """``scenario`` and ``reference`` import neither the layers above them nor each other (the CLI names the
    reference's mutants); nothing below them imports them."""
    for middle, other in (("scenario", "reference"), ("reference", "scenario")):
        reached = {name for module in _within(f"replaykit.{middle}") for name in _reach(module)}
        above = {name for name in reached for top in (*ABOVE_SCENARIO, other)
                 if name in _within(f"replaykit.{top}")}
        assert above == set(), middle
    for low in BELOW_SCENARIO:
        reached = {name for module in _within(f"replaykit.{low}") for name in _reach(module)}
        assert not {name for name in reached
                    if name.startswith(("replaykit.scenario", "replaykit.reference"))}, low


def test_the_reference_sits_above_the_library_and_below_the_cli_and_the_runner() -> None:
    reached = set().union(*(_reach(module) for module in _within("replaykit.reference")))
    above = ("replaykit.cli", "replaykit.scenario", "replaykit.server", "replaykit.pytest_plugin")
    assert not {name for name in reached if name.startswith(above)}
    top = tuple(f"replaykit.{name}" for name in ABOVE_SCENARIO)  # cli, repro...: above the reference
    below = {name for module in _within("replaykit") if not module.startswith("replaykit.reference")
             and not module.startswith(("replaykit.scenario", *top)) for name in _reach(module)}
    assert not {name for name in below if name.startswith("replaykit.reference")}


HTTP_WING = ("seam", "prepared", "connections", "streaming", "lane", "transport", "background")
PROVIDER_WING = ("provider", "catalogue", "admin", "exchange", "matching", "plan", "faults", "journal",
                 "verdicts", "envelopes", "diff")


def test_every_server_module_is_in_one_wing() -> None:
    modules = {name.removeprefix("replaykit.server.") for name in _within("replaykit.server")}
    modules.discard("replaykit.server")
    assert sorted(modules) == sorted(HTTP_WING + PROVIDER_WING)


def test_the_http_wing_imports_nothing_of_the_provider_wing() -> None:
    """The HTTP wing asks the provider wing through the seam (``seam.Provider``), never by import: nothing
    it reaches is a module of the provider wing."""
    upper = {f"replaykit.server.{name}" for name in PROVIDER_WING} | {"replaykit.server"}
    for low in HTTP_WING:
        reached = _reach(f"replaykit.server.{low}") & upper
        assert reached == set(), f"server.{low} imports {sorted(reached)}"


# Basenames more than one package may use, each for one concept (the reason in one line).
SHARED_BASENAMES = {
    "__init__.py": "a package",
    "__main__.py": "what `python -m` runs: replaykit's CLI, the reference target",
    "drift.py": "cli/drift.py is the `drift` command of the library's drift.py",
    "merge.py": "cli/merge.py is the `merge` command of the library's merge.py",
    "mutants.py": "cli/mutants.py is the `mutants` command of the kill matrix, scenario/mutants.py",
    "redgreen.py": "cli/redgreen.py is the `redgreen` command of scenario/redgreen.py",
    "properties.py": "cli/properties.py is the `properties` command of the library's property suite",
    "verify.py": "cli/verify.py is the `verify` command of the library's verify.py",
    "model.py": "the data types of its package (cassette, scenario, transcript): one role",
    "report.py": "a command's report as text and JSON (scenario runs, explore): one role",
}


def _basenames() -> dict[str, list[str]]:
    """``{basename: the modules of that name}`` for every module of the package."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found.setdefault(path.name, []).append(str(path.relative_to(PACKAGE.parent)))
    return found


def test_no_two_modules_share_a_basename_unless_they_are_one_concept() -> None:
    shared = {name: paths for name, paths in _basenames().items() if len(paths) > 1}
    assert {name: paths for name, paths in shared.items() if name not in SHARED_BASENAMES} == {}
    assert sorted(set(SHARED_BASENAMES) - set(shared)) == []  # a reason for a pair that is gone goes too
