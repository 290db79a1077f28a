"""Warm parents (replaykit.scenario.warm): each run of a Python target is a process of its own, forked from a
parent that imported the target once, with the run's own folder, environment and output; a crash, a hang or
a killed parent in one run never reaches another; the parent preloads the installed modules a run imported,
never the target's own; REPLAYKIT_WARM=0 runs cold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from scenario_support import FUNCTION, scenario_doc, tiny_target_importable, write_scenario

from replaykit.scenario import Target, load, run_many
from replaykit.scenario.warm import ENV, Parents, Preload, Warm, enabled

PROBE = '''
import json, os, sys, time

IMPORTED_UNDER = os.environ.get("PROBE_AT_IMPORT")


def run(given):
    with open("seen.json", "w") as out:
        json.dump({"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "cwd": os.getcwd(),
                   "run": os.environ.get("PROBE_RUN"), "imported_under": IMPORTED_UNDER}, out)
    print("said on stdout")
    how = given.get("how")
    if how == "lazy":  # an installed module (the standard library's) and one of the target's own, both lazily
        seen = {name: name in sys.modules for name in ("colorsys", "probe_helper")}
        import colorsys, probe_helper
        with open("lazy.json", "w") as out:
            json.dump(seen, out)
    if how == "exit":
        os._exit(3)
    if how == "hang":
        time.sleep(60)
    return {"status": "ok", "persistWrites": 0}
'''


def _run(parents: Parents, tmp_path: Path, number: int, how: str = "", timeout: float | None = 60) -> tuple[
        int, dict[str, object]]:
    work = tmp_path / f"work-{number}"
    work.mkdir()
    (work / "input.json").write_text(json.dumps({"how": how}))
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "PROBE_RUN": str(number),
           "REPLAYKIT_INPUT": str(work / "input.json"), "REPLAYKIT_OUTCOME": str(work / "outcome.json")}
    warm_env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "PROBE_AT_IMPORT": "parent"}
    run = parents.launch("probe:run", warm_env, work, env, work / "out.txt", work / "err.txt")
    try:
        code = run.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        code = run.wait()
    seen = json.loads((work / "seen.json").read_text())
    return code, seen


def test_each_run_is_its_own_process_forked_from_one_parent(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    with Parents() as parents:
        (code, first), (again, second) = _run(parents, tmp_path, 1), _run(parents, tmp_path, 2)
    assert (code, again) == (0, 0)
    assert first["pid"] != second["pid"] and first["ppid"] == second["ppid"]  # one parent, two children
    assert first["pgid"] == first["pid"]  # a session of its own: its group is killed, nothing else
    assert (first["run"], second["run"]) == ("1", "2") and first["cwd"] == str(tmp_path / "work-1")
    assert first["imported_under"] == "parent"  # imported once, by the parent
    assert (tmp_path / "work-2" / "out.txt").read_text() == "said on stdout\n"
    assert json.loads((tmp_path / "work-2" / "outcome.json").read_text())["status"] == "ok"


def test_the_parent_preloads_the_installed_modules_a_run_imported_not_the_targets(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "probe_helper.py").write_text("")
    with Parents() as parents:
        lazy = []
        for number in (1, 2):
            code, _ = _run(parents, tmp_path, number, "lazy")
            assert code == 0
            lazy.append(json.loads((tmp_path / f"work-{number}" / "lazy.json").read_text()))
    assert lazy[0] == {"colorsys": False, "probe_helper": False}
    assert lazy[1] == {"colorsys": True, "probe_helper": False}  # taught by run 1; the target's own is not


def test_a_preload_that_starts_a_thread_retires_the_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """A fork copies only the thread that forks: a preloaded module that started a thread would leave the runs
    with a module whose thread is gone, so the parent says it must retire."""
    (tmp_path / "threader.py").write_text(
        "import threading\nSTOP = threading.Event()\n"
        "threading.Thread(target=STOP.wait, daemon=True).start()\n")
    (tmp_path / "quiet.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    preload = Preload(tmp_path)
    (tmp_path / "1").write_text("quiet\nno_such_module_anywhere")
    (tmp_path / "2").write_text("threader")
    try:
        assert preload.learn(1) is True and "quiet" in sys.modules and not (tmp_path / "1").exists()
        assert preload.learn(2) is False
    finally:
        sys.modules["threader"].STOP.set()
        for name in ("threader", "quiet"):
            sys.modules.pop(name, None)


def test_a_retired_parent_is_followed_by_one_that_preloads_nothing(tmp_path: Path) -> None:
    """End to end: the parents take the target's folder for an installed package's (its sysconfig says so), so
    run 1 teaches ``threader``; its import starts a thread, the parent retires after answering; run 2 gets a
    new parent, which learns nothing and so serves run 3 too."""
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "probe_helper.py").write_text("import threader\n")
    (tmp_path / "threader.py").write_text(
        "import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\n")
    (tmp_path / "sitecustomize.py").write_text(
        "import sysconfig\nfound = sysconfig.get_path\n"
        f"sysconfig.get_path = lambda name: {str(tmp_path)!r} if name == 'purelib' else found(name)\n")
    with Parents() as parents:
        ran = [_run(parents, tmp_path, number, "lazy") for number in (1, 2, 3)]
    assert [code for code, _ in ran] == [0, 0, 0]
    first, second, third = (seen["ppid"] for _, seen in ran)
    assert first != second == third


def test_a_parent_serves_the_runs_of_other_threads_once_idle(tmp_path: Path) -> None:
    """A parent is given back when its run ends: another thread (alive at once, so not the same thread under
    another name) forks its run from it, warm."""
    (tmp_path / "probe.py").write_text(PROBE)
    seen: list[dict[str, object]] = []
    first_ran, release = threading.Event(), threading.Event()

    def first() -> None:
        seen.append(_run(parents, tmp_path, 1)[1])
        first_ran.set()
        release.wait()

    with Parents() as parents:
        holder = threading.Thread(target=first)
        holder.start()
        assert first_ran.wait(60)
        second = threading.Thread(target=lambda: seen.append(_run(parents, tmp_path, 2)[1]))
        second.start()
        second.join()
        release.set()
        holder.join()
    assert len(seen) == 2 and seen[0]["ppid"] == seen[1]["ppid"]


def test_a_crash_or_a_hang_ends_that_run_only(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    with Parents() as parents:
        crashed, seen = _run(parents, tmp_path, 1, "exit")
        hung, _ = _run(parents, tmp_path, 2, "hang", timeout=0.5)
        after, later = _run(parents, tmp_path, 3)
    assert (crashed, hung, after) == (3, -signal.SIGKILL, 0)
    assert later["ppid"] == seen["ppid"]  # the same parent served the run after them


def test_a_run_that_ends_at_once_is_seen_when_both_its_lines_came_together() -> None:
    """The parent writes a run's pid and its exit code in one go when the run ends at once (a busy machine):
    the code must be found in what was read with the pid, not waited for on the pipe."""
    read, write = os.pipe()
    os.write(write, b'{"pid": 7}\n{"pid": 7, "code": 3}\n')
    warm = Warm.__new__(Warm)
    warm.spec, warm.answers, warm._read = "probe:run", os.fdopen(read, "rb"), bytearray()
    try:
        assert warm.answer(None) == {"pid": 7}
        assert warm.answer(5) == {"pid": 7, "code": 3}  # (it timed out, the line held by a buffered read)
    finally:
        warm.answers.close()
        os.close(write)


def test_a_killed_parent_is_replaced_at_the_next_run(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    with Parents() as parents:
        _, first = _run(parents, tmp_path, 1)
        os.kill(int(str(first["ppid"])), signal.SIGKILL)
        code, second = _run(parents, tmp_path, 2)
    assert code == 0 and second["ppid"] != first["ppid"]


def test_a_target_that_cannot_be_imported_says_why_in_each_run(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text("raise RuntimeError('broken at import')\n")
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "REPLAYKIT_INPUT": str(work / "in.json"),
           "REPLAYKIT_OUTCOME": str(work / "out.json")}
    with Parents() as parents:
        code = parents.launch("probe:run", env, work, env, work / "out.txt", work / "err.txt").wait(60)
    assert code != 0 and "broken at import" in (work / "err.txt").read_text()


@pytest.mark.parametrize("warm", ["1", "0"])
def test_warm_and_cold_runs_give_the_same_verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    warm: str) -> None:
    tiny_target_importable(monkeypatch)
    monkeypatch.setenv(ENV, warm)
    assert enabled() is (warm == "1")
    write_scenario(tmp_path, scenario_doc("good"))
    write_scenario(tmp_path, scenario_doc("bad", expectations={"outcome": "ok", "persistWrites": 2}))
    results = run_many([load(tmp_path / "good.yaml"), load(tmp_path / "bad.yaml")], Target.parse(FUNCTION),
                       jobs=2)
    assert [(r.scenario.name, r.verdict) for r in results] == [("good", "pass"), ("bad", "fail")]
    assert results[1].failure_text() == "persistWrites: expected 2 write(s), got 1"
