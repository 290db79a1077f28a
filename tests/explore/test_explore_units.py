"""The parts of explore that need no run: the space's faults, the schedule, the oracle's budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replaykit.explore import oracle, schedule, space
from replaykit.explore import report as reported
from replaykit.explore.group import candidates
from replaykit.explore.space import Point, Trial
from replaykit.scenario import Check, Result, Scenario
from replaykit.scenario.shard import Shard
from replaykit.server.faults import Fault

DURABLE = {"maxRetries": 2, "recovery": {"maxAttempts": 3}, "tools": [{"name": "read"}]}


def _points() -> list[Point]:
    stream = [Point(1, after, "anthropic.messages", 1, 9) for after in range(10)]
    return [*stream, Point(1, 10, "anthropic.messages", 1, 9, "read"),
            *(Point(2, after, "anthropic.messages", 2, 4) for after in range(5))]


def test_spread_starts_at_both_ends_and_bisects() -> None:
    assert schedule.spread(10)[:3] == [0, 9, 5]
    assert sorted(schedule.spread(10)) == list(range(10))
    assert schedule.spread(1) == [0] and schedule.spread(0) == []


def test_each_kind_is_a_fault_of_the_scenario_vocabulary_at_the_points_it_applies() -> None:
    found = {(t.kinds[0], t.points[0].after, t.faults[0].times): t.faults[0]
             for t in space.trials(_points()[:11], space.KINDS, DURABLE)}
    overloaded = Fault("status", "anthropic.messages", 1, status=529, retry_after_ms=1)
    assert found[("overloaded", 0, 1)] == overloaded
    assert found[("overloaded", 3, 1)].kind == "error_event"
    assert found[("corrupt", 3, 1)] == Fault("corrupt_event", "anthropic.messages", 1, event=4)
    assert found[("drop", 9, 1)].kind == "drop_terminal" and ("drop", 3, 1) not in found
    assert found[("kill", 10, 1)] == Fault("kill", tool="read", nth=1)
    assert found[("kill", 0, 4)].times == 4  # persistent: one more than recovery.maxAttempts
    assert found[("overloaded", 0, 3)].times == 3  # one more than maxRetries
    assert ("disconnect", 9, 1) not in found  # after the last event: the drop and kill points


def test_the_plan_is_the_budget_long_and_the_same_for_a_seed() -> None:
    singles = space.trials(_points(), ("kill", "disconnect"), DURABLE)
    small = schedule.plan(singles, 5, seed=1)
    assert len(small) == 5 and all(len(t.faults) == 1 for t in small)
    assert {t.points[0].request for t in small} == {1, 2}  # both responses before any point twice
    big = schedule.plan(singles, len(singles) + 7, seed=1)
    assert big == schedule.plan(singles, len(singles) + 7, seed=1)
    pairs = big[len(singles):]
    assert len(pairs) == 7
    assert all(len({p.request if not p.tool else -1 for p in t.points}) == 2 for t in pairs)
    assert pairs != schedule.plan(singles, len(singles) + 7, seed=2)[len(singles):]


def test_shards_split_the_plan_without_overlap() -> None:
    singles = space.trials(_points(), ("kill",), DURABLE)
    whole = schedule.plan(singles, 12, seed=0)
    parts = [schedule.plan(singles, 12, seed=0, shard=Shard(k, 3)) for k in (1, 2, 3)]
    assert sorted(map(id, (t for part in parts for t in part))) == sorted(map(id, whole))


def test_a_schedule_within_its_budgets_must_recover_and_its_requests_are_bounded() -> None:
    base = oracle.Baseline(2, 0, [], {}, True)
    kill = Point(1, 0, "anthropic.messages", 1, 9)
    once = Trial((Fault("kill", "anthropic.messages", 1, after=0),), (kill,), ("kill",))
    again = Trial((Fault("kill", "anthropic.messages", 1, 4, after=0),), (kill,), ("kill",))
    doc = {**DURABLE, "steps": [{"prompt": "hi"}], "expectations": {"outcome": "ok", "providerRequests": 2}}
    assert oracle.recoverable(once, doc) and not oracle.recoverable(again, doc)
    wanted, labels = oracle.expectations(once, doc, base)
    assert wanted["outcome"] == "ok" and wanted["providerRequests"] == {"max": 3}
    assert labels["providerRequests"] == "retries-bounded"
    wanted, labels = oracle.expectations(again, doc, base)
    assert wanted["outcome"] == oracle.ALL_STATUSES and wanted["providerRequests"] == {"max": 5}


def test_shrinking_tries_each_fault_of_a_pair_alone_then_earlier_points() -> None:
    singles = space.trials(_points(), ("kill",), DURABLE)
    late = next(t for t in singles if t.points[0].after == 7 and t.faults[0].times == 1)
    tried = candidates(late, singles, {late})
    assert [t.points[0].after for t in tried] == [0, 1, 2, 3, 4, 5]
    pair = Trial(late.faults + singles[-1].faults, late.points + singles[-1].points, ("kill", "kill"))
    assert candidates(pair, singles, set())[:2] == sorted([late, singles[-1]], key=lambda t: t.rank)


def test_a_failed_outcome_is_grouped_with_the_error_code_it_ended_with() -> None:
    scenario = Scenario(Path("s.yaml"), {"name": "s", "kind": "regression"})

    def ended(code: str) -> Result:
        return Result(scenario, "t", [Check("outcome", False, "expected ok")],
                      {"status": "error", "error": {"code": code}})
    assert oracle.first_broken(ended("INTERNAL_ERROR"), {}) == ("expectation", "outcome (INTERNAL_ERROR)")
    assert oracle.first_broken(ended("PROVIDER_ERROR"), {}) == ("expectation", "outcome (PROVIDER_ERROR)")
    held = Result(scenario, "t", [Check("outcome", True)], {"status": "ok"})
    assert oracle.first_broken(held, {}) is None
    crashed = Result(scenario, "t", [Check("target", False, "timed out")])
    assert oracle.first_broken(crashed, {"target": "ends-classified"}) == ("ends-classified", "target")


def test_contracts_hold_when_the_fault_free_run_held_them_and_break_as_their_own_invariant() -> None:
    point = Point(1, 0, "anthropic.messages", 1, 9)
    trial = Trial((Fault("status", "anthropic.messages", 1, status=529),), (point,), ("overloaded",))
    doc = {"steps": [{"prompt": "hi"}], "expectations": {"outcome": "ok"}}
    held = oracle.Baseline(1, 0, [], {}, False, contracts_hold=True)
    wanted, labels = oracle.expectations(trial, doc, held)
    assert wanted["requestContractsHold"] is True and labels["requestContractsHold"] == "contracts-hold"
    broke = oracle.Baseline(1, 0, [], {}, False, contracts_hold=False)
    assert "requestContractsHold" not in oracle.expectations(trial, doc, broke)[0]
    scenario = Scenario(Path("s.yaml"), {"name": "s", "kind": "regression"})
    failed = Result(scenario, "t", [Check("outcome", True), Check("requestContractsHold", False, "/model")],
                    {"status": "ok"})
    assert oracle.first_broken(failed, labels) == ("contracts-hold", "requestContractsHold")


def _found(after: int, runs: int, file: str | None, check: str = "reaches[0]") -> reported.Found:
    point = Point(1, after, "anthropic.messages", 1, 9)
    trial = Trial((Fault("kill", "anthropic.messages", 1, after=after),), (point,), ("kill",))
    return reported.Found(("partial-kept", check), trial, runs, file)


def _shard(*found: reported.Found) -> dict[str, Any]:
    head = {"scenario": "s", "target": "t", "mutant": None, "kinds": ["kill"], "budget": 3, "seed": 0,
            "points": 10, "space": 11, "runs": 2, "shrinkRuns": 1, "notes": ["n"]}
    return reported.to_json(head, list(found), {"command": "explore", "index": 1, "count": 2, "inputs": "x"})


def test_joined_shards_keep_each_group_once_with_its_smallest_written_schedule() -> None:
    one = _shard(_found(6, 2, "a.yaml"), _found(2, 1, None, "other"))
    two = _shard(_found(4, 1, "a.yaml"), _found(1, 1, None), _found(3, 1, "b.yaml", "other"))
    doc, files = reported.join([(Path("s1"), one), (Path("s2"), two)])
    kept = [reported.Found.from_json(group) for group in doc["groups"]]
    assert [(each.key[1], each.trial.points[0].after, each.runs, each.file) for each in kept] == [
        ("other", 3, 2, "b.yaml"),  # written beats a smaller schedule that did not fail again from its file
        ("reaches[0]", 4, 4, "a.yaml")]  # the earliest point; the runs of both shards
    assert files == {"a.yaml": Path("s2/a.yaml"), "b.yaml": Path("s2/b.yaml")}
    assert (doc["runs"], doc["shrinkRuns"], doc["notes"], doc["found"]) == (4, 2, ["n"], True)
    assert "shard" not in doc
