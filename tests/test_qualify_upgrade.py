"""Qualifying an upgrade of ``anthropic``: a report made with an older release in a second venv, then
``--baseline-report`` from this environment lists the version change and the verdicts that changed.

The second venv is this one's packages (a ``.pth`` file naming this environment's site-packages) with
``anthropic`` at :data:`OLDER` installed over them, offline first: from the wheels in
``$REPLAYKIT_WHEELHOUSE`` (default ``.cache/wheels/`` in the repository, ignored by git), else from the
package index (pip's own cache first), the wheels kept in the wheelhouse for the next run. With neither, the
test is skipped and says why. ``OLDER`` is the lowest release the test extra allows (``anthropic>=0.70``): it
lacks SDK types the contracts map, which ``drift`` reports as ``sdk-missing`` gaps, and it cannot parse
content blocks the provider sends (web fetch and code execution results), which ``drift`` reports as
blocking ``unparsed`` gaps naming the block type and the SDK version: that qualification fails, the
upgrade's passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path
from typing import Any

import pytest

from replaykit.cli import EXIT_FINDINGS, EXIT_OK
from replaykit.resources import data_dir

pytestmark = pytest.mark.slow

OLDER = "0.70.0"
ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--scenarios", str(data_dir("scenarios") / "retry-529.yaml"), "--mutant", "no-retry-on-529",
         "--max-examples", "5"]


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=300)


def older_anthropic_venv(folder: Path) -> Path:
    """A venv with this environment's packages and ``anthropic`` at :data:`OLDER`; its python."""
    venv.EnvBuilder(with_pip=False).create(folder)
    python = folder / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([str(python), "-c", where],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "replaykit-base.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    wheels = Path(os.environ.get("REPLAYKIT_WHEELHOUSE", ROOT / ".cache" / "wheels"))
    wanted = f"anthropic=={OLDER}"
    offline = _pip(python, "install", "--no-index", "--find-links", str(wheels), wanted)
    if offline.returncode != 0:
        wheels.mkdir(parents=True, exist_ok=True)
        fetched = _pip(python, "download", "--no-deps", "--dest", str(wheels), wanted, "distro")
        online = _pip(python, "install", "--find-links", str(wheels), wanted)
        if online.returncode != 0:
            why = (online.stderr or fetched.stderr).strip().splitlines()[-1:]
            pytest.skip(f"{wanted} is not in {wheels} and the package index cannot be reached: {why}")
    return python


def qualify(python: Path, out: Path, *more: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run([str(python), "-m", "replaykit", "qualify", "--out", str(out), *SMALL, *more],
                          env=env, capture_output=True, text=True, timeout=600)
    return done, json.loads((out / "report.json").read_text(encoding="utf-8"))


def test_an_upgrade_of_anthropic_lists_the_version_change_and_the_verdict_changes(tmp_path: Path) -> None:
    older = older_anthropic_venv(tmp_path / "older")
    before_run, before = qualify(older, tmp_path / "before")
    assert before_run.returncode == EXIT_FINDINGS, before_run.stdout + before_run.stderr
    assert before["environment"]["packages"]["anthropic"] == OLDER
    verdicts = before["sections"]["drift"]["verdicts"]
    assert any(name.startswith("anthropic/") and "sdk-missing" in name for name in verdicts)
    unparsed = {name for name, verdict in verdicts.items() if " unparsed: " in name and verdict == "blocking"}
    said = f"type 'web_fetch_tool_result': the provider sends it and anthropic {OLDER} has no model for it"
    assert any(said in name for name in unparsed), sorted(unparsed)

    after_run, after = qualify(Path(sys.executable), tmp_path / "after", "--baseline-report",
                               str(tmp_path / "before" / "report.json"))
    assert after_run.returncode == EXIT_OK, after_run.stdout + after_run.stderr
    installed = after["environment"]["packages"]["anthropic"]
    assert installed != OLDER
    assert {"name": "anthropic", "from": OLDER, "to": installed} in after["dependencies"]
    gone = [c for c in after["changes"]["verdicts"] if c["section"] == "drift" and "sdk-missing" in c["name"]]
    assert gone and all(c["from"] == "info" and c["to"] is None and not c["flipped"] for c in gone)
    parsed = [c for c in after["changes"]["verdicts"]
              if c["section"] == "drift" and " unparsed: " in c["name"]]
    assert parsed and all(c["from"] == "blocking" and c["to"] is None for c in parsed)
    assert after["changes"]["hashes"] == []  # same inputs: only the SDK changed
    assert f"  version anthropic: {OLDER} -> {installed}" in after_run.stdout.splitlines()
    md = (tmp_path / "after" / "report.md").read_text(encoding="utf-8")
    assert f"| `anthropic` | {OLDER} | {installed} |" in md
    assert md.index("## Changes since the baseline report") < md.index("## Checks")
