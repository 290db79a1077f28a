"""Grouping failures and shrinking each group to its smallest schedule.

A failing run falls in the group of the invariant it broke and its first failing expectation (with the
error code it ended with when that is the outcome: :func:`~replaykit.explore.oracle.first_broken`). A
group's schedule is its simplest member (:attr:`~replaykit.explore.space.Trial.rank`: fewest faults, fewest
repeats, earliest points); shrinking then tries smaller ones not run yet, each fault of a pair alone and the
earlier points of the same kind (:func:`candidates`, at most :data:`SHRINK_TRIES`), and keeps the simplest
that breaks the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from replaykit.explore.space import Trial
from replaykit.scenario.runner import Result

__all__ = ["SHRINK_TRIES", "Group", "candidates", "group"]

SHRINK_TRIES = 6
Key = tuple[str, str]


@dataclass
class Group:
    """The failing runs that broke ``key`` (invariant, check): the simplest schedule and its result, and
    how many runs fell here."""

    key: Key
    trial: Trial
    result: Result
    runs: int = 1
    tried: list[Trial] = field(default_factory=list)

    def offer(self, trial: Trial, result: Result) -> None:
        """Count a run of this group; keep it when its schedule is simpler."""
        self.runs += 1
        if trial.rank < self.trial.rank:
            self.trial, self.result = trial, result


def group(failures: Iterable[tuple[Key, Trial, Result]]) -> list[Group]:
    """The failures by key, in the order of their simplest schedule."""
    found: dict[Key, Group] = {}
    for key, trial, result in failures:
        if key in found:
            found[key].offer(trial, result)
        else:
            found[key] = Group(key, trial, result)
    return sorted(found.values(), key=lambda g: (g.trial.rank, g.key))


def _alone(trial: Trial) -> list[Trial]:
    if len(trial.faults) < 2:
        return []
    return [Trial((f,), (p,), (k,)) for f, p, k in zip(trial.faults, trial.points, trial.kinds, strict=True)]


def _same_kind(one: Trial, other: Trial) -> bool:
    a, b = one.faults[0], other.faults[0]
    return (one.kinds == other.kinds and a.times == b.times and a.route == b.route
            and one.points[0].tool == other.points[0].tool)


def candidates(trial: Trial, singles: Sequence[Trial], ran: set[Trial]) -> list[Trial]:
    """Smaller schedules than ``trial`` not run yet: each fault of a pair alone, then the earliest
    points of the same kind before it; at most :data:`SHRINK_TRIES`."""
    found = [t for t in _alone(trial) if t not in ran]
    if len(trial.faults) == 1:
        found += [t for t in singles if t not in ran and t.rank < trial.rank and _same_kind(trial, t)]
    return sorted(found, key=lambda t: t.rank)[:SHRINK_TRIES]
