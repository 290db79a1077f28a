"""Faults (provider wing): a :class:`Fault` selects requests (route, n-th, every) and rewrites their
:class:`~replaykit.server.seam.Plan`: a status, delays, a stall, a cut, an error or corrupt event, a dropped
terminal event, a truncated body, a kill point.

``Fault.parse`` reads the ``--fault`` syntax, :func:`load_faults` a faults file; :func:`kinds_help` and
:func:`kinds_text` list the kinds and their keys. :func:`status_plan` answers a ``status`` fault,
:func:`apply_all` applies the others. The catalogue in words: docs/architecture/server.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from replaykit import sse
from replaykit.errors import UsageError, located
from replaykit.routes import PROVIDERS, ROUTES
from replaykit.server import envelopes
from replaykit.server.plan import Plan, error_plan
from replaykit.sse import event_type

__all__ = [
    "COMPLETE_KINDS",
    "EVENT_KINDS",
    "ORDER",
    "STREAM_KINDS",
    "TERMINAL_EVENTS",
    "Fault",
    "FaultKind",
    "apply",
    "apply_all",
    "corrupt",
    "fault_at",
    "faults_from",
    "faults_json",
    "keys_text",
    "kinds_help",
    "kinds_text",
    "load_faults",
    "status_plan",
]

FaultKind = Literal[
    "status",
    "delay_headers",
    "delay_events",
    "stall",
    "disconnect",
    "error_event",
    "corrupt_event",
    "drop_terminal",
    "truncate",
    "kill",
]
KINDS: tuple[str, ...] = get_args(FaultKind)
STREAM_KINDS = frozenset({"delay_events", "stall", "error_event", "corrupt_event", "drop_terminal"})
COMPLETE_KINDS = frozenset({"delay_headers", "delay_events"})
EVENT_KINDS = frozenset({"error_event", "drop_terminal"})
TERMINAL_EVENTS = frozenset({"message_stop", "response.completed", "response.incomplete", "response.failed"})
_REQUIRED: dict[str, tuple[str, ...]] = {
    "status": ("status",),
    "delay_headers": ("ms",),
    "delay_events": ("ms",),
    "stall": ("after",),
    "disconnect": ("after",),
    "error_event": ("after",),
    "corrupt_event": ("event",),
}
_ALLOWED: dict[str, tuple[str, ...]] = {
    "status": ("status", "retry_after", "retry_after_ms", "message", "error_type", "code", "should_retry"),
    "delay_headers": ("ms",),
    "delay_events": ("ms",),
    "stall": ("after", "ms"),
    "disconnect": ("after",),
    "error_event": ("after", "error_type", "message", "as_failed"),
    "corrupt_event": ("event",),
    "drop_terminal": (),
    "truncate": ("at",),
    "kill": ("after", "tool"),
}
_SELECTORS = ("kind", "route", "nth", "times")
_EXAMPLE = '{"kind": "status", "route": "anthropic", "nth": 1, "status": 429}'
_DATA = re.compile(rb"(?m)^data: ?([^\r\n]*)")


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault; see the module docstring for the kinds and their fields."""

    kind: FaultKind
    route: str | None = None
    nth: int | None = None
    times: int = 1
    status: int | None = None
    retry_after: float | None = None
    retry_after_ms: float | None = None
    should_retry: bool | None = None
    message: str | None = None
    error_type: str | None = None
    code: str | None = None
    ms: float | None = None
    after: int | None = None
    event: int | None = None
    at: int | None = None
    as_failed: bool = False
    tool: str | None = None

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """Build from ``key=value,key=value`` (the ``--fault`` syntax)."""
        pairs: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            key, sep, value = part.partition("=")
            if not sep:
                raise UsageError(f"--fault {spec!r}: {part!r} is not key=value; e.g. kind=status,status=429")
            pairs[key.strip()] = value.strip()
        if "status" in pairs:
            pairs.setdefault("kind", "status")
        return cls.from_dict(_typed(pairs, spec), where=f"--fault {spec!r}")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, where: str = "fault", pointer: str | None = None) -> Fault:
        """Build from a mapping (a faults file entry, a scenario's ``faults`` item). An error names ``where``,
        and with ``pointer`` (the mapping's JSON pointer in its document) the pointer of the bad value."""
        try:
            unknown = sorted(map(str, set(raw) - {f.name for f in dataclasses.fields(cls)}))
            if unknown:
                raise _BadField(unknown[0], f"unknown key {unknown[0]!r}; {_takes(raw.get('kind'))}")
            if "kind" not in raw:
                raise _BadField(None, f"a fault needs a kind; {kinds_text()}")
            return cls(**dict(raw))
        except _BadField as exc:
            raise UsageError(_place(where, pointer, exc.key, str(exc))) from exc
        except (TypeError, ValueError) as exc:
            raise UsageError(_place(where, pointer, None, str(exc))) from exc

    def selects(self, route: str, provider: str | None, count: int) -> bool:
        """True when this fault applies to the ``count``-th request on its selector, on ``route``."""
        if self.tool is not None:  # a kill at a tool call selects the target's announcements, no request
            return False
        if self.route not in (None, "*", route, provider):
            return False
        return self.nth is None or self.nth <= count < self.nth + self.times

    def holds_tool(self, name: str, count: int) -> bool:
        """True when this is a ``kill`` at the ``count``-th announced call of tool ``name``."""
        return self.kind == "kill" and self.tool == name and (
            self.nth is None or self.nth <= count < self.nth + self.times)

    def to_json(self) -> dict[str, object]:
        """The fields that are set, as a JSON object (``kind`` first)."""
        out: dict[str, object] = {"kind": self.kind}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name != "kind" and value != item.default:
                out[item.name] = value
        return out


