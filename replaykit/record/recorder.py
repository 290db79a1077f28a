"""The recorder: what the recording proxy captured, checked and written in a process of its own, so the
checks and the writes never take the serving thread's GIL (or its event loop) from the bytes in flight.

The proxy hands each finished :class:`~replaykit.record.capture.Capture` to :meth:`Recorder.take`, which
returns at once; the recorder process (:func:`serve`) checks it (:func:`~replaykit.record.capture.checked`)
and adds it to the :class:`~replaykit.record.tape.Tape`, written atomically at a bounded rate, and reports
back on a second pipe. A dead recorder is a :class:`~replaykit.errors.CassetteError` when the proxy stops;
``isolate=False`` runs it in a thread. The protocol is in docs/architecture/record.md.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

from replaykit.contracts import Profile
from replaykit.errors import CassetteError
from replaykit.record.capture import Capture, checked, violation_line
from replaykit.record.tape import Tape
from replaykit.redact import safe_message

__all__ = ["FLUSH_INTERVAL", "WRITE_SHARE", "Recorder", "RecorderSettings", "Tally", "serve"]


@dataclass(slots=True)
class Tally:
    """What the proxy did: requests received, recorded, replayed, checked; contract errors and warnings;
    exchanges not recorded (``incomplete``) and upstream failures."""

    requests: int = 0
    recorded: int = 0
    replayed: int = 0
    checked: int = 0
    errors: int = 0
    warnings: int = 0
    incomplete: int = 0
    failed: int = 0


FLUSH_INTERVAL = 0.5  # seconds at least between two writes of the cassette while recording
WRITE_SHARE = 0.1  # at most this share of the recorder's time goes to rewriting the cassette


@dataclass(frozen=True, slots=True)
class RecorderSettings:
    """What the recorder process needs to start: the cassette (``path`` None: check only, write nothing),
    whose traffic it is (None: the routes of each request say), whether it adds to what the file holds
    (``--mode new``) and the contract profile."""

    path: Path | None
    provider: str | None
    keep: bool
    profile: Profile


# ---------------------------------------------------------------- in the recorder process


def _due(written_at: float, took: float) -> float:
    """When the next write may start, the last one having ended at ``written_at`` and taken ``took`` s."""
    return written_at + max(FLUSH_INTERVAL, took / WRITE_SHARE)


class _Work:
    """The recorder's state: the tape, the exchanges taken, and when the next write is due."""

    def __init__(self, settings: RecorderSettings, results: Connection) -> None:
        self.settings, self.results = settings, results
        self.tape = None if settings.path is None else Tape(settings.path, settings.provider,
                                                            keep=settings.keep, say=self.refused)
        self.taken, self.due = 0, 0.0

    def send(self, *message: object) -> None:
        """Send ``message`` to the proxy (see :func:`_send`)."""
        _send(self.results, *message)

    def tell(self, line: str) -> None:
        """Have the proxy say ``line``."""
        self.send("say", line)

    def refused(self, line: str) -> None:
        """The tape's one line: it refused to write (a key survived redaction); the proxy says it and keeps it
        as its tape's ``refused``."""
        self.send("refused", line)

    def take(self, capture: Capture) -> None:
        """Check ``capture``, tell what its contracts say, add it to the tape."""
        done = checked(capture.interaction(), self.settings.profile)
        index, errors = self.taken, 0
        self.taken += 1
        for violation in done.violations:
            errors += violation.severity == "error"
            self.tell(f"contract {violation.severity}: {violation_line(index, violation)}")
        recorded = self.tape is not None and self.tape.add(done)
        self.send("took", errors, len(done.violations) - errors, recorded)

    def wait(self) -> float | None:
        """Seconds until a write is due (None: nothing to write)."""
        if self.tape is None or not self.tape.dirty:
            return None
        return max(0.0, self.due - time.monotonic())

    def flush(self) -> None:
        """Write the cassette if anything was added; the next write waits as :func:`_due` says."""
        if self.tape is None:
            return
        started = time.monotonic()
        if self.tape.flush():
            ended = time.monotonic()
            self.due = _due(ended, ended - started)
            self.send("wrote", len(self.tape.cassette.interactions))


def _send(results: Connection, *message: Any) -> None:
    """Send ``message`` to the proxy; dropped when the proxy is gone (the cassette is still written)."""
    with contextlib.suppress(OSError):
        results.send(message)


def _send_error(results: Connection, exc: BaseException) -> None:
    """Send ``exc`` to the proxy (as a CassetteError naming it when pickle cannot carry it)."""
    try:
        _send(results, "error", exc)
    except Exception:
        _send(results, "error", CassetteError(f"recording failed: {type(exc).__name__}: {exc}"))


def serve(tasks: Connection, results: Connection) -> None:
    """The recorder's loop: its :class:`RecorderSettings` first on ``tasks``, then each capture until None or
    the end of the pipe; the cassette written when due and at the end, then ``("done",)`` sent."""
    try:
        work = _Work(tasks.recv(), results)
    except Exception as exc:
        _send_error(results, exc)
        _send(results, "done")
        return
    while True:
        wait = work.wait()
        try:  # a write due goes first, also while captures keep coming
            if wait is not None and (wait == 0 or not tasks.poll(wait)):
                work.flush()
                continue
            capture = tasks.recv()
        except (EOFError, OSError):  # the proxy is gone: write what it sent
            capture = None
        if capture is None:
            break
        try:
            work.take(capture)
        except Exception as exc:
            _send_error(results, exc)
    try:
        work.flush()
    except Exception as exc:
        _send_error(results, exc)
    work.send("done")


