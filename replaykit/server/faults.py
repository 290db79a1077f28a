"""Faults the fake provider injects: declared in Python, on the command line or in a YAML / JSON file.

A :class:`Fault` has a ``kind`` and selects requests by ``route`` (a provider such as ``anthropic``, a route
name such as ``anthropic.messages``, or ``None`` for every route) and ``nth`` (1-based count of requests on
that selector; ``None``: every request) for ``times`` consecutive requests. Kinds:

==================  ========================================================================================
``status``          answer ``status`` (429, 500, 503, 529, 401, 400…) with the provider's error body, headers;
                    ``retry_after`` (s) / ``retry_after_ms`` become ``retry-after`` / ``retry-after-ms``
``delay_headers``   wait ``ms`` before sending the status line and headers
``delay_events``    wait ``ms`` before each event of a stream
``stall``           after ``after`` events, send nothing for ``ms`` (``None``: until the client gives up)
``disconnect``      after ``after`` events close the connection (a non-stream body: half of it is sent)
``error_event``     after ``after`` events send the provider's mid-stream error and end the stream
                    (OpenAI: ``as_failed=True`` sends ``response.failed`` instead of ``error``)
``corrupt_event``   event number ``event`` (1-based) is sent with its JSON cut in half
``drop_terminal``   the terminal event (``message_stop``, ``response.completed``…) is not sent
``truncate``        a non-stream body is cut at byte ``at`` (default: half), framed as complete
==================  ========================================================================================

A faulted request does not use up its recorded interaction unless the response was delivered whole
(the delays): the client's retry gets the same interaction.

Command-line syntax (``--fault``): ``kind=status,route=anthropic,nth=1,status=429,retry_after=0``
(``kind`` may be left out when ``status=`` is given). A faults file holds a list of fault objects.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from replaykit.errors import UsageError, located
from replaykit.routes import PROVIDERS, ROUTES

__all__ = ["COMPLETE_KINDS", "STREAM_KINDS", "Fault", "FaultKind", "faults_json", "load_faults"]

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
]
KINDS: tuple[str, ...] = get_args(FaultKind)
STREAM_KINDS = frozenset({"delay_events", "stall", "error_event", "corrupt_event", "drop_terminal"})
COMPLETE_KINDS = frozenset({"delay_headers", "delay_events"})
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
}
_SELECTORS = ("kind", "route", "nth", "times")


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
        pairs.setdefault("kind", "status" if "status" in pairs else "")
        return cls.from_dict(_typed(pairs, spec), where=f"--fault {spec!r}")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, where: str = "fault") -> Fault:
        """Build from a mapping (a faults file entry, a scenario's ``faults`` item)."""
        unknown = sorted(set(raw) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise UsageError(f"{where}: unknown key {unknown[0]!r}; known keys: {', '.join(_known(raw))}")
        try:
            return cls(**dict(raw))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{where}: {exc}") from exc

    def selects(self, route: str, provider: str | None, count: int) -> bool:
        """True when this fault applies to the ``count``-th request on its selector, on ``route``."""
        if self.route not in (None, "*", route, provider):
            return False
        return self.nth is None or self.nth <= count < self.nth + self.times

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, as a JSON object (``kind`` first)."""
        out: dict[str, Any] = {"kind": self.kind}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name != "kind" and value != item.default:
                out[item.name] = value
        return out


def _known(raw: Mapping[str, Any]) -> list[str]:
    return [*_SELECTORS, *_ALLOWED.get(str(raw.get("kind", "")), ())]


def _check(fault: Fault) -> None:
    if fault.kind not in KINDS:
        raise ValueError(f"kind={fault.kind!r} must be one of {', '.join(KINDS)}")
    for name in _REQUIRED.get(fault.kind, ()):
        if getattr(fault, name) is None:
            raise ValueError(f"a {fault.kind} fault needs {name}=")
    allowed = set(_SELECTORS) | set(_ALLOWED[fault.kind])
    for item in dataclasses.fields(fault):
        if item.name not in allowed and getattr(fault, item.name) != item.default:
            raise ValueError(
                f"{item.name}= does not apply to a {fault.kind} fault; it takes {_ALLOWED[fault.kind]}"
            )
    _check_numbers(fault)
    _check_flags(fault)
    _check_route(fault.route)


def _check_flags(fault: Fault) -> None:
    for name in ("as_failed", "should_retry"):
        value = getattr(fault, name)
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{name}={value!r} must be true or false")


def _check_route(route: str | None) -> None:
    known = ("*", *PROVIDERS, *(r.name for r in ROUTES))
    if route is None or route in known or (" /" in route and route.split(" ", 1)[0].isupper()):
        return
    raise ValueError(
        f"route={route!r} is not a provider or route; use one of {', '.join(known)} or 'METHOD /path'"
    )


def _check_numbers(fault: Fault) -> None:
    status = fault.status
    valid = isinstance(status, int) and not isinstance(status, bool) and 400 <= status <= 599
    if status is not None and not valid:
        raise ValueError(f"status={status!r} must be an HTTP error status (400-599)")
    for name in ("nth", "times", "event"):
        value = getattr(fault, name)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name}={value!r} must be a whole number >= 1")
    for name in ("after", "at", "ms", "retry_after", "retry_after_ms"):
        value = getattr(fault, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not (isinstance(value, int) or math.isfinite(value)) or value < 0):
            raise ValueError(f"{name}={value!r} must be a finite number >= 0")


def _typed(pairs: dict[str, str], spec: str) -> dict[str, Any]:
    types = {f.name: str(f.type) for f in dataclasses.fields(Fault)}
    return {key: _convert(key, value, types.get(key, "str"), spec) for key, value in pairs.items()}


def _convert(key: str, value: str, kind: str, spec: str) -> Any:
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
    items = doc.get("faults") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise UsageError(
            located(
                path,
                "/",
                "a faults file must hold a list of fault objects",
                "write e.g. [{kind: status, route: anthropic, nth: 1, status: 429}]",
            )
        )
    return [_item(path, index, raw) for index, raw in enumerate(items)]


def _item(path: str | os.PathLike[str], index: int, raw: Any) -> Fault:
    where = f"{path}:/{index}"
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: a fault must be an object with a kind, not {json.dumps(raw)[:60]}")
    return Fault.from_dict(raw, where=where)


def faults_json(faults: Iterable[Fault]) -> list[dict[str, Any]]:
    """Faults as a JSON list (for the journal and the admin endpoint)."""
    return [fault.to_json() for fault in faults]
