"""The admin API under ``/__replaykit/`` (provider wing): what a suite in any language asks of a running fake
provider; never journaled.

Every answer is JSON; an error is ``{"error": message}`` naming the endpoint, the JSON pointer of the bad
value and the fix (400), or the endpoints there are (404, 405). :data:`ENDPOINTS` lists them; a body is
checked against its contract under ``contracts/replaykit/`` before anything changes. Loading goes through
the :class:`~replaykit.server.catalogue.Catalogue`. The endpoints: docs/architecture/server.md.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs

from replaykit import cassette, contracts, jsondoc
from replaykit.cassette import Cassette, Interaction
from replaykit.errors import ReplaykitError, UsageError, located
from replaykit.netguard import is_loopback
from replaykit.resources import find_cassette
from replaykit.server.catalogue import Catalogue
from replaykit.server.exchange import State
from replaykit.server.faults import Fault, fault_at, faults_from, faults_json
from replaykit.server.seam import ADMIN_PREFIX, Plan, Request

__all__ = ["DROPPED_HEADER", "ENDPOINTS", "WINDOW_HEADER", "answer", "posted_faults", "posted_interaction",
           "posted_load"]

Handler = Callable[[Request, State, Catalogue], Awaitable[Plan]]
JSON_TYPE = "application/json; charset=utf-8"

DROPPED_HEADER = "x-replaykit-journal-dropped"  # entries that left the journal's window
WINDOW_HEADER = "x-replaykit-journal-window"  # entries the window holds at most
_FAULTS = f"POST {ADMIN_PREFIX}/faults"
_FAULTS_FIX = 'send a fault object or a list of them, e.g. [{"kind": "status", "status": 429}]'
_LOAD = f"POST {ADMIN_PREFIX}/cassettes"
_LOAD_FIX = ('send e.g. {"paths": ["cassettes/anthropic/web_search.yaml"]} or {"mode": "add", "cassettes": '
             '[{"name": "mine", "cassette": "<the cassette YAML>"}]}')
_STUB = f"POST {ADMIN_PREFIX}/interactions"
_STUB_FIX = ('send one interaction as a cassette holds it: {"request": {"method": "POST", "uri": '
             '"https://api.anthropic.com/v1/messages", "body": "..."}, "response": {"status": {"code": 200}, '
             '"headers": {"content-type": ["application/json"]}, "body": {"string": "..."}}}')


class _Refused(Exception):
    """An admin request answered with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------- bodies


def _document(body: bytes, where: str, fix: str) -> object:
    """``body`` parsed as JSON; a :class:`UsageError` naming ``where`` and ``fix`` when it is not."""
    try:
        return jsondoc.loads(body)
    except jsondoc.TooDeep:
        raise UsageError(located(where, None, "the body is nested too deep to parse", fix)) from None
    except ValueError as exc:
        raise UsageError(located(where, None, f"the body is not JSON ({exc})", fix)) from None


def _conforming(kind: str, doc: object, where: str, fix: str) -> dict[str, Any]:
    """``doc`` when it holds to contract ``kind``; else a :class:`UsageError` at the first violation (one
    that names a value before one that only says no alternative fits)."""
    found = sorted((v for v in contracts.validate(kind, doc) if v.severity == "error"),
                   key=lambda v: v.keyword in ("anyOf", "oneOf"))
    if found:
        raise UsageError(located(where, found[0].pointer or "/", found[0].message, fix))
    return cast("dict[str, Any]", doc)  # both contracts checked here describe an object


def posted_faults(body: bytes) -> list[Fault]:
    """The faults a ``POST /__replaykit/faults`` body holds; a :class:`UsageError` names the JSON pointer of
    the bad value and the fix."""
    doc = _document(body, _FAULTS, _FAULTS_FIX)
    if isinstance(doc, dict):
        return [fault_at(doc, _FAULTS, "")]
    if not isinstance(doc, list):
        raise UsageError(located(_FAULTS, None, f"the body must be a fault object or a list of them, not "
                                                f"{json.dumps(doc)[:60]}", _FAULTS_FIX))
    return faults_from(doc, _FAULTS)


