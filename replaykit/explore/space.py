"""The space of fault points a scenario offers, read from its fault-free run and its cassettes.

A :class:`Point` is a place in the run: before a response, after an event of a streamed one, after its last
event, or a tool call the target announces; :func:`points` lists them in the order the run reaches them.
:func:`trials` crosses them with the fault kinds (:data:`KINDS`), each a
:class:`~replaykit.server.faults.Fault` of the scenario's own vocabulary, plus the persistent variants (one
attempt more than the declared budget). The kinds are described in the docs' explore page.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from replaykit import cassette, sse
from replaykit.jsondoc import JSON
from replaykit.routes import PROVIDERS
from replaykit.scenario.formats import ScenarioDoc
from replaykit.server import Entry
from replaykit.server.faults import Fault

__all__ = ["KINDS", "STALL_LIMIT_MS", "STALL_MS", "Point", "Trial", "budget_of", "budgets", "points",
           "served", "stall_timeout", "tool_call_ids", "trials", "with_short_stall"]

KINDS = ("disconnect", "stall", "corrupt", "drop", "overloaded", "kill")
STALL_LIMIT_MS = 2000  # a stall costs the target's timeout: a longer one is lowered to STALL_MS for it
STALL_MS = 1000
_LLM = frozenset(PROVIDERS) - {"cloudflare"}


@dataclass(frozen=True, order=True)
class Point:
    """A fault point: request ``request`` (1-based, in the fault-free run's journal), the ``nth`` on its
    ``route``; ``after`` events of ``events`` sent (0: before the response); or, with ``tool``, the ``nth``
    announced call of that tool (announced in the response of request ``request``)."""

    request: int
    after: int
    route: str
    nth: int
    events: int
    tool: str = ""

    def describe(self) -> str:
        """Where the point is, in words."""
        if self.tool:
            return f"call {self.nth} of tool {self.tool}"
        where = f"request {self.request} ({self.route} #{self.nth})"
        if self.after == 0:
            return f"before the response to {where}"
        if self.after >= self.events:
            return f"after the last event of {where}"
        return f"after event {self.after} of {self.events} of {where}"


@dataclass(frozen=True)
class Trial:
    """One schedule: its faults (in the scenario's vocabulary), the points and kinds they came from."""

    faults: tuple[Fault, ...]
    points: tuple[Point, ...]
    kinds: tuple[str, ...]

    @property
    def rank(self) -> tuple[int, tuple[tuple[int, int, int], ...]]:
        """Smaller is simpler: fewer faults, fewer repeats, then the earliest points."""
        repeats = sum(fault.times for fault in self.faults)
        return len(self.faults) * 100 + repeats, tuple(
            (p.request, p.after, KINDS.index(k)) for p, k in zip(self.points, self.kinds, strict=True))

    def describe(self) -> str:
        """The schedule in words: ``kill after event 3 of 12 of request 1 (anthropic.messages #1)``."""
        parts = []
        for fault, point, kind in zip(self.faults, self.points, self.kinds, strict=True):
            again = f" on {fault.times} attempts in a row" if fault.times > 1 else ""
            if kind == "corrupt":
                parts.append(f"corrupt event {point.after + 1} of {point.events} of request {point.request} "
                             f"({point.route} #{point.nth})")
            else:
                parts.append(f"{kind} {point.describe()}{again}")
        return "; ".join(parts) or "no fault"


def _events(place: JSON, scenario_cassettes: tuple[Path, ...]) -> list[JSON]:
    """The parsed events of the interaction the journal entry's ``matched`` names (none: not a stream)."""
    name = Path(str(place["cassette"])).resolve()
    for path in scenario_cassettes:
        if path.resolve() == name:
            response = cassette.load(path).interactions[int(place["index"])].response
            if not response.is_stream:
                return []
            return [_data(event) for event in response.events]
    return []


def _data(event: sse.Event) -> JSON:
    """The event's JSON object (bounded as every event is: :meth:`replaykit.sse.Event.json`); {} when not."""
    try:
        value = event.json() if event.data else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def served(journal: Sequence[Entry], cassettes: tuple[Path, ...]) -> list[tuple[Entry, list[JSON]]]:
    """Each journal entry with the events of the interaction that answered it."""
    return [(entry, _events(entry.matched, cassettes) if entry.matched else []) for entry in journal]


def _tool_calls(events: list[JSON]) -> Iterator[tuple[str, str]]:
    """``(name, id)`` of each client tool call a response streams (Anthropic and OpenAI Responses)."""
    for event in events:
        block = event.get("content_block") or event.get("item") or {}
        if event.get("type") == "content_block_start" and block.get("type") == "tool_use":
            yield str(block.get("name")), str(block.get("id"))
        elif event.get("type") == "response.output_item.added" and block.get("type") == "function_call":
            yield str(block.get("name")), str(block.get("call_id"))


def points(journal: Sequence[Entry], cassettes: tuple[Path, ...], tools: set[str]) -> list[Point]:
    """Every fault point of the fault-free run, in the order it reaches them: for each response of a
    provider route, before it, after each of its events, and each announced call of a tool in ``tools``."""
    found: list[Point] = []
    per_route: dict[str, int] = {}
    per_tool: dict[str, int] = {}
    for number, (entry, events) in enumerate(served(journal, cassettes), 1):
        route = entry.route
        per_route[route] = nth = per_route.get(route, 0) + 1
        if entry.provider not in _LLM:
            continue
        found += [Point(number, after, route, nth, len(events)) for after in range(len(events) + 1)]
        for name, _ in _tool_calls(events):
            if name in tools:
                per_tool[name] = count = per_tool.get(name, 0) + 1
                found.append(Point(number, len(events) + 1, route, count, len(events), name))
    return found


def tool_call_ids(journal: Sequence[Entry], cassettes: tuple[Path, ...]) -> dict[tuple[str, int], str]:
    """``(tool, nth) -> call id`` of the tool calls the fault-free run's responses stream."""
    ids: dict[tuple[str, int], str] = {}
    counts: dict[str, int] = {}
    for _, events in served(journal, cassettes):
        for name, call in _tool_calls(events):
            counts[name] = counts.get(name, 0) + 1
            ids[(name, counts[name])] = call
    return ids


def budgets(doc: ScenarioDoc) -> dict[str, int]:
    """The declared budgets: ``retry`` (``maxRetries``) and, for durable turns, ``recovery``
    (``recovery.maxAttempts``)."""
    recovery = doc.get("recovery") or {}
    found = {"retry": int(doc.get("maxRetries", 2))}
    if recovery:
        found["recovery"] = int(recovery.get("maxAttempts", 10))
    return found


def budget_of(kind: str, doc: ScenarioDoc) -> tuple[str, int]:
    """The budget a fault of ``kind`` draws on: a kill (and a stall in durable turns) is an interruption
    the recovery budget covers; every other fault a retry."""
    known = budgets(doc)
    if kind == "kill" or (kind == "stall" and "recovery" in known):
        return "recovery", known.get("recovery", 0)
    return "retry", known["retry"]


def stall_timeout(doc: ScenarioDoc) -> int:
    """Milliseconds of silence after which the target gives up on a stream."""
    recovery = doc.get("recovery") or {}
    if recovery:
        return int(recovery.get("stallTimeoutMs", 120000))
    return int(doc.get("idleTimeoutMs", 30000))


def with_short_stall(doc: ScenarioDoc) -> None:
    """Lower the timeout after which the target gives up on a silent stream to :data:`STALL_MS` when it is
    above :data:`STALL_LIMIT_MS` (in ``doc``, in place): a stall schedule then costs a second, not the
    default two minutes, and says so in the scenario written for it."""
    if stall_timeout(doc) <= STALL_LIMIT_MS:
        return
    recovery = doc.get("recovery")
    if recovery:
        recovery["stallTimeoutMs"] = STALL_MS
    else:
        doc["idleTimeoutMs"] = STALL_MS


def _fault(kind: str, point: Point, times: int = 1) -> Fault | None:
    route, nth, after, events = point.route, point.nth, point.after, point.events
    if point.tool:
        return Fault("kill", tool=point.tool, nth=nth, times=times) if kind == "kill" else None
    mid = 0 < after < events
    if kind == "overloaded":
        if after == 0:
            return Fault("status", route, nth, times, status=529, retry_after_ms=1)
        overloaded = Fault("error_event", route, nth, times, after=after, error_type="overloaded_error")
        return overloaded if mid else None
    if kind == "corrupt":
        return Fault("corrupt_event", route, nth, times, event=after + 1) if after < events else None
    if kind == "drop":
        return Fault("drop_terminal", route, nth, times) if events and after == events else None
    if kind == "kill":
        return Fault("kill", route, nth, times, after=after)
    if after == events and events:
        return None  # a disconnect or stall after the last event is what the drop and kill points cover
    return Fault(kind, route, nth, times, after=after)  # type: ignore[arg-type]


def trials(found: list[Point], kinds: tuple[str, ...], doc: ScenarioDoc) -> list[Trial]:
    """Every single fault: each point crossed with each kind that applies there, and the persistent
    variant (one more attempt than its budget) of each kind at the points before a response."""
    singles: list[Trial] = []
    for point in found:
        for kind in kinds:
            fault = _fault(kind, point)
            if fault is not None:
                singles.append(Trial((fault,), (point,), (kind,)))
            if point.after == 0 and not point.tool and kind in ("kill", "overloaded", "disconnect"):
                _, budget = budget_of(kind, doc)
                again = _fault(kind, point, budget + 1)
                if again is not None and budget >= 1:
                    singles.append(Trial((again,), (point,), (kind,)))
    return singles
