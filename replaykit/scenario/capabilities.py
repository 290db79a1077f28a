"""Capabilities: what a target has (its manifest) and what a scenario needs; lacking it makes a scenario n/a.

A target's manifest (``contracts/replaykit/target-manifest.schema.json``) is the file named by ``--manifest``,
else ``replaykit-target.yaml`` (``.yml``, ``.json``) beside the target's command (:func:`find_manifest`). A
scenario needs what it says in ``requires:`` and what its own parts show (:func:`requirements`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replaykit.errors import UsageError, located
from replaykit.jsondoc import JSON
from replaykit.pointer import pointer_parts
from replaykit.routes import MODEL_APIS, ROUTES
from replaykit.scenario.formats import ScenarioDoc

if TYPE_CHECKING:
    from replaykit.server.faults import Fault

__all__ = ["API_OF", "CALLS", "CAPABILITIES", "MANIFEST_NAMES", "OR", "Manifest", "Mutant", "find_manifest",
           "load_manifest", "recorded_forms", "requirements"]

#: The capability words (``tool:NAME`` besides them), each with what it means.
CAPABILITIES: dict[str, str] = {
    "anthropic-messages": "calls Anthropic Messages (a step on provider anthropic)",
    "openai-responses": "calls OpenAI Responses (a step on provider openai)",
    "azure-responses": "calls Azure OpenAI Responses (a step on provider azure)",
    "openai-chat": "calls OpenAI Chat Completions (a step on provider openai, api openai-chat)",
    "azure-chat": "calls Azure OpenAI Chat Completions (a step on provider azure, api openai-chat)",
    "gemini-generate": "calls the Gemini API's generateContent (a step on provider gemini)",
    "vertex-generate": "calls Vertex AI's Gemini generateContent (a step on provider vertex)",
    "stream": "sends streamed requests (the scenario's recordings are streams)",
    "non-stream": "sends plain, non-streamed requests (the scenario's recordings are not streams)",
    "hosted-search": "enables the provider's own web search tool (a hostedSearch tool)",
    "research": "runs research steps (a step's `research`)",
    "durable": "keeps durable turns: recovery, kills and restarts mid-turn, operationId receipts",
    "restart": "restores from its store in a new process (a step's `restart: true`)",
    "persisted-transcript": "persists the neutral transcript to $REPLAYKIT_STATE_DIR/transcript.json",
    "cancel": "cancels a step after its cancelAfterMs",
    "cancel-signal": "on SIGINT (sent at a step's cancelOn) cancels the run: aborted, CANCELLED, outcome "
                     "written",
    "estimates": "reports a token estimate before each request (the outcome's `estimates`)",
}
#: The capability of calling each provider on each of its APIs (a step's ``provider`` and ``api``).
CALLS = {("anthropic", "anthropic-messages"): "anthropic-messages",
         ("openai", "openai-responses"): "openai-responses", ("azure", "openai-responses"): "azure-responses",
         ("openai", "openai-chat"): "openai-chat", ("azure", "openai-chat"): "azure-chat",
         ("gemini", "gemini-generate"): "gemini-generate", ("vertex", "gemini-generate"): "vertex-generate"}
#: The capability of calling each provider on its default API (a step without ``api``).
API_OF = {provider: CALLS[provider, api] for provider, api in MODEL_APIS.items()}
MANIFEST_NAMES = ("replaykit-target.yaml", "replaykit-target.yml", "replaykit-target.json")
_TOOL_OF = {"task_wait": "task"}  # task and task_wait come together: the capability tool:task
_MODEL_ROUTES = tuple(route.name for route in ROUTES if route.api)
_SCHEMA = "contracts/replaykit/target-manifest.schema.json"
OR = " or "  # between the alternatives of one need: ``cancel or cancel-signal``


@dataclass(frozen=True)
class Mutant:
    """One named defect of a target: what it is, and the environment that switches it on."""

    name: str
    defect: str = ""
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Manifest:
    """What a target has. ``capabilities`` None: none declared (no manifest, or one naming only mutants), so
    every capability is taken as given."""

    path: Path | None = None
    name: str = ""
    capabilities: frozenset[str] | None = None
    mutants: Mapping[str, Mutant] = field(default_factory=dict)

    def missing(self, needed: Iterable[str]) -> tuple[str, ...]:
        """What of ``needed`` the target does not declare, in a stable order; a need of alternatives
        (``cancel or cancel-signal``, :data:`OR`) is met by any one of them."""
        if self.capabilities is None:
            return ()
        given = self.capabilities
        return tuple(sorted(need for need in set(needed) if given.isdisjoint(need.split(OR))))

    def declares(self, capability: str) -> bool:
        """True when the manifest names ``capability`` (not merely takes it as given: none declared)."""
        return self.capabilities is not None and capability in self.capabilities


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and check the manifest at ``path``; a bad one is a usage error naming the place and the fix."""
    where = Path(path)
    data, doc = _read(where)
    _check(where, data, doc)
    mutants = {name: Mutant(name, spec.get("defect", ""), dict(spec.get("env", {})))
               for name, spec in (doc.get("mutants") or {}).items()}
    given = doc.get("capabilities")
    return Manifest(where, str(doc.get("name", "")), None if given is None else frozenset(given), mutants)


