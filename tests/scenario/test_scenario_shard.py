"""Shards (:mod:`replaykit.scenario.shard`): the partition, the durations file, the inputs hash."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replaykit.errors import UsageError
from replaykit.resources import data_dir
from replaykit.scenario import Target, load
from replaykit.scenario.shard import Shard, inputs_hash, partition, read_durations, write_durations

NAMES = st.lists(st.text("abcdefgh-", min_size=1, max_size=6), unique=True, max_size=30)


@given(NAMES, st.integers(1, 6), st.data())
def test_every_name_is_in_exactly_one_shard_whatever_the_order(names: list[str], count: int,
                                                               data: st.DataObject) -> None:
    timed = data.draw(st.lists(st.sampled_from(names), unique=True) if names else st.just([]))
    durations = {name: data.draw(st.floats(0, 100)) for name in timed}
    parts = partition(names, count, durations)
    assert len(parts) == count
    dealt = [name for part in parts for name in part]
    assert sorted(dealt) == sorted(names)  # each once: none lost, none twice
    shuffled = data.draw(st.permutations(names))
    assert partition(shuffled, count, dict(reversed(durations.items()))) == parts  # every shard agrees


def test_with_no_durations_the_sorted_names_are_dealt_round_robin() -> None:
    assert partition(["e", "b", "a", "d", "c"], 2, {}) == [["a", "c", "e"], ["b", "d"]]


def test_durations_are_dealt_longest_first_to_the_least_loaded_shard() -> None:
    durations = {"a": 10, "b": 6, "c": 5, "d": 4, "e": 1}
    # a -> 1 (10); b -> 2 (6); c -> 2 (11); d -> 1 (14); e -> 2 (12)
    assert partition(list(durations), 2, durations) == [["a", "d"], ["b", "c", "e"]]


def test_a_name_without_a_duration_counts_as_the_mean() -> None:
    # new counts 5 (the mean of 8 and 2): a -> 1 (8), new -> 2 (5), b -> 2 (7)
    assert partition(["a", "b", "new"], 2, {"a": 8, "b": 2}) == [["a"], ["b", "new"]]


@pytest.mark.parametrize("text", ["1/1", "2/4", " 4/4 "])
def test_a_shard_is_k_of_n(text: str) -> None:
    shard = Shard.parse(text)
    assert str(shard) == text.strip()


@pytest.mark.parametrize("text", ["0/4", "5/4", "2", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_refused_saying_how_to_write_it(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="write K/N"):
        Shard.parse(text)


def test_the_durations_file_keeps_what_other_runs_recorded(tmp_path: Path) -> None:
    path = tmp_path / "durations.json"
    assert read_durations(path, "run") == {}
    write_durations(path, "run", {"a": 1.23456, "b": 2})
    write_durations(path, "run", {"b": 3})
    write_durations(path, "mutants", {"a": 9})
    assert read_durations(path, "run") == {"a": 1.235, "b": 3.0}
    assert read_durations(path, "mutants") == {"a": 9.0}
    assert json.loads(path.read_text())["version"] == 1


@pytest.mark.parametrize(("text", "place"), [
    ('{"version": 1,\n "run": ', ":2: not JSON"),
    ('{"version": 2}', ":/version: not a replaykit durations file"),
    ('{"version": 1, "run": {"a": "slow"}}', ":/run/a: not a number of seconds"),
])
def test_a_bad_durations_file_is_one_line_with_its_place(tmp_path: Path, text: str, place: str) -> None:
    path = tmp_path / "durations.json"
    path.write_text(text)
    with pytest.raises(UsageError) as caught:
        read_durations(path, "run")
    message = str(caught.value)
    assert message.startswith(f"{path}{place}") and "\n" not in message
    assert "--durations FILE" in message


def test_the_inputs_hash_changes_with_what_the_results_depend_on(tmp_path: Path) -> None:
    scenarios = [load(data_dir("scenarios") / "retry-529.yaml")]
    target = Target.parse("python:replaykit.reference:run")
    same = inputs_hash("run", scenarios, target, [["retry-529"], []])
    assert same == inputs_hash("run", scenarios, target, [["retry-529"], []])
    assert same.startswith("sha256:")
    assert same != inputs_hash("run", scenarios, target, [["retry-529"], [], []])  # N
    assert same != inputs_hash("mutants", scenarios, target, [["retry-529"], []])
    assert same != inputs_hash("run", scenarios, target, [["retry-529"], []], {"mutants": ["x"]})
    other = Target.parse("python:replaykit.reference:main")
    assert same != inputs_hash("run", scenarios, other, [["retry-529"], []])
    copied = tmp_path / "retry-529.yaml"
    original = scenarios[0].path.read_text()
    copied.write_text(original.replace("maxUses: 5", "maxUses: 4"))
    for folder in ("cassettes", "transcripts"):
        (tmp_path / folder).symlink_to(scenarios[0].path.parent / folder)
    assert same != inputs_hash("run", [load(copied)], target, [["retry-529"], []])  # a scenario's bytes
