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
import pytest
from recordings import recorded
from server_support import bundled

from replaykit import contracts
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
        assert set(urls) == {"anthropic", "openai", "azure", "cloudflare"}
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
    with _serve(str(recorded("llm-anthropic__web_search_stream.yaml")), "--timing", "fixed:1") as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().split() for _ in range(5)]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)
    assert [line[0] for line in lines] == ["anthropic", "openai", "azure", "cloudflare", "journal"]
    assert lines[1][1].endswith("/v1") and lines[4][1].endswith("/__replaykit/journal")
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
