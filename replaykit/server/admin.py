"""The admin API under ``/__replaykit/``: what a suite in any language asks of a running fake provider.

Nothing here is journaled as provider traffic. Every answer is JSON; an error is ``{"error": message}``,
the message naming the endpoint, the JSON pointer of the bad value and the fix (a 400), or the endpoints
there are (a 404 for a path under ``/__replaykit/`` that is none of them, a 405 for a method it does not
take)::

    GET    /__replaykit/journal        the journal, one object per request (journal-entry.schema.json): the
                                       last entries (the window); the x-replaykit-journal-dropped header
                                       says how many left it, x-replaykit-journal-window how many it holds
    GET    /__replaykit/unused         interactions not delivered whole since the last reset
    POST   /__replaykit/reset          forget the journal, the counters, the faults and what was served
    POST   /__replaykit/faults         add faults: a fault object or a list of them
    GET    /__replaykit/cassettes      the cassettes loaded: [{cassette, interactions, routes}]
    POST   /__replaykit/cassettes      load cassettes (admin-load.schema.json): {"paths": [...]} names files
                                       or folders the server reads (relative to its working folder, else
                                       bundled ones), {"cassettes": [{"name", "cassette"}]}
                                       holds them (YAML or JSON text, or the cassette document itself);
                                       "mode": "replace" (default: the loaded cassettes are dropped and usage
                                       starts afresh) or "add"
    DELETE /__replaykit/cassettes      unload every cassette, or those named: ?name=NAME (repeatable; a name
                                       as x-replaykit-cassette takes it, see replaykit.server.matching)
    POST   /__replaykit/tool-calls     a target announces the tool call it is about to run: {"name", "id"};
                                       answered {"held": false} at once, unless a ``kill`` fault with
                                       ``tool`` selects it: then held (the scenario runner kills the
                                       target meanwhile)
    POST   /__replaykit/interactions   add one interaction as a stub (admin-interaction.schema.json: an item
                                       of a cassette's interactions, {"request": ..., "response": ...}) to
                                       the cassette ``<stubs>``, after those added before

The fake provider does the loading (:class:`~replaykit.server.app.Host`); a body is parsed and checked here,
against its contract under ``contracts/replaykit/``, before anything changes: a bad body changes nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from replaykit import cassette, contracts, jsondoc
from replaykit.cassette import Cassette, Interaction
from replaykit.errors import ReplaykitError, UsageError, located
from replaykit.netguard import is_loopback
from replaykit.resources import find_cassette
from replaykit.server.app import ADMIN_PREFIX, Host, State, Unreadable, read_body
from replaykit.server.faults import Fault, fault_at, faults_from, faults_json

__all__ = ["DROPPED_HEADER", "ENDPOINTS", "WINDOW_HEADER", "answer", "posted_faults", "posted_interaction",
           "posted_load"]

Handler = Callable[[web.BaseRequest, State], Awaitable[web.StreamResponse]]

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


def _document(body: bytes, where: str, fix: str) -> Any:
    """``body`` parsed as JSON; a :class:`UsageError` naming ``where`` and ``fix`` when it is not."""
    try:
        return jsondoc.loads(body)
    except jsondoc.TooDeep:
        raise UsageError(located(where, None, "the body is nested too deep to parse", fix)) from None
    except ValueError as exc:
        raise UsageError(located(where, None, f"the body is not JSON ({exc})", fix)) from None


def _conforming(kind: str, doc: Any, where: str, fix: str) -> Any:
    """``doc`` when it holds to contract ``kind``; else a :class:`UsageError` at the first violation (one
    that names a value before one that only says no alternative fits)."""
    found = sorted((v for v in contracts.validate(kind, doc) if v.severity == "error"),
                   key=lambda v: v.keyword in ("anyOf", "oneOf"))
    if found:
        raise UsageError(located(where, found[0].pointer or "/", found[0].message, fix))
    return doc


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


def _host(state: State) -> Host:
    if state.host is None:
        raise _Refused(503, "this server loads no cassettes at run time (it was built without a host)")
    return state.host


async def _body(request: web.BaseRequest, state: State, where: str) -> bytes:
    try:
        return await read_body(request, state.limits)
    except Unreadable as exc:
        raise _Refused(exc.status, f"{where}: {exc}") from None


async def _journal(request: web.BaseRequest, state: State) -> web.Response:
    journal = state.journal
    entries = journal.to_json()
    headers = {DROPPED_HEADER: str(journal.dropped), WINDOW_HEADER: str(journal.window)}
    return web.json_response(entries, headers=headers)


async def _reset(request: web.BaseRequest, state: State) -> web.Response:
    state.reset()
    return web.json_response({"reset": True})


async def _unused(request: web.BaseRequest, state: State) -> web.Response:
    return web.json_response(state.unused())


async def _add_faults(request: web.BaseRequest, state: State) -> web.Response:
    faults = posted_faults(await _body(request, state, _FAULTS))
    with state.lock:
        state.faults.extend(faults)
        return web.json_response(faults_json(state.faults))


async def _cassettes(request: web.BaseRequest, state: State) -> web.Response:
    return web.json_response({"cassettes": _host(state).cassettes()})


async def _load(request: web.BaseRequest, state: State) -> web.Response:
    host = _host(state)
    sources, add = posted_load(await _body(request, state, _LOAD), host.max_body)
    if not is_loopback(request.remote) and any(isinstance(source, Path) for source in sources):
        raise _Refused(403, f"{_LOAD}: files are loaded by name only for a client on this machine (a server "
                            "started with --allow-remote reads no file for a remote client); send the "
                            'cassettes themselves: {"cassettes": [{"name": ..., "cassette": ...}]}')
    try:  # files are read off the event loop: other requests go on meanwhile
        await asyncio.to_thread(host.load, sources, add=add)
    except ReplaykitError as exc:  # a file that does not parse: its message names it, the line and the fix
        raise UsageError(located(_LOAD, "/paths", str(exc))) from exc
    return web.json_response({"cassettes": host.cassettes()})


async def _unload(request: web.BaseRequest, state: State) -> web.Response:
    host, names = _host(state), request.query.getall("name", [])
    unloaded = host.unload(names)
    if names and not unloaded:
        loaded = ", ".join(row["cassette"] for row in host.cassettes()) or "none"
        raise _Refused(404, f"DELETE {ADMIN_PREFIX}/cassettes: no loaded cassette is named "
                            f"{', '.join(map(repr, names))} (loaded: {loaded})")
    return web.json_response({"unloaded": unloaded, "cassettes": host.cassettes()})


async def _add_stub(request: web.BaseRequest, state: State) -> web.Response:
    host = _host(state)
    return web.json_response({"added": host.stub(posted_interaction(await _body(request, state, _STUB)))})


_TOOL = f"POST {ADMIN_PREFIX}/tool-calls"


async def _tool_call(request: web.BaseRequest, state: State) -> web.Response:
    doc = _document(await _body(request, state, _TOOL), _TOOL, 'send {"name": "read", "id": "toolu_01"}')
    name = doc.get("name") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not name:
        raise UsageError(located(_TOOL, "/name", "the tool's name is missing", 'send {"name": "read"}'))
    with state.lock:
        state.counts[f"tool:{name}"] += 1
        count = state.counts[f"tool:{name}"]
        held = any(fault.holds_tool(name, count) for fault in state.faults)
    if not held:
        return web.json_response({"held": False})
    state.reached({"tool": name, "id": doc.get("id"), "nth": count})
    await state.closing.wait()  # until the runner kills the target (aiohttp then cancels this handler)
    return web.json_response({"held": True})


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


def _unknown(request: web.BaseRequest) -> _Refused:
    """The 404 (no such endpoint) or 405 (not with that method) for a request the table has no handler for."""
    listed = ", ".join(f"{method} {path}" for method, path in ENDPOINTS if method != "HEAD")
    if any(path == request.path for _, path in ENDPOINTS):
        return _Refused(405, f"{request.method} {request.path}: not with this method; the admin endpoints "
                             f"are {listed}")
    return _Refused(404, f"{request.method} {request.path}: no such admin endpoint; the admin endpoints are "
                         f"{listed}")


async def answer(request: web.BaseRequest, state: State) -> web.StreamResponse:
    """Answer a request under ``/__replaykit/`` (see the module docstring); never journaled."""
    handler = ENDPOINTS.get((request.method, request.path))
    try:
        if handler is None:
            raise _unknown(request)
        return await handler(request, state)
    except _Refused as exc:
        allow = sorted({m for m, path in ENDPOINTS if path == request.path}) if exc.status == 405 else []
        headers = {"allow": ", ".join(allow)} if allow else None
        return web.json_response({"error": str(exc)}, status=exc.status, headers=headers)
    except UsageError as exc:
        return web.json_response({"error": str(exc)}, status=400)
