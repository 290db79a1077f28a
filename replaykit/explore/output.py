"""Writing what explore found: each group's scenario (valid against the scenario contract, its schedule in
the scenario's own ``faults``, paths relative to the folder written) and ``summary.md``; each file whole or
not at all (:func:`~replaykit.cassette.write_atomic`). Nothing written depends on the clock or the machine,
so one seed writes the same files."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import yaml

from replaykit import contracts
from replaykit.cassette import write_atomic
from replaykit.errors import UsageError
from replaykit.explore.group import Group
from replaykit.explore.oracle import INVARIANTS
from replaykit.explore.report import Found
from replaykit.jsondoc import JSON
from replaykit.scenario.formats import ScenarioDoc
from replaykit.scenario.model import Scenario

__all__ = ["HEADER", "SUMMARY", "copy_scenario", "file_name", "scenario_doc", "summary", "write_scenario",
           "write_summary"]

SUMMARY = "summary.md"
HEADER = "# Written by replaykit explore"


def file_name(scenario: Scenario, group: Group) -> str:
    """``<scenario>-<invariant>-<check>.yaml`` (a scenario's name: lower case, words joined by dashes)."""
    check = re.sub(r"[^a-z0-9]+", "-", group.key[1].lower()).strip("-")
    return f"{scenario.name}-{group.key[0]}-{check}.yaml"


def _relative(folder: Path, name: str, out: Path) -> str:
    """``name`` (relative to ``folder``) relative to ``out``."""
    return Path(os.path.relpath((folder / name).resolve(), out.resolve())).as_posix()


def _paths(doc: ScenarioDoc, folder: Path, out: Path) -> None:
    """The cassette and transcript paths of ``doc`` (relative to ``folder``) made relative to ``out``."""
    doc["cassettes"] = [_relative(folder, name, out) for name in doc.get("cassettes", [])]
    stored = doc.get("transcript")
    if isinstance(stored, str):
        doc["transcript"] = _relative(folder, stored, out)


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
    _paths(written, scenario.path.parent, out)
    written["expectations"].pop("persistedSnapshot", None)  # a snapshot lives beside the original
    return written


def write_scenario(out: Path, scenario: Scenario, group: Group, doc: ScenarioDoc, seed: int) -> Path:
    """Write the group's scenario into ``out``; its path."""
    written = scenario_doc(scenario, group, doc, out, seed)
    broken = [v for v in contracts.validate("replaykit.scenario", written) if v.severity == "error"]
    if broken:  # a bug of explore, never a half-valid file
        raise UsageError(f"{file_name(scenario, group)}: not a valid scenario at {broken[0].pointer}: "
                         f"{broken[0].message}; report this as a replaykit bug")
    return _dump(out / file_name(scenario, group), written)


def _dump(path: Path, doc: ScenarioDoc) -> Path:
    text = f"{HEADER} (contracts/replaykit/scenario.schema.json).\n" + yaml.safe_dump(
        doc, sort_keys=False, allow_unicode=True, width=110)
    write_atomic(path, text.encode("utf-8"))
    return path


def copy_scenario(source: Path, out: Path) -> Path:
    """The scenario explore wrote at ``source`` (a shard's folder) copied into ``out``, its paths made
    relative to ``out``; its path."""
    try:
        doc = yaml.safe_load(source.read_bytes())
    except OSError as exc:
        raise UsageError(f"{source}: cannot read the scenario its shard wrote ({exc.strerror}); merge the "
                         "shards' reports in the folders explore wrote them to") from exc
    _paths(doc, source.parent, out)
    return _dump(out / source.name, doc)


def _lines(doc: JSON) -> dict[str, str]:
    shard = doc.get("shard")
    run = f"{doc['runs']} (budget {doc['budget']}, seed {doc['seed']}" + (
        f", shard {shard['index']}/{shard['count']}" if shard else "") + ")"
    lines = {"fault points": str(doc["points"]), "schedules in the space (single faults)": str(doc["space"]),
             "schedules run": run, "shrinking runs": str(doc["shrinkRuns"]), "kinds": ", ".join(doc["kinds"])}
    lines.update({f"note {n}": note for n, note in enumerate(doc["notes"], 1)})
    return lines


def summary(doc: JSON) -> str:
    """The Markdown summary of a report (:mod:`~replaykit.explore.report`): what was explored, then a row
    per group written."""
    mutant = doc["mutant"]
    head = [f"# replaykit explore: {doc['scenario']}", "",
            f"Target `{doc['target']}`" + (f" as mutant `{mutant}`" if mutant else "") + ".", ""]
    head += [f"- {key}: {value}" for key, value in _lines(doc).items()]
    found = [each for each in map(Found.from_json, doc["groups"]) if each.file is not None]
    if not found:
        return "\n".join([*head, "", "No schedule broke an invariant.", ""])
    rows = ["| # | invariant | first failing check | smallest schedule | failing runs | scenario |",
            "|---|---|---|---|---|---|"]
    for number, each in enumerate(found, 1):
        invariant, check = each.key
        rows.append(f"| {number} | {invariant} | `{check}` | {each.trial.describe()} | {each.runs} | "
                    f"[{each.file}]({each.file}) |")
    return "\n".join([*head, "", *rows, "", "Invariants: docs/explore.md (replaykit's documentation).", ""])


def write_summary(out: Path, text: str) -> Path:
    """Write ``summary.md`` into ``out``."""
    path = out / SUMMARY
    write_atomic(path, text.encode("utf-8"))
    return path