def _inline(item: dict[str, Any], pointer: str, max_body: int) -> Cassette:
    """The cassette an item of ``cassettes`` holds, labelled with its name; errors name its pointer."""
    held = item["cassette"]
    text = held if isinstance(held, str) else json.dumps(held)
    try:
        return cassette.loads(text, item["name"], max_body=max_body)
    except ReplaykitError as exc:
        raise UsageError(located(_LOAD, f"{pointer}/cassette", str(exc))) from exc


def _found(name: str, pointer: str) -> Path:
    """The cassette file or folder ``name`` (as given, else a bundled one); an error names its pointer."""
    try:
        return find_cassette(name)
    except UsageError as exc:
        raise UsageError(located(_LOAD, pointer, str(exc))) from exc


def posted_load(body: bytes, max_body: int = cassette.MAX_BODY) -> tuple[list[Path | Cassette], bool]:
    """What a ``POST /__replaykit/cassettes`` body asks to load (paths first, each found by
    :func:`~replaykit.resources.find_cassette`, then the cassettes it holds) and whether to add them (mode
    ``add``) rather than replace; a :class:`UsageError` names the pointer."""
    doc = _conforming("replaykit.admin-load", _document(body, _LOAD, _LOAD_FIX), _LOAD, _LOAD_FIX)
    paths = [_found(name, f"/paths/{i}") for i, name in enumerate(doc.get("paths", []))]
    held = [_inline(item, f"/cassettes/{i}", max_body) for i, item in enumerate(doc.get("cassettes", []))]
    return [*paths, *held], doc.get("mode") == "add"


def posted_interaction(body: bytes) -> Interaction:
    """The interaction a ``POST /__replaykit/interactions`` body holds; a :class:`UsageError` names the
    pointer of the bad value and the fix."""
    doc = _conforming("replaykit.admin-interaction", _document(body, _STUB, _STUB_FIX), _STUB, _STUB_FIX)
    try:
        stub = cassette.loads(json.dumps({"version": 1, "interactions": [doc]}), _STUB).interactions[0]
    except ReplaykitError as exc:
        raise UsageError(located(_STUB, "/", str(exc), _STUB_FIX)) from exc
    stub.line = None  # it has no line in any file
    return stub


# ---------------------------------------------------------------- endpoints


def _json(doc: object, status: int = 200, headers: dict[str, str] | None = None) -> Plan:
    """An answer of ``doc`` as JSON (as aiohttp's ``json_response`` writes it)."""
    body = json.dumps(doc).encode()
    lines = [("Content-Type", JSON_TYPE), *(headers or {}).items()]
    return Plan(status, lines, [body], False, length=len(body))


def _body(request: Request, where: str) -> bytes:
    if request.unreadable is not None:
        raise _Refused(request.unreadable.status, f"{where}: {request.unreadable}")
    return request.body


async def _journal(request: Request, state: State, catalogue: Catalogue) -> Plan:
    journal = state.journal
    headers = {DROPPED_HEADER: str(journal.dropped), WINDOW_HEADER: str(journal.window)}
    return _json(journal.to_json(), headers=headers)


async def _reset(request: Request, state: State, catalogue: Catalogue) -> Plan:
    state.reset()
    return _json({"reset": True})


async def _unused(request: Request, state: State, catalogue: Catalogue) -> Plan:
    return _json(state.unused())


async def _add_faults(request: Request, state: State, catalogue: Catalogue) -> Plan:
    faults = posted_faults(_body(request, _FAULTS))
    with state.lock:
        state.faults.extend(faults)
        return _json(faults_json(state.faults))


async def _cassettes(request: Request, state: State, catalogue: Catalogue) -> Plan:
    return _json({"cassettes": catalogue.listed()})


async def _load(request: Request, state: State, catalogue: Catalogue) -> Plan:
    sources, add = posted_load(_body(request, _LOAD), catalogue.max_body)
    if not is_loopback(request.remote) and any(isinstance(source, Path) for source in sources):
        raise _Refused(403, f"{_LOAD}: files are loaded by name only for a client on this machine (a server "
                            "started with --allow-remote reads no file for a remote client); send the "
                            'cassettes themselves: {"cassettes": [{"name": ..., "cassette": ...}]}')
    try:  # files are read off the event loop: other requests go on meanwhile
        await asyncio.to_thread(catalogue.load, sources, add=add)
    except ReplaykitError as exc:  # a file that does not parse: its message names it, the line and the fix
        raise UsageError(located(_LOAD, "/paths", str(exc))) from exc
    return _json({"cassettes": catalogue.listed()})


