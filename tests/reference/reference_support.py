"""Driving the reference harness against a fake provider, in-process, with the scenario fixtures.

``Case`` holds what a test needs: the scenario's cassette and stored transcript (``scenarios/``), the input it
runs, the files of its work folder and the faults injected. ``drive(case, mutant=...)`` runs
:func:`replaykit.reference.run` with the target protocol's environment and returns the outcome and the
journal (full bodies).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from replaykit.resources import data_dir
from replaykit.server import Entry, FakeProvider

SCENARIOS = data_dir("scenarios")
Json = dict[str, Any]
READ_TOOL = {"type": "function", "name": "read", "description": "Read a text file of the work folder.",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                            "required": ["path"]}}
TASK_TOOL = {"type": "function", "name": "task", "description": "Start a sub-agent on a prompt.",
             "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}},
                            "required": ["prompt"]}}
WAIT_TOOL = {"type": "function", "name": "task_wait", "description": "Wait for sub-tasks; their answers.",
             "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}
SEARCH_TOOL = {"type": "hostedSearch", "maxUses": 5}
NOTES = "# notes\nPython 3.13 was released in October 2024.\n"


def stored(name: str) -> Json:
    """The stored transcript ``scenarios/transcripts/<name>.json``."""
    return json.loads((SCENARIOS / "transcripts" / f"{name}.json").read_text(encoding="utf-8"))


def step(prompt: str, provider: str = "anthropic", model: str = "claude-sonnet-4-6", **extra: Any) -> Json:
    """One step of a target input."""
    return {"prompt": prompt, "provider": provider, "model": model, **extra}


@dataclass
class Case:
    """One end-to-end case: the scenario fixture it is served, its input, work files and faults."""

    name: str
    steps: list[Json]
    transcript: Json | None = None
    tools: list[Json] = field(default_factory=lambda: [SEARCH_TOOL])
    faults: list[str] = field(default_factory=list)
    cassette: bool = True
    extra: Json = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=lambda: {"notes.md": NOTES})

    def input(self) -> Json:
        """The target input (contracts/replaykit/target-input.schema.json, with the runner's additions)."""
        return {"scenario": self.name, "transcript": copy.deepcopy(self.transcript), "steps": self.steps,
                "tools": self.tools, "contextWindow": 200000, "reserve": 4096, "idleTimeoutMs": 2000,
                "maxRetries": 2, "system": None, **self.extra}


@dataclass
class Result:
    """What a run gave: the outcome, the journal, and the state folder (the store)."""

    outcome: Json
    journal: list[Entry]
    state: Path

    def bodies(self) -> list[Json]:
        """The journaled request bodies, in order."""
        return [entry.body for entry in self.journal]

    def persisted(self) -> Json:
        """The transcript in the store."""
        return json.loads((self.state / "transcript.json").read_text(encoding="utf-8"))


def cassette_of(name: str) -> list[Path]:
    """The scenario's cassette, when it has one."""
    path = SCENARIOS / "cassettes" / f"{name}.yaml"
    return [path] if path.is_file() else []


def serve(case: Case) -> FakeProvider:
    """A started fake provider serving ``case`` (stop it when done)."""
    fake = FakeProvider(cassette_of(case.name) if case.cassette else [], journal_bodies="full").start()
    for fault in case.faults:
        fake.inject(fault)
    return fake


def environ(monkeypatch: pytest.MonkeyPatch, fake: FakeProvider, work: Path, state: Path,
            mutant: str | None) -> None:
    """The target protocol's environment, in this process."""
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("REPLAYKIT_STATE_DIR", str(state))
    if mutant:
        monkeypatch.setenv("REPLAYKIT_MUTANT", mutant)
    else:
        monkeypatch.delenv("REPLAYKIT_MUTANT", raising=False)
    monkeypatch.chdir(work)


def folders(tmp_path: Path, case: Case, tag: str) -> tuple[Path, Path]:
    """A fresh work folder holding the case's files, and a fresh state folder."""
    work, state = tmp_path / f"work-{tag}", tmp_path / f"state-{tag}"
    work.mkdir()
    state.mkdir()
    for relative, text in case.files.items():
        (work / relative).write_text(text, encoding="utf-8")
    return work, state


def drive(case: Case, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mutant: str | None = None) -> Result:
    """Run the reference (or one of its mutants) on ``case``; the outcome and the journal."""
    from replaykit.reference import run

    work, state = folders(tmp_path, case, mutant or "reference")
    fake = serve(case)
    try:
        with monkeypatch.context() as patched:
            environ(patched, fake, work, state, mutant)
            outcome = run(case.input())
    finally:
        fake.stop()
    return Result(outcome, list(fake.journal), state)


def blocks(body: Json, kind: str) -> list[Json]:
    """Every Anthropic content block of ``kind`` in a request body."""
    return [block for message in body.get("messages", []) if isinstance(message.get("content"), list)
            for block in message["content"] if block.get("type") == kind]
