"""Shards: one deterministic, duration-balanced part of the scenarios (``--shard K/N``), the durations file
it is balanced on, and the hash of the inputs every shard of one run shares (``replaykit merge`` refuses
others).

:func:`partition` deals the scenario names to ``N`` shards: greedy longest-processing-time on the durations,
else round robin over the sorted names; it depends on the names and durations only, so every shard computes
the same. The durations file (``.replaykit-durations.json`` unless ``--durations FILE``) is written by an
unsharded run and by ``replaykit merge``, read by a shard. Its format is in docs/architecture/scenario.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from replaykit import __version__
from replaykit.cassette import write_atomic
from replaykit.errors import UsageError, located
from replaykit.jsondoc import JSON
from replaykit.scenario.model import Scenario
from replaykit.scenario.target import Target

__all__ = [
    "DEFAULT_DURATIONS", "Shard", "inputs_hash", "partition", "read_durations", "write_durations",
]

DEFAULT_DURATIONS = Path(".replaykit-durations.json")
_SHARD = re.compile(r"(\d+)/(\d+)")
_FIX = "delete it (the next run shards by name) or name another file with --durations FILE"


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``K/N`` with 1 <= K <= N: an argparse ``type``."""
        match = _SHARD.fullmatch(text.strip())
        if not match or not 1 <= int(match[1]) <= int(match[2]):
            raise argparse.ArgumentTypeError(f"{text!r} is not a shard: write K/N, 1 <= K <= N (e.g. 2/4)")
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def pick(self, command: str, scenarios: Sequence[Scenario], target: Target,
             durations: Mapping[str, float], more: Mapping[str, object] | None = None,
             ) -> tuple[list[Scenario], JSON]:
        """The scenarios of this shard (in the order given) and the ``shard`` block of its report:
        ``command``, ``index``, ``count``, ``inputs`` (:func:`inputs_hash`), ``total`` (the scenarios of every
        shard) and ``positions`` (where each of this shard's stands among them)."""
        parts = partition([s.name for s in scenarios], self.count, durations)
        mine = set(parts[self.index - 1])
        picked = [(position, s) for position, s in enumerate(scenarios) if s.name in mine]
        block = {
            "command": command, "index": self.index, "count": self.count,
            "inputs": inputs_hash(command, scenarios, target, parts, more), "total": len(scenarios),
            "positions": [position for position, _ in picked],
        }
        return [s for _, s in picked], block


def partition(names: Sequence[str], count: int, durations: Mapping[str, float]) -> list[list[str]]:
    """``names`` dealt to ``count`` shards (see the module docstring); each list sorted by name."""
    ordered = sorted(set(names))
    known = [durations[name] for name in ordered if name in durations]
    if not known:
        return [ordered[index::count] for index in range(count)]
    mean = sum(known) / len(known)
    cost = {name: durations.get(name, mean) for name in ordered}
    shards: list[list[str]] = [[] for _ in range(count)]
    totals = [0.0] * count
    for name in sorted(ordered, key=lambda name: (-cost[name], name)):
        least = min(range(count), key=lambda index: (totals[index], index))
        shards[least].append(name)
        totals[least] += cost[name]
    return [sorted(shard) for shard in shards]


def _read(path: Path) -> JSON:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        why = f"cannot read the durations file: {exc.strerror}"
        raise UsageError(located(path, None, why, _FIX)) from exc
    except UnicodeDecodeError as exc:
        raise UsageError(located(path, None, "not UTF-8 text", _FIX)) from exc
    except ValueError as exc:
        raise UsageError(located(path, getattr(exc, "lineno", None), f"not JSON: {exc}", _FIX)) from exc
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise UsageError(located(path, "/version", "not a replaykit durations file (version 1)", _FIX))
    return doc


def read_durations(path: Path, command: str) -> dict[str, float]:
    """The seconds of each scenario ``command`` last took (empty when the file does not exist)."""
    section = _read(path).get(command, {})
    if not isinstance(section, dict):
        raise UsageError(located(path, f"/{command}", "not an object of seconds by scenario", _FIX))
    for name, seconds in section.items():
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
            raise UsageError(located(path, f"/{command}/{name}", "not a number of seconds", _FIX))
    return {name: float(seconds) for name, seconds in section.items()}


def write_durations(path: Path, command: str, seconds: Mapping[str, float]) -> None:
    """Record ``seconds`` under ``command`` (atomically; the other scenarios' and commands' entries kept)."""
    doc = _read(path) or {"version": 1}
    merged = {**doc.get(command, {}), **{name: round(value, 3) for name, value in seconds.items()}}
    doc[command] = dict(sorted(merged.items()))
    write_atomic(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def inputs_hash(command: str, scenarios: Sequence[Scenario], target: Target, parts: Sequence[Sequence[str]],
                more: Mapping[str, object] | None = None) -> str:
    """The SHA-256 of what a shard's results depend on: the command, replaykit's version, the target (its
    spec and its manifest's bytes), each scenario's files' bytes, the partition (which holds N) and ``more``
    (the mutants run, the matrix's mode...). Shards of one run share it."""
    manifest = target.manifest.path
    doc = {
        "command": command,
        "replaykit": __version__,
        "target": target.spec,
        "manifest": _digest(manifest.read_bytes()) if manifest is not None else None,
        "scenarios": {s.name: [_digest(path.read_bytes()) for path in s.inputs] for s in scenarios},
        "shards": [list(part) for part in parts],
        "more": dict(more or {}),
    }
    return _digest(json.dumps(doc, sort_keys=True).encode("utf-8"))
