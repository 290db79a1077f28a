"""``replaykit record`` on the command line: a subprocess run until SIGINT, a fake provider as the upstream.

``--check`` is the live contract test: exit 1 on a contract error, 0 when the traffic keeps its contracts,
nothing written either way. A usage error is one line and exit 2, never a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from replaykit import cassette
from replaykit.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, main
from replaykit.resources import find_cassette
from replaykit.server import FakeProvider

ROOT = Path(__file__).resolve().parents[1]
PLAIN = "anthropic/web_search.yaml"


def record(args: list[str], bodies: list[bytes], cwd: Path,
           more_env: dict[str, str] | None = None) -> tuple[int, str, list[int]]:
    """Run ``replaykit record ARGS --json``, send ``bodies`` through it, stop it with SIGINT."""
    command = [sys.executable, "-m", "replaykit", "record", *args, "--json"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1", **(more_env or {})}
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            assert proc.stdout is not None
            base = json.loads(proc.stdout.readline())["anthropic"]
            statuses = [httpx.post(f"{base}/v1/messages", content=body, timeout=30,
                                   headers={"content-type": "application/json"}).status_code
                        for body in bodies]
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
    return proc.returncode, err, statuses


def plain_body() -> dict[str, object]:
    body = cassette.load(find_cassette(PLAIN)).interactions[0].request.json()
    assert isinstance(body, dict)
    return body


@pytest.mark.slow
def test_check_exits_1_on_a_contract_error_and_writes_nothing(tmp_path: Path) -> None:
    bad = plain_body()
    bad["messages"] = [{"role": "user", "content": [{"type": "text", "text": "hi", "internal_id": 7}]}]
    with FakeProvider([PLAIN], repeat=True) as upstream:
        code, err, statuses = record(["--check", "--upstream", upstream.url, "--provider", "anthropic"],
                                     [json.dumps(bad).encode()], tmp_path)
    assert statuses == [200] and code == EXIT_FINDINGS, err
    assert "contract error: interactions[0] request /messages/0/content/0/internal_id" in err
    assert "exit 1: 1 contract error" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_check_exits_0_when_the_traffic_keeps_its_contracts_and_record_writes(tmp_path: Path) -> None:
    body = json.dumps(plain_body()).encode()
    with FakeProvider([PLAIN], repeat=True) as upstream:
        checked = record(["--check", "--upstream", upstream.url, "--provider", "anthropic"], [body], tmp_path)
        recorded = record(["--upstream", upstream.url, "--provider", "anthropic", "--cassette", "new.yaml"],
                          [body], tmp_path)
    assert checked[0] == EXIT_OK and checked[2] == [200], checked[1]
    assert recorded[0] == EXIT_OK and "1 recorded into new.yaml" in recorded[1], recorded[1]
    assert cassette.load(tmp_path / "new.yaml").meta.origin == "recorded"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "environment"])
def test_mode_none_never_reaches_the_upstream_given(tmp_path: Path, how: str) -> None:
    kept = tmp_path / "kept.yaml"
    cassette.save(cassette.load(find_cassette(PLAIN)), kept)
    unmatched = {**plain_body(), "model": "another-model"}
    bodies = [json.dumps(plain_body()).encode(), json.dumps(unmatched).encode()]
    with FakeProvider([PLAIN], repeat=True) as upstream:
        args = ["--upstream", upstream.url, "--provider", "anthropic", "--cassette", "kept.yaml"]
        if how == "flag":
            code, err, statuses = record([*args, "--mode", "none"], bodies, tmp_path)
        else:
            code, err, statuses = record(args, bodies, tmp_path, {"REPLAYKIT_RECORD_MODE": "none"})
        assert upstream.journal == [], "nothing may leave loopback in mode none"
    assert (code, statuses) == (EXIT_OK, [200, 404]), err
    ignored = (f"replaykit record: --mode none only replays: --upstream {upstream.url} is ignored; "
               "nothing is forwarded")
    assert err.splitlines().count(ignored) == 1 and "2 requests, 2 replayed" in err, err
    assert cassette.load(kept).interactions == cassette.load(find_cassette(PLAIN)).interactions


def test_a_bad_record_mode_in_the_environment_is_one_usage_line(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REPLAYKIT_RECORD_MODE", "sometimes")
    code = main(["record", "--upstream", "http://127.0.0.1:9", "--provider", "anthropic"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert err == ("replaykit: error: REPLAYKIT_RECORD_MODE='sometimes' must be one of once, new (or "
                   "new_episodes), all, none\n")


def test_an_existing_cassette_under_once_is_a_usage_error(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("version: 1\ninteractions: []\n")
    code = main(["record", "--upstream", "http://127.0.0.1:9", "--provider", "anthropic", "--cassette",
                 str(old)])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.count("\n") == 1
    assert f"replaykit: error: {old}: already exists and --mode once" in err


def test_a_bad_upstream_and_a_missing_provider_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "--upstream", "api.anthropic.com", "--provider", "anthropic", "--check"]) == 2
    assert "must be an http(s) URL" in capsys.readouterr().err
    assert main(["record", "--upstream", "https://api.anthropic.com", "--check"]) == EXIT_USAGE
    assert "--provider" in capsys.readouterr().err


def started(args: list[str], cwd: Path) -> tuple[subprocess.Popen[str], str, int]:
    """``replaykit record ARGS --json`` running: the process, its Anthropic base URL, its recorder's pid."""
    command = [sys.executable, "-m", "replaykit", "record", *args, "--json"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    base = json.loads(proc.stdout.readline())["anthropic"]
    children = [int(pid) for task in Path(f"/proc/{proc.pid}/task").iterdir()
                for pid in (task / "children").read_text().split()]
    [recorder] = [pid for pid in children
                  if b"replaykit.record.recorder" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    return proc, base, recorder


def gone(pid: int) -> bool:
    """True when ``pid`` has exited (a zombie left to an init that does not reap counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _written(path: Path) -> int:
    """How many interactions the cassette at ``path`` holds now (0 while there is none: writes are atomic, so
    a file there is always whole)."""
    return len(cassette.load(path).interactions) if path.exists() else 0


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the recorder process in /proc")
def test_a_recorder_killed_mid_session_exits_1_with_one_clear_line(tmp_path: Path) -> None:
    body = json.dumps(plain_body()).encode()
    with FakeProvider([PLAIN], repeat=True) as upstream:
        proc, base, recorder = started(["--upstream", upstream.url, "--provider", "anthropic", "--cassette",
                                        "kept.yaml"], tmp_path)
        try:
            assert httpx.post(f"{base}/v1/messages", content=body, timeout=30).status_code == 200
            deadline = time.monotonic() + 60
            while _written(tmp_path / "kept.yaml") < 1:  # the recorder's first write holding the exchange
                assert time.monotonic() < deadline
                time.sleep(0.02)
            os.kill(recorder, signal.SIGKILL)
            assert httpx.post(f"{base}/v1/messages", content=body, timeout=30).status_code == 200
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_FINDINGS and "Traceback" not in err, err
    assert "replaykit: error: the recorder stopped unexpectedly (exit code -9) after 1 exchanges" in err
    assert "kept.yaml holds its last complete write (1 interactions)" in err
    assert len(cassette.load(tmp_path / "kept.yaml").interactions) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.yaml"]  # no half-written file


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the recorder process in /proc")
def test_a_proxy_killed_mid_session_still_gets_what_it_forwarded_written(tmp_path: Path) -> None:
    bad = plain_body()  # a contract error in each: the recorder says it has taken each exchange
    bad["messages"] = [{"role": "user", "content": [{"type": "text", "text": "hi", "internal_id": 7}]}]
    body = json.dumps(bad).encode()
    with FakeProvider([PLAIN], repeat=True) as upstream:
        proc, base, recorder = started(["--upstream", upstream.url, "--provider", "anthropic", "--cassette",
                                        "orphan.yaml"], tmp_path)
        try:
            statuses = [httpx.post(f"{base}/v1/messages", content=body, timeout=30).status_code]
            deadline = time.monotonic() + 20
            while not (tmp_path / "orphan.yaml").exists():  # the first write: the next waits 0.5 s
                assert time.monotonic() < deadline
                time.sleep(0.01)
            statuses += [httpx.post(f"{base}/v1/messages", content=body, timeout=30).status_code
                         for _ in range(2)]
            assert proc.stderr is not None
            while "contract error: interactions[2]" not in proc.stderr.readline():
                pass  # the third exchange is in the recorder, not yet written
        finally:
            proc.kill()  # no chance to stop cleanly
            proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while not gone(recorder):  # it saw the proxy's end of the pipe close, wrote, and ended
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert statuses == [200] * 3
    assert len(cassette.load(tmp_path / "orphan.yaml").interactions) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["orphan.yaml"]