def _read(where: Path) -> tuple[bytes, Any]:
    """The manifest's bytes and its YAML document (read the cassette's way: bounded, UTF-8 checked)."""
    from replaykit.cassette import read_yaml
    from replaykit.errors import CassetteError

    try:
        data = where.read_bytes()
        return data, read_yaml(data, str(where))
    except OSError as exc:
        raise UsageError(located(where, None, f"cannot read: {exc.strerror or exc}",
                                 "check the path given to --manifest")) from exc
    except CassetteError as exc:
        raise UsageError(str(exc)) from exc


def _check(where: Path, data: bytes, doc: object) -> None:
    """Refuse a document that is not a manifest: its first problem, at its line and JSON pointer."""
    from replaykit import contracts
    from replaykit.cassette import yaml_line

    if not isinstance(doc, dict):
        raise UsageError(located(where, None, "a manifest is a YAML mapping",
                                 f"write `capabilities: [...]` ({_SCHEMA})"))
    errors = [v for v in contracts.validate("replaykit.target-manifest", doc) if v.severity == "error"]
    found = _unknown_words(doc) + [(v.pointer, v.message, f"see {_SCHEMA}") for v in errors]
    if found:
        pointer, message, fix = found[0]
        line = yaml_line(data.decode("utf-8"), pointer_parts(pointer))
        place = f"{line} {pointer}" if line is not None and pointer else line or pointer
        raise UsageError(located(where, place or "/", message, fix))


def _unknown_words(doc: JSON) -> list[tuple[str, str, str]]:
    """A capability that is no word of :data:`CAPABILITIES` nor ``tool:NAME``: its pointer, what, the fix."""
    given = doc.get("capabilities")
    for index, word in enumerate(given if isinstance(given, list) else []):
        if isinstance(word, str) and word not in CAPABILITIES and not word.startswith("tool:"):
            return [(f"/capabilities/{index}", f"{word!r} is no capability",
                     f"use tool:NAME or one of {', '.join(CAPABILITIES)}")]
    return []


def _module_folder(module: str, search: Iterable[str]) -> Path | None:
    """The folder of Python module ``module`` (a package's own folder), looked up in ``search`` and then on
    ``sys.path`` without importing anything."""
    relative = Path(*module.split("."))
    for base in [*search, *sys.path]:
        candidate = Path(base or ".") / relative
        if (candidate / "__init__.py").is_file():
            return candidate
        if candidate.with_suffix(".py").is_file():
            return candidate.parent
    return None


def _folders(argv: Iterable[str], module: str | None, search: Iterable[str]) -> Iterator[Path]:
    """Where a target's manifest may lie: its module's folder, the folder of each file its command names."""
    search = list(search)
    words = list(argv)
    modules = [module] if module is not None else []
    modules += [words[i + 1] for i, word in enumerate(words[:-1]) if word == "-m"]
    for name in modules:
        found = _module_folder(name, search)
        if found is not None:
            yield found
    for index, word in enumerate(words):
        if index > 0 and not word.startswith("-") and os.path.isfile(word):
            yield Path(word).resolve().parent


