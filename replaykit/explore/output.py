"""Writing what explore found: each group's scenario (valid against the scenario contract, its schedule in
the scenario's own ``faults``, paths relative to the folder written) and ``summary.md``; each file whole or
not at all (:func:`~replaykit.cassette.write_atomic`). Nothing written depends on the clock or the machine,
so one seed writes the same files."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import yaml

from replaykit import contracts
from replaykit.cassette import write_atomic
from replaykit.errors import UsageError
from replaykit.explore.group import Group
from replaykit.explore.oracle import INVARIANTS
from replaykit.scenario.formats import ScenarioDoc
from replaykit.scenario.model import Scenario

__all__ = ["HEADER", "SUMMARY", "file_name", "scenario_doc", "summary", "write_scenario", "write_summary"]

SUMMARY = "summary.md"
HEADER = "# Written by replaykit explore"


def file_name(scenario: Scenario, group: Group) -> str:
    """``<scenario>-<invariant>-<check>.yaml`` (a scenario's name: lower case, words joined by dashes)."""
    check = re.sub(r"[^a-z0-9]+", "-", group.key[1].lower()).strip("-")
    return f"{scenario.name}-{group.key[0]}-{check}.yaml"


def _relative(scenario: Scenario, name: str, out: Path) -> str:
    return Path(os.path.relpath((scenario.path.parent / name).resolve(), out.resolve())).as_posix()


def scenario_doc(scenario: Scenario, group: Group, doc: ScenarioDoc, out: Path, seed: int) -> ScenarioDoc:
    """The scenario written for ``group``: ``doc`` (the one its run was judged by) renamed, described,
    its paths made relative to ``out``."""
    written = copy.deepcopy(doc)
    written["name"] = Path(file_name(scenario, group)).stem
    written["kind"] = "regression"
    invariant, check = group.key
    written["description"] = (f"Found by replaykit explore from {scenario.name} (seed {seed}): "
                              f"{group.trial.describe()}. Breaks {invariant} "
                              f"({INVARIANTS[invariant]}), first at {check}.")
    written["cassettes"] = [_relative(scenario, name, out) for name in doc.get("cassettes", [])]
    stored = doc.get("transcript")
    if isinstance(stored, str):
        written["transcript"] = _relative(scenario, stored, out)
    written["expectations"].pop("persistedSnapshot", None)  # a snapshot lives beside the original
    return written


def write_scenario(out: Path, scenario: Scenario, group: Group, doc: ScenarioDoc, seed: int) -> Path:
    """Write the group's scenario into ``out``; its path."""
    written = scenario_doc(scenario, group, doc, out, seed)
    broken = [v for v in contracts.validate("replaykit.scenario", written) if v.severity == "error"]
    if broken:  # a bug of explore, never a half-valid file
        raise UsageError(f"{file_name(scenario, group)}: not a valid scenario at {broken[0].pointer}: "
                         f"{broken[0].message}; report this as a replaykit bug")
    path = out / file_name(scenario, group)
    text = f"{HEADER} (contracts/replaykit/scenario.schema.json).\n" + yaml.safe_dump(
        written, sort_keys=False, allow_unicode=True, width=110)
    write_atomic(path, text.encode("utf-8"))
    return path


def summary(scenario: Scenario, target: str, mutant: str | None, lines: dict[str, Any],
            groups: list[tuple[Group, str]]) -> str:
    """The Markdown summary: what was explored, then a row per group."""
    head = [f"# replaykit explore: {scenario.name}", "",
            f"Target `{target}`" + (f" as mutant `{mutant}`" if mutant else "") + ".", ""]
    head += [f"- {key}: {value}" for key, value in lines.items()]
    if not groups:
        return "\n".join([*head, "", "No schedule broke an invariant.", ""])
    rows = ["| # | invariant | first failing check | smallest schedule | failing runs | scenario |",
            "|---|---|---|---|---|---|"]
    for number, (group, name) in enumerate(groups, 1):
        invariant, check = group.key
        rows.append(f"| {number} | {invariant} | `{check}` | {group.trial.describe()} | {group.runs} | "
                    f"[{name}]({name}) |")
    return "\n".join([*head, "", *rows, "", "Invariants: docs/explore.md (replaykit's documentation).", ""])


def write_summary(out: Path, text: str) -> Path:
    """Write ``summary.md`` into ``out``."""
    path = out / SUMMARY
    write_atomic(path, text.encode("utf-8"))
    return path
