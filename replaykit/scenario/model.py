"""The scenario model, and reading scenario files: YAML checked against
``contracts/replaykit/scenario.schema.json``.

:func:`load` reads one file (YAML the cassette's way: :func:`replaykit.cassette.read_yaml`), validates it and
resolves its paths; :func:`discover` turns the command line's ``SCENARIO|DIR...`` into files (a folder: the
``*.yaml`` / ``*.yml`` files directly in it, not its ``cassettes/`` or ``transcripts/``). A bad file is a
:class:`~replaykit.errors.ScenarioError` naming ``file:line``, the JSON pointer and the fix, never a
traceback.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replaykit import cassette, contracts
from replaykit.cassette import read_yaml, yaml_line
from replaykit.errors import CassetteError, ScenarioError, UsageError, located
from replaykit.jsondoc import JSON
from replaykit.pointer import json_pointer, pointer_parts
from replaykit.scenario.capabilities import MANIFEST_NAMES, requirements
from replaykit.scenario.formats import CancelOn, ScenarioDoc, TargetInput
from replaykit.server.faults import Fault

__all__ = ["MAX_FILE", "RUNNER_KEYS", "Scenario", "discover", "load", "load_all"]

RUNNER_KEYS = ("restart", "cancelOn")  # a scenario step's keys the runner keeps from the target's input
MAX_FILE = 8 << 20  # bytes: a scenario is a page of YAML; more is a mistake (a cassette named as a scenario)


@dataclass(frozen=True)
class Scenario:
    """One scenario as loaded: the document (``doc``, defaults not filled in), where it came from, and the
    parts the runner needs resolved (cassette paths, the stored transcript, the faults)."""

    path: Path
    doc: ScenarioDoc
    cassettes: tuple[Path, ...] = ()
    transcript: JSON | None = None
    faults: tuple[Fault, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def named(cls, path: Path, name: str, kind: str = "", kills: Iterable[str] = ()) -> Scenario:
        """A scenario known by its name only (a report read back): no steps, no expectations."""
        doc: ScenarioDoc = {"name": name, "kind": kind, "description": "", "steps": [], "expectations": {}}
        if kills:
            doc["kills"] = list(kills)
        return cls(path, doc)

    @property
    def name(self) -> str:
        """The scenario's ``name``."""
        return self.doc["name"]

    @property
    def kind(self) -> str:
        """``regression`` or ``contract``."""
        return self.doc["kind"]

    @property
    def expectations(self) -> JSON:
        """The ``expectations`` mapping."""
        return self.doc["expectations"]

    @property
    def steps(self) -> list[JSON]:
        """The steps, as written (with ``restart``)."""
        return self.doc["steps"]

    @property
    def kills(self) -> tuple[str, ...]:
        """The mutants this scenario declares it kills."""
        return tuple(self.doc.get("kills", ()))

    @property
    def inputs(self) -> tuple[Path, ...]:
        """The files the scenario reads: the scenario file, its cassettes and its stored transcript file."""
        stored = self.doc.get("transcript")
        named = [self.path.parent / stored] if isinstance(stored, str) else []
        return tuple(dict.fromkeys([self.path, *self.cassettes, *(path for path in named if path.is_file())]))

    @property
    def kills_armed(self) -> int:
        """How many times a ``kill`` fault can fire: the restarts the runner makes at most."""
        return sum(fault.times for fault in self.faults if fault.kind == "kill")

    @functools.cached_property
    def needs(self) -> frozenset[str]:
        """What the scenario needs of a target (:func:`replaykit.scenario.capabilities.requirements`)."""
        return requirements(self.doc, self.cassettes, self.faults)

    @property
    def timeout(self) -> float:
        """The wall-clock budget of the whole scenario, in seconds (``timeoutMs``, default 60000)."""
        return int(self.doc.get("timeoutMs", 60000)) / 1000

    @functools.cached_property
    def waits(self) -> float:
        """The longest wait the scenario declares, in seconds, at most its timeout: the largest ``…Ms`` or
        ``ms`` number in its steps and faults (a cancel, a deadline, a delay): the runner starts it first."""
        found = [value for key, value in _numbers({"steps": self.steps, "faults": self.doc.get("faults", [])})
                 if key == "ms" or key.endswith("Ms")]
        return min(max(found, default=0) / 1000, self.timeout)

    def segments(self) -> list[tuple[int, list[JSON]]]:
        """The run segments: ``(index of the first step, the steps)``, split before each ``restart`` step;
        steps as the target input carries them (without the runner's own keys, :data:`RUNNER_KEYS`)."""
        found: list[tuple[int, list[JSON]]] = []
        for index, step in enumerate(self.steps):
            if not found or step.get("restart"):
                found.append((index, []))
            found[-1][1].append({key: value for key, value in step.items() if key not in RUNNER_KEYS})
        return found

    def cancel_on(self, index: int) -> CancelOn | None:
        """Step ``index``'s ``cancelOn``: the request whose arrival cancels the run (None: none)."""
        found: CancelOn | None = self.steps[index].get("cancelOn")
        return found

    def target_input(self, steps: list[JSON], first: bool) -> TargetInput:
        """The target input (``contracts/replaykit/target-input.schema.json``) of one segment: the stored
        transcript for the first, ``null`` (restore from the store) after a restart; every field written."""
        doc = self.doc
        return {
            "scenario": self.name,
            "transcript": self.transcript if first else None,
            "steps": steps,
            "tools": doc.get("tools", []),
            "contextWindow": doc.get("contextWindow", 200000),
            "reserve": doc.get("reserve", 16384),
            "idleTimeoutMs": doc.get("idleTimeoutMs", 30000),
            "maxRetries": doc.get("maxRetries", 2),
            "system": doc.get("system"),
            "recovery": doc.get("recovery"),
        }


