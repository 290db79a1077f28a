"""The wheel ships contracts/, cassettes/ and scenarios/: a non-editable install finds them as package data,
and its console script finds the bundled cassettes by name (``cassettes``, ``show``, ``verify``, ``serve``).

With the wheel of the checkout installed (``--no-deps``) into a fresh venv (the ``wheel_venv`` fixture:
``tests/wheel_support.py``), from a folder outside the repository and with only the project venv's
site-packages on PYTHONPATH for the dependencies, asks the installed ``replaykit.resources.data_dir`` where
each folder is and runs the installed ``replaykit`` command, each run bounded by a timeout.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from wheel_support import Installed, completed, outside_env, run

from replaykit import cassette
from replaykit.resources import data_dir

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("contracts", "cassettes", "scenarios")
PROBE = """
import json, sys
import replaykit
from replaykit import cassette
from replaykit.resources import data_dir
found = {kind: str(data_dir(kind)) for kind in ("contracts", "cassettes", "scenarios")}
files = {kind: sorted(str(p.relative_to(data_dir(kind))) for p in data_dir(kind).rglob("*") if p.is_file())
         for kind in found}
bundled = cassette.iter_paths([data_dir("cassettes")])
loaded = [len(cassette.load(path).interactions) for path in bundled]
json.dump({"module": replaykit.__file__, "dirs": found, "files": files, "loaded": loaded}, sys.stdout)
"""


STREAM = "anthropic/web_search_stream.yaml"


def source_files(kind: str) -> list[str]:
    folder = ROOT / kind
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def test_data_dirs_resolve_inside_the_installed_package(wheel_venv: Installed, tmp_path: Path) -> None:
    python, site = wheel_venv
    report = json.loads(run(python, "-c", PROBE, cwd=tmp_path, env=outside_env()))
    assert Path(report["module"]).parent == site / "replaykit", "imported the checkout, not the wheel"
    for kind in KINDS:
        assert Path(report["dirs"][kind]) == site / "replaykit" / "_data" / kind
        assert report["files"][kind] == source_files(kind)
        assert any(name.endswith((".yaml", ".json")) for name in report["files"][kind]), kind
    assert report["loaded"] and all(count > 0 for count in report["loaded"])


def test_the_installed_command_lists_and_shows_the_bundled_cassettes(wheel_venv: Installed,
                                                                     tmp_path: Path) -> None:
    python, site = wheel_venv
    command, bundled = python.parent / "replaykit", site / "replaykit" / "_data" / "cassettes"
    assert run(command, "--version", cwd=tmp_path, env=outside_env(), timeout=60).startswith("replaykit 0.")
    listed = run(command, "cassettes", cwd=tmp_path, env=outside_env(), timeout=60).splitlines()
    assert len(listed) == 2 + len(cassette.iter_paths([data_dir("cassettes")]))
    assert any(line.startswith(f"{STREAM} ") for line in listed) and f" in {bundled};" in listed[-1]
    shown = completed(command, "show", STREAM, cwd=tmp_path, env=outside_env(), timeout=60)
    assert "interactions[0] (line 16): POST /v1/messages  route anthropic.messages" in shown.stdout
    assert shown.stderr == f"replaykit: {STREAM}: not found here; using the bundled {bundled / STREAM}\n"
    run(command, "verify", STREAM, cwd=tmp_path, env=outside_env(), timeout=60)


def test_the_installed_command_serves_a_bundled_cassette(wheel_venv: Installed, tmp_path: Path) -> None:
    python, _ = wheel_venv
    body = cassette.load(data_dir("cassettes") / STREAM).interactions[0].request.json()
    with subprocess.Popen([python.parent / "replaykit", "serve", STREAM, "--json"], cwd=tmp_path,
                          env=outside_env() | {"PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            urls = json.loads(proc.stdout.readline())
            reply = httpx.post(urls["anthropic"] + "/v1/messages", json=body, timeout=30)
            assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
            assert reply.text.rstrip().endswith('"type":"message_stop"}')
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"replaykit: {STREAM}: not found here; using the bundled " in err