def find_manifest(argv: Iterable[str], module: str | None = None, search: Iterable[str] = ()) -> Path | None:
    """The manifest beside a target: in the folder of its Python module (``python:module:function``, or
    ``-m module``; looked up in ``search``, then ``sys.path``), else of the first file its command line names
    that has one."""
    for folder in _folders(argv, module, search):
        for name in MANIFEST_NAMES:
            if (folder / name).is_file():
                return folder / name
    return None


# ---------------------------------------------------------------- what a scenario needs


def recorded_forms(cassettes: Iterable[Path]) -> dict[tuple[str, int], tuple[str, bool]]:
    """Each recorded model request of a scenario's ``cassettes``, by ``(cassette, index)``: its canonical key
    without ``stream`` (:func:`replaykit.canonical.canonical_key`) and whether it was recorded streamed. Two
    interactions of one key, one streamed and one not, are *twins*: one request recorded in both forms, so a
    target of either form is served (and the other twin is not expected to be)."""
    from replaykit import cassette
    from replaykit.canonical import canonical_key
    from replaykit.routes import classify_uri

    forms: dict[tuple[str, int], tuple[str, bool]] = {}
    for path in cassettes:
        for index, item in enumerate(cassette.load(path).interactions):
            route = classify_uri(item.request.method, item.request.uri)
            if route.name not in _MODEL_ROUTES:
                continue
            body = item.request.json()
            streamed = bool(isinstance(body, dict) and body.get("stream") is True) or item.response.is_stream
            forms[(str(path), index)] = (canonical_key(route.name, body), streamed)
    return forms


def _stream_needs(cassettes: Iterable[Path]) -> set[str]:
    """stream / non-stream: a request recorded only streamed needs stream, only plain needs non-stream, in
    both forms (twins, :func:`recorded_forms`) neither."""
    forms: dict[str, set[bool]] = {}
    for key, streamed in recorded_forms(cassettes).values():
        forms.setdefault(key, set()).add(streamed)
    needs = set()
    for kinds in forms.values():
        if kinds == {True}:
            needs.add("stream")
        elif kinds == {False}:
            needs.add("non-stream")
    return needs


def _cancel_needs(step: JSON) -> set[str]:
    """cancelAfterMs needs cancel, cancelOn cancel-signal, and both either (the runner uses what it has)."""
    timed, signalled = "cancelAfterMs" in step, "cancelOn" in step
    if timed and signalled:
        return {f"cancel{OR}cancel-signal"}
    return {"cancel"} if timed else {"cancel-signal"} if signalled else set()


def _step_needs(steps: list[JSON]) -> set[str]:
    needs = set()
    for step in steps:
        needs.add(CALLS[step["provider"], step.get("api") or MODEL_APIS[step["provider"]]])
        needs.update(name for key, name in (("research", "research"), ("restart", "restart"),
                                            ("operationId", "durable"))
                     if step.get(key))
        needs |= _cancel_needs(step)
    return needs


def _tool_needs(tools: list[JSON]) -> set[str]:
    needs = set()
    for tool in tools:
        if tool.get("type") == "hostedSearch":
            needs.add("hosted-search")
        elif tool.get("type") == "function" and isinstance(name := tool.get("name"), str):
            needs.add("tool:" + _TOOL_OF.get(name, name))
    return needs


def _expectation_needs(expected: JSON) -> set[str]:
    needs = set()
    if expected.get("persistedSnapshot"):
        needs.add("persisted-transcript")
    if expected.get("estimates"):
        needs.add("estimates")
    if "receipts" in expected or "reason" in expected:
        needs.add("durable")
    return needs


def requirements(doc: ScenarioDoc, cassettes: Iterable[Path], faults: Iterable[Fault]) \
        -> frozenset[str]:
    """What a scenario (its document, cassettes and faults) needs of a target: its ``requires:``, and what its
    parts show: the APIs of its steps, research / restart / cancelAfterMs / cancelOn / operationId steps, its
    tools (hostedSearch, function tools by name), ``recovery`` or a ``kill`` fault (durable), a
    persistedSnapshot, estimates, receipts, and stream or non-stream from its recordings."""
    needs = set(doc.get("requires", ()))
    needs |= _step_needs(doc["steps"]) | _tool_needs(doc.get("tools", []))
    needs |= _expectation_needs(doc["expectations"]) | _stream_needs(cassettes)
    if doc.get("recovery") or any(fault.kind == "kill" for fault in faults):
        needs.add("durable")
    return frozenset(needs)
