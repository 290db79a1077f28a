"""The options ``run``, ``mutants`` and ``redgreen`` share, and what they resolve to.

The scenarios named (``--select``, ``--kind``), the target and its manifest, the shard picked
(``--shard K/N``, ``--durations``), the durations recorded and the ``--report`` written.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from replaykit.cassette import write_atomic
from replaykit.cli import positive
from replaykit.errors import ScenarioError, UsageError
from replaykit.scenario import DEFAULT_TARGET, Result, Scenario, Target, load_all
from replaykit.scenario.shard import DEFAULT_DURATIONS, Shard, read_durations, write_durations

__all__ = ["add_common", "add_report", "add_shard", "load_scenarios", "load_target", "pick_shard",
           "record_durations", "write_report"]


def add_common(parser: argparse.ArgumentParser, target: bool = True) -> None:
    """The scenario paths, ``--target`` and ``--manifest`` (``target``), ``--select``, ``--kind``, ``-j`` and
    ``--json``."""
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="SCENARIO|DIR",
        help="a scenario file, or a folder of them (its *.yaml files)",
    )
    if target:
        parser.add_argument(
            "--target",
            default=DEFAULT_TARGET,
            metavar="CMD",
            help=f"the code under test: a command (run with the target protocol's environment; leading "
            f"VAR=value words set its environment) or python:module:function (default: {DEFAULT_TARGET}, the "
            "reference)",
        )
        parser.add_argument(
            "--manifest",
            type=Path,
            metavar="FILE",
            help="the target's manifest: what it has and its mutants (default: replaykit-target.yaml beside "
            "its command, if any; with none, every capability is taken as given)",
        )
    parser.add_argument(
        "--select",
        action="append",
        metavar="GLOB",
        help="run only the scenarios whose name matches GLOB (repeatable; e.g. 'web-search-*')",
    )
    parser.add_argument(
        "--kind", choices=("regression", "contract"), help="run only the scenarios of this kind"
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=positive,
        default=1,
        metavar="N",
        help="run N scenarios at a time, each with its own fake provider (default 1); "
        "verdicts do not depend on N",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")


def add_shard(parser: argparse.ArgumentParser) -> None:
    """``--shard K/N`` and ``--durations FILE`` (:mod:`replaykit.scenario.shard`)."""
    parser.add_argument(
        "--shard",
        type=Shard.parse,
        metavar="K/N",
        help="run only shard K of N: a part of the scenarios balanced on the durations file (by name when "
        "there is none), the same on every machine; join the shards' JSON reports with replaykit merge",
    )
    parser.add_argument(
        "--durations",
        type=Path,
        metavar="FILE",
        help=f"the durations the shards are balanced on (default: ./{DEFAULT_DURATIONS}, if any); a run "
        "without --shard records its durations there when FILE is given",
    )


def add_report(parser: argparse.ArgumentParser) -> None:
    """``--report FILE``: the JSON report, what ``replaykit merge`` reads."""
    parser.add_argument(
        "--report", type=Path, metavar="FILE",
        help="also write the JSON report to FILE (what replaykit merge reads)",
    )


def load_scenarios(args: argparse.Namespace) -> list[Scenario]:
    """The scenarios the command line names, narrowed by ``--select`` and ``--kind``."""
    try:
        found = load_all(args.paths)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from exc
    globs = args.select or ["*"]
    kept = [s for s in found if any(fnmatch.fnmatchcase(s.name, glob) for glob in globs)
            and args.kind in (None, s.kind)]
    if not kept:
        raise UsageError(f"no scenario of the {len(found)} named matches --select {' '.join(globs)}"
                         + (f" --kind {args.kind}" if args.kind else "") + "; check the names")
    return kept


def load_target(args: argparse.Namespace) -> Target:
    """The target named, its manifest read at once (a bad one is a usage error before anything runs)."""
    target = Target.parse(args.target, manifest=args.manifest)
    _ = target.manifest
    return target


def pick_shard(args: argparse.Namespace, command: str, scenarios: list[Scenario], target: Target,
               more: dict[str, Any] | None = None) -> tuple[list[Scenario], dict[str, Any] | None]:
    """The scenarios this run runs (``--shard``: its part) and its report's ``shard`` block (None: all)."""
    if args.shard is None:
        return scenarios, None
    durations = read_durations(args.durations or DEFAULT_DURATIONS, command)
    picked, block = args.shard.pick(command, scenarios, target, durations, more)
    return picked, block


def record_durations(args: argparse.Namespace, command: str, results: Sequence[Result]) -> None:
    """An unsharded run given ``--durations FILE`` records each scenario's seconds there."""
    if args.durations is not None and args.shard is None:
        seconds: dict[str, float] = {}
        for result in results:
            seconds[result.scenario.name] = seconds.get(result.scenario.name, 0.0) + result.seconds
        write_durations(args.durations, command, seconds)


def write_report(path: Path | None, doc: Mapping[str, object]) -> None:
    """``doc`` as JSON to ``path`` (``--report``), atomically; nothing when ``path`` is None."""
    if path is not None:
        write_atomic(path, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
