"""``replaykit explore SCENARIO --target CMD [--mutant NAME] [--faults KINDS] [--budget N] [--seed S] [-j N]
[--shard K/N] --out DIR``: every fault point the scenario's recording offers, times the fault kinds; the
failing schedules grouped, shrunk and written into DIR as scenarios, with ``summary.md``
(:mod:`replaykit.explore`). On a terminal, a progress line. Exit 0 when no schedule fails, 1 when failing
schedules were written, 2 on a usage error or a bad scenario file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from replaykit.cli import EXIT_FINDINGS, EXIT_OK, positive
from replaykit.errors import ScenarioError, UsageError

__all__ = ["kinds", "register", "run_explore"]


def kinds(text: str) -> tuple[str, ...]:
    """An argparse type: fault kinds separated by commas, each one of :data:`replaykit.explore.KINDS`."""
    from replaykit.explore import KINDS

    given = tuple(dict.fromkeys(word.strip() for word in text.split(",") if word.strip()))
    wrong = [word for word in given if word not in KINDS]
    if wrong or not given:
        raise argparse.ArgumentTypeError(f"{text!r}: use fault kinds among {', '.join(KINDS)}, "
                                         "separated by commas")
    return given


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed={text!r} must be a whole number") from None


def register(subparsers: Any) -> None:
    """Add the ``explore`` subcommand."""
    from replaykit.explore import KINDS
    from replaykit.scenario import DEFAULT_TARGET
    from replaykit.scenario.shard import Shard

    parser = subparsers.add_parser(
        "explore",
        description="Run a scenario under every fault its recording offers (each event boundary of each "
        "streamed response, before each response, each tool call, around each persisted turn) times the "
        "fault kinds; group the schedules that break an invariant, shrink each group to its smallest "
        "schedule and write it as a scenario. Exit 0 when none fails, 1 when failing schedules were "
        "written, 2 on a usage error.",
    )
    parser.add_argument("scenario", metavar="SCENARIO", help="a scenario file, run without its kills")
    parser.add_argument("--target", default=DEFAULT_TARGET, metavar="CMD",
                        help=f"the code under test, as for replaykit run (default: {DEFAULT_TARGET})")
    parser.add_argument("--manifest", type=Path, metavar="FILE", help="the target's manifest")
    parser.add_argument("--mutant", metavar="NAME", help="run the target as this mutant of its manifest")
    parser.add_argument("--faults", type=kinds, default=KINDS, metavar="KINDS",
                        help=f"the fault kinds, separated by commas (default: {','.join(KINDS)})")
    parser.add_argument("--budget", type=positive, default=200, metavar="N",
                        help="run at most N schedules (default 200): single faults first, then pairs")
    parser.add_argument("--seed", type=_seed, default=0, metavar="S",
                        help="the seed the pairs are sampled by (default 0): one seed, one set of files")
    parser.add_argument("-j", "--jobs", type=positive, default=1, metavar="N",
                        help="run N schedules at a time (default 1)")
    parser.add_argument("--shard", type=Shard.parse, metavar="K/N",
                        help="run only every N-th schedule from the K-th (the same list everywhere)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="where the failing scenarios and summary.md are written")
    parser.set_defaults(func=run_explore)


class _Progress:
    """``explore: k/N schedules run, M failing`` rewritten in place, on a terminal only."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.tty = out, out.isatty()

    def __call__(self, done: int, total: int, failing: int) -> None:
        if self.tty:
            self.out.write(f"\r\x1b[Kexplore: {done}/{total} schedules run, {failing} failing")
            self.out.flush()

    def end(self) -> None:
        if self.tty:
            self.out.write("\r\x1b[K")
            self.out.flush()


def run_explore(args: argparse.Namespace) -> int:
    """``replaykit explore``: see the module docstring."""
    from replaykit.explore import Options, explore
    from replaykit.scenario import Target, load

    try:
        scenario = load(args.scenario)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from exc
    target = Target.parse(args.target, manifest=args.manifest)
    declared = target.manifest.mutants
    if args.mutant is not None and declared and args.mutant not in declared:
        raise UsageError(f"--mutant {args.mutant}: the target's manifest declares no such mutant; use one of "
                         f"{', '.join(declared)}")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: not a folder; name a folder to write the scenarios into")
    options = Options(args.out, args.faults, args.budget, args.seed, args.jobs, args.shard, args.mutant)
    progress = _Progress(sys.stderr)
    report = explore(scenario, target, options, progress)
    progress.end()
    print(f"{scenario.name}: {report.points} fault points, {report.space} single-fault schedules; "
          f"{report.runs} run, {report.shrink_runs} to shrink ({report.seconds:.1f} s)")
    for note in report.notes:
        print(f"  {note}")
    for group in report.groups:
        mark = "" if group not in report.unconfirmed else " (not reproduced from the file: not written)"
        print(f"FAIL {group.key[0]} at {group.key[1]}: {group.trial.describe()}{mark}")
        print(f"     {group.result.failure_text()[:300]}")
    for path in report.written:
        print(f"wrote {path}")
    print(f"wrote {args.out / 'summary.md'}")
    return EXIT_FINDINGS if report.written else EXIT_OK
