"""The reference target: a small, correct agent harness built on replaykit's library, and its mutants.

It speaks the target protocol: :func:`run` takes a target input and returns the outcome (their contracts under
``contracts/replaykit/``); ``python -m replaykit.reference`` does the same with the files of
``REPLAYKIT_INPUT`` and ``REPLAYKIT_OUTCOME``. Requests go over httpx as raw wire data (no provider SDK).
Each step restores, validates, rebuilds, projects, checks, estimates, requests, parses, appends and persists;
a ``research`` step runs :mod:`~replaykit.reference.research`. The parts (harness, steps, wire, tools,
websearch, mutants) and the steps in full are in docs/architecture/reference.md.
"""

from __future__ import annotations

from replaykit.reference.defects import MUTANTS, mutant
from replaykit.reference.harness import run, run_async

__all__ = ["MUTANTS", "mutant", "run", "run_async"]
