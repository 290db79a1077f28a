"""``replaykit serve``: base URLs printed, SIGINT / SIGTERM shut it down cleanly and write the journal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from recordings import recorded
from server_support import anthropic_request, bundled, raw_exchange

from replaykit import cassette, contracts
from replaykit.cli import EXIT_USAGE, main

pytestmark = pytest.mark.slow


@contextmanager
def _serve(*args: str) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "replaykit", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_prints_json_urls_and_writes_the_journal_on_a_signal(tmp_path: Path, sig: int) -> None:
    journal = tmp_path / "journal.jsonl"
    cassette = str(recorded("llm-anthropic__web_search_stream.yaml"))
    with _serve(
        cassette, "--json", "--journal", str(journal), "--fault", "status=529,nth=1,retry_after_ms=1"
    ) as proc:
        assert proc.stdout is not None
        urls = json.loads(proc.stdout.readline())
        assert set(urls) == {"anthropic", "openai", "azure", "gemini", "vertex", "cloudflare"}
        with (
            anthropic.Anthropic(base_url=urls["anthropic"], api_key="dummy", max_retries=1) as client,
            client.messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}]) as s,
        ):
            assert s.get_final_message().usage.server_tool_use is not None
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "replaykit serve: 2 requests, 0 unmatched, 0 interactions never served" in err
    entries = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()]
    assert [e["status"] for e in entries] == [529, 200]
    assert all(contracts.validate("replaykit.journal-entry", e) == [] for e in entries)


def test_serve_prints_one_line_per_provider(tmp_path: Path) -> None:
    cassette = str(recorded("llm-anthropic__web_search_stream.yaml"))
    with _serve(cassette, "--timing", "fixed:1", "--allow-unused") as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().split() for _ in range(7)]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)
    assert [line[0] for line in lines] == ["anthropic", "openai", "azure", "gemini", "vertex", "cloudflare",
                                           "journal"]
    assert lines[1][1].endswith("/v1") and lines[-1][1].endswith("/__replaykit/journal")
    assert proc.returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["absent.yaml"], "absent.yaml: no such cassette file or folder"),
        (["{cassette}", "--host", "10.1.2.3"], "is not a loopback address"),
        (["{cassette}", "--fault", "kind=explode"], "kind='explode' must be one of"),
        (["{cassette}", "--faults", "{bad_faults}"], "bad.yaml:/0: a fault must be an object"),
        (["{cassette}", "--timing", "slow"], "must be fast, recorded or fixed:<ms>"),
        (["{cassette}", "--match-on", "colour"], "unknown matcher 'colour'"),
        (["{cassette}", "--port", "x"], "invalid int value"),
        (["{cassette}", "--journal", "{folder}"], "is a folder; give a file path"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: Any, args: list[str], message: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- 3\n", encoding="utf-8")
    values = {
        "cassette": str(recorded("llm-anthropic__web_search_stream.yaml")),
        "bad_faults": str(bad),
        "folder": str(tmp_path),
    }
    assert main(["serve", *(arg.format(**values) for arg in args)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_an_unwritable_journal_path_is_refused_before_serving(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder" / "journal.jsonl"
    assert main(["serve", str(bundled("anthropic/web_search.yaml")), "--journal", str(missing)]) == EXIT_USAGE
    assert not missing.parent.exists()  # nothing created on a typo


def test_a_broken_cassette_is_a_usage_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\ninteractions: [", encoding="utf-8")
    assert main(["serve", str(broken)]) == EXIT_USAGE


def _entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_killed_server_keeps_every_entry_it_completed(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    cassette = str(bundled("anthropic/web_search.yaml"))
    with _serve(cassette, "--json", "--repeat", "--journal", str(journal)) as proc:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["anthropic"]
        for _ in range(3):
            httpx.post(f"{url}/v1/messages", json={"model": "m"})
        proc.kill()  # SIGKILL: no clean exit, no chance to write anything more
        proc.wait(timeout=20)
    entries = _entries(journal)
    assert [e["seq"] for e in entries] == [1, 2, 3]
    assert all(contracts.validate("replaykit.journal-entry", e) == [] for e in entries)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.jsonl"]


def test_malformed_requests_print_nothing_and_are_journaled_once(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    cassette = str(bundled("anthropic/web_search.yaml"))
    bad = [b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n",
           b"POST /v1/messages HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n",
           b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n"]
    with _serve(cassette, "--json", "--journal", str(journal)) as proc:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["anthropic"]
        replies = [raw_exchange(url, request) for request in bad]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert all(b" 400 Bad Request\r\n" in reply for reply in replies)
    assert "Error handling request" not in err and "Traceback" not in err
    assert err.count("\n") == 1  # the summary line alone
    assert [e["verdict"] for e in _entries(journal)] == ["malformed"] * 4  # one packet, one parse error


def test_the_limits_and_journal_bodies_are_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replaykit.cli import serve

    args = ["serve", str(bundled("anthropic/web_search.yaml")), "--header-timeout", "5", "--body-timeout",
            "7.5", "--max-connections", "9", "--journal-bodies", "full", "--body-deadline", "30"]
    built: list[Any] = []
    monkeypatch.setattr(serve, "run", lambda parsed: built.append(serve.build(parsed)) or 0)
    assert main(args) == 0
    fake = built[0]
    assert (fake.limits.header_timeout, fake.limits.body_timeout, fake.limits.max_connections) == (5, 7.5, 9)
    assert fake.limits.body_deadline == 30
    assert fake.journal_bodies == "full"
    assert fake.lane is True


def test_no_lane_serves_everything_through_aiohttp(monkeypatch: pytest.MonkeyPatch) -> None:
    from replaykit.cli import serve

    built: list[Any] = []
    monkeypatch.setattr(serve, "run", lambda parsed: built.append(serve.build(parsed)) or 0)
    assert main(["serve", str(bundled("anthropic/web_search.yaml")), "--no-lane"]) == 0
    assert built[0].lane is False


def test_serve_help_names_the_new_flags(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    flags = ("--header-timeout", "--body-timeout", "--body-deadline", "--max-connections", "--journal-bodies")
    for flag in flags:
        assert flag in out
    assert "as each request completes" in out


# ---------------------------------------------------------------- what serve says, and its exit code


def _stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> str:
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err
    return err


def _url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return str(json.loads(proc.stdout.readline())["anthropic"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_exits_1_after_an_unmatched_request(sig: int) -> None:
    with _serve(str(bundled("anthropic/web_search.yaml")), "--json", "--strict") as proc:
        url = _url(proc)
        assert httpx.post(f"{url}/v1/messages", json={"model": "m"}).status_code == 404
        err = _stop(proc, sig)
    assert proc.returncode == 1
    summary = err.splitlines()[-1]
    assert summary.startswith("replaykit serve: 1 request, 1 unmatched, 1 interaction never served; exit 1: "
                              "1 request matched no interaction, 1 interaction never served")
    assert "replaykit serve: #1 POST /v1/messages 404 unmatched: " in err  # said as it happened, too


def test_an_unmatched_request_is_counted_even_after_a_reset() -> None:
    with _serve(str(bundled("anthropic/web_search.yaml")), "--json", "--strict", "--allow-unused") as proc:
        url = _url(proc)
        httpx.post(f"{url}/v1/messages", json={"model": "m"})
        httpx.post(f"{url}/__replaykit/reset")
        err = _stop(proc)
    assert proc.returncode == 1 and "exit 1: 1 request matched no interaction" in err


@pytest.mark.parametrize(("flags", "code"), [([], 1), (["--allow-unused"], 0)])
def test_an_interaction_never_served_exits_1_unless_allowed(flags: list[str], code: int) -> None:
    with _serve(str(bundled("anthropic/web_search_follow_up.yaml")), "--json", *flags) as proc:
        body = cassette.load(bundled("anthropic/web_search_follow_up.yaml")).interactions[0].request.json()
        assert httpx.post(f"{_url(proc)}/v1/messages", json=body).status_code == 200
        err = _stop(proc)
    assert proc.returncode == code
    summary = err.splitlines()[-1]
    assert summary.startswith("replaykit serve: 1 request, 0 unmatched, 1 interaction never served")
    assert ("exit 1: 1 interaction never served (pass --allow-unused to allow that)" in err) is (code == 1)


def test_a_request_served_by_another_body_is_said_on_stderr_as_it_happens() -> None:
    with _serve(str(bundled("anthropic/web_search.yaml")), "--json") as proc:
        httpx.post(f"{_url(proc)}/v1/messages", json={**anthropic_request(), "model": "claude-other"})
        err = _stop(proc)
    assert proc.returncode == 0
    line = next(line for line in err.splitlines() if "#1" in line)
    assert line.startswith("replaykit serve: #1 POST /v1/messages 200 served ")
    assert 'web_search.yaml#0; the body differs: /model: sent "claude-other", recorded "claude-sonnet-4-6"' \
        in line


def test_verbose_prints_a_line_per_request() -> None:
    search = str(bundled("anthropic/web_search.yaml"))
    with _serve(search, "--json", "-v", "--fault", "status=529,nth=1,retry_after=0") as proc:
        url = _url(proc)
        body = cassette.load(bundled("anthropic/web_search.yaml")).interactions[0].request.json()
        statuses = [httpx.post(f"{url}/v1/messages", json=body).status_code for _ in range(3)]
        err = _stop(proc)
    assert statuses == [529, 200, 404]
    lines = [line for line in err.splitlines() if line.startswith("replaykit serve: #")]
    assert [line.split()[2:6] for line in lines] == [["#1", "POST", "/v1/messages", "529"],
                                                    ["#2", "POST", "/v1/messages", "200"],
                                                    ["#3", "POST", "/v1/messages", "404"]]
    assert lines[0].endswith("fault; faults: status") and "served " in lines[1] and "unmatched" in lines[2]