class _BadField(ValueError):
    """A fault's field (``key``; ``None``: the fault as a whole) is missing, unknown or has a bad value."""

    def __init__(self, key: str | None, message: str) -> None:
        super().__init__(message)
        self.key = key


def _place(where: str, pointer: str | None, key: str | None, message: str) -> str:
    """``where: message``, or with a ``pointer`` ``where:pointer/key: message``."""
    if pointer is None:
        return f"{where}: {message}"
    return located(where, pointer if key is None else f"{pointer}/{key}", message)


_ALSO = ", ".join(_SELECTORS[1:])  # the selectors every kind takes besides its own keys


def keys_text(kind: str) -> str:
    """The keys a fault of ``kind`` takes beyond the selectors, required ones marked ``*``: ``after*, ms``."""
    return ", ".join(key + ("*" if key in _REQUIRED.get(kind, ()) else "") for key in _ALLOWED[kind])


def kinds_text() -> str:
    """Every kind with its keys, on one line (for an error message)."""
    kinds = "; ".join(f"{kind} ({keys_text(kind)})" for kind in KINDS)
    return f"the kinds and their keys (each also takes {_ALSO}; * required): {kinds}"


def kinds_help() -> list[str]:
    """Every kind with its keys, a line each, then the selectors: for ``replaykit serve --help``."""
    width = max(map(len, KINDS))
    rows = [f"  {kind.ljust(width)}  {keys_text(kind) or '(none)'}" for kind in KINDS]
    return ["fault kinds and their keys (--fault kind=KIND,key=value,...; * required):", *rows,
            "every fault also takes route= (a provider, a route name or 'METHOD /path'), nth= and times="]


def _takes(kind: object) -> str:
    """What a fault of ``kind`` takes: its keys when the kind is known, else every kind's."""
    if kind not in _ALLOWED:
        return kinds_text()
    return f"a {kind} fault takes {keys_text(str(kind)) or 'no other key'} (and {_ALSO}; * required)"


def _check(fault: Fault) -> None:
    if fault.kind not in KINDS:
        raise _BadField("kind", f"kind={fault.kind!r} must be one of {', '.join(KINDS)}; {kinds_text()}")
    for name in _REQUIRED.get(fault.kind, ()):
        if getattr(fault, name) is None:
            raise _BadField(None, f"a {fault.kind} fault needs {name}=")
    allowed = set(_SELECTORS) | set(_ALLOWED[fault.kind])
    for item in dataclasses.fields(fault):
        if item.name not in allowed and getattr(fault, item.name) != item.default:
            owners = ", ".join(kind for kind in KINDS if item.name in _ALLOWED[kind])
            message = f"{item.name}= does not apply to a {fault.kind} fault; it takes " \
                      f"{keys_text(fault.kind) or 'no other key'}; {item.name}= belongs to {owners} " \
                      f"(and {_ALSO}; * required)"
            raise _BadField(item.name, message)
    _check_numbers(fault)
    _check_flags(fault)
    _check_route(fault.route)
    if fault.tool is not None and (not isinstance(fault.tool, str) or not fault.tool):
        raise _BadField("tool", f"tool={fault.tool!r} must be a tool's name")


