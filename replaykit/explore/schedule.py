"""The schedule: which trials run, in which order, within ``--budget`` runs.

Single faults first, exhaustively when the budget allows, else in *coverage order*: every kind at the first
point of each response before any point is taken twice, then the points between those already taken
(bisection, :func:`spread`), so a small budget still sees every kind, every response and both ends of each
stream. What is left of the budget goes to pairs of single faults on different requests, sampled by
``--seed`` (:class:`random.Random`, so a seed gives the same pairs everywhere). ``--shard K/N`` keeps every
N-th trial of that one list, from the K-th.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from replaykit.explore.space import Point, Trial
from replaykit.scenario.shard import Shard

__all__ = ["pairs", "plan", "spread"]


def spread(count: int) -> list[int]:
    """``0 .. count-1`` in bisection order: the ends, then the middle, then the quarters..."""
    if count <= 0:
        return []
    order = [0, count - 1] if count > 1 else [0]
    seen = set(order)
    step = count
    while len(order) < count:
        step = max(step // 2, 1)
        for value in range(0, count, step):
            if value not in seen:
                seen.add(value)
                order.append(value)
    return order


def _key(point: Point) -> tuple[int, str, int]:
    return point.request, point.tool, point.nth if point.tool else 0


def _coverage(singles: Sequence[Trial]) -> list[Trial]:
    """The single trials in coverage order: by depth of their point in its response's bisection order,
    then the run's order, then the kind."""
    groups: dict[tuple[int, str, int], list[int]] = {}
    for trial in singles:
        groups.setdefault(_key(trial.points[0]), [])
        if trial.points[0].after not in groups[_key(trial.points[0])]:
            groups[_key(trial.points[0])].append(trial.points[0].after)
    depth = {key: {after: spread(len(afters)).index(i) for i, after in enumerate(sorted(afters))}
             for key, afters in groups.items()}
    return sorted(singles, key=lambda t: (depth[_key(t.points[0])][t.points[0].after], t.rank))


def pairs(singles: Sequence[Trial], count: int, seed: int) -> list[Trial]:
    """``count`` pairs of single faults on different requests, sampled by ``seed`` without repeats."""
    chance = random.Random(seed)
    plain = [trial for trial in singles if trial.faults[0].times == 1]
    chosen: list[Trial] = []
    seen: set[tuple[int, int]] = set()
    tries = 0
    while len(chosen) < count and tries < count * 20 and len(plain) > 1:
        tries += 1
        first, second = sorted(chance.sample(range(len(plain)), 2))
        one, two = plain[first], plain[second]
        if (first, second) in seen or _key(one.points[0]) == _key(two.points[0]):
            continue
        seen.add((first, second))
        chosen.append(Trial(one.faults + two.faults, one.points + two.points, one.kinds + two.kinds))
    return chosen


def plan(singles: Sequence[Trial], budget: int, seed: int, shard: Shard | None = None) -> list[Trial]:
    """The trials to run: singles in coverage order up to ``budget``, then sampled pairs; a shard's part."""
    ordered = _coverage(singles)[:budget]
    left = budget - len(ordered)
    chosen = ordered + (pairs(singles, left, seed) if left > 0 else [])
    if shard is None:
        return chosen
    return chosen[shard.index - 1 :: shard.count]
