"""The target protocol, runner side: how a target is named, the environment it gets, one run of it.

A target is a command or ``python:module:function`` (:mod:`replaykit.scenario.call`); its manifest
(:mod:`~replaykit.scenario.capabilities`) says what it has. Each run (:func:`run_segment`) gets, in a fresh
process group, the work folder as cwd, this process's environment without secrets plus the fake provider's
and the protocol's variables, a deadline and a kill point (``stop``) observed at the fake provider. The
outcome is read and checked against its contract (:func:`read_outcome`). Called by
:mod:`replaykit.scenario.runner`; the environment and kill points are in docs/architecture/scenario.md.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from replaykit import contracts
from replaykit.errors import UsageError
from replaykit.redact import is_secret_field
from replaykit.scenario import warm
from replaykit.scenario.capabilities import Manifest, find_manifest, load_manifest
from replaykit.scenario.formats import TargetOutcome
from replaykit.scenario.warm import Parents

__all__ = ["DEFAULT_TARGET", "Target", "TargetExit", "interrupt", "read_outcome", "run_segment", "target_env"]

DEFAULT_TARGET = "python:replaykit.reference:run"
PYTHON_PREFIX = "python:"
_TAIL = 600  # characters of a target's stderr shown when it wrote no outcome
_POLL = 0.005  # seconds between looks at a kill point while the target runs
_QUIET = 0.03  # seconds a target stays idle at a kill point before it is killed
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _absolute(word: str, index: int, here: Path) -> str:
    """``word`` made absolute when it names a file of ``here`` (the target runs in another folder); the
    command itself only when written as a path (``./target.sh``), never ``node`` found on PATH. Symlinks are
    kept, not followed: a virtualenv's ``.venv/bin/python`` is a link whose target is not the venv."""
    if os.path.isabs(word) or word.startswith("-") or (index == 0 and "/" not in word):
        return word
    return os.path.abspath(here / word) if (here / word).exists() else word


def _python_path(here: Path) -> list[str]:
    """This process's ``PYTHONPATH``, each entry made absolute from ``here`` (the target's cwd differs)."""
    entries = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return [str((here / entry).resolve()) for entry in entries]


