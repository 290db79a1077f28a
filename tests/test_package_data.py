"""The wheel ships contracts/, cassettes/ and scenarios/: a non-editable install finds them as package data,
and its console script finds the bundled cassettes by name (``cassettes``, ``show``, ``verify``, ``serve``).

Builds a wheel of the checkout, installs it (``--no-deps``) into a fresh venv made with this interpreter,
then, from a folder outside the repository and with only the project venv's site-packages on PYTHONPATH
(for the dependencies: offline and quick, where installing them from PyPI would take minutes and the
network), asks the installed ``replaykit.resources.data_dir`` where each folder is and runs the installed
``replaykit`` command, each run bounded by a timeout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import httpx
import pytest

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


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    return completed(*command, cwd=cwd, env=env, timeout=timeout).stdout


def completed(*command: str | Path, cwd: Path, env: dict[str, str] | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done


def source_files(kind: str) -> list[str]:
    folder = ROOT / kind
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's python, its site-packages) with the wheel installed."""
    work = tmp_path_factory.mktemp("wheel")
    # without hatchling in this venv, build makes an isolated environment and fetches it from the index
    isolation = ["--no-isolation"] if importlib.util.find_spec("hatchling") else []
    run(sys.executable, "-m", "build", "--wheel", *isolation, "--outdir", work / "dist", ROOT, cwd=work)
    [wheel] = (work / "dist").glob("replaykit-*.whl")
    run(sys.executable, "-m", "venv", "--without-pip", work / "venv", cwd=work)
    python = work / "venv" / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel, cwd=work)
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=work).strip()
    return python, Path(purelib)


def outside_env() -> dict[str, str]:
    """The environment of a run outside the repository: the project venv's site-packages for the
    dependencies only, no PYTHON* or VIRTUAL_ENV variable of this run."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return env | {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PYTHONNOUSERSITE": "1"}


def test_data_dirs_resolve_inside_the_installed_package(installed: tuple[Path, Path], tmp_path: Path) -> None:
    python, site = installed
    report = json.loads(run(python, "-c", PROBE, cwd=tmp_path, env=outside_env()))
    assert Path(report["module"]).parent == site / "replaykit", "imported the checkout, not the wheel"
    for kind in KINDS:
        assert Path(report["dirs"][kind]) == site / "replaykit" / "_data" / kind
        assert report["files"][kind] == source_files(kind)
        assert any(name.endswith((".yaml", ".json")) for name in report["files"][kind]), kind
    assert report["loaded"] and all(count > 0 for count in report["loaded"])


def test_the_installed_command_lists_and_shows_the_bundled_cassettes(installed: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    python, site = installed
    command, bundled = python.parent / "replaykit", site / "replaykit" / "_data" / "cassettes"
    assert run(command, "--version", cwd=tmp_path, env=outside_env(), timeout=60).startswith("replaykit 0.")
    listed = run(command, "cassettes", cwd=tmp_path, env=outside_env(), timeout=60).splitlines()
    assert len(listed) == 2 + len(cassette.iter_paths([data_dir("cassettes")]))
    assert any(line.startswith(f"{STREAM} ") for line in listed) and f" in {bundled};" in listed[-1]
    shown = completed(command, "show", STREAM, cwd=tmp_path, env=outside_env(), timeout=60)
    assert "interactions[0] (line 16): POST /v1/messages  route anthropic.messages" in shown.stdout
    assert shown.stderr == f"replaykit: {STREAM}: not found here; using the bundled {bundled / STREAM}\n"
    run(command, "verify", STREAM, cwd=tmp_path, env=outside_env(), timeout=60)


def test_the_installed_command_serves_a_bundled_cassette(installed: tuple[Path, Path],
                                                         tmp_path: Path) -> None:
    python, _ = installed
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
