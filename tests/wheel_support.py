"""A wheel of the checkout installed into a fresh venv, and the environment of a run outside the repository.

Shared by the tests that run what a user installs (``tests/test_package_data.py``, ``tests/test_readme.py``)
through the session fixture ``wheel_venv`` (``tests/conftest.py``): built once per test process (once per
xdist worker), a couple of seconds each.

The venv gets the wheel only (``--no-deps``): a run in it finds the dependencies through ``outside_env()``,
whose ``PYTHONPATH`` is the project venv's site-packages (offline and quick, where installing them from PyPI
would take minutes and the network).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]


class Installed(NamedTuple):
    """The fresh venv with the wheel installed: its ``python`` and its ``site`` packages."""

    python: Path
    site: Path

    @property
    def command(self) -> Path:
        """The installed ``replaykit`` console script."""
        return self.python.parent / "replaykit"


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    """The stdout of ``command``, which must exit 0."""
    return completed(*command, cwd=cwd, env=env, timeout=timeout).stdout


def completed(*command: str | Path, cwd: Path, env: dict[str, str] | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``command`` run to its end within ``timeout`` seconds; it must exit 0."""
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done


def install_wheel(work: Path) -> Installed:
    """Build a wheel of the checkout in ``work`` and install it into a fresh venv there."""
    # without hatchling in this venv, build makes an isolated environment and fetches it from the index
    isolation = ["--no-isolation"] if importlib.util.find_spec("hatchling") else []
    run(sys.executable, "-m", "build", "--wheel", *isolation, "--outdir", work / "dist", ROOT, cwd=work)
    [wheel] = (work / "dist").glob("replaykit_llm-*.whl")
    run(sys.executable, "-m", "venv", "--without-pip", work / "venv", cwd=work)
    python = work / "venv" / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel, cwd=work)
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=work).strip()
    return Installed(python, Path(purelib))


def outside_env() -> dict[str, str]:
    """The environment of a run outside the repository: the project venv's site-packages for the
    dependencies only, no PYTHON*, VIRTUAL_ENV or PYTEST_* variable of this run (an inner pytest is not an
    xdist worker)."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTHON", "VIRTUAL_ENV", "PYTEST_"))}
    return env | {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PYTHONNOUSERSITE": "1"}
