"""A warm parent for Python targets: the target's module imported once, a fresh process forked for each run.

``python -m replaykit.scenario.warm module:function`` imports the function, then reads one request a line on
stdin, forks a child per run (its own session, folder, environment and output) and answers its pid and code.
The parent preloads the installed modules a run imported (:class:`Preload`); ``REPLAYKIT_WARM=0`` starts each
run cold. :class:`Parents` is the runner's side (idle :class:`Warm` parents by target, one run each), and
:class:`Forked` looks like a cold run's :class:`subprocess.Popen`. The protocol is in
docs/architecture/scenario.md.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from replaykit.jsondoc import JSON

__all__ = ["ENV", "Forked", "Parents", "Preload", "Warm", "enabled", "main"]

ENV = "REPLAYKIT_WARM"
RETIRED = 75  # the parent's exit code once a preload started a thread: its successor learns nothing


def enabled() -> bool:
    """Whether Python targets run warm (``REPLAYKIT_WARM`` is not ``0``)."""
    return os.environ.get(ENV, "1").strip() not in ("0", "false", "no", "off")


# ---------------------------------------------------------------- the parent process


def _child(function: Any, spec: str, order: Mapping[str, Any]) -> int:
    """In the forked child: become the run (session, folder, environment, output), run it, give its code."""
    from replaykit.scenario import call

    os.setsid()
    os.chdir(order["cwd"])
    os.environ.clear()
    os.environ.update(order["env"])
    for fd, name in ((1, "stdout"), (2, "stderr")):
        target = os.open(order[name], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(target, fd)
        os.close(target)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return call.main([spec], function=function)


def _fork(function: object, spec: str, order: Mapping[str, object], preload: Preload | None) -> int:
    sys.stdout.flush()  # what the parent's imports printed (to /dev/null) is not the child's to write
    pid = os.fork()
    if pid == 0:
        code, before = 70, set(sys.modules)
        try:
            code = _child(function, spec, order)
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            if preload is not None:
                with contextlib.suppress(Exception):
                    preload.tell(os.getpid(), before)
            os._exit(code)
    return pid


class Preload:
    """What a warm parent learns from its runs: the modules of installed packages a run imported, which the
    parent then imports itself (each once: a name that fails to import is not tried again)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.tried: set[str] = set()
        roots = {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
        roots.add(str(Path(__file__).resolve().parents[1]))  # replaykit's own modules
        self.roots = tuple(os.path.join(os.path.realpath(root), "") for root in roots if root)

    def _installed(self, name: str) -> bool:
        origin = getattr(getattr(sys.modules.get(name), "__spec__", None), "origin", None)
        return isinstance(origin, str) and os.path.realpath(origin).startswith(self.roots)

    def tell(self, pid: int, before: set[str]) -> None:
        """In the child, as its run ends: write the installed modules it imported (``before``: the modules at
        the fork)."""
        learned = [name for name in list(sys.modules) if name not in before and self._installed(name)]
        if learned:
            (self.folder / str(pid)).write_text("\n".join(learned), encoding="utf-8")

    def learn(self, pid: int) -> bool:
        """In the parent, once child ``pid`` ended: import what it told; False when that started a thread
        (a fork keeps only the thread that forks, so the parent must retire)."""
        told = self.folder / str(pid)
        if not told.exists():
            return True
        names = told.read_text(encoding="utf-8").split("\n")
        told.unlink()
        for name in names:
            if name not in sys.modules and name not in self.tried:
                self.tried.add(name)
                with contextlib.suppress(Exception):
                    importlib.import_module(name)
        return threading.active_count() == 1


def _found(spec: str) -> object:
    """The target function, or None when it cannot be found or its module fails to import (each run then
    looks for it again and says why, as a cold run does)."""
    from replaykit.scenario.call import target_function

    try:
        return target_function(spec)
    except Exception:  # the target's own import error belongs to each run's report, not to this process
        return None


def _answering() -> IO[str]:
    """The answers' pipe (stdout), kept apart from what imports print: file descriptor 1 becomes /dev/null."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    return answers


def main(argv: Sequence[str] | None = None) -> int:
    """Serve forked runs of the target function named by ``argv[0]`` (``--no-preload`` before it: learn
    nothing) until stdin closes; exit :data:`RETIRED` once a preload started a thread."""
    args = list(sys.argv[1:] if argv is None else argv)
    learning = "--no-preload" not in args
    args = [arg for arg in args if arg != "--no-preload"]
    spec = args[0] if len(args) == 1 else ""
    answers = _answering()
    function = _found(spec)
    with tempfile.TemporaryDirectory(prefix="replaykit-warm-") as folder:
        preload = Preload(Path(folder)) if learning else None
        for line in sys.stdin:
            order = json.loads(line)
            pid = _fork(function, spec, order, preload)
            answers.write(json.dumps({"pid": pid}) + "\n")
            answers.flush()
            _, status = os.waitpid(pid, 0)
            answers.write(json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status)}) + "\n")
            answers.flush()
            if preload is not None and not preload.learn(pid):
                return RETIRED
    return 0


# ---------------------------------------------------------------- the runner's side


class Forked:
    """One forked run, as much of :class:`subprocess.Popen` as the runner uses: ``pid``, ``returncode`` and
    :meth:`wait`; ``ended`` is called with its parent once its exit code is known (the parent is free)."""

    def __init__(self, parent: Warm, pid: int, ended: Callable[[Warm], None] | None = None) -> None:
        self.parent, self.pid, self.ended = parent, pid, ended
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (negative: the signal), once the run ended; :class:`subprocess.TimeoutExpired`
        when ``timeout`` seconds pass first."""
        if self.returncode is None:
            self.returncode = int(self.parent.answer(timeout, self)["code"])
            if self.ended is not None:
                self.ended(self.parent)
        return self.returncode


class Warm:
    """A warm parent process for one Python target (``spec``), with the environment it imports under."""

    def __init__(self, spec: str, env: Mapping[str, str], preload: bool = True) -> None:
        self.spec = spec
        words = [spec] if preload else ["--no-preload", spec]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "replaykit.scenario.warm", *words], env=dict(env), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.orders: IO[bytes] = self.process.stdin
        self.answers: IO[bytes] = self.process.stdout
        self._read = bytearray()  # the parent's output read but not yet answered: lines come two per run

    def start(self, cwd: Path, env: Mapping[str, str], stdout: Path, stderr: Path,
              ended: Callable[[Warm], None] | None = None) -> Forked:
        """Fork one run; the handle to wait on it (``ended``: see :class:`Forked`)."""
        order = {"cwd": str(cwd), "env": dict(env), "stdout": str(stdout), "stderr": str(stderr)}
        self.orders.write(json.dumps(order).encode("utf-8") + b"\n")
        self.orders.flush()
        return Forked(self, int(self.answer(None)["pid"]), ended)

    def answer(self, timeout: float | None, waiting: Forked | None = None) -> JSON:
        """The parent's next line; :class:`subprocess.TimeoutExpired` after ``timeout`` seconds.

        Read from the pipe itself, not through a buffered reader: a run that ends at once has its second
        line written with its first, and a reader would hold it where ``select`` never looks."""
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        while b"\n" not in self._read:
            if deadline is not None:
                ready, _, _ = select.select([self.answers], [], [], max(deadline - time.monotonic(), 0.0))
                if not ready:
                    raise subprocess.TimeoutExpired(self.spec, timeout or 0.0)
            chunk = os.read(self.answers.fileno(), 1 << 16)
            if not chunk:
                raise OSError(f"the warm parent of {self.spec} ended (exit code {self.process.poll()})")
            self._read += chunk
        line, _, rest = bytes(self._read).partition(b"\n")
        self._read = bytearray(rest)
        found: JSON = json.loads(line)
        return found

    def alive(self) -> bool:
        """True while the parent runs."""
        return self.process.poll() is None

    def close(self) -> None:
        """End the parent: stdin closed, then its exit awaited (killed when it does not end at once)."""
        with contextlib.suppress(OSError):
            self.orders.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.answers.close()


