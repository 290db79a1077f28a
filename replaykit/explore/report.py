"""The exploration's JSON report, ``report.json`` in ``--out``
(contracts/replaykit/explore-report.schema.json), and the join of the N shards' reports that
``replaykit merge`` makes of them.

:func:`to_json` writes what one exploration found: each group's key, its smallest schedule (each fault in the
scenario's vocabulary with the point and kind it came from, so :attr:`~replaykit.explore.space.Trial.rank`
orders schedules read back) and its file. :func:`join` keeps each group once: its written schedule of the
smallest rank, the failing runs of every shard added up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from replaykit.explore.group import Key
from replaykit.explore.space import Point, Trial
from replaykit.jsondoc import JSON
from replaykit.scenario.model import Scenario
from replaykit.scenario.shard import inputs_hash
from replaykit.scenario.target import Target
from replaykit.server.faults import Fault

__all__ = ["FILE", "Found", "inputs", "join", "to_json"]

FILE = "report.json"


@dataclass(frozen=True)
class Found:
    """A group as reported: its key, its smallest schedule, its failing runs and the file written for it
    (``None``: run again from the file it did not fail, so not written)."""

    key: Key
    trial: Trial
    runs: int
    file: str | None

    def to_json(self) -> JSON:
        """The group as ``report.json`` has it."""
        schedule = [{"fault": fault.to_json(), "kind": kind, "point": asdict(point)}
                    for fault, point, kind in zip(self.trial.faults, self.trial.points, self.trial.kinds,
                                                  strict=True)]
        return {"invariant": self.key[0], "check": self.key[1], "schedule": schedule,
                "describe": self.trial.describe(), "runs": self.runs, "file": self.file}

    @classmethod
    def from_json(cls, doc: JSON) -> Found:
        """A group read back from a report valid by its contract."""
        steps: list[Any] = doc["schedule"]
        trial = Trial(tuple(Fault.from_dict(step["fault"]) for step in steps),
                      tuple(Point(**step["point"]) for step in steps), tuple(step["kind"] for step in steps))
        return cls((doc["invariant"], doc["check"]), trial, doc["runs"], doc["file"])


def inputs(scenario: Scenario, target: Target, settings: JSON, count: int) -> str:
    """The hash every shard of one exploration shares: the scenario's files, the target, replaykit's version,
    the options that choose and judge the schedules (``settings``) and N (:func:`~replaykit.scenario.shard
    .inputs_hash`)."""
    return inputs_hash("explore", [scenario], target, [[str(k)] for k in range(1, count + 1)], settings)


def to_json(head: JSON, found: Sequence[Found], shard: JSON | None) -> JSON:
    """The report: ``head`` (scenario, target, settings, counts, notes), the groups and the shard block."""
    doc = {**head, "found": any(each.file for each in found), "groups": [each.to_json() for each in found]}
    return {**doc, "shard": shard} if shard is not None else doc


def _better(one: Found, other: Found) -> bool:
    """``one`` is the one to keep: written where ``other`` is not, else the smaller schedule."""
    return (one.file is None, one.trial.rank) < (other.file is None, other.trial.rank)


def join(docs: Sequence[tuple[Path, JSON]]) -> tuple[JSON, dict[str, Path]]:
    """The N shards' reports (each with its folder) as one report, and where each kept file is."""
    kept: dict[Key, tuple[Found, Path]] = {}
    runs: dict[Key, int] = {}
    for folder, doc in docs:
        for found in (Found.from_json(group) for group in doc["groups"]):
            runs[found.key] = runs.get(found.key, 0) + found.runs
            if found.key not in kept or _better(found, kept[found.key][0]):
                kept[found.key] = (found, folder)
    ordered = sorted(kept.values(), key=lambda pair: (pair[0].trial.rank, pair[0].key))
    groups = [Found(each.key, each.trial, runs[each.key], each.file) for each, _ in ordered]
    first = docs[0][1]
    head = {key: value for key, value in first.items() if key not in ("shard", "groups", "found")}
    head.update(runs=sum(doc["runs"] for _, doc in docs),
                shrinkRuns=sum(doc["shrinkRuns"] for _, doc in docs),
                notes=list(dict.fromkeys(note for _, doc in docs for note in doc["notes"])))
    files = {each.file: folder / each.file for each, folder in ordered if each.file is not None}
    return to_json(head, groups, None), files