def _assignments(words: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """The leading ``VAR=value`` words of a command line (as a shell reads them), and the command after."""
    count = 0
    while count < len(words) and _ASSIGNMENT.match(words[count]):
        count += 1
    pairs = [(name, value) for name, _, value in (word.partition("=") for word in words[:count])]
    return pairs, words[count:]


def _manifest(given: str | os.PathLike[str] | None, argv: tuple[str, ...], module: str | None,
              search: list[str]) -> Path | None:
    """The manifest's path: the one named, else the one beside the target (:func:`find_manifest`), if any."""
    return Path(given) if given is not None else find_manifest(argv, module, search)


@dataclass(frozen=True)
class Target:
    """A target as given on the command line (``spec``), the command that runs it (``argv``), the variables it
    needs besides the protocol's (``env``: a Python target's ``PYTHONPATH``, leading ``VAR=value`` words) and
    its manifest (what it has, its mutants)."""

    spec: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    manifest_path: Path | None = None

    @functools.cached_property
    def manifest(self) -> Manifest:
        """What the target has and its mutants (:mod:`~replaykit.scenario.capabilities`), read when first
        asked for (a bad one is a usage error); with no manifest, every capability is given."""
        return load_manifest(self.manifest_path) if self.manifest_path is not None else Manifest()

    def mutant_env(self, mutant: str) -> dict[str, str]:
        """The environment that runs the target as ``mutant``: ``REPLAYKIT_MUTANT`` and the manifest's."""
        declared = self.manifest.mutants.get(mutant)
        return {"REPLAYKIT_MUTANT": mutant, **(declared.env if declared is not None else {})}

    @classmethod
    def parse(cls, spec: str, here: Path | None = None, manifest: str | os.PathLike[str] | None = None,
              flag: str = "--target") -> Target:
        """``python:module:function`` or a command line; a bad one is a usage error naming ``flag``. The
        target runs in its own work folder, so what names a file of ``here`` (default: the current folder) is
        made absolute, and a Python target's module is also looked up in ``here``. ``manifest``: the
        manifest's path (default: the one found beside the target, if any)."""
        here = Path.cwd() if here is None else here
        if spec.startswith(PYTHON_PREFIX):
            return cls._python(spec, here, manifest, flag)
        try:
            words = shlex.split(spec)
        except ValueError as exc:
            raise UsageError(f"{flag} {spec!r} cannot be split into words ({exc}); balance its quotes") \
                from exc
        assigned, words = _assignments(words)
        if not words:
            raise UsageError(f"{flag} {spec!r} names no command; give a command or python:module:function")
        command = tuple(_absolute(word, index, here) for index, word in enumerate(words))
        inherited = _python_path(here)
        env = ((("PYTHONPATH", os.pathsep.join(inherited)),) if inherited else ()) + tuple(assigned)
        return cls(spec, command, env, _manifest(manifest, command, None, [str(here), *inherited]))

    @classmethod
    def _python(cls, spec: str, here: Path, manifest: str | os.PathLike[str] | None, flag: str) -> Target:
        name = spec[len(PYTHON_PREFIX) :]
        module, sep, function = name.partition(":")
        if not sep or not module or not function:
            raise UsageError(f"{flag} {spec!r} must be python:module:function, e.g. {DEFAULT_TARGET}")
        search = [str(here), *_python_path(here)]
        argv = (sys.executable, "-m", "replaykit.scenario.call", name)
        env = (("PYTHONPATH", os.pathsep.join(search)),)
        return cls(spec, argv, env, _manifest(manifest, (), module, search))


def target_env(
    provider_env: Mapping[str, str], extra: Mapping[str, str], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The target's environment: ``base`` (default: this process's) without secrets, then ``provider_env``
    (the fake provider's) and ``extra`` (the protocol's files and the mutant)."""
    source = os.environ if base is None else base
    kept = {name: value for name, value in source.items() if not is_secret_field(name)}
    kept.pop("REPLAYKIT_MUTANT", None)  # only the runner chooses a mutant
    return {**kept, **provider_env, **extra}


@dataclass(frozen=True)
class TargetExit:
    """How one run of the target ended: its exit code (None when killed), whether it ``timed_out``, the
    tail of its stderr, and how long it took."""

    returncode: int | None
    timed_out: bool
    stderr_tail: str
    seconds: float
    killed: bool = False


def _kill_group(process: _Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(process.pid, signal.SIGKILL)


def interrupt(pgid: int) -> None:
    """Send SIGINT to the run's process group ``pgid`` (its leader's pid), as a terminal's Ctrl-C does:
    the target itself (cold, or forked from a warm parent: each leads its own session) and any process it
    started, a wrapper script's child included; nothing when the group is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGINT)


def _tail(path: Path) -> str:
    try:
        text = path.read_bytes()[-_TAIL * 4 :].decode("utf-8", "replace")
    except OSError:
        return ""
    return text[-_TAIL:].strip()