def _numbers(value: object) -> Iterable[tuple[str, float]]:
    """Every ``(key, number)`` of a JSON value, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, int | float) and not isinstance(item, bool):
                yield str(key), float(item)
            else:
                yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)


def _fail(path: Path, text: str, pointer: str, message: str, fix: str) -> ScenarioError:
    line = yaml_line(text, pointer_parts(pointer)) if text else None
    where = f"{line} {pointer}" if line is not None and pointer else line if line is not None else pointer
    return ScenarioError(located(path, where, message, fix))


_FIXES = {
    "required": "add it (see contracts/replaykit/scenario.schema.json)",
    "additionalProperties": "remove or correct the misspelt key",
    "unevaluatedProperties": "remove or correct the misspelt key",
    "enum": "use one of the values the contract lists",
    "type": "give a value of the type the contract says",
}


def _read(path: Path) -> tuple[str, Any]:
    try:
        size = path.stat().st_size
        if size > MAX_FILE:
            raise ScenarioError(
                located(
                    path,
                    None,
                    f"{size:,} bytes: too large for a scenario file",
                    "a scenario is a page of YAML; name a scenario, not a cassette",
                )
            )
        data = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(
            located(path, None, f"cannot read: {exc.strerror or exc}", "check the path and its permissions")
        ) from exc
    try:
        doc = read_yaml(data, str(path))
    except CassetteError as exc:
        raise ScenarioError(str(exc)) from exc
    return data.decode("utf-8"), doc


def _validate(path: Path, text: str, doc: object) -> None:
    if not isinstance(doc, dict):
        raise _fail(
            path,
            text,
            "",
            "a scenario must be a YAML mapping",
            "start from scenarios/example-nameless-search-block.yaml",
        )
    found = [v for v in contracts.validate("replaykit.scenario", doc) if v.severity == "error"]
    if found:
        first = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise _fail(
            path,
            text,
            first.pointer,
            f"{first.pointer or '/'} {first.message}{more}",
            _FIXES.get(first.keyword, "see contracts/replaykit/scenario.schema.json"),
        )
    if doc["steps"][0].get("restart"):
        raise _fail(
            path,
            text,
            "/steps/0/restart",
            "the first step cannot restart: nothing ran before it",
            "remove `restart` or put it on a later step",
        )


def _inside(path: Path, text: str, pointer: str, relative: str) -> Path:
    resolved = path.parent / relative
    if not resolved.is_file():
        raise _fail(
            path,
            text,
            pointer,
            f"{relative}: no such file (relative to {path.parent})",
            "fix the path; paths are relative to the scenario file's folder",
        )
    return resolved


def _transcript(path: Path, text: str, doc: ScenarioDoc) -> JSON | None:
    stored = doc.get("transcript")
    if not isinstance(stored, str):
        return stored
    source = _inside(path, text, "/transcript", stored)
    try:
        loaded = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _fail(
            path, text, "/transcript", f"{stored}: not a JSON file ({exc})", "store the transcript as JSON"
        ) from exc
    if not isinstance(loaded, dict):
        raise _fail(
            path,
            text,
            "/transcript",
            f"{stored}: a transcript is a JSON object",
            "store the transcript object itself",
        )
    return loaded


def _faults(path: Path, text: str, doc: ScenarioDoc) -> tuple[Fault, ...]:
    faults = []
    for index, raw in enumerate(doc.get("faults", [])):
        pointer = json_pointer(["faults", index])
        try:
            faults.append(Fault.from_dict(raw, where=str(path), pointer=pointer))
        except UsageError as exc:  # the contract refuses these first; a fault's own checks are the backstop
            place, _, message = str(exc).removeprefix(f"{path}:").partition(": ")
            raise _fail(
                path, text, place, message, "see `replaykit serve --help` for the fault kinds"
            ) from exc
    return tuple(faults)


def _files(path: Path, text: str, doc: ScenarioDoc) -> dict[str, str]:
    files: dict[str, str] = dict(doc.get("files", {}))
    for name in files:
        if ".." in name.split("/"):
            raise _fail(
                path,
                text,
                json_pointer(["files", name]),
                f"{name}: a file outside the work folder",
                "name files inside the target's work folder, without `..`",
            )
    return files


def _cassettes(path: Path, text: str, doc: ScenarioDoc) -> tuple[Path, ...]:
    """The cassettes' paths, each read once here (a bad one is this scenario's error; the fake provider
    then loads it from the cassette cache)."""
    found = []
    for index, name in enumerate(doc.get("cassettes", [])):
        pointer = json_pointer(["cassettes", index])
        resolved = _inside(path, text, pointer, name)
        try:
            cassette.load(resolved)
        except CassetteError as exc:
            raise _fail(path, text, pointer, f"{name}: {exc}", "fix or record the cassette again") from exc
        found.append(resolved)
    return tuple(found)


def load(path: str | os.PathLike[str]) -> Scenario:
    """Read, validate and resolve one scenario file (see the module docstring)."""
    where = Path(path)
    text, raw = _read(where)
    _validate(where, text, raw)
    doc: ScenarioDoc = raw  # valid against the contract, whose keys are ScenarioDoc's (tested)
    return Scenario(
        where,
        doc,
        _cassettes(where, text, doc),
        _transcript(where, text, doc),
        _faults(where, text, doc),
        _files(where, text, doc),
    )


def discover(names: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The scenario files named on a command line: files as given, folders as the ``*.yaml`` / ``*.yml``
    files directly in them (sorted; a target manifest, ``replaykit-target.yaml``, is not one); a missing path
    or an empty folder is a usage error."""
    found: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()
                            and p.name not in MANIFEST_NAMES)
            if not inside:
                raise UsageError(
                    located(
                        path,
                        None,
                        "no scenario files (*.yaml) in this folder",
                        "name a folder of scenarios, e.g. scenarios/",
                    )
                )
            found += inside
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(located(path, None, "no such file or folder", "name a scenario file or folder"))
    return list(dict.fromkeys(found))


def load_all(names: Iterable[str | os.PathLike[str]]) -> list[Scenario]:
    """Every scenario the command line names (:func:`discover`), loaded; two with one name are an error."""
    scenarios = [load(path) for path in discover(names)]
    seen: dict[str, Path] = {}
    for scenario in scenarios:
        if scenario.name in seen:
            raise ScenarioError(
                located(
                    scenario.path,
                    "/name",
                    f"the name {scenario.name!r} is also the name of {seen[scenario.name]}",
                    "give every scenario its own name",
                )
            )
        seen[scenario.name] = scenario.path
    return scenarios