async def _unload(request: Request, state: State, catalogue: Catalogue) -> Plan:
    names = parse_qs(request.query, keep_blank_values=True).get("name", [])
    unloaded = catalogue.unload(names)
    if names and not unloaded:
        loaded = ", ".join(str(row["cassette"]) for row in catalogue.listed()) or "none"
        raise _Refused(404, f"DELETE {ADMIN_PREFIX}/cassettes: no loaded cassette is named "
                            f"{', '.join(map(repr, names))} (loaded: {loaded})")
    return _json({"unloaded": unloaded, "cassettes": catalogue.listed()})


async def _add_stub(request: Request, state: State, catalogue: Catalogue) -> Plan:
    return _json({"added": catalogue.stub(posted_interaction(_body(request, _STUB)))})


_TOOL = f"POST {ADMIN_PREFIX}/tool-calls"


async def _tool_call(request: Request, state: State, catalogue: Catalogue) -> Plan:
    doc = _document(_body(request, _TOOL), _TOOL, 'send {"name": "read", "id": "toolu_01"}')
    doc = doc if isinstance(doc, dict) else {}
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise UsageError(located(_TOOL, "/name", "the tool's name is missing", 'send {"name": "read"}'))
    with state.lock:
        state.counts[f"tool:{name}"] += 1
        count = state.counts[f"tool:{name}"]
        held = any(fault.holds_tool(name, count) for fault in state.faults)
    if not held:
        return _json({"held": False})
    state.reached({"tool": name, "id": doc.get("id"), "nth": count})
    await state.closing.wait()  # until the runner kills the target (aiohttp then cancels this handler)
    return _json({"held": True})


ENDPOINTS: dict[tuple[str, str], Handler] = {
    ("POST", f"{ADMIN_PREFIX}/tool-calls"): _tool_call,
    ("GET", f"{ADMIN_PREFIX}/journal"): _journal,
    ("HEAD", f"{ADMIN_PREFIX}/journal"): _journal,
    ("GET", f"{ADMIN_PREFIX}/unused"): _unused,
    ("HEAD", f"{ADMIN_PREFIX}/unused"): _unused,
    ("POST", f"{ADMIN_PREFIX}/reset"): _reset,
    ("POST", f"{ADMIN_PREFIX}/faults"): _add_faults,
    ("GET", f"{ADMIN_PREFIX}/cassettes"): _cassettes,
    ("HEAD", f"{ADMIN_PREFIX}/cassettes"): _cassettes,
    ("POST", f"{ADMIN_PREFIX}/cassettes"): _load,
    ("DELETE", f"{ADMIN_PREFIX}/cassettes"): _unload,
    ("POST", f"{ADMIN_PREFIX}/interactions"): _add_stub,
}


def _unknown(request: Request) -> _Refused:
    """The 404 (no such endpoint) or 405 (not with that method) for a request the table has no handler for."""
    listed = ", ".join(f"{method} {path}" for method, path in ENDPOINTS if method != "HEAD")
    if any(path == request.path for _, path in ENDPOINTS):
        return _Refused(405, f"{request.method} {request.path}: not with this method; the admin endpoints "
                             f"are {listed}")
    return _Refused(404, f"{request.method} {request.path}: no such admin endpoint; the admin endpoints are "
                         f"{listed}")


async def answer(request: Request, state: State, catalogue: Catalogue) -> Plan:
    """Answer a request under ``/__replaykit/`` (see the module docstring); never journaled."""
    handler = ENDPOINTS.get((request.method, request.path))
    try:
        if handler is None:
            raise _unknown(request)
        return await handler(request, state, catalogue)
    except _Refused as exc:
        allow = sorted({m for m, path in ENDPOINTS if path == request.path}) if exc.status == 405 else []
        return _json({"error": str(exc)}, exc.status, {"allow": ", ".join(allow)} if allow else None)
    except UsageError as exc:
        return _json({"error": str(exc)}, 400)
