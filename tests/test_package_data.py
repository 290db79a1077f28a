"""The wheel ships contracts/, cassettes/ and scenarios/: a non-editable install finds them as package data.

Builds a wheel of the checkout, installs it (``--no-deps``) into a fresh venv made with this interpreter,
then, from a folder outside the repository and with only the project venv's site-packages on PYTHONPATH
(for the dependencies), asks the installed ``replaykit.resources.data_dir`` where each folder is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

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


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


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


def test_data_dirs_resolve_inside_the_installed_package(installed: tuple[Path, Path], tmp_path: Path) -> None:
    python, site = installed
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env |= {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PYTHONNOUSERSITE": "1"}
    report = json.loads(run(python, "-c", PROBE, cwd=tmp_path, env=env))
    assert Path(report["module"]).parent == site / "replaykit", "imported the checkout, not the wheel"
    for kind in KINDS:
        assert Path(report["dirs"][kind]) == site / "replaykit" / "_data" / kind
        assert report["files"][kind] == source_files(kind)
        assert any(name.endswith((".yaml", ".json")) for name in report["files"][kind]), kind
    assert report["loaded"] and all(count > 0 for count in report["loaded"])