def _check_flags(fault: Fault) -> None:
    for name in ("as_failed", "should_retry"):
        value = getattr(fault, name)
        if value is not None and not isinstance(value, bool):
            raise _BadField(name, f"{name}={value!r} must be true or false")


def _check_route(route: str | None) -> None:
    known = ("*", *PROVIDERS, *(r.name for r in ROUTES))
    if route is None or route in known or (" /" in route and route.split(" ", 1)[0].isupper()):
        return
    listed = ", ".join(known)
    message = f"route={route!r} is not a provider or route; use one of {listed} or 'METHOD /path'"
    raise _BadField("route", message)


def _check_numbers(fault: Fault) -> None:
    status = fault.status
    valid = isinstance(status, int) and not isinstance(status, bool) and 400 <= status <= 599
    if status is not None and not valid:
        raise _BadField("status", f"status={status!r} must be an HTTP error status (400-599)")
    for name in ("nth", "times", "event"):
        value = getattr(fault, name)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise _BadField(name, f"{name}={value!r} must be a whole number >= 1")
    for name in ("after", "at", "ms", "retry_after", "retry_after_ms"):
        value = getattr(fault, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not (isinstance(value, int) or math.isfinite(value)) or value < 0):
            raise _BadField(name, f"{name}={value!r} must be a finite number >= 0")


def _typed(pairs: dict[str, str], spec: str) -> dict[str, object]:
    types = {f.name: str(f.type) for f in dataclasses.fields(Fault)}
    return {key: _convert(key, value, types.get(key, "str"), spec) for key, value in pairs.items()}


def _convert(key: str, value: str, kind: str, spec: str) -> object:
    if value.lower() in ("none", "null", ""):
        return None
    try:
        if kind.startswith("int"):
            return int(value)
        if kind.startswith("float"):
            return float(value)
    except ValueError as exc:
        raise UsageError(f"--fault {spec!r}: {key}={value!r} must be a number") from exc
    if kind.startswith("bool"):
        if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise UsageError(f"--fault {spec!r}: {key}={value!r} must be true or false")
        return value.lower() in ("true", "1", "yes")
    return value


def load_faults(path: str | os.PathLike[str]) -> list[Fault]:
    """Read a YAML or JSON file holding a list of fault objects (or ``{faults: [...]}``)."""
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(located(path, None, f"cannot read faults file: {exc.strerror}")) from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise UsageError(located(path, mark.line + 1 if mark else None, f"invalid YAML/JSON: {problem}",
                                 "fix the syntax: a list of fault objects")) from exc
    return faults_from(doc, path)


def faults_from(doc: object, source: str | os.PathLike[str]) -> list[Fault]:
    """The faults a parsed document holds: a list of fault objects, or ``{faults: [...]}``. An error names
    ``source``, the JSON pointer of the bad value, and the fix."""
    items = doc.get("faults") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise UsageError(located(source, "/", "the document must hold a list of fault objects",
                                 f"write e.g. [{_EXAMPLE}]"))
    base = "/faults" if isinstance(doc, dict) else ""
    return [fault_at(raw, source, f"{base}/{index}") for index, raw in enumerate(items)]


def fault_at(raw: object, source: str | os.PathLike[str], pointer: str) -> Fault:
    """The fault object ``raw`` found at ``pointer`` in ``source``; an error names both, and the fix."""
    if not isinstance(raw, dict):
        shown = json.dumps(raw, default=str)[:60]
        raise UsageError(located(source, pointer, f"a fault must be an object with a kind, not {shown}",
                                 f"write e.g. {_EXAMPLE}"))
    return Fault.from_dict(raw, where=str(source), pointer=pointer)