class Parents:
    """The warm parents of one or more batches of runs (:func:`replaykit.scenario.runner.run_jobs`): a parent
    serves one run at a time, so a run takes an idle parent of its target (and the environment it imports
    under) or starts one, and gives it back when it ends; all are ended by :meth:`close`."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, tuple[tuple[str, str], ...]], list[Warm]] = {}
        self._started: list[Warm] = []
        self._retired: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        self._lock = threading.Lock()

    def launch(self, spec: str, warm_env: Mapping[str, str], cwd: Path, env: Mapping[str, str], stdout: Path,
               stderr: Path) -> Forked:
        """Fork a run of Python target ``spec`` (``module:function``) from an idle warm parent for it, or from
        one started with ``warm_env`` when none is idle (one that ended meanwhile is replaced)."""
        key = (spec, tuple(sorted(warm_env.items())))
        while (parent := self._take(key)) is not None:
            try:
                return parent.start(cwd, env, stdout, stderr, self._give_back(key))
            except OSError:  # it ended meanwhile (killed, or retired after a preload): the next one
                self._ended(key, parent)
        with self._lock:
            parent = Warm(spec, warm_env, preload=key not in self._retired)
            self._started.append(parent)
        return parent.start(cwd, env, stdout, stderr, self._give_back(key))

    def _take(self, key: tuple[str, tuple[tuple[str, str], ...]]) -> Warm | None:
        """An idle parent of ``key`` that still runs (those that ended are closed on the way)."""
        while True:
            with self._lock:
                idle = self._idle.get(key)
                parent = idle.pop() if idle else None
            if parent is None or parent.alive():
                return parent
            self._ended(key, parent)

    def _ended(self, key: tuple[str, tuple[tuple[str, str], ...]], parent: Warm) -> None:
        parent.close()
        if parent.process.returncode == RETIRED:
            with self._lock:
                self._retired.add(key)

    def _give_back(self, key: tuple[str, tuple[tuple[str, str], ...]]) -> Callable[[Warm], None]:
        def give_back(parent: Warm) -> None:
            with self._lock:
                self._idle.setdefault(key, []).append(parent)

        return give_back

    def close(self) -> None:
        """End every parent."""
        with self._lock:
            parents, self._started, self._idle = self._started, [], {}
        for parent in parents:
            parent.close()

    def __enter__(self) -> Parents:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    sys.exit(main())
