"""The ``kill`` fault in scenarios: the runner SIGKILLs the target at the kill point, once the target is
idle there, and starts it again with the same input and state; the same scenario run 20 times gives the
same journal (requests and bodies) and the same verdict."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from scenario_support import scenario_doc, write_scenario

from replaykit.errors import ScenarioError
from replaykit.scenario import DEFAULT_TARGET, Result, Target, load, run_many
from replaykit.scenario.target import quiesce

pytestmark = pytest.mark.slow  # each scenario runs child processes

ROOT = Path(__file__).resolve().parents[2]
RUNS = 20


def _journal(result: Result) -> list[tuple[Any, ...]]:
    """The journal as the sequence of requests and bodies, with how far each response got."""
    return [(e.route, e.method, e.path, e.body, e.outcome, e.chunks)
            for e in result.journal]


def _verdict(result: Result) -> tuple[bool, list[dict[str, Any]]]:
    return result.passed, [check.to_json() for check in result.checks]


# where each scenario is killed: held after 9 events of the first stream; at the read call's announcement
KILLED_AT = {"durable-killed-mid-stream": ("hung", 9), "durable-tool-interrupted": ("complete", 9)}


@pytest.mark.parametrize("name", sorted(KILLED_AT))
def test_a_kill_is_deterministic(name: str) -> None:
    scenario = load(ROOT / "scenarios" / f"{name}.yaml")
    results = run_many([scenario] * RUNS, Target.parse(DEFAULT_TARGET), jobs=2)
    journals = {repr(_journal(result)) for result in results}
    verdicts = {repr(_verdict(result)) for result in results}
    assert len(journals) == 1 and len(verdicts) == 1, (journals, verdicts)
    assert results[0].passed, results[0].failure_text()
    first = results[0].journal[0]
    assert (first.outcome, first.chunks) == KILLED_AT[name]


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="reads /proc (Linux)")
def test_the_runner_waits_until_the_target_is_idle_before_killing() -> None:
    busy = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 0.4: pass\ntime.sleep(30)"
    process = subprocess.Popen([sys.executable, "-c", busy], start_new_session=True)
    try:
        start = time.monotonic()
        quiesce(process.pid, start + 10)
        assert time.monotonic() - start >= 0.35
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_a_kill_with_no_restart_left_is_the_scenario_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REPLAYKIT_MUTANT", raising=False)
    source = (ROOT / "scenarios" / "durable-killed-mid-stream.yaml").read_text(encoding="utf-8")
    (tmp_path / "cassettes").mkdir()
    (tmp_path / "cassettes" / "durable-killed-mid-stream.yaml").write_bytes(
        (ROOT / "scenarios" / "cassettes" / "durable-killed-mid-stream.yaml").read_bytes())
    # every request is killed (nth left out): the one restart the fault allows is used up by the second kill
    path = tmp_path / "kill-every-request.yaml"
    path.write_text(source.replace("  nth: 1\n  after: 9\n", "  after: 9\n")
                    .replace("persistedSnapshot: true", "persistedSnapshot: false"), encoding="utf-8")
    (result,) = run_many([load(path)], Target.parse(DEFAULT_TARGET))
    assert result.failure_text().startswith("target: the target reached a kill point with no restart left")
    assert [entry.outcome for entry in result.journal] == ["hung", "hung"]


def test_a_kill_fault_is_checked_where_the_scenario_is_read(tmp_path: Path) -> None:
    for fault, place in (({"kind": "kill", "tool": "read", "ms": 5}, "/faults/0"),
                         ({"kind": "stall", "after": 1, "tool": "read"}, "/faults/0")):
        path = write_scenario(tmp_path, scenario_doc(faults=[fault]))
        with pytest.raises(ScenarioError) as caught:
            load(path)
        assert place in str(caught.value) and str(path) in str(caught.value)
    fine = load(write_scenario(tmp_path, scenario_doc(faults=[{"kind": "kill", "tool": "read", "times": 2}])))
    assert fine.kills_armed == 2
