"""A step's ``cancelOn``: the runner sends SIGINT once the named request has arrived, to a target that
declares cancel-signal; a target that declares only cancel gets the step's ``cancelAfterMs`` as before.

The target (``signal_target.py``) reports the SIGINTs it got and how many requests it had sent when the first
came; its second request is held by the fake provider (a minute), so only a cancel ends it, and the requests
after the first are answered 503 (there is one recording).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from scenario_support import HERE, STEP, scenario_doc, write_scenario

from replaykit.resources import data_dir
from replaykit.scenario import Target, load, run_jobs, run_scenario

pytestmark = pytest.mark.slow  # each scenario runs a child process

FUNCTION = "python:signal_target:run"
COMMAND = f"{sys.executable} {HERE / 'signal_target.py'}"
HELD = [{"kind": "status", "route": "anthropic", "nth": 2, "times": 3, "status": 503},
        {"kind": "delay_headers", "route": "anthropic", "nth": 2, "ms": 60000}]
WORDS = ["anthropic-messages", "stream", "non-stream"]


def manifest(folder: Path, *cancel: str) -> Path:
    path = folder / "replaykit-target.yaml"
    path.write_text(yaml.safe_dump({"name": "signals", "capabilities": [*WORDS, *cancel]}), encoding="utf-8")
    return path


def cancelled(folder: Path, message: str, **step: Any) -> Path:
    expectations = {"outcome": "aborted", "error": {"code": "CANCELLED", "provenance": "cancelled"},
                    "outcomeHas": [{"pointer": "/error/message", "contains": message}]}
    doc = scenario_doc("cancelled", steps=[{**STEP, **step}], faults=HELD, expectations=expectations)
    return write_scenario(folder, doc)


@pytest.mark.parametrize("spec", [FUNCTION, COMMAND], ids=["function-warm", "command"])
def test_a_cancel_signal_target_gets_sigint_once_when_the_named_request_has_arrived(
        tmp_path: Path, spec: str) -> None:
    """Once: the request after the cancel does not bring another. When it arrived, not before: the target
    had sent 2 when it came. cancelAfterMs is taken out of its input."""
    path = cancelled(tmp_path, "signals=1 sent=2 cancelAfterMs=absent",
                     cancelOn={"route": "anthropic.messages", "nth": 2}, cancelAfterMs=600000)
    target = Target.parse(spec, manifest=manifest(tmp_path, "cancel", "cancel-signal"))
    [result] = run_jobs([(load(path), target, None)])  # a Python target's run forked from a warm parent
    assert result.passed, result.failure_text()
    assert result.requests == 3


def test_a_cancel_only_target_gets_cancel_after_ms_and_no_signal(tmp_path: Path) -> None:
    path = cancelled(tmp_path, "signals=0 sent=None cancelAfterMs=300",
                     cancelOn={"route": "anthropic", "nth": 2}, cancelAfterMs=300)
    result = run_scenario(load(path), Target.parse(COMMAND, manifest=manifest(tmp_path, "cancel")))
    assert result.passed, result.failure_text()


def test_a_target_without_a_manifest_keeps_the_timer_it_had(tmp_path: Path) -> None:
    path = cancelled(tmp_path, "signals=0 sent=None cancelAfterMs=300",
                     cancelOn={"route": "anthropic", "nth": 2}, cancelAfterMs=300)
    target = Target.parse(COMMAND)
    assert target.manifest.capabilities is None
    result = run_scenario(load(path), target)
    assert result.passed, result.failure_text()


def test_a_target_without_a_manifest_gets_the_signal_when_there_is_no_timer(tmp_path: Path) -> None:
    path = cancelled(tmp_path, "signals=1 sent=2 cancelAfterMs=absent",
                     cancelOn={"route": "anthropic", "nth": 2})
    result = run_scenario(load(path), Target.parse(COMMAND))
    assert result.passed, result.failure_text()


@pytest.mark.parametrize(("step", "declared", "missing"), [
    ({"cancelOn": {"route": "anthropic", "nth": 1}}, ["cancel"], ("cancel-signal",)),
    ({"cancelOn": {"route": "anthropic", "nth": 1}, "cancelAfterMs": 5}, [], ("cancel or cancel-signal",)),
    ({"cancelOn": {"route": "anthropic", "nth": 1}, "cancelAfterMs": 5}, ["cancel"], ()),
    ({"cancelOn": {"route": "anthropic", "nth": 1}, "cancelAfterMs": 5}, ["cancel-signal"], ()),
    ({"cancelAfterMs": 5}, ["cancel-signal"], ("cancel",)),
])
def test_what_a_cancelled_step_needs(tmp_path: Path, step: dict[str, Any], declared: list[str],
                                     missing: tuple[str, ...]) -> None:
    path = write_scenario(tmp_path, scenario_doc(steps=[{**STEP, **step}]))
    result = run_scenario(load(path), Target.parse(COMMAND, manifest=manifest(tmp_path, *declared)))
    assert result.missing == missing
    if missing:
        assert result.verdict == "n/a" and result.reason == f"needs {', '.join(missing)}"


def test_cancel_on_is_never_in_the_target_input(tmp_path: Path) -> None:
    step = {**STEP, "cancelOn": {"route": "anthropic", "nth": 1}, "restart": False}
    scenario = load(write_scenario(tmp_path, scenario_doc(steps=[step])))
    [(_, steps)] = scenario.segments()
    assert steps == [STEP]
    assert scenario.cancel_on(0) == {"route": "anthropic", "nth": 1}


IGNORING = """import signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background job: its children inherit it
from replaykit.cli import main
sys.exit(main(["run", *sys.argv[1:]]))
"""


@pytest.mark.parametrize("warm", ["1", "0"], ids=["warm", "cold"])
def test_the_reference_takes_sigint_though_it_was_started_ignoring_it(warm: str) -> None:
    """Python's own Ctrl-C (asyncio.run's) is not installed when SIGINT is ignored at start; the reference's
    handler (CtrlC) is installed whatever it inherited, warm or cold."""
    scenarios = data_dir("scenarios")
    names = [str(scenarios / f"{name}.yaml") for name in ("web-search-cancelled", "cancelled-subtask")]
    done = subprocess.run([sys.executable, "-c", IGNORING, *names, "-j", "2"], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "REPLAYKIT_WARM": warm})
    assert done.returncode == 0, done.stdout + done.stderr
