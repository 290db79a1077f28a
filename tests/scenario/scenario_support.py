"""Helpers of the scenario tests: the tiny target (``tiny_target.py``) and scenario files written to a temp
folder (with a copy of the bundled Anthropic and OpenAI web search cassettes beside them)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FUNCTION = "python:tiny_target:run"
COMMAND = f"{sys.executable} {HERE / 'tiny_target.py'}"
ANTHROPIC = "cassettes/anthropic.yaml"
OPENAI = "cassettes/openai.yaml"
STEP = {"prompt": "When was Python 3.13 released?", "provider": "anthropic", "model": "claude-sonnet-4-6"}


def tiny_target_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python target's module is found by the child process (and the checkout's replaykit)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(HERE)]))
    monkeypatch.delenv("REPLAYKIT_MUTANT", raising=False)


def scenario_doc(name: str = "one-step", **changes: Any) -> dict[str, Any]:
    """A scenario that passes on the tiny target: one Anthropic step, one request, one write."""
    doc: dict[str, Any] = {
        "name": name, "kind": "contract", "description": "One step.", "cassettes": [ANTHROPIC],
        "steps": [dict(STEP)],
        "expectations": {"outcome": "ok", "providerRequests": 1, "persistWrites": 1},
    }
    doc.update(changes)
    return doc


def write_scenario(folder: Path, doc: dict[str, Any], file: str | None = None) -> Path:
    """``doc`` as ``folder/<name>.yaml``, the cassettes it names copied beside it."""
    cassettes = folder / "cassettes"
    if not cassettes.exists():
        cassettes.mkdir(parents=True)
        shutil.copy(ROOT / "cassettes" / "anthropic" / "web_search.yaml", folder / ANTHROPIC)
        shutil.copy(ROOT / "cassettes" / "openai" / "web_search.yaml", folder / OPENAI)
    path = folder / (file or f"{doc['name']}.yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path
