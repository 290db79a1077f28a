"""The named mutants of the reference harness: each a real defect of its class, switched on by name.

``REPLAYKIT_MUTANT=<name>`` makes the harness run with that one defect: the code asks :func:`mutant` at the
exact place the defect lives (``if mutant("retry-on-400"): ...``). :data:`MUTANTS` names them, read from the
reference's manifest (``replaykit-target.yaml`` beside this module); their names are the defect classes the
bundled scenarios' ``kills:`` name. The environment is read on every call; each name asked about is listed in
``$REPLAYKIT_MUTANTS_ASKED`` when the runner sets it (:mod:`replaykit.scenario.mutants` reads it).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from replaykit.errors import UsageError

__all__ = ["ASKED", "ENV", "MANIFEST", "MUTANTS", "active", "defect_classes", "mutant"]

ENV = "REPLAYKIT_MUTANT"
ASKED = "REPLAYKIT_MUTANTS_ASKED"

MANIFEST = Path(__file__).with_name("replaykit-target.yaml")


def _mutants() -> dict[str, str]:
    """The reference's mutants and their defects, from its manifest (the one place they are written)."""
    with MANIFEST.open("rb") as handle:
        manifest = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return {name: spec["defect"] for name, spec in manifest["mutants"].items()}


#: name -> the defect, in one sentence (the reference's manifest, ``replaykit-target.yaml``, holds them).
MUTANTS: dict[str, str] = _mutants()


def defect_classes() -> frozenset[str]:
    """The defect classes a scenario's ``kills:`` may name: the reference's mutants."""
    return frozenset(MUTANTS)


def active() -> str | None:
    """The mutant named by ``REPLAYKIT_MUTANT`` (None when unset or empty); an unknown name is a
    :class:`~replaykit.errors.UsageError` listing the known ones."""
    name = os.environ.get(ENV, "").strip()
    if not name:
        return None
    if name not in MUTANTS:
        raise UsageError(f"{ENV}={name!r} is no mutant of the reference; use one of: {', '.join(MUTANTS)}")
    return name


def mutant(name: str) -> bool:
    """True when the harness runs as mutant ``name`` (a name of :data:`MUTANTS`, checked)."""
    if name not in MUTANTS:
        raise UsageError(f"mutant({name!r}): no such mutant; use one of: {', '.join(MUTANTS)}")
    _tell(name)
    return active() == name


_TOLD: set[tuple[str, str]] = set()


def _tell(name: str) -> None:
    """List ``name`` in ``$REPLAYKIT_MUTANTS_ASKED`` (once a file and name)."""
    path = os.environ.get(ASKED, "")
    if path and (path, name) not in _TOLD:
        _TOLD.add((path, name))
        with open(path, "a", encoding="utf-8") as listed:
            listed.write(name + "\n")