def _stat(folder: Path) -> list[str]:
    """The fields of ``folder/stat`` (``/proc``) after the command name: state, ppid, pgrp..."""
    text = (folder / "stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def _group(pgid: int) -> list[Path]:
    """The ``/proc/<pid>/task/<tid>`` folders of every thread of process group ``pgid`` (none without
    ``/proc``)."""
    threads: list[Path] = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(_stat(entry)[2]) == pgid:
                threads += list((entry / "task").iterdir())
    return threads


def _activity(threads: list[Path]) -> tuple[bool, int]:
    """Whether any of ``threads`` runs (or waits on the disk), and the CPU time they used (ns)."""
    busy, used = False, 0
    for task in threads:
        with contextlib.suppress(OSError, ValueError, IndexError):
            busy = busy or _stat(task)[0] in "RD"
            used += int((task / "schedstat").read_text().split()[0])
    return busy, used


def quiesce(pgid: int, deadline: float, quiet: float = _QUIET) -> None:
    """Wait until the target (process group ``pgid``) is idle: every thread asleep and no CPU time used for
    ``quiet`` seconds. At a kill point the fake provider holds the target's connection, so it is idle once it
    has handled all it was sent (the events recorded, the announcement made): killed then, it always dies
    at the same place. Where there is no ``/proc``, a fixed wait of ten times ``quiet``; never past
    ``deadline`` (``time.monotonic()``)."""
    threads = _group(pgid)
    if not threads:
        time.sleep(max(0.0, min(quiet * 10, deadline - time.monotonic())))
        return
    still, last = 0.0, -1
    while still < quiet and time.monotonic() < deadline:
        time.sleep(_POLL)
        busy, used = _activity(threads)
        still = still + _POLL if not busy and used == last else 0.0
        last = used


def _wait(process: _Process, timeout: float, stop: Callable[[], bool] | None) -> str:
    """``exited``, ``timed_out`` or ``killed`` (``stop()`` turned true first: checked every few ms)."""
    deadline = time.monotonic() + max(timeout, 0.001)
    while True:
        left = deadline - time.monotonic()
        try:
            process.wait(timeout=max(min(left, _POLL if stop is not None else left), 0.001))
            return "exited"
        except subprocess.TimeoutExpired:
            if stop is not None and stop():
                quiesce(process.pid, deadline)
                return "killed"
            if time.monotonic() >= deadline:
                return "timed_out"


class _Process(Protocol):
    """A run's process: a :class:`subprocess.Popen`, or a :class:`~replaykit.scenario.warm.Forked` run."""

    pid: int
    returncode: int | None

    def wait(self, timeout: float | None = None) -> int: ...


def _start(target: Target, cwd: Path, env: Mapping[str, str], logs: Path,
           parents: Parents | None) -> _Process:
    """Start a run: forked from a warm parent for a Python target (:mod:`~replaykit.scenario.warm`), else
    the target's command, in a session of its own, its output appended to ``logs``."""
    out, err = logs / "stdout.txt", logs / "stderr.txt"
    if parents is not None and target.spec.startswith(PYTHON_PREFIX) and warm.enabled():
        imported_under = target_env({}, dict(target.env))
        return parents.launch(target.spec[len(PYTHON_PREFIX):], imported_under, cwd, env, out, err)
    with open(out, "ab") as out_file, open(err, "ab") as err_file:
        try:
            return subprocess.Popen(target.argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                    stdout=out_file, stderr=err_file, start_new_session=True)
        except OSError as exc:
            raise UsageError(
                f"target {target.spec!r} cannot start: {exc.strerror or exc}; "
                "check the command and that it is installed"
            ) from exc


def run_segment(
    target: Target, cwd: Path, env: Mapping[str, str], timeout: float, logs: Path,
    stop: Callable[[], bool] | None = None, parents: Parents | None = None,
    arm: Callable[[int], Callable[[], None]] | None = None,
) -> TargetExit:
    """Run ``target`` once in ``cwd`` with ``env``; kill its process group after ``timeout`` seconds, or as
    soon as ``stop()`` is true (and any process it left behind once it exits). Its stdout and stderr go to
    files in ``logs``. ``parents``: the batch's warm parents (a Python target's run is forked from one).
    ``arm``: called with the run's process group once it started (e.g. to :func:`interrupt` it when a
    request arrives); what it returns is called before the group is killed."""
    start = time.monotonic()
    process = _start(target, cwd, env, logs, parents)
    disarm: Callable[[], None] | None = None
    try:
        disarm = arm(process.pid) if arm is not None else None
        ended = _wait(process, timeout, stop)
    finally:
        if disarm is not None:
            disarm()
        _kill_group(process)
        process.wait()
    code = process.returncode if ended == "exited" else None
    return TargetExit(code, ended == "timed_out", _tail(logs / "stderr.txt"), time.monotonic() - start,
               ended == "killed")


def read_outcome(path: Path) -> tuple[TargetOutcome | None, str]:
    """The outcome the target wrote at ``path``, or None and why it is not one (missing, not JSON, or against
    its contract: the first violation's JSON pointer and message)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, "the target wrote no outcome to REPLAYKIT_OUTCOME"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"the outcome cannot be read: {exc}"
    try:
        outcome: TargetOutcome = json.loads(text)  # returned only once it holds to its contract
    except ValueError as exc:
        return None, f"the outcome is not JSON: {exc}"
    found = [v for v in contracts.validate("replaykit.target-outcome", outcome) if v.severity == "error"]
    if found:
        return (
            None,
            f"the outcome breaks target-outcome.schema.json at {found[0].pointer or '/'}: {found[0].message}",
        )
    return outcome, ""