def faults_json(faults: Iterable[Fault]) -> list[dict[str, object]]:
    """Faults as a JSON list (for the journal and the admin endpoint)."""
    return [fault.to_json() for fault in faults]


# ---------------------------------------------------------------- applying faults: changes of plan


def _cut(plan: Plan, count: int) -> int:
    count = min(count, len(plan.chunks))
    del plan.chunks[count:], plan.due[count:]
    return count


def _json_of(event: sse.Event) -> object:
    try:
        return event.json() if event.data is not None else None
    except ValueError:
        return None


def _after(plan: Plan, fault: Fault) -> int:
    return min(fault.after or 0, len(plan.chunks))


def _stall(plan: Plan, fault: Fault) -> bool:
    at = _after(plan, fault)
    if fault.ms is None:
        _cut(plan, at)
        plan.end, plan.altered = "hang", True
    else:
        plan.due[at:] = [due + fault.ms / 1000 for due in plan.due[at:]]
    plan.notes.append(f"stalled after event {at}")
    return True


def _disconnect(plan: Plan, fault: Fault) -> bool:
    if plan.stream:
        at = _cut(plan, _after(plan, fault))
        plan.notes.append(f"disconnected after event {at}")
    else:
        body = b"".join(plan.chunks)
        plan.chunks = [body[: len(body) // 2]]
        plan.notes.append(f"disconnected after {len(body) // 2} of {len(body)} bytes")
    plan.end, plan.altered = "disconnect", True
    return True


def _next_sequence(events: list[sse.Event]) -> int:
    for event in reversed(events):
        data = _json_of(event)
        if isinstance(data, dict) and isinstance(data.get("sequence_number"), int):
            return int(data["sequence_number"]) + 1
    return len(events)


def _last_response(events: list[sse.Event]) -> dict[str, object] | None:
    for event in reversed(events):
        data = _json_of(event)
        if isinstance(data, dict) and isinstance(data.get("response"), dict):
            return dict(data["response"])
    return None


def _error_event(plan: Plan, fault: Fault) -> bool:
    at = _cut(plan, _after(plan, fault))
    sent = plan.events[:at]
    sequence = _next_sequence(sent)
    if fault.as_failed and plan.provider != "anthropic":
        raw = envelopes.failed_event(
            _last_response(sent), code=fault.error_type, message=fault.message or "", sequence_number=sequence
        )
    elif _is_chat(plan.events):
        raw = envelopes.chat_error_event(error_type=fault.error_type, message=fault.message or "")
    else:
        raw = envelopes.error_event(
            plan.provider, error_type=fault.error_type, message=fault.message or "", sequence_number=sequence
        )
    plan.chunks.append(raw)
    plan.due.append(plan.due[-1] if plan.due else 0.0)
    plan.notes.append(f"error event after event {at}")
    plan.altered = True
    return True


def _is_chat(events: list[sse.Event]) -> bool:
    """True when the stream is Chat Completions': unnamed events of ``chat.completion`` chunks."""
    return any(event.event is None and '"chat.completion' in (event.data or "") for event in events[:1])


def corrupt(raw: bytes) -> bytes:
    """The block with the payload of its first ``data:`` line cut in half (the JSON no longer parses)."""
    found = _DATA.search(raw)
    if found is None:
        return raw[: len(raw) // 2] + b"\n\n"
    payload = found.group(1).rstrip()
    return raw[: found.start(1)] + payload[: len(payload) // 2] + raw[found.end(1) :]


def _corrupt_event(plan: Plan, fault: Fault) -> bool:
    index = (fault.event or 1) - 1
    if index >= len(plan.chunks):
        plan.notes.append(f"not applied: the stream has {len(plan.chunks)} events, not {index + 1}")
        return False
    plan.chunks[index] = corrupt(bytes(plan.chunks[index]))
    plan.notes.append(f"event {index + 1} corrupted")
    plan.altered = True
    return True


def _drop_terminal(plan: Plan, fault: Fault) -> bool:
    for index in range(min(len(plan.events), len(plan.chunks)) - 1, -1, -1):
        event = plan.events[index]
        kind = event_type(event)
        if kind in TERMINAL_EVENTS or (event.data or "").strip() == "[DONE]":
            del plan.chunks[index], plan.due[index]
            plan.notes.append(f"terminal event {index + 1} ({kind}) dropped")
            plan.altered = True
            return True
    plan.notes.append("not applied: no terminal event in the stream")
    return False


def _truncate(plan: Plan, fault: Fault) -> bool:
    body = b"".join(plan.chunks)
    at = len(body) // 2 if fault.at is None else min(fault.at, len(body))
    plan.chunks, plan.length = [body[:at]], at
    plan.notes.append(f"body truncated to {at} of {len(body)} bytes")
    plan.altered = True
    return True


def _delay_events(plan: Plan, fault: Fault) -> bool:
    step = (fault.ms or 0) / 1000
    plan.due = [due + (i + 1) * step for i, due in enumerate(plan.due)]
    plan.notes.append(f"{fault.ms:g} ms before each event")
    return True


def _delay_headers(plan: Plan, fault: Fault) -> bool:
    plan.head_delay += (fault.ms or 0) / 1000
    plan.notes.append(f"{fault.ms:g} ms before the headers")
    return True


_STREAM_ONLY = {
    "stall": _stall,
    "error_event": _error_event,
    "corrupt_event": _corrupt_event,
    "drop_terminal": _drop_terminal,
    "delay_events": _delay_events,
}
def _kill(plan: Plan, fault: Fault) -> bool:
    if plan.stream:
        at = _cut(plan, _after(plan, fault))
        plan.notes.append(f"held for a kill after event {at}")
    else:
        plan.chunks = []
        plan.notes.append("held for a kill before the body")
    plan.end, plan.altered, plan.batch = "hang", True, False
    plan.framed = plan.whole = None  # event by event
    return True


_ANY = {"disconnect": _disconnect, "delay_headers": _delay_headers, "kill": _kill}


# Content changes first, then cuts, then delays: a delay or a cut applies to the content as changed.
ORDER = (
    "corrupt_event",
    "drop_terminal",
    "truncate",
    "error_event",
    "disconnect",
    "kill",
    "stall",
    "delay_events",
    "delay_headers",
)


def apply(plan: Plan, fault: Fault) -> bool:
    """Rewrite ``plan`` for ``fault`` (not ``status``, which replaces the plan); False when it cannot apply.

    Apply several faults in :data:`ORDER` (:func:`apply_all`).
    """
    if fault.kind in _ANY:
        return _ANY[fault.kind](plan, fault)
    if fault.kind == "truncate" and not plan.stream:
        return _truncate(plan, fault)
    if fault.kind in _STREAM_ONLY and plan.stream:
        return _STREAM_ONLY[fault.kind](plan, fault)
    return False


def _rank(fault: Fault) -> int:
    return ORDER.index(fault.kind) if fault.kind in ORDER else len(ORDER)


def apply_all(plan: Plan, faults: Iterable[Fault], answered: Fault | None = None) -> list[tuple[Fault, bool]]:
    """Rewrite ``plan`` for ``faults`` in :data:`ORDER`: each fault, and whether it applied.

    ``answered`` is the ``status`` fault whose :func:`status_plan` ``plan`` is (it counts as applied; any
    other ``status`` fault does not apply).
    """
    return [(fault, fault is answered or (fault.kind != "status" and apply(plan, fault)))
            for fault in sorted(faults, key=_rank)]


def status_plan(fault: Fault, provider: str | None) -> Plan:
    """The plan of a ``status`` fault: the provider's error envelope with its retry headers."""
    extra: dict[str, str] = {}
    if fault.retry_after is not None:
        extra["retry-after"] = f"{fault.retry_after:g}"
    elif fault.status == 429:
        extra["retry-after"] = "1"
    if fault.retry_after_ms is not None:
        extra["retry-after-ms"] = f"{fault.retry_after_ms:g}"
    if fault.should_retry is not None:
        extra["x-should-retry"] = "true" if fault.should_retry else "false"
    reply = envelopes.error_reply(
        provider,
        fault.status or 500,
        message=fault.message or "",
        error_type=fault.error_type,
        code=fault.code,
        headers=extra,
    )
    return error_plan(reply)