def main(tasks: int, results: int) -> None:
    """The recorder process's entry, on the pipes' file descriptors: deaf to the terminal's signals (the
    proxy stops it when it stops)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve(Connection(tasks, writable=False), Connection(results, readable=False))


def _spawn(tasks: int, results: int, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    """The recorder process, a fresh interpreter on this one's import path (never a fork of a threaded
    process, nor a re-run of the proxy's ``__main__`` as multiprocessing's spawn does)."""
    code = f"from replaykit.record.recorder import main; main({tasks}, {results})"
    path = os.pathsep.join(entry for entry in sys.path if entry)
    return subprocess.Popen([sys.executable, "-c", code], pass_fds=(tasks, results), close_fds=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                            env={**os.environ, "PYTHONPATH": path})


# ---------------------------------------------------------------- in the proxy's process


class Recorder:
    """The proxy's handle on its recorder: :meth:`start`, :meth:`take` each capture, :meth:`stop`.

    ``tally`` gets the counts, ``say`` the lines, ``tape`` (the proxy's view of the cassette) the refusal;
    errors (the recorder's own, or its death) are kept in ``errors``.
    """

    def __init__(self, settings: RecorderSettings, *, tally: Tally, tape: Tape | None,
                 say: Callable[[str], None], isolate: bool = True) -> None:
        self.settings, self.tally, self.tape, self.say, self.isolate = settings, tally, tape, say, isolate
        self.errors: list[BaseException] = []
        self.written = 0  # interactions in the recorder's last complete write
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replaykit-record-send")
        self._tasks: Connection | None = None
        self._runner: Any = None
        self._listener: threading.Thread | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The recorder process's id (None before :meth:`start`, or when it is a thread)."""
        return self._runner.pid if isinstance(self._runner, subprocess.Popen) else None

    @property
    def started(self) -> bool:
        """True once :meth:`start` was called (a recorder records once)."""
        return self._runner is not None

    def start(self) -> None:
        """Start the recorder (a process, or a thread when not ``isolate`` or not on POSIX) and the
        listener."""
        if self.isolate and os.name == "posix":  # pass_fds is POSIX's
            tasks_in, tasks_out = os.pipe()
            results_in, results_out = os.pipe()
            self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop(); never a pipe that fills)
            try:
                self._runner = _spawn(tasks_in, results_out, self._stderr)
            except BaseException:
                for fd in (tasks_out, results_in):
                    os.close(fd)
                self._stderr.close()
                raise
            finally:  # the process holds its own ends: EOF reaches each side when the other goes
                for fd in (tasks_in, results_out):
                    os.close(fd)
            self._tasks = Connection(tasks_out, readable=False)
            results = Connection(results_in, writable=False)
        else:
            theirs, self._tasks = multiprocessing.Pipe(duplex=False)
            results, ours = multiprocessing.Pipe(duplex=False)
            self._runner = threading.Thread(target=serve, args=(theirs, ours), daemon=True,
                                            name="replaykit-recorder")
            self._runner.start()
        self._send(self.settings)
        self._listener = threading.Thread(target=self._listen, args=(results,), daemon=True,
                                          name="replaykit-record-listen")
        self._listener.start()

    def take(self, capture: Capture) -> None:
        """Hand ``capture`` to the recorder; returns at once (a thread sends it)."""
        self._sender.submit(self._send, capture)

    def _send(self, message: RecorderSettings | Capture | None) -> None:
        assert self._tasks is not None
        with contextlib.suppress(OSError):  # the recorder is gone: the listener says so
            self._tasks.send(message)

    def stop(self) -> None:
        """Send what is left, let the recorder write and end, wait for it."""
        self._sender.shutdown(wait=True)
        if self._tasks is None:
            return
        self._send(None)
        if self._listener is not None:
            self._listener.join()
        self._end()
        self._tasks.close()
        self._tasks = None
        if self._stderr is not None:
            self._stderr.close()

    def _listen(self, results: Connection) -> None:
        """Apply what the recorder sends until it is done, or gone."""
        with results:
            while True:
                try:
                    message = results.recv()
                except (EOFError, OSError):
                    self._died()
                    return
                if message[0] == "done":
                    return
                self._apply(message)

    def _apply(self, message: tuple[Any, ...]) -> None:
        kind, *rest = message
        if kind == "say":
            self.say(rest[0])
        elif kind == "took":
            errors, warnings, recorded = rest
            self.tally.checked += 1
            self.tally.errors += errors
            self.tally.warnings += warnings
            self.tally.recorded += bool(recorded)
        elif kind == "refused":
            self.say(rest[0])
            if self.tape is not None:
                self.tape.refused = rest[0]
        elif kind == "wrote":
            self.written = rest[0]
        elif kind == "error":
            self.errors.append(rest[0])

    def _end(self, timeout: float | None = None) -> int | None:
        """Wait for the recorder to end; its exit code (None: a thread)."""
        if isinstance(self._runner, subprocess.Popen):
            with contextlib.suppress(subprocess.TimeoutExpired):
                return self._runner.wait(timeout)
            return None
        self._runner.join(timeout)
        return None

    def _last_words(self) -> str:
        """The last line the dead recorder wrote on stderr (its exception), keys masked; or nothing."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        lines = self._stderr.read()[-4096:].decode("utf-8", "replace").strip().splitlines()
        return f": {safe_message(lines[-1])}" if lines else ""

    def _died(self) -> None:
        code = self._end(timeout=5)
        held = (f"{self.settings.path} holds its last complete write ({self.written} interactions), never "
                "half a file" if self.settings.path is not None else "nothing was to be written")
        message = (f"the recorder stopped unexpectedly (exit code {code}{self._last_words()}) after "
                   f"{self.tally.checked} exchanges; nothing more is recorded; {held}; record the rest again "
                   "with --mode new")
        self.say(message)
        self.errors.append(CassetteError(message))
