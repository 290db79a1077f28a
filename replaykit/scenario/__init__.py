"""Scenarios: the format, the target protocol (runner side), the runner, reports, red→green and mutants.

A scenario (YAML, ``contracts/replaykit/scenario.schema.json``) names cassettes, a stored transcript, steps,
faults and expectations. The runner starts one loopback fake provider per scenario, runs the target (a
command, or ``python:module:function``) with the protocol's environment, reads its outcome and checks every
expectation against the outcome and the fake provider's journal (``run_scenario(load(path), target)``). The
parts: model, target, call, expect, snapshot, runner, report, redgreen, mutants; the example and the parts are
in docs/architecture/scenario.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replaykit.scenario.expect import Check, Evidence, check_all
    from replaykit.scenario.model import Scenario, discover, load, load_all
    from replaykit.scenario.runner import Result, run_jobs, run_many, run_scenario
    from replaykit.scenario.target import DEFAULT_TARGET, Target

# Imported on first use: a target run as ``python -m replaykit.scenario.call`` loads this package first, and
# must not pay for the fake provider (aiohttp) it never uses.
_HOMES = {
    "Check": "expect",
    "Evidence": "expect",
    "check_all": "expect",
    "Scenario": "model",
    "discover": "model",
    "load": "model",
    "load_all": "model",
    "Result": "runner",
    "run_jobs": "runner",
    "run_many": "runner",
    "run_scenario": "runner",
    "DEFAULT_TARGET": "target",
    "Target": "target",
}

__all__ = [
    "DEFAULT_TARGET",
    "Check",
    "Evidence",
    "Result",
    "Scenario",
    "Target",
    "check_all",
    "discover",
    "load",
    "load_all",
    "run_jobs",
    "run_many",
    "run_scenario",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'replaykit.scenario' has no attribute {name!r}")
    return getattr(importlib.import_module(f"replaykit.scenario.{_HOMES[name]}"), name)
